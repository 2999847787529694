//! The project memory file `.dsh/memory.md` (issue 10, item 4): written only through the
//! pipeline, every write asked even under an allow rule, while the rest of `.dsh/` stays
//! protected; what it holds reaches the next session's system prompt.
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
fn a_write_to_the_memory_file_asks_even_under_an_allow_rule() {
    let d = Dirs::new();
    d.write_user_config(
        "[permissions]\nallow = [\"write_file\", \"edit_file\", \"write_file(.dsh/**)\"]\n",
    );
    for tool in ["write_file", "edit_file"] {
        let args = match tool {
            "write_file" => json!({"path": ".dsh/memory.md", "content": "x"}),
            _ => json!({"path": ".dsh/memory.md", "old_string": "a", "new_string": "b"}),
        };
        let r = check(&d, tool, args);
        assert_eq!(r["decision"], "ask", "{r}");
        assert_eq!(r["policy"], "memory", "{r}");
        assert_eq!(r["gate"], "pre_policy", "{r}");
    }
    // Spelled another way, it is the same file.
    let r = check(
        &d,
        "write_file",
        json!({"path": "src/../.dsh/memory.md", "content": "x"}),
    );
    assert_eq!(r["decision"], "ask", "{r}");
    // The rest of .dsh/ stays protected, whatever the rules say.
    for path in [
        ".dsh/config.toml",
        ".dsh/memory.md.bak",
        ".dsh/sub/memory.md",
    ] {
        let r = check(&d, "write_file", json!({"path": path, "content": "x"}));
        assert_eq!(r["decision"], "deny", "{path}: {r}");
        assert_eq!(r["policy"], "protected_paths", "{path}: {r}");
    }
    // A shell write into it is refused: the file tools are the way in.
    let r = check(
        &d,
        "run_shell",
        json!({"command": "echo hi > .dsh/memory.md"}),
    );
    assert_eq!(r["decision"], "deny", "{r}");
}

#[test]
fn an_approved_write_lands_and_a_headless_one_is_unavailable() {
    let d = Dirs::new();
    d.write_user_config("[permissions]\nallow = [\"write_file\"]\n");
    let call = json!({"name": "write_file", "args": {"path": ".dsh/memory.md", "content": "tests need --locked"}});
    let out = d.batch_output(std::slice::from_ref(&call), &[], &[]);
    assert_eq!(
        kind(&json_lines(&out)[0]),
        "unavailable",
        "{}",
        stderr(&out)
    );
    assert!(!d.ws.join(".dsh/memory.md").exists());
    let out = d.batch_output(&[call], &["--yolo"], &[]);
    assert_eq!(kind(&json_lines(&out)[0]), "ok", "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(d.ws.join(".dsh/memory.md")).unwrap(),
        "tests need --locked"
    );
}
