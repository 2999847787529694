//! The files that go into every later system prompt (issue 10, item 4): `.dsh/memory.md` can
//! be written only through the pipeline and only where a person answers asks — headless and
//! under `--yolo` it stays protected like the rest of `.dsh/`; `AGENTS.md`, `AGENT.md` and
//! `CLAUDE.md` are asked about even under an allow rule. (The interactive case, where the
//! memory file asks, is `dsh-agent/tests/agents.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Dirs, json_lines, kind, stderr};
use serde_json::{Value, json};

fn check(d: &Dirs, tool: &str, args: Value) -> Value {
    let out = d.dsh(&["check", tool, &args.to_string()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_lines(&out).remove(0)
}

#[test]
fn headless_the_memory_file_stays_protected_and_prompt_files_ask() {
    let d = Dirs::new();
    d.write_user_config(
        "[permissions]\nallow = [\"write_file\", \"edit_file\", \"write_file(.dsh/**)\"]\n",
    );
    for path in [
        ".dsh/memory.md",
        "src/../.dsh/memory.md",
        ".dsh/config.toml",
        ".dsh/sub/memory.md",
    ] {
        let r = check(&d, "write_file", json!({"path": path, "content": "x"}));
        assert_eq!(r["decision"], "deny", "{path}: {r}");
        assert_eq!(r["policy"], "protected_paths", "{path}: {r}");
    }
    for path in ["AGENTS.md", "AGENT.md", "CLAUDE.md"] {
        let r = check(&d, "write_file", json!({"path": path, "content": "x"}));
        assert_eq!(r["decision"], "ask", "{path}: {r}");
        assert_eq!(r["policy"], "memory", "{path}: {r}");
    }
    // Not a prompt file: the allow rule decides.
    let r = check(
        &d,
        "write_file",
        json!({"path": "docs/AGENTS.md", "content": "x"}),
    );
    assert_eq!(r["decision"], "allow", "{r}");
    // A shell write into .dsh/ or a prompt file is refused: the file tools are the way in.
    for command in [
        "echo hi > .dsh/memory.md",
        "echo hi >> AGENTS.md",
        "echo hi > CLAUDE.md",
    ] {
        let r = check(&d, "run_shell", json!({ "command": command }));
        assert_eq!(r["decision"], "deny", "{command}: {r}");
    }
}

#[test]
fn yolo_cannot_write_the_memory_file_but_may_approve_a_prompt_file() {
    let d = Dirs::new();
    d.write_user_config("[permissions]\nallow = [\"write_file\"]\n");
    let memory =
        json!({"name": "write_file", "args": {"path": ".dsh/memory.md", "content": "obey me"}});
    let out = d.batch_output(&[memory], &["--yolo"], &[]);
    assert_eq!(kind(&json_lines(&out)[0]), "denied", "{}", stderr(&out));
    assert!(!d.ws.join(".dsh/memory.md").exists());

    let agents =
        json!({"name": "write_file", "args": {"path": "AGENTS.md", "content": "use tabs"}});
    let out = d.batch_output(std::slice::from_ref(&agents), &[], &[]);
    assert_eq!(
        kind(&json_lines(&out)[0]),
        "unavailable",
        "{}",
        stderr(&out)
    );
    let out = d.batch_output(&[agents], &["--yolo"], &[]);
    assert_eq!(kind(&json_lines(&out)[0]), "ok", "{}", stderr(&out));
}
