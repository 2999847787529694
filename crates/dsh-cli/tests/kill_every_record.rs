//! Kill at every record (DESIGN §6; the promise: every call that ran is on record, and
//! nothing runs without its record). Built only with the `fault-injection` feature
//! (`cargo test --features dsh-cli/fault-injection`), with which `DSH_FAULT_KILL_AT=N:MODE`
//! makes the `dsh` binary SIGKILL itself at its Nth journal record write — `before` any byte
//! of it, `half` its bytes written, or `after` the whole line (dsh-core's `journal/fault.rs`).
//!
//! The scenario is one `dsh exec --continue "third task"` on a session of two earlier turns,
//! under a 3,000-token window so that its first step compacts the first turn (a summary
//! request, `context_compacted`); then a `run_shell` call (`bash mark.sh main`, allowed by a
//! rule) appends one line to `side.txt`; then `call_sub_agent` starts a `shell` child whose
//! own `run_shell` call appends `child` to it and which answers; then the final answer.
//!
//! It is run once unharmed, and its journal's lines counted: W, the records its process
//! writes (the process writes one journal, so its lines are its writes; the sweep checks it:
//! a kill at W+1 does not happen). Then, for every n in 1..=W and every mode, from the same
//! starting state: the process died by SIGKILL, leaving exactly the records it should (the
//! same kinds as the unharmed run's first n-1 or n, and for `half` a torn last line);
//! `dsh sessions verify` passes, naming the torn line as torn and nothing as broken (a file
//! whose first record never became whole is named a crash artefact); `dsh exec --resume ID
//! "go on"` (`--continue` from an artefact) against a fresh server exits 0 with one request,
//! which the server's orphan check accepted (a call without its result, or a result without
//! its call, is refused as the real APIs refuse it), ends with "go on", carries the summary
//! exactly when `context_compacted` was written whole, and the calls the kill cut off are
//! closed as `cancelled_before` / `cancelled_after`; each side-effect line has its
//! `tool_started`, no call started twice, a call whose result was written ran exactly once;
//! the resumed journal verifies, its link to the killed file included.
//!
//! The sweep collects every failure and reports them together. OpenAI: every n and mode;
//! Anthropic: every n and mode as well (the two run as parallel tests).
#![cfg(all(feature = "fault-injection", unix))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use common::{Dirs, records, stderr, stdout};
use dsh_core::journal::fault::VAR;
use dsh_testkit::model_server::{Reply, ScriptedServer, ServerHandle, Turn};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    OpenAi,
    Anthropic,
}

const MODES: [&str; 3] = ["before", "half", "after"];

/// Allows `bash mark.sh …`; the window makes the third turn compact the first.
const CONFIG: &str = "[permissions]\nallow = [\"run_shell(bash mark.sh *)\"]\n\
    [model]\ncontext_window = 3000\n";
/// The resumed run's configuration: the window unknown, so it sends exactly one request,
/// whether or not the killed run's compaction was recorded.
const RESUME_CONFIG: &str = "[permissions]\nallow = [\"run_shell(bash mark.sh *)\"]\n";
/// One line per execution, naming who ran it.
const MARK: &str = "echo \"$1\" >> side.txt\n";
const SUMMARY: &str = "S-U-M-M-A-R-Y";

/// The session the scenario continues, made once and copied back before each run, so every
/// run starts from the same bytes at the same paths.
struct World {
    wire: Wire,
    dirs: Dirs,
    template: tempfile::TempDir,
    /// The journals of the two earlier turns.
    before: BTreeSet<PathBuf>,
    /// The second turn's session, which the scenario continues.
    second: String,
}

impl World {
    fn new(wire: Wire) -> World {
        let dirs = Dirs::new();
        dirs.write_user_config(CONFIG);
        std::fs::write(dirs.ws.join("mark.sh"), MARK).unwrap();
        let mut w = World {
            wire,
            dirs,
            template: tempfile::tempdir().unwrap(),
            before: BTreeSet::new(),
            second: String::new(),
        };
        // About 3,000 tokens of work in the first turn: the third turn's first step must
        // compact it, and a short summary is well under half of it.
        let first = format!("ANSWER-ONE {}", "a".repeat(12_000));
        let s1 = w.server(vec![Reply::text(first)]);
        let out = w.exec(&s1, &[], "first task", None);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let first_journal = w.journal_set();
        let s2 = w.server(vec![Reply::text("two")]);
        let out = w.exec(&s2, &["--continue"], "second task", None);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        w.before = w.journal_set();
        assert_eq!(w.before.len(), 2);
        w.second = id_of(w.before.difference(&first_journal).next().unwrap());
        cp(w.dirs.root(), w.template.path());
        w
    }

