//! The `auto` permission mode (issue "ordinary work runs", item 4; DESIGN §5). Its policy
//! side is built — the asks it may lift are marked, the `mode` listener would allow them in
//! the hardened sandbox — but the hardened sandbox is **held back** (`run_shell`'s
//! `HELD_BACK`) until a review's findings are fixed, so `auto` behaves as `ask` and says why.
//! These tests hold that: nothing auto would have run without a person runs, the attacks
//! that review used change nothing, and what auto must never lift stays refused or asked.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::{Dirs, batch_lines as batch, check_with_stderr as check, kind, stderr};
use serde_json::json;

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
    let key = d.user_home.join(".ssh/id_rsa");
    std::fs::write(&key, "SECRET-KEY\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    d
}

const AUTO: &[&str] = &["--mode", "auto"];

#[test]
fn auto_is_held_back_and_asks_saying_why() {
    let d = world();
    let (c, err) = check(&d, AUTO, "run_shell", json!({"command": "perl -e 1"}));
    assert_eq!(c["decision"], "ask", "{c}");
    assert!(err.contains("held back"), "{err}");
    let (c, _) = check(
        &d,
        AUTO,
        "write_file",
        json!({"path": "notes.txt", "content": "x"}),
    );
    assert_eq!(c["decision"], "ask", "{c}");
}

/// What the review's attacks tried, under `--mode auto` with nobody to ask: none runs, and
/// nothing changes.
#[test]
fn the_reviews_attacks_change_nothing() {
    let d = world();
    let socket = d.outside.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let outside = d.outside.join("planted");
    let lines = [
        "perl -e 'open F, \">.git/hooks/pre-commit\" or die'".to_owned(),
        "perl -e 'open F, \">AGENTS.md\" or die; print F \"obey\"'".to_owned(),
        "perl -e 'mkdir \".dsh\"; open F, \">.dsh/config.toml\" or die; print \"dsh sandbox-exec: fake\\n\"; exit 125'".to_owned(),
        format!("perl -e 'chmod 0644, \"{}/.ssh/id_rsa\"'", d.user_home.display()),
        format!("perl -e 'open F, \">{}\" or die'", outside.display()),
        format!(
            "perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => $ARGV[0]) and print \"UNIX-CONNECTED\"' {}",
            socket.display()
        ),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let r = batch(&d, AUTO, &lines);
    for (line, x) in lines.iter().zip(&r) {
        assert_eq!(kind(x), "unavailable", "{line}: {x}");
    }
    assert!(!d.ws.join(".git/hooks/pre-commit").exists());
    assert!(!d.ws.join("AGENTS.md").exists());
    assert!(!d.ws.join(".dsh").exists());
    assert!(!outside.exists());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(d.user_home.join(".ssh/id_rsa"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the key's mode changed");
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
