//! `dsh sessions list | show | verify | prune` (DESIGN §4): rendering only; finding,
//! summarizing and verifying journals is `dsh_agent::sessions`, recognising and removing
//! crash artefacts `dsh_agent::leftovers`.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::Subcommand;
use dsh_agent::leftovers::{self, Left};
use dsh_agent::sessions::{self, Chain, End, FileCheck};
use dsh_core::journal::{Record, read_journal};
use serde_json::{Value, json};

use crate::words::one_line;
use crate::{Common, Failure, exit};

mod transcript;

use transcript::lines_of;
pub(crate) use transcript::{readable_lines, short_args, shorten};

#[derive(Debug, Subcommand)]
pub(crate) enum SessionsCommand {
    /// Every session under DSH_HOME, newest first: id, start, model, steps, tokens, how it
    /// ended, workspace. Only the sessions of one workspace when `--workspace DIR` is given
    /// explicitly (its default, `.`, does not filter). `--json`: one object per line.
    List,
    /// A session's transcript: user and assistant text, one line per tool call (tool, short
    /// arguments, outcome, the deciding gate and policy, elapsed). `--json`: the records.
    Show {
        /// A session id, a name given with /save, a unique prefix of an id, or a journal file's path.
        id: String,
    },
    /// Check a journal's hash chain, record shapes and `resumed_from` links.
    #[command(long_about = VERIFY_HELP)]
    Verify {
        /// A session id, a name given with /save, a unique prefix of an id, or a journal file's path.
        id: String,
    },
    /// Remove crash artefacts: journals whose process died before their first record was
    /// complete (an empty file, or a torn first line). Nothing else is removed.
    #[command(long_about = PRUNE_HELP)]
    Prune,
}

const PRUNE_HELP: &str = "\
Remove crash artefacts under DSH_HOME/sessions: journals whose process died before their first \
record was complete — an empty file, or a first line without its newline or that is no record \
with nothing after it. They hold no session: `sessions list` leaves them out and `sessions \
verify` names them. Prints one line per file removed, then a summary.

Never removed: a journal with a complete first record, a file not named by a session id, a \
file a running dsh process holds open (locked), and one changed in the last few seconds (it may \
be a session that is just starting; run prune again later). A journal whose first line is \
damaged but which goes on after it is no crash artefact: `sessions verify` reports it.

Exit 0, or 1 when a crash artefact could not be removed.";

const VERIFY_HELP: &str = "\
Check a journal: every line is a record of a known kind with its fields, `seq` counts from 1 \
without gaps, each line's `prev` is the SHA-256 of the previous line (64 zeros for the first), \
and a `session_start.resumed_from` link names an existing session whose record `seq` has that \
hash and is its last; the linked session is verified in turn. Names the first broken record \
(file, line, seq, what is wrong) and a torn last line (a write cut off by a crash, ignored as \
readers ignore it).

Exit 0 intact (also when the session did not end, or ends in a torn line: both are noticed), \
1 broken, 2 unknown or ambiguous id. A crash artefact (a file whose first record is missing or \
torn: its process died before writing it) is no session: exit 0 with a notice saying so; \
`dsh sessions prune` removes it.

What a chain cannot prove: the last record can be edited and its hash recomputed, since no \
later record quotes it, and a file cut after any whole record still verifies: it looks like \
a session that did not end. Neither can be told from a crash; the chain only shows that no \
record before the last was changed, removed or inserted.";

pub(crate) fn run(common: &Common, command: &SessionsCommand) -> Result<u8, Failure> {
    let home = dsh_config::dsh_home(&dsh_config::process_env()).map_err(Failure::usage)?;
    match command {
        SessionsCommand::List => list(common, &home),
        SessionsCommand::Show { id } => show(common, &resolve(common, &home, id)?),
        SessionsCommand::Verify { id } => verify(&resolve(common, &home, id)?),
        SessionsCommand::Prune => prune(&home),
    }
}

/// The journal an `ID` names (an id, a `/save` name — one saved in this workspace first —
/// or a unique prefix).
fn resolve(common: &Common, home: &Path, id: &str) -> Result<PathBuf, Failure> {
    let workspace = common.workspace.canonicalize().ok();
    sessions::find(home, id, workspace.as_deref())
        .map(|f| f.path)
        .map_err(Failure::usage)
}