    fn server(&self, script: Vec<Reply>) -> ServerHandle {
        match self.wire {
            Wire::OpenAi => ScriptedServer::start(script),
            Wire::Anthropic => ScriptedServer::start_anthropic(script),
        }
    }

    /// `dsh exec EXTRA… PROMPT` against `server`, `DSH_FAULT_KILL_AT` set to `kill`.
    fn exec(
        &self,
        server: &ServerHandle,
        extra: &[&str],
        prompt: &str,
        kill: Option<&str>,
    ) -> Output {
        let (provider, key) = match self.wire {
            Wire::OpenAi => ("openai", "OPENAI_API_KEY"),
            Wire::Anthropic => ("anthropic", "ANTHROPIC_API_KEY"),
        };
        let mut cmd = self.dirs.dsh(&[
            "exec",
            "--provider",
            provider,
            "--base-url",
            &server.url,
            "--model",
            "scripted",
        ]);
        cmd.args(extra).arg(prompt).env(key, "k").env_remove(VAR);
        if let Some(kill) = kill {
            cmd.env(VAR, kill);
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.output().unwrap()
    }

    /// The session journals under DSH_HOME.
    fn journal_set(&self) -> BTreeSet<PathBuf> {
        std::fs::read_dir(self.dirs.home.join("sessions"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect()
    }

    /// The journals written since the earlier turns, and since `also`.
    fn new_journals(&self, also: &BTreeSet<PathBuf>) -> Vec<PathBuf> {
        self.journal_set()
            .into_iter()
            .filter(|p| !self.before.contains(p) && !also.contains(p))
            .collect()
    }

    /// Back to the state after the earlier turns.
    fn restore(&self) {
        let root = self.dirs.root();
        for e in std::fs::read_dir(root).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                std::fs::remove_dir_all(&p).unwrap();
            } else {
                std::fs::remove_file(&p).unwrap();
            }
        }
        cp(self.template.path(), root);
        std::fs::write(self.dirs.cfg.join("config.toml"), CONFIG).unwrap();
    }

    /// The scenario: the third turn, `kill` at a write.
    fn scenario(&self, kill: Option<&str>) -> (Output, PathBuf) {
        let server = self.server(vec![
            // The compaction of the first turn.
            Reply::text(SUMMARY),
            Turn::tool_call("m1", "run_shell", r#"{"command":"bash mark.sh main"}"#).into(),
            Turn::tool_call(
                "m2",
                "call_sub_agent",
                &json!({"profile": "shell", "task": "mark it"}).to_string(),
            )
            .into(),
            // The child's two steps.
            Turn::tool_call("c1", "run_shell", r#"{"command":"bash mark.sh child"}"#).into(),
            Reply::text("the child marked it"),
            Reply::text("all done"),
        ]);
        let out = self.exec(&server, &["--continue"], "third task", kill);
        let new = self.new_journals(&BTreeSet::new());
        assert_eq!(new.len(), 1, "one journal per run: {new:?}");
        (out, new.into_iter().next().unwrap())
    }

    fn side_lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.dirs.ws.join("side.txt"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn verify(&self, path: &Path) -> Output {
        self.dirs
            .dsh(&["sessions", "verify", path.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    }
}

/// `cp -a FROM/. TO` (paths, modes and all).
fn cp(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(from.join("."))
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

fn id_of(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

fn kinds(recs: &[Value]) -> Vec<String> {
    recs.iter()
        .map(|r| {
            let agent = r["agent"]
                .as_str()
                .map(|a| format!("{a}:"))
                .unwrap_or_default();
            format!("{agent}{}", r["kind"].as_str().unwrap())
        })
        .collect()
}

/// The unharmed run: its record kinds (W of them), checked for the scenario's parts.
fn baseline(w: &World) -> Vec<String> {
    w.restore();
    let (out, path) = w.scenario(None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "all done");
    let recs = records(&path);
    assert_eq!(recs[0]["resumed_from"]["session"], w.second.as_str());
    let kinds = kinds(&recs);
    for k in [
        "context_compacted",
        "sub_agent_start",
        "sub-1:tool_started",
        "sub_agent_end",
        "session_end",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k} missing: {kinds:?}");
    }
    let mut side = w.side_lines();
    side.sort();
    assert_eq!(side, ["child", "main"]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), recs.len());
    assert!(text.ends_with('\n'));
    kinds
}

/// One kill at write `n` in `mode`, and everything checked after it; the failures found.
fn one_kill(w: &World, base: &[String], n: usize, mode: &str) -> Vec<String> {
    let mut fails = Vec::new();
    let at = format!("{n}:{mode}");
    let mut fail = |what: String| fails.push(format!("[{:?} {at}] {what}", w.wire));
    let w_total = base.len();
    w.restore();
    let (out, killed) = w.scenario(Some(&at));

    // Died where it was told to, leaving exactly the records it should.
    let past_end = n > w_total;
    if past_end {
        if out.status.code() != Some(0) {
            fail(format!("not killed, yet it failed: {}", stderr(&out)));
        }
    } else if out.status.signal() != Some(libc::SIGKILL) {
        fail(format!(
            "not killed by SIGKILL: {:?}: {}",
            out.status,
            stderr(&out)
        ));
        return fails;
    }
    let transcript = match dsh_core::journal::read_journal(&killed) {
        Ok(t) => t,
        Err(e) => {
            fail(format!("the killed journal cannot be read: {e}"));
            return fails;
        }
    };
    let recs: Vec<Value> = transcript
        .records
        .iter()
        .map(|e| Value::Object(e.json.clone()))
        .collect();
    let whole = match (past_end, mode) {
        (true, _) => w_total,
        (false, "after") => n,
        (false, _) => n - 1,
    };
    if kinds(&recs) != base[..whole] {
        fail(format!(
            "records {:?}, expected the unharmed run's first {whole}: {:?}",
            kinds(&recs),
            &base[..whole]
        ));
    }
    let torn = !past_end && mode == "half";
    if transcript.torn_tail.is_some() != torn {
        fail(format!("torn tail {:?}", transcript.torn_tail));
    }

    // `sessions verify`: nothing broken, the torn line named as torn.
    let v = w.verify(&killed);
    let vtext = stdout(&v);
    let artefact = whole == 0;
    if v.status.code() != Some(0) || vtext.contains("BROKEN") {
        fail(format!(
            "verify of the killed journal: {:?}: {vtext}{}",
            v.status,
            stderr(&v)
        ));
    }
    if artefact {
        if !vtext.contains("a crash artefact, not a session") {
            fail(format!("verify does not name the crash artefact: {vtext}"));
        }
    } else if torn != vtext.contains(&format!("line {n} is torn")) {
        fail(format!("verify and the torn line {n}: {vtext}"));
    }

    // The run's calls and what they did.
    let started_count = |rs: &[Value], id: &str| {
        rs.iter()
            .filter(|r| r["kind"] == "tool_started" && r["call_id"] == id)
            .count()
    };
    let done = |rs: &[Value], id: &str| {
        rs.iter().any(|r| {
            r["kind"] == "tool_result" && r["call_id"] == id && r.get("failure_kind").is_none()
        })
    };

    // Resume against a fresh server.
    std::fs::write(w.dirs.cfg.join("config.toml"), RESUME_CONFIG).unwrap();
    let server = w.server(vec![Reply::text("resumed")]);
    let before_resume: BTreeSet<PathBuf> = std::iter::once(killed.clone()).collect();
    let id = id_of(&killed);
    let resume_args: Vec<&str> = if artefact {
        vec!["--continue"]
    } else {
        vec!["--resume", &id]
    };
    let out = w.exec(&server, &resume_args, "go on", None);
    if out.status.code() != Some(0) {
        fail(format!(
            "resume failed: {:?}: {}; the server got {:?}",
            out.status,
            stderr(&out),
            server.requests()
        ));
        return fails;
    }
    let requests = server.requests();
    if requests.len() != 1 {
        fail(format!("resume sent {} requests", requests.len()));
    }
    let request = requests[0].to_string();
    let messages = requests[0]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let last = messages
        .last()
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    if !last.contains("go on") {
        fail(format!(
            "the resumed conversation does not end with go on: {last}"
        ));
    }
    let compacted = recs.iter().any(|r| r["kind"] == "context_compacted");
    if compacted != request.contains(SUMMARY) || compacted == request.contains("ANSWER-ONE") {
        fail(format!(
            "compaction recorded: {compacted}, yet the request has the summary: {}, the first turn: {}",
            request.contains(SUMMARY),
            request.contains("ANSWER-ONE")
        ));
    }
    let resumed = w.new_journals(&before_resume);
    if resumed.len() != 1 {
        fail(format!("resume made {resumed:?}"));
        return fails;
    }
    let resumed = &resumed[0];
    let rrecs = records(resumed);
    let link = &rrecs[0]["resumed_from"];
    let linked = if artefact {
        w.second.clone()
    } else {
        id.clone()
    };
    if link["session"] != linked.as_str() {
        fail(format!("the resumed session links to {link}, not {linked}"));
    }
    if !artefact && link["seq"] != recs.len() {
        fail(format!(
            "the link names {link}, the killed file has {} records",
            recs.len()
        ));
    }

    // Every call the kill cut off, the child's included, is closed as it should be.
    let same =
        |a: &Value, b: &Value| a["call_id"] == b["call_id"] && a.get("agent") == b.get("agent");
    for call in recs.iter().filter(|r| r["kind"] == "tool_call") {
        let of = |rs: &[Value], kind: &str| {
            rs.iter()
                .filter(|r| r["kind"] == kind && same(r, call))
                .count()
        };
        if of(&recs, "tool_result") > 0 {
            continue;
        }
        let expected = if of(&recs, "tool_started") > 0 {
            "cancelled_after"
        } else {
            "cancelled_before"
        };
        let closed: Vec<&Value> = rrecs
            .iter()
            .filter(|r| r["kind"] == "tool_result" && same(r, call))
            .collect();
        if closed.len() != 1 || closed[0]["failure_kind"] != expected {
            fail(format!(
                "{} {} cut off, closed as {closed:?}, expected {expected}",
                call["agent"], call["call_id"]
            ));
        }
    }
    // Nothing ran on resume, and nothing ran unrecorded or twice.
    if rrecs.iter().any(|r| r["kind"] == "tool_started") {
        fail("the resumed run started a tool".to_owned());
    }
    let side = w.side_lines();
    for (who, call_id) in [("main", "m1"), ("child", "c1")] {
        let lines = side.iter().filter(|l| *l == who).count();
        let started = started_count(&recs, call_id) + started_count(&rrecs, call_id);
        let ran_whole = done(&recs, call_id);
        if lines > started {
            fail(format!(
                "{call_id} ran {lines} times with {started} tool_started"
            ));
        }
        if started > 1 {
            fail(format!("{call_id} started {started} times"));
        }
        if ran_whole && lines != 1 {
            fail(format!("{call_id} has its result, yet ran {lines} times"));
        }
    }
    if side.iter().any(|l| l != "main" && l != "child") {
        fail(format!("side.txt: {side:?}"));
    }

    // The resumed journal verifies, its link included.
    let v = w.verify(resumed);
    let vtext = stdout(&v);
    if v.status.code() != Some(0) || vtext.contains("BROKEN") {
        fail(format!(
            "verify of the resumed journal: {:?}: {vtext}{}",
            v.status,
            stderr(&v)
        ));
    }
    fails
}

/// The sweep in one wire format over `ns` and every mode; panics with every failure.
fn sweep(wire: Wire) {
    let start = Instant::now();
    let w = World::new(wire);
    let base = baseline(&w);
    let total = base.len();
    let mut fails = Vec::new();
    let mut kills = 0;
    for n in 1..=total {
        for mode in MODES {
            fails.extend(one_kill(&w, &base, n, mode));
            kills += 1;
        }
    }
    // Past the last write: the count is the process's whole count.
    fails.extend(one_kill(&w, &base, total + 1, "before"));
    eprintln!(
        "{wire:?}: W = {total} writes ({}), {kills} kills, {:.1} s",
        base.join(" "),
        start.elapsed().as_secs_f64()
    );
    assert!(
        fails.is_empty(),
        "{} failures:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

#[test]
fn every_journal_write_killed_before_half_way_and_after_resumes_cleanly_openai() {
    sweep(Wire::OpenAi);
}

#[test]
fn every_journal_write_killed_before_half_way_and_after_resumes_cleanly_anthropic() {
    sweep(Wire::Anthropic);
}
