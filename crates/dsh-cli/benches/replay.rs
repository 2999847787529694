//! `dsh replay` end to end: the release binary, started as a process, replays a generated
//! journal (written with dsh's own `JsonlJournal`) under a small user configuration.
//!
//! - `replay/calls_0`: a journal with no tool call (start-up, configuration, session
//!   assembly, reading the file).
//! - `replay/calls_500`: 500 `tool_call` records, each with its `tool_result` (and an
//!   `approval` for the writes), mixing what policies judge differently: reads allowed by
//!   default, `read_file(.env)` denied by a rule, `write_file` asked, `run_shell` commands
//!   allowed by a rule (`git status --short`) or by the shell's safe list (`ls src`), which the
//!   shell policy parses.
//!
//! The per-call figure is `(calls_500 − calls_0) / 500`, printed after criterion under
//! `cargo bench`.
//!
//! ```sh
//! cargo bench -p dsh-cli --bench replay
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::Criterion;
use dsh_core::journal::{Journal, JsonlJournal, Record, SyncPolicy};
use dsh_core::{ApprovalOutcome, FailureKind};
use serde::Deserialize;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_dsh");
const CALLS: usize = 500;

struct Env {
    _root: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    cfg: PathBuf,
    config: PathBuf,
}

impl Env {
    fn new() -> Env {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let config = root.path().join("replay.toml");
        std::fs::write(
            &config,
            "[permissions]\nallow = [\"run_shell(git status *)\"]\ndeny = [\"read_file(.env)\"]\n",
        )
        .unwrap();
        Env {
            ws: ws.canonicalize().unwrap(),
            home: root.path().join("home"),
            cfg: root.path().join("cfg"),
            config,
            _root: root,
        }
    }

    fn replay(&self, journal: &Path) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.arg("replay")
            .arg(journal)
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--config")
            .arg(&self.config)
            .arg("--json")
            .env("DSH_HOME", &self.home)
            .env("DSH_CONFIG_HOME", &self.cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }
}

/// The `i`th call: its tool, arguments and what the journal recorded for it.
fn call(i: usize) -> (&'static str, Value, Option<FailureKind>, bool) {
    match i % 5 {
        0 => (
            "read_file",
            json!({"path": format!("src/m{i}.rs")}),
            None,
            false,
        ),
        1 => (
            "read_file",
            json!({"path": ".env"}),
            Some(FailureKind::Denied),
            false,
        ),
        2 => (
            "write_file",
            json!({"path": format!("out/{i}.txt"), "content": "x"}),
            None,
            true,
        ),
        3 => (
            "run_shell",
            json!({"command": "git status --short"}),
            None,
            false,
        ),
        _ => ("run_shell", json!({"command": "ls src"}), None, false),
    }
}

/// A journal of `calls` tool calls at `path`, written with dsh's own journal.
fn write_journal(path: &Path, ws: &Path, calls: usize) {
    let journal = JsonlJournal::create(path, "bench", SyncPolicy::BatchEnd).unwrap();
    journal
        .append(&Record::SessionStart {
            workspace: ws.into(),
            provider: None,
            model: None,
            dsh_version: "0.1.0".into(),
            config_digest: "bench".into(),
            resumed_from: None,
            mode: None,
            tools_mode: None,
            client: None,
        })
        .unwrap();
    for i in 0..calls {
        let (tool, args, failure, asked) = call(i);
        let id = format!("c{i}");
        journal
            .append(&Record::ToolCall {
                call_id: id.as_str().into(),
                name: tool.into(),
                args: args.into(),
                source: dsh_core::CallSource::Model,
                parent: None,
                step: 1,
            })
            .unwrap();
        if asked {
            journal
                .append(&Record::Approval {
                    call_id: id.as_str().into(),
                    outcome: ApprovalOutcome::AllowedOnce,
                    message: None,
                })
                .unwrap();
        }
        let (gate, policy) = match (failure, asked) {
            (Some(_), _) => ("pre_policy", Some("permissions")),
            (None, true) => ("approval", Some("yolo")),
            (None, false) => ("pre_policy", None),
        };
        let result = json!({
            "kind": "tool_result", "call_id": id, "tool": tool, "ok": failure.is_none(),
            "failure_kind": failure.map(FailureKind::as_str),
            "decided_by": {"gate": gate, "policy": policy, "reason": "recorded"},
            "content": "", "value": null, "elapsed_ms": 0, "exit_code": null, "sandbox": null,
        });
        journal
            .append(&Record::deserialize(&result).unwrap())
            .unwrap();
    }
    journal.sync().unwrap();
}

fn run(mut cmd: Command) {
    let status = cmd.status().unwrap();
    assert_eq!(status.code(), Some(0), "dsh replay failed");
}

fn time(env: &Env, journal: &Path, runs: usize) -> Duration {
    let mut v: Vec<Duration> = (0..runs)
        .map(|_| {
            let cmd = env.replay(journal);
            let begun = Instant::now();
            run(cmd);
            begun.elapsed()
        })
        .collect();
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let env = Env::new();
    let journals: Vec<(String, PathBuf)> = [0, CALLS]
        .into_iter()
        .map(|n| {
            let path = env.ws.parent().unwrap().join(format!("calls_{n}.jsonl"));
            write_journal(&path, &env.ws, n);
            (format!("calls_{n}"), path)
        })
        .collect();
    let mut c = Criterion::default().configure_from_args();
    {
        let mut group = c.benchmark_group("replay");
        group
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(5));
        for (name, path) in &journals {
            group.bench_function(name, |b| b.iter(|| run(env.replay(path))));
        }
        group.finish();
    }
    c.final_summary();
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: keep that run short.
    if std::env::args().any(|a| a == "--bench") {
        let empty = time(&env, &journals[0].1, 15);
        let full = time(&env, &journals[1].1, 15);
        let per_call = full.saturating_sub(empty) / CALLS as u32;
        println!(
            "replay: {CALLS} calls {:.2} ms, no call {:.2} ms (medians of 15): {:.1} µs per call",
            full.as_secs_f64() * 1e3,
            empty.as_secs_f64() * 1e3,
            per_call.as_secs_f64() * 1e6
        );
    }
}
