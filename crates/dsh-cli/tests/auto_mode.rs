//! The `auto` permission mode (issue "ordinary work runs", item 4; DESIGN §5): the asks a
//! rule could lift for work inside the workspace run without a person, in the hardened
//! sandbox; the attacks a review used against that sandbox run and change nothing; what
//! auto must never lift stays refused or asked; without its sandbox auto asks and says why.
//! More attacks: `attack_auto.rs`.
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
fn auto_runs_workspace_work_without_a_person() {
    let d = world();
    std::fs::create_dir_all(d.ws.join("src")).unwrap();
    std::fs::write(d.ws.join("src/a.txt"), "a\n").unwrap();
    let lines = [
        "mkdir -p build/out",
        "cp src/a.txt build/out/b.txt",
        "mv build/out/b.txt build/c.txt",
        "touch build/d.txt",
        "tar cf out.tar build",
        "perl -e 'open F, \">made.txt\" or die $!; print F \"made\"'",
        "chmod +x x && ./x",
        "rm -rf build",
    ];
    let r = batch(&d, AUTO, &lines);
    for (line, x) in lines.iter().zip(&r) {
        assert_eq!(kind(x), "ok", "{line}: {x}");
        assert_eq!(x["decided_by"]["policy"], "mode", "{line}: {x}");
        assert_eq!(x["sandbox"], "landlock", "{line}: {x}");
        assert_eq!(x["exit_code"], 0, "{line}: {x}");
    }
    assert!(r[6]["content"].as_str().unwrap().contains("planted"));
    assert!(d.ws.join("out.tar").is_file());
    assert_eq!(
        std::fs::read_to_string(d.ws.join("made.txt")).unwrap(),
        "made"
    );
    assert!(!d.ws.join("build").exists());
    // A file tool's write inside the workspace too; the memory file still asks.
    let (c, _) = check(
        &d,
        AUTO,
        "write_file",
        json!({"path": "notes.txt", "content": "x"}),
    );
    assert_eq!(c["decision"], "allow", "{c}");
    assert_eq!(c["policy"], "mode", "{c}");
    let (c, _) = check(
        &d,
        AUTO,
        "write_file",
        json!({"path": "AGENTS.md", "content": "x"}),
    );
    assert_eq!(c["decision"], "ask", "{c}");
}

/// What the review's attacks tried, under `--mode auto` with nobody to ask: they run in the
/// hardened sandbox, and nothing changes.
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
        assert_eq!(x["decided_by"]["policy"], "mode", "{line}: {x}");
    }
    // The faked setup failure is the command's own output: it ran.
    assert_eq!(kind(&r[2]), "ok", "{}", r[2]);
    assert_eq!(r[2]["exit_code"], 125, "{}", r[2]);
    assert!(!r[5]["content"].as_str().unwrap().contains("UNIX-CONNECTED"));
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

/// Doors and structural denials of the earlier shell issues (`shell_doors.rs` holds them
/// with their reasons): denied in every mode, `auto` and `yolo` included.
#[test]
fn doors_and_structural_denials_hold_in_every_mode() {
    let d = world();
    const DOORS: &[&str] = &[
        "git -c core.pager='rm -rf ~' status",
        "git -c alias.st='!rm -rf ~' st",
        "git -c include.path=/tmp/c log",
        "git config --global user.name x",
        "GIT_PAGER='rm -rf ~' git log",
        "git --exec-path=/tmp log",
        "git rebase --exec 'make' main",
        "git bisect run ./t.sh",
        "git submodule foreach 'rm x'",
        "git clone 'ext::sh -c x' d",
        "git -C /etc status",
        "GIT_DIR=/tmp/x git log",
        "make SHELL=/tmp/x",
        "make --eval='x:'",
        "MAKEFLAGS='SHELL=/x' make",
        "npx cowsay hi",
        "npm --script-shell=/tmp/x test",
        "NODE_OPTIONS=--import=./x.mjs npm test",
        "LD_PRELOAD=/tmp/x.so ls",
        "PATH=/tmp:$PATH ls",
        "BASH_ENV=x ls",
        "echo x > /etc/passwd",
        "echo x >> ~/.bashrc",
        "ls &> /tmp/x",
        "echo x > $(echo f)",
        "echo x > /dev/tcp/10.0.0.1/80",
        "find . -fprint /tmp/x",
        "echo x > .Git/config",
        "echo x > .DSH/config.toml",
        "cat > .GIT/hooks/pre-commit",
        "find /etc -delete",
        "echo ${x@P}",
        "echo ${!x}",
        "sh -c ls",
        "ls | sh",
        "cp x .git/hooks/pre-commit",
        "mv x .dsh/config.toml",
        "sed -i s/a/b/ AGENTS.md",
        "cd / && ls",
        "curl -s https://example.com",
    ];
    let mut wrong = Vec::new();
    for mode in ["read-only", "ask", "auto", "yolo"] {
        let results = batch(&d, &["--mode", mode], DOORS);
        for (line, r) in DOORS.iter().zip(&results) {
            if kind(r) != "denied" {
                wrong.push(format!("--mode {mode} {line}: {r}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
