//! `dsh replay SESSION` (DESIGN §4): choosing the journal, the workspace and the
//! configuration, and rendering; what is decided is `dsh_agent::replay`.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use dsh_agent::Session;
use dsh_agent::replay::{self, Row};
use dsh_agent::sessions;
use dsh_core::Decision;
use dsh_core::journal::{Record, read_journal, resolve_blobs};

use crate::sessions::{short_args, shorten};
use crate::{Common, Failure, exit, settings};

pub(crate) const HELP: &str = "\
Re-drive every tool call a session recorded through today's gates 1 and 3, as `dsh check` \
does: the tool never runs and nobody is asked; gate-1 listeners (hooks included) do run. Each \
call is judged with the tool set of the agent that made it. Prints per call the recorded \
decision and today's (allow, ask or deny), then a summary; `--json`: one object per call, \
then {\"summary\":{\"calls\":N,\"changed\":K}}.

The recorded decision is deny when the call's result was denied (at gate 1 or by a guard), \
else ask when an approval record exists for it, else allow. A call that never reached gate 1 \
(unknown tool, invalid arguments), or that gate 1 or a guard could not decide (an OS error \
while resolving its path), has no recorded decision and never counts as changed.

The workspace is --workspace DIR if given, else the recorded one if that directory exists, \
else the current directory (with a notice). The configuration is loaded for that workspace \
as for `dsh check` (--config FILE replaces the user configuration). Only the one journal is \
read: a session it resumes is not replayed.

Exit 0 when no decision changed, 4 when one did, 1 when the journal cannot be read, 2 for a \
usage or configuration error (an unknown or ambiguous session id).";

pub(crate) async fn replay(common: &Common, given: &str) -> Result<u8, Failure> {
    // A journal's path needs no DSH_HOME; an id is looked up under it.
    let path = match dsh_config::dsh_home(&dsh_config::process_env()) {
        Ok(home) => {
            let workspace = common.workspace.canonicalize().ok();
            sessions::find(&home, given, workspace.as_deref())
                .map_err(Failure::usage)?
                .path
        }
        Err(_) if Path::new(given).is_file() => PathBuf::from(given),
        Err(e) => {
            return Err(Failure::usage(anyhow!(
                "{e} (needed to look `{given}` up; or give the journal's path)"
            )));
        }
    };
    let mut transcript = read_journal(&path)
        .map_err(|e| Failure::harness(anyhow!("{e} (`dsh sessions verify` says more)")))?;
    // Arguments stored beside the journal (over 1 MiB) are judged in full.
    resolve_blobs(&path, &mut transcript)
        .map_err(|e| Failure::harness(anyhow!("{e} (`dsh sessions verify` says more)")))?;
    if let Some(torn) = &transcript.torn_tail {
        eprintln!(
            "dsh: {}: the last line ({} bytes) has no newline: a torn write, ignored",
            path.display(),
            torn.len()
        );
    }
    let recorded_workspace = transcript.records.iter().find_map(|e| match &e.record {
        Record::SessionStart { workspace, .. } => Some(workspace.to_path_buf()),
        _ => None,
    });
    let mut chosen =
        crate::workspace::for_recorded(common, recorded_workspace.as_deref(), "replaying")?;
    // Nobody is asked: an approver would change nothing, so none is mounted.
    chosen.yolo = false;
    let mut settings = settings::load(&chosen)?;
    // Judged under the tools mode the session ran in, unless the flag names one.
    let recorded_tools_mode = transcript.records.iter().find_map(|e| match &e.record {
        Record::SessionStart { tools_mode, .. } => tools_mode.as_deref()?.parse().ok(),
        _ => None,
    });
    if common.tools_mode.is_none()
        && let Some(m) = recorded_tools_mode
    {
        settings.tools_mode = m;
    }
    let tools_mode = settings.tools_mode;
    let session = Session::assemble_dry(&settings).map_err(Failure::usage)?;
    let calls = replay::recorded_calls(&transcript.records);
    // The servers start only when the session called one of their tools.
    if calls.iter().any(|c| c.tool.starts_with(dsh_mcp::PREFIX)) {
        crate::start::wait_for_servers(&session).await;
    }
    let rows = replay::replay(calls, &session).await;
    session.stop_extensions();
    let changed = replay::changed_count(&rows);
    let lines: Vec<String> = if common.json {
        let mut lines = rows
            .iter()
            .map(|r| serde_json::to_string(r).map_err(Failure::harness))
            .collect::<Result<Vec<_>, _>>()?;
        lines.push(
            serde_json::json!({"summary": {"calls": rows.len(), "changed": changed, "tools_mode": tools_mode.as_str()}})
                .to_string(),
        );
        lines
    } else {
        let mut lines: Vec<String> = rows.iter().map(row_line).collect();
        lines.push(format!(
            "{} (tools mode {tools_mode})",
            summary_line(&rows, changed)
        ));
        lines
    };
    crate::print_lines(lines)?;
    Ok(if changed > 0 { exit::CHANGED } else { exit::OK })
}

fn decision(d: Decision) -> &'static str {
    match d {
        Decision::Allow => "allow",
        Decision::Ask => "ask",
        Decision::Deny => "deny",
    }
}

/// `   12  read_file path=src/a.rs  allow → ask  CHANGED  [pre_policy/rules: why]`
fn row_line(r: &Row) -> String {
    let who = r
        .agent
        .as_deref()
        .map(|a| format!("[{a}] "))
        .unwrap_or_default();
    let recorded = r
        .recorded
        .as_ref()
        .map_or("-", |rec| decision(rec.decision));
    let marker = if r.changed {
        "  CHANGED"
    } else if r.recorded.is_none() {
        "  (never reached gate 1)"
    } else {
        ""
    };
    let t = &r.today;
    format!(
        "{:>5}  {who}{} {}  {recorded} → {}{marker}  [{}/{}: {}]",
        r.seq,
        r.tool,
        short_args(&r.args),
        decision(t.decision),
        t.gate.as_str(),
        t.policy.as_deref().unwrap_or("-"),
        shorten(&t.reason, 120),
    )
}

fn summary_line(rows: &[Row], changed: usize) -> String {
    let unreached = rows.iter().filter(|r| r.recorded.is_none()).count();
    let mut line = format!(
        "{} replayed, {changed} changed",
        crate::words::plural(rows.len(), "call")
    );
    if unreached > 0 {
        line.push_str(&format!(", {unreached} never reached gate 1"));
    }
    line
}
