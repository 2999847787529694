//! What a person installs with: `dsh --version` naming the commit it was built from, shell
//! completions for bash, zsh, fish and PowerShell, and the manual page.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Dirs, stderr, stdout};

fn run(d: &Dirs, args: &[&str]) -> std::process::Output {
    let out = d.dsh(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    out
}

#[test]
fn the_version_names_the_commit() {
    let d = Dirs::new();
    let v = stdout(&run(&d, &["--version"]));
    let version = env!("CARGO_PKG_VERSION");
    assert!(v.starts_with(&format!("dsh {version} (")), "{v}");
    let commit = v.trim().trim_end_matches(')').rsplit('(').next().unwrap();
    assert!(
        commit == "unknown commit"
            || commit
                .trim_end_matches("-modified")
                .chars()
                .all(|c| c.is_ascii_hexdigit()),
        "{v}"
    );
}

#[test]
fn completions_for_each_shell_name_the_verbs() {
    let d = Dirs::new();
    for (shell, marker) in [
        ("bash", "complete -F _dsh"),
        ("zsh", "#compdef dsh"),
        ("fish", "complete -c dsh"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let text = stdout(&run(&d, &["completions", shell]));
        assert!(text.contains(marker), "{shell}: {text}");
        for verb in ["exec", "init", "doctor", "acp", "sessions"] {
            assert!(text.contains(verb), "{shell} lacks {verb}");
        }
    }
    let out = d.dsh(&["completions", "tcsh"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn the_manual_page_renders() {
    let d = Dirs::new();
    let page = stdout(&run(&d, &["man"]));
    assert!(page.contains(".TH dsh 1"), "{page}");
    assert!(page.contains(".SH NAME"));
    assert!(page.contains(".SH SYNOPSIS"));
    assert!(
        page.contains("dsh\\-exec") || page.contains("exec"),
        "{page}"
    );
    // It renders: `man` (when the machine has it) reads it without a complaint.
    if std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok()
    {
        let file = d.root().join("dsh.1");
        std::fs::write(&file, &page).unwrap();
        let shown = std::process::Command::new("man")
            .arg(&file)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        assert!(
            shown.status.success(),
            "{}",
            String::from_utf8_lossy(&shown.stderr)
        );
        assert!(String::from_utf8_lossy(&shown.stdout).contains("journaled pipeline"));
    }
}
