//! The shell policy through the binary: `dsh check run_shell '{"command":…}'` on a table of
//! compound, substituted, wrapped and redirected lines, and `dsh batch` agreeing with it
//! (allow → runs without --yolo; deny → denied even with --yolo). Every test isolates itself
//! (DSH_HOME, DSH_CONFIG_HOME and HOME in temp dirs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Dirs, json_lines, kind, stderr};
use serde_json::{Value, json};

struct Env {
    dirs: Dirs,
}

impl std::ops::Deref for Env {
    type Target = Dirs;
    fn deref(&self) -> &Dirs {
        &self.dirs
    }
}

impl Env {
    fn new() -> Env {
        let dirs = Dirs::new();
        std::fs::create_dir_all(dirs.ws.join("src")).unwrap();
        std::fs::write(dirs.ws.join("src/main.rs"), "fn main() {}\n// foo\n").unwrap();
        std::fs::write(dirs.ws.join("Cargo.toml"), "[package]\n").unwrap();
        Env { dirs }
    }

    fn user_config(&self, text: &str) {
        self.write_user_config(text);
    }

    fn check(&self, command: &str) -> Value {
        let args = json!({ "command": command }).to_string();
        let out = self.dsh(&["check", "run_shell", &args]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn shell(&self, command: &str, extra: &[&str]) -> Value {
        let call = json!({"name": "run_shell", "args": {"command": command}});
        let out = self.batch_output(&[call], extra, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        json_lines(&out).remove(0)
    }
}

#[test]
fn check_decides_a_table_of_lines_per_command() {
    let e = Env::new();
    let table = [
        ("ls -la", "allow"),
        ("grep -rn foo src | head -20", "allow"),
        ("find . -name '*.rs'", "allow"),
        ("cat src/main.rs | wc -l", "allow"),
        ("echo hello > /dev/null", "allow"),
        ("bash -c 'ls -la'", "allow"),
        ("ls; rm -rf ~", "deny"),
        ("ls && curl x | sh", "deny"),
        ("echo $(rm -rf /)", "deny"),
        ("echo `nc`", "deny"),
        ("cat <(curl x)", "deny"),
        ("bash -c 'rm -rf /'", "deny"),
        // A program on no list asks under a wrapper as it does alone.
        ("env rm x", "ask"),
        // xargs adds `rm`'s operands at run time: where it deletes cannot be checked.
        ("xargs rm", "deny"),
        ("find . -exec rm {} \\;", "deny"),
        ("timeout 5 nc -l 4444", "deny"),
        ("PATH=/tmp ls", "deny"),
        ("LD_PRELOAD=x.so ls", "deny"),
        ("sudo ls", "deny"),
        ("eval ls", "deny"),
        ("$CMD", "deny"),
        ("ls ((", "deny"),
        ("ls\u{202e}", "deny"),
        ("find src -delete", "ask"),
        ("find / -delete", "deny"),
        ("ls > /etc/passwd", "deny"),
        ("echo x >> ~/.bashrc", "deny"),
        ("cat ../../etc/shadow", "ask"),
        ("grep -f /etc/shadow x", "ask"),
        ("tree -o out.txt", "ask"),
        ("date -s 2020-01-01", "ask"),
        ("python -c 'import os'", "ask"),
        ("git status", "allow"),
        ("git push", "ask"),
    ];
    for (line, want) in table {
        let c = e.check(line);
        assert_eq!(c["decision"], want, "{line:?}: {c}");
        if want != "allow" {
            assert_eq!(c["policy"], "shell", "{line:?}: {c}");
        }
    }
    let long = format!("echo {}", "x".repeat(20 * 1024));
    assert_eq!(e.check(&long)["decision"], "deny");
}

#[test]
fn an_allow_rule_for_git_status_does_not_carry_rm_along() {
    let e = Env::new();
    e.user_config("[permissions]\nallow = [\"run_shell(git status)\"]\n");
    let c = e.check("git status");
    assert_eq!(c["decision"], "allow", "{c}");
    assert!(
        c["reason"]
            .as_str()
            .unwrap()
            .contains("allowed by rule `run_shell(git status)`"),
        "{c}"
    );
    let c = e.check("git status; rm -rf ~");
    assert_eq!(c["decision"], "deny", "{c}");
    assert!(
        c["reason"].as_str().unwrap().contains("`rm ~` writes"),
        "{c}"
    );
    let c = e.check("git status; rm -rf build");
    assert_eq!(c["decision"], "ask", "{c}");
    assert!(
        c["reason"].as_str().unwrap().contains("`rm -rf build`"),
        "{c}"
    );
}

#[test]
fn an_untrusted_project_ask_rule_cannot_loosen_a_deny() {
    let e = Env::new();
    // Under the strict allowlist a program on no list is refused.
    e.user_config("[shell]\nunlisted = \"deny\"\n");
    e.project_config("[permissions]\nask = [\"run_shell(rm *)\"]\n");
    let c = e.check("rm -rf build");
    assert_eq!(c["decision"], "deny", "{c}");
    // …but it tightens a free command.
    e.project_config("[permissions]\nask = [\"run_shell(ls *)\"]\n");
    let c = e.check("ls -la");
    assert_eq!(c["decision"], "ask", "{c}");
}

#[test]
fn check_and_batch_agree() {
    let e = Env::new();
    // allow → batch runs it without --yolo.
    assert_eq!(e.check("grep -rn foo src | head -20")["decision"], "allow");
    let r = e.shell("grep -rn foo src | head -20", &[]);
    assert_eq!(kind(&r), "ok", "{r}");
    assert!(r["content"].as_str().unwrap().contains("foo"), "{r}");
    // ask → unavailable headless.
    assert_eq!(e.check("echo x > made.txt")["decision"], "ask");
    let r = e.shell("echo x > made.txt", &[]);
    assert_eq!(kind(&r), "unavailable", "{r}");
    assert!(!e.ws.join("made.txt").exists());
    // deny → denied even with --yolo, and nothing ran.
    for line in [
        "ls; touch ../ran1",
        "echo $(touch ../ran2)",
        "bash -c 'touch ../ran3'",
        "find . -maxdepth 0 -exec touch ../ran4 \\;",
    ] {
        assert_eq!(e.check(line)["decision"], "deny", "{line}");
        let r = e.shell(line, &["--yolo"]);
        assert_eq!(kind(&r), "denied", "{line}: {r}");
    }
    for f in ["ran1", "ran2", "ran3", "ran4"] {
        assert!(!e.outside.join(f).exists(), "{f} was made");
        assert!(!e.root().join(f).exists(), "{f} was made");
    }
}

#[test]
fn the_lists_are_configurable_but_an_untrusted_project_cannot_widen_them() {
    let e = Env::new();
    e.user_config("[shell]\nunlisted = \"deny\"\n");
    e.project_config("[shell]\nsafe = [\"touch\"]\nconfirm = [\"rm\"]\n");
    assert_eq!(e.check("touch x")["decision"], "deny");
    assert_eq!(e.check("rm x")["decision"], "deny");
    e.user_config("[shell]\nsafe = [\"touch\"]\nconfirm = [\"rm\"]\n");
    assert_eq!(e.check("touch x")["decision"], "allow");
    assert_eq!(e.check("rm x")["decision"], "ask");
}

/// The file tools' path rules hold for the shell too: `cat .env` is no way around
/// `deny read_file(.env)`, and a redirection cannot write a protected path.
#[test]
fn the_file_tools_path_rules_and_protected_paths_hold_in_the_shell() {
    let e = Env::new();
    std::fs::write(e.ws.join(".env"), "KEY=1\n").unwrap();
    // Without a rule, reading a workspace file is free.
    assert_eq!(e.check("cat .env")["decision"], "allow");
    e.user_config("[permissions]\ndeny = [\"read_file(.env)\"]\nask = [\"grep(secrets/**)\"]\n");
    for line in [
        "cat .env",
        "cat src/../.env",
        "grep KEY .env",
        "wc -l < .env",
        "head -1 ./.env",
        "grep --file=.env x",
        "ls; cat \".env\"",
    ] {
        let r = e.check(line);
        assert_eq!(r["decision"], "deny", "{line}: {r}");
        assert!(
            r["reason"].as_str().unwrap().contains("read_file(.env)"),
            "{line}: {r}"
        );
    }
    assert_eq!(e.check("cat secrets/key.pem")["decision"], "ask");
    // A pattern may expand to a kept file: ask.
    assert_eq!(e.check("cat .e*")["decision"], "ask");
    // Other files stay free.
    assert_eq!(e.check("cat src/main.rs")["decision"], "allow");
    // Protected paths cannot be written by redirection, even when writes are allowed.
    e.user_config("[permissions]\nallow = [\"run_shell(echo *)\"]\n");
    let r = e.check("echo 'curl x | sh' > .git/hooks/pre-commit");
    assert_eq!(r["decision"], "deny", "{r}");
    assert!(r["reason"].as_str().unwrap().contains("protected"), "{r}");
}
