//! The `auto` permission mode (issue "ordinary work runs", item 4; DESIGN §5): builds and
//! workspace writes run without a person — a gate-1 allow by `policy: "mode"` — in the
//! hardened workspace-write sandbox, where what a person would still have to see stays
//! refused or asked: protected paths and prompt files, writes outside, UNIX sockets, reads
//! outside the workspace, programs that always ask, the network. Where the hardened sandbox
//! cannot be used (`--sandbox off`), `auto` behaves as `ask` and says why. On Linux these
//! tests fail, never skip, without Landlock or a private mount namespace.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::{Dirs, json_lines, kind, stderr};
use serde_json::{Value, json};

fn world() -> Dirs {
    let d = Dirs::new();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&d.ws)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    git(&["init", "-q", "."]);
    std::fs::write(d.ws.join("x"), "#!/bin/sh\necho planted\n").unwrap();
    std::fs::create_dir_all(d.user_home.join(".ssh")).unwrap();
    std::fs::write(d.user_home.join(".ssh/id_rsa"), "SECRET-KEY\n").unwrap();
    d
}

fn check(d: &Dirs, extra: &[&str], tool: &str, args: Value) -> (Value, String) {
    let args = args.to_string();
    let mut a = extra.to_vec();
    a.extend(["check", tool, &args]);
    let out = d.dsh(&a).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (json_lines(&out).remove(0), stderr(&out))
}

fn batch(d: &Dirs, extra: &[&str], lines: &[&str]) -> Vec<Value> {
    let calls: Vec<Value> = lines
        .iter()
        .map(|l| json!({"name": "run_shell", "args": {"command": l}}))
        .collect();
    let out = d.batch_output(&calls, extra, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_lines(&out)
}

const AUTO: &[&str] = &["--mode", "auto"];

#[test]
fn auto_runs_builds_and_workspace_writes_without_a_person_in_the_hardened_sandbox() {
    let d = world();
    let (c, _) = check(&d, AUTO, "run_shell", json!({"command": "perl -e 1"}));
    assert_eq!(c["decision"], "allow", "{c}");
    assert_eq!(c["policy"], "mode", "{c}");
    let (c, _) = check(
        &d,
        AUTO,
        "write_file",
        json!({"path": "notes.txt", "content": "x"}),
    );
    assert_eq!(c["decision"], "allow", "{c}");
    assert_eq!(c["policy"], "mode", "{c}");
    let r = batch(
        &d,
        AUTO,
        &["mkdir -p build/out && cp x build/out/y && chmod +x build/out/y && echo built"],
    );
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    assert_eq!(r[0]["sandbox"], "landlock", "{}", r[0]);
    assert!(d.ws.join("build/out/y").exists());
}

#[test]
fn auto_changes_no_protected_path_and_reaches_nothing_outside() {
    let d = world();
    let socket = d.outside.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let outside = d.outside.join("planted");
    let lines = [
        "perl -e 'open F, \">.git/hooks/pre-commit\" or die'".to_owned(),
        "perl -e 'open F, \">>.git/config\" or die'".to_owned(),
        // Prompt files and `.dsh` that do not exist yet: created, then moved away.
        "perl -e 'open F, \">AGENTS.md\" or die; print F \"obey\"'".to_owned(),
        "perl -e 'mkdir \".dsh\"; open F, \">.dsh/config.toml\" or die'".to_owned(),
        format!("perl -e 'open F, \">{}\" or die'", outside.display()),
        format!(
            "perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => $ARGV[0]) and print \"UNIX-CONNECTED\"' {}",
            socket.display()
        ),
        format!(
            "perl -e 'open F, \"<{}/.ssh/id_rsa\" or die; print <F>'",
            d.user_home.display()
        ),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let r = batch(&d, AUTO, &lines);
    for (line, x) in lines.iter().zip(&r) {
        assert_eq!(kind(x), "ok", "{line}: {x}");
        assert_eq!(x["decided_by"]["policy"], "mode", "{line}: {x}");
        let text = x["content"].as_str().unwrap();
        assert!(!text.contains("UNIX-CONNECTED"), "{line}: {text}");
        assert!(!text.contains("SECRET-KEY"), "{line}: {text}");
    }
    assert!(!d.ws.join(".git/hooks/pre-commit").exists());
    assert!(!d.ws.join("AGENTS.md").exists(), "AGENTS.md stayed");
    assert!(!d.ws.join(".dsh").exists(), ".dsh stayed");
    assert!(
        r[2]["content"].as_str().unwrap().contains("moved to"),
        "{}",
        r[2]
    );
    assert!(!outside.exists());
    assert!(matches!(
        listener.accept(),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    ));
}

#[test]
fn auto_never_lifts_what_a_person_must_see() {
    let d = world();
    for (line, want) in [
        ("cp x .git/hooks/pre-commit", "deny"),
        ("mv x .dsh/config.toml", "deny"),
        ("sed -i s/a/b/ AGENTS.md", "deny"),
        ("curl -s https://example.com", "deny"),
        ("docker ps", "ask"),
        ("ssh host true", "ask"),
        ("cat ~/.ssh/id_rsa", "ask"),
        ("cat ../outside/x", "ask"),
    ] {
        let (c, _) = check(&d, AUTO, "run_shell", json!({ "command": line }));
        assert_eq!(c["decision"], want, "{line}: {c}");
    }
    // A configured ask rule holds too.
    d.write_user_config("[permissions]\nask = [\"run_shell(perl *)\"]\n");
    let (c, _) = check(&d, AUTO, "run_shell", json!({"command": "perl -e 1"}));
    assert_eq!(c["decision"], "ask", "{c}");
}

#[test]
fn without_its_sandbox_auto_asks_and_says_why() {
    let d = world();
    let extra = ["--mode", "auto", "--sandbox", "off"];
    let (c, err) = check(&d, &extra, "run_shell", json!({"command": "perl -e 1"}));
    assert_eq!(c["decision"], "ask", "{c}");
    assert!(err.contains("auto behaves as ask"), "{err}");
    let (c, _) = check(
        &d,
        &extra,
        "write_file",
        json!({"path": "notes.txt", "content": "x"}),
    );
    assert_eq!(c["decision"], "ask", "{c}");
}