fn list(common: &Common, home: &Path) -> Result<u8, Failure> {
    let filter = if common.workspace_given {
        Some(common.workspace.canonicalize().map_err(|e| {
            Failure::usage(anyhow!("--workspace {}: {e}", common.workspace.display()))
        })?)
    } else {
        None
    };
    let (summaries, unreadable) = sessions::list(home);
    for e in &unreadable {
        eprintln!("dsh: skipped {e}");
    }
    let chains = sessions::chains(&summaries);
    let shown = chains.iter().filter(|c| match &filter {
        Some(dir) => {
            let ws = &c.newest.workspace;
            ws.canonicalize().as_ref().unwrap_or(ws) == dir
        }
        None => true,
    });
    if common.json {
        crate::print_lines(shown.map(|c| chain_json(c).to_string()))?;
    } else {
        let now = std::time::SystemTime::now();
        let mut lines = vec![LIST_HEADER.to_owned()];
        lines.extend(shown.map(|c| chain_line(c, now, true)));
        crate::print_lines(lines)?;
    }
    Ok(exit::OK)
}

/// DESIGN §4's object, one per chain of resumed journals (the newest file's id, start,
/// model and stop; the chain's totals), plus `end`: `session_end`'s reason, `did_not_end` or
/// `running`.
fn chain_json(c: &Chain) -> Value {
    let s = &c.newest;
    json!({
        "id": s.id,
        "started": s.started,
        "workspace": s.workspace,
        "provider": s.provider,
        "model": s.model,
        "steps": c.totals.steps,
        "prompt_tokens": c.totals.prompt_tokens,
        "completion_tokens": c.totals.completion_tokens,
        "cost_usd": c.totals.cost_usd,
        "stop": s.stop,
        "resumed_from": s.resumed_from,
        "end": s.end.as_str(),
        "name": c.name,
        "first_prompt": c.first_prompt,
        "turns": c.turns,
        "chain": c.chain,
    })
}

/// The columns of [`chain_line`] (with the workspace last).
pub(crate) const LIST_HEADER: &str = "ID                         NAME          TURNS  MODEL             AGE          TOKENS IN+OUT  END                       FIRST PROMPT                              WORKSPACE";

/// One session of the list, under [`LIST_HEADER`]; `workspace`: with its last column.
pub(crate) fn chain_line(c: &Chain, now: std::time::SystemTime, workspace: bool) -> String {
    let s = &c.newest;
    let end = match (&s.end, &s.stop) {
        (End::Ended(r), Some(stop)) => format!("{r} ({stop})"),
        (End::Ended(r), None) => r.clone(),
        (End::DidNotEnd, _) => "did not end".to_owned(),
        (End::Running, _) => "running".to_owned(),
    };
    let age = dsh_core::journal::parse_rfc3339_millis(&s.started)
        .map_or_else(|| "-".to_owned(), |t| crate::words::ago(t, now));
    let name = c
        .name
        .as_deref()
        .map_or_else(|| "-".to_owned(), |n| one_line(n, 12));
    let prompt = c
        .first_prompt
        .as_deref()
        .map_or_else(|| "-".to_owned(), |p| one_line(p, 40));
    // What the journal quotes (a prompt, a name) reaches the terminal with its control
    // characters made visible.
    let (name, prompt) = (
        crate::repl::visible::visible(&name, false).into_owned(),
        crate::repl::visible::visible(&prompt, false).into_owned(),
    );
    let mut line = format!(
        "{:<25}  {name:<12}  {:>5}  {:<16}  {age:<11}  {:>13}  {:<24}  {prompt:<40}",
        s.id,
        c.turns,
        crate::repl::visible::visible(&one_line(s.model.as_deref().unwrap_or("-"), 16), false),
        format!("{}+{}", c.totals.prompt_tokens, c.totals.completion_tokens),
        end,
    );
    if workspace {
        let ws = s.workspace.display().to_string();
        line.push_str(&format!("  {}", crate::repl::visible::visible(&ws, false)));
    }
    line.trim_end().to_owned()
}

