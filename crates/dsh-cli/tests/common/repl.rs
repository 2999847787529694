//! What the REPL's PTY tests share: a workspace, `dsh` (the REPL) against a scripted
//! server in a real pseudo-terminal, the session's journal, leaving.
#![allow(dead_code)]

use std::process::Command;

use dsh_testkit::model_server::ServerHandle;
use serde_json::Value;

use crate::common::Dirs;
use crate::pty::{Pty, PtySpec, key};

/// The prompt marker.
pub const PROMPT: &str = "›";

pub fn world() -> Dirs {
    let d = Dirs::new();
    std::fs::create_dir_all(d.ws.join("src")).unwrap();
    std::fs::write(
        d.ws.join("src/main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n",
    )
    .unwrap();
    d
}

/// `dsh` (the REPL) against `server`, with `extra` flags.
pub fn repl_command(d: &Dirs, server: &ServerHandle, extra: &[&str]) -> Command {
    let mut args = vec![
        "--provider",
        "openai",
        "--base-url",
        &server.url,
        "--model",
        "scripted",
    ];
    args.extend_from_slice(extra);
    let mut c = d.dsh(&args);
    c.env("OPENAI_API_KEY", "sk-test");
    c
}

pub fn spawn(d: &Dirs, server: &ServerHandle, extra: &[&str]) -> Pty {
    spawn_sized(d, server, extra, (40, 120))
}

/// [`spawn`] on a terminal of (rows, columns).
pub fn spawn_sized(d: &Dirs, server: &ServerHandle, extra: &[&str], size: (u16, u16)) -> Pty {
    let pty = PtySpec::from_command(&repl_command(d, server, extra))
        .size(size.0, size.1)
        .spawn();
    pty.wait_for_text(PROMPT);
    pty
}

/// The records of the session's (only) journal.
pub fn journal(d: &Dirs) -> Vec<Value> {
    let dir = d.home.join("sessions");
    let path = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    dsh_core::journal::read_journal(&path)
        .unwrap()
        .records
        .into_iter()
        .map(|e| Value::Object(e.json))
        .collect()
}

/// A record's kind.
pub fn kind(r: &Value) -> &str {
    r["kind"].as_str().unwrap()
}

/// Waits for prompt number `prompts` (keys typed while a turn runs are the next prompt's),
/// then leaves with Ctrl-D.
pub fn leave(mut pty: Pty, prompts: usize) {
    pty.wait_for_count(PROMPT, prompts);
    pty.send(key::CTRL_D);
    let status = pty.wait_exit();
    assert!(status.success(), "exit: {status:?}\n{}", pty.report());
}

/// Waits for an empty prompt on the cursor's row (however much has scrolled away), then
/// leaves with Ctrl-D.
pub fn leave_at_prompt(mut pty: Pty) {
    wait_at_prompt(&pty);
    pty.send(key::CTRL_D);
    let status = pty.wait_exit();
    assert!(status.success(), "exit: {status:?}\n{}", pty.report());
}

/// Waits until the cursor's row is an empty prompt.
pub fn wait_at_prompt(pty: &Pty) {
    pty.wait_for("an empty prompt at the cursor", |s| {
        s.row(s.cursor().0).trim_end() == PROMPT
    });
}