fn show(common: &Common, path: &Path) -> Result<u8, Failure> {
    if let Ok(Some(what)) = leftovers::crash_artefact(path) {
        let path = path.display().to_string();
        eprintln!(
            "dsh: {}",
            sessions::SessionsError::CrashArtefact { path, what }
        );
        return Ok(exit::OK);
    }
    let transcript = read_journal(path)
        .map_err(|e| Failure::harness(anyhow!("{e} (`dsh sessions verify` says more)")))?;
    if let Some(torn) = &transcript.torn_tail {
        eprintln!(
            "dsh: {}: the last line ({} bytes) has no newline: a torn write, ignored",
            path.display(),
            torn.len()
        );
    }
    if common.json {
        crate::print_lines(
            transcript
                .records
                .iter()
                .map(|e| Value::Object(e.json.clone()).to_string()),
        )?;
        return Ok(exit::OK);
    }
    let mut lines = lines_of(&transcript);
    if transcript
        .records
        .last()
        .is_none_or(|e| !matches!(e.record, Record::SessionEnd { .. }))
    {
        lines.push("(the session did not end: no session_end record)".to_owned());
    }
    // What the journal quotes (prompts, answers, outputs) reaches the terminal with its
    // control characters made visible; `--json` gives the records as written.
    crate::print_lines(
        lines
            .iter()
            .map(|l| crate::repl::visible::visible(l, true).into_owned()),
    )?;
    Ok(exit::OK)
}

fn verify(path: &Path) -> Result<u8, Failure> {
    let checks = sessions::verify(path);
    let mut lines = Vec::new();
    let mut broken = false;
    for c in &checks {
        lines.push(check_line(c));
        broken |= c.problem.is_some();
    }
    crate::print_lines(lines)?;
    Ok(if broken { exit::HARNESS } else { exit::OK })
}

fn check_line(c: &FileCheck) -> String {
    let file = c.path.display();
    if let Some(what) = &c.artefact {
        return if c.open {
            format!(
                "{file}: no session yet: {what}, and a running dsh process holds it open (it may still write its first record)"
            )
        } else {
            format!(
                "{file}: notice: a crash artefact, not a session: {what} (its process ended before its first record was complete); `dsh sessions prune` removes it"
            )
        };
    }
    let mut line = match &c.problem {
        Some(p) if p.line == 0 => format!("{file}: BROKEN: {}", p.what),
        Some(p) => format!(
            "{file}: BROKEN at line {} (seq {}): {} ({} records before it verify)",
            p.line,
            p.line,
            p.what,
            p.line - 1
        ),
        None => format!("{file}: intact, {} records", c.records),
    };
    if c.problem.is_none() && c.did_not_end {
        line.push_str("; notice: the session did not end (no session_end), or is still running");
    }
    if let Some((n, bytes)) = c.torn_tail {
        line.push_str(&format!(
            "; notice: line {n} is torn ({bytes} bytes without a newline: a write cut off by a crash), ignored"
        ));
    }
    line
}

fn prune(home: &Path) -> Result<u8, Failure> {
    let pruned = leftovers::prune(home);
    let mut lines: Vec<String> = pruned
        .removed
        .iter()
        .map(|(path, what)| format!("removed {}: a crash artefact ({what})", path.display()))
        .collect();
    lines.extend(pruned.left.iter().map(|(path, what, why)| {
        let why = match why {
            Left::Open => "a running dsh process holds it open".to_owned(),
            Left::Recent => format!(
                "changed less than {} s ago: it may be a session that is starting; run prune again later",
                leftovers::PRUNE_GRACE.as_secs()
            ),
            _ => "it may be in use".to_owned(),
        };
        format!(
            "left {}: a crash artefact ({what}), but {why}",
            path.display()
        )
    }));
    for (path, e) in &pruned.failed {
        eprintln!("dsh: cannot remove {}: {e}", path.display());
    }
    let removed = pruned.removed.len();
    lines.push(match (removed, pruned.left.len()) {
        (0, 0) if pruned.failed.is_empty() => format!(
            "no crash artefacts under {}",
            sessions::sessions_dir(home).display()
        ),
        (n, 0) => format!("{n} crash artefact(s) removed"),
        (n, left) => format!("{n} crash artefact(s) removed, {left} left"),
    });
    crate::print_lines(lines)?;
    Ok(if pruned.failed.is_empty() {
        exit::OK
    } else {
        exit::HARNESS
    })
}
