//! Attacks on the read-only list and the read-only sandbox profile, from a review of
//! 12f701b: each test failed while its finding stood (commands hidden in here-documents and
//! nested backquotes; mode, owner and time changes from the read-only profile; `network:
//! true` lifting a free command out of it; a planted `.git` file widening reads; `/etc`
//! secrets; flag-table gaps — getopt abbreviations, sed comments and labels, wrapper options;
//! credentials printed by `printenv`) and guards its fix. Through the real `dsh check` and
//! `dsh batch`, with no approver, HOME/DSH_HOME/DSH_CONFIG_HOME in a temp dir.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use common::{Dirs, check_shell as check, content, git, json_lines, kind, shell_call, stderr};
use serde_json::{Value, json};

/// A git workspace with a few files, an attacker's helper scripts in it (a repository may
/// hold anything), and a planted key at `$HOME/.ssh/id_rsa`.
fn world() -> Dirs {
    let d = Dirs::new();
    let ws = &d.ws;
    std::fs::write(ws.join("README.md"), "first line\nsecond line\n").unwrap();
    std::fs::write(ws.join("nums.txt"), "3\n1\n2\n").unwrap();
    std::fs::write(ws.join("evil.sed"), "1e touch PWNED-sed-file\n").unwrap();
    std::fs::write(ws.join("rgrc"), "--pre=./pre.sh\n").unwrap();
    executable(ws, "zip.sh", "#!/bin/sh\ntouch PWNED-sort\nexec cat\n");
    executable(ws, "pre.sh", "#!/bin/sh\ntouch PWNED-rg\ncat \"$1\"\n");
    let big: String = (0..300_000).map(|i| format!("{i}\n")).collect();
    std::fs::write(ws.join("big.txt"), big).unwrap();
    git(ws, &["init", "-q", "."]);
    git(ws, &["add", "."]);
    git(ws, &["commit", "-qm", "init"]);
    std::fs::create_dir_all(d.user_home.join(".ssh")).unwrap();
    std::fs::write(d.user_home.join(".ssh/id_rsa"), "SECRET-KEY-MATERIAL\n").unwrap();
    std::fs::set_permissions(
        d.user_home.join(".ssh/id_rsa"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    d
}

fn executable(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A repository-configured diff driver (`diff.external`), as `read_only_sandbox.rs` plants.
fn plant_external_diff(d: &Dirs, script: &str) {
    executable(&d.ws, "ext.sh", script);
    let mut config = std::fs::read_to_string(d.ws.join(".git/config")).unwrap();
    config.push_str(&format!("[diff]\n\texternal = {}/ext.sh\n", d.ws.display()));
    std::fs::write(d.ws.join(".git/config"), config).unwrap();
    std::fs::write(d.ws.join("README.md"), "changed\n").unwrap();
}

fn batch_calls(d: &Dirs, extra: &[&str], envs: &[(&str, &str)], calls: &[Value]) -> Vec<Value> {
    let out = d.batch_output(calls, extra, envs);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = json_lines(&out);
    assert_eq!(results.len(), calls.len());
    results
}

fn batch(d: &Dirs, extra: &[&str], lines: &[&str]) -> Vec<Value> {
    let calls: Vec<Value> = lines.iter().map(|l| shell_call(l)).collect();
    batch_calls(d, extra, &[], &calls)
}

fn pwned(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("PWNED"))
        .collect()
}

/// Finding: tree-sitter-bash sees no command in a heredoc body line that starts with
/// blanks (`\t$(cmd)`, `  $(cmd)`), in backticks inside a heredoc body, or in backticks
/// nested in backticks; bash runs them all. Any program then runs "free" — in the
/// read-only profile where it is enforced, unconfined under `--sandbox off` or without
/// Landlock, and in the workspace-write profile on kernels before 6.12.
#[test]
fn commands_hidden_in_heredocs_and_nested_backticks_are_judged() {
    let d = world();
    let lines = [
        "cat <<EOF\n`touch PWNED-heredoc-backtick`\nEOF",
        "cat <<-EOF\n\t$(touch PWNED-heredoc-tab)\n\tEOF",
        "cat <<EOF\n  $(touch PWNED-heredoc-blank)\nEOF",
        "echo `echo \\`touch PWNED-nested\\``",
    ];
    for line in lines {
        let c = check(&d, &[], line);
        assert_ne!(c["decision"], "allow", "{line:?}: {c}");
    }
    for (line, r) in lines.iter().zip(batch(&d, &["--sandbox", "off"], &lines)) {
        assert_ne!(
            r["sandbox"], "none",
            "{line:?} ran unconfined without a person: {r}"
        );
    }
    assert!(pwned(&d.ws).is_empty(), "{:?}", pwned(&d.ws));
}

/// Finding: Landlock (ABI ≤ 6) does not handle chmod, chown, utimes or xattrs, and the
/// read-only profile's seccomp filter does not refuse them: a program a free command runs (a
/// repository's diff driver here) changes modes and times in the workspace and outside it,
/// e.g. makes `~/.ssh/id_rsa` world-readable or sets a setuid bit.
#[test]
fn the_read_only_profile_changes_no_modes_or_times() {
    let d = world();
    let key = d.user_home.join(".ssh/id_rsa");
    plant_external_diff(
        &d,
        &format!(
            "#!/bin/sh\nchmod 0666 {key}\ntouch -d 2001-01-01 {key}\nchmod 4755 {ws}/zip.sh\nchmod 000 {ws}/nums.txt\n",
            key = key.display(),
            ws = d.ws.display()
        ),
    );
    let before = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.mode() & 0o7777, m.mtime())
    };
    let (key0, zip0, nums0) = (
        before(&key),
        before(&d.ws.join("zip.sh")),
        before(&d.ws.join("nums.txt")),
    );
    let r = batch(&d, &[], &["git diff"]).remove(0);
    assert_eq!(r["sandbox"], "landlock-read-only", "{r}");
    assert_eq!(before(&key), key0, "the key's mode or mtime changed: {r}");
    assert_eq!(before(&d.ws.join("zip.sh")), zip0, "setuid bit set: {r}");
    assert_eq!(before(&d.ws.join("nums.txt")), nums0, "mode changed: {r}");
}

/// Finding: `network: true` on a free line (with `sandbox.allow_network = true`) is allowed
/// without a person, and `run.rs` then leaves the read-only profile for the
/// workspace-write one with the network: a repository's diff driver writes the workspace,
/// reads `~/.ssh` and opens a TCP socket.
#[test]
fn network_does_not_lift_a_free_command_out_of_the_read_only_profile() {
    let d = world();
    d.write_user_config("[sandbox]\nallow_network = true\n");
    plant_external_diff(
        &d,
        &format!(
            "#!/bin/sh\necho RAN-EXT\ntouch {ws}/PWNED-net\ncat {key}\n",
            ws = d.ws.display(),
            key = d.user_home.join(".ssh/id_rsa").display()
        ),
    );
    let calls = [json!({"name": "run_shell", "args": {"command": "git diff", "network": true}})];
    let r = batch_calls(&d, &[], &[], &calls).remove(0);
    if kind(&r) == "ok" {
        assert_eq!(r["sandbox"], "landlock-read-only", "{r}");
    }
    assert!(!content(&r).contains("SECRET-KEY-MATERIAL"), "{r}");
    assert!(pwned(&d.ws).is_empty(), "{:?}: {r}", pwned(&d.ws));
}

/// Finding: `reads.rs` trusts a `.git` *file* in the workspace (or an ancestor): the
/// `gitdir:` it names (and that directory's `commondir`) become readable, unchecked — `/`
/// included, so the whole file system is.
#[test]
fn a_dot_git_file_does_not_widen_what_free_commands_read() {
    let d = Dirs::new();
    std::fs::write(d.ws.join("a.txt"), "a\n").unwrap();
    std::fs::write(d.ws.join(".git"), "gitdir: /\n").unwrap();
    std::fs::create_dir_all(d.user_home.join(".ssh")).unwrap();
    let key = d.user_home.join(".ssh/id_rsa");
    std::fs::write(&key, "SECRET-KEY-MATERIAL\n").unwrap();
    let line = format!("echo {} | xargs cat", key.display());
    let r = batch(&d, &[], &[&line]).remove(0);
    assert_eq!(r["sandbox"], "landlock-read-only", "{r}");
    assert!(!content(&r).contains("SECRET-KEY-MATERIAL"), "{r}");
}

/// Finding: the read-only profile grants all of `/etc`; run as root (containers, CI), that
/// includes `/etc/shadow`, SSH host keys and `/etc/ssl/private`.
#[test]
fn root_only_files_in_etc_stay_unread() {
    let Ok(shadow) = std::fs::read_to_string("/etc/shadow") else {
        return; // Not root: /etc/shadow is not readable anyway.
    };
    let first = shadow.lines().next().unwrap_or_default().to_owned();
    let d = world();
    let r = batch(&d, &[], &["echo /etc/shadow | xargs cat"]).remove(0);
    assert_eq!(r["sandbox"], "landlock-read-only", "{r}");
    assert!(!content(&r).contains(&first), "{r}");
}

/// Finding: flags and forms the tables miss (GNU long-option abbreviations, a sed script
/// the parser reads differently from GNU sed, options that take no value, variables and
/// wrapper options). Each writes or runs a program of the line's choosing where the
/// read-only profile is not in force (`--sandbox off`, no Landlock, kernels before 6.12).
#[test]
fn forms_the_flag_tables_miss_are_not_free() {
    let d = world();
    let outside = d.outside.join("PWNED-time");
    let docker = d.user_home.join(".docker");
    let lines = [
        "sort --out=README.md nums.txt".to_owned(),
        "sort --outp README.md nums.txt".to_owned(),
        "sort -S 1M --compress-prog=./zip.sh big.txt".to_owned(),
        "sort --temp=. nums.txt".to_owned(),
        "sed --i s/first/X/ README.md".to_owned(),
        "sed --e='1e touch PWNED-sed-e' p README.md".to_owned(),
        "sed --fi=evil.sed p README.md".to_owned(),
        "sed -n '#x\\\ne touch PWNED-sed-comment\np' README.md".to_owned(),
        "sed -n ':x;t x e touch PWNED-sed-label' README.md".to_owned(),
        "sed -n 'v 4.2 e touch PWNED-sed-v' README.md".to_owned(),
        "xxd -C README.md PWNED-xxd".to_owned(),
        "RIPGREP_CONFIG_PATH=./rgrc rg first README.md".to_owned(),
        format!(
            "env time --output={} --format=PWNED cat README.md",
            outside.display()
        ),
        format!(
            "jq -n 'import \"config\" as $c {{search:\"{}\"}}; $c'",
            docker.display()
        ),
        "date --se=2020-01-01".to_owned(),
        "file --comp".to_owned(),
        "xargs --process-slot-var echo ./zip.sh".to_owned(),
        "xargs --max-lines ./zip.sh cat".to_owned(),
        "git grep --open=./zip.sh first".to_owned(),
        "git log --outp=PWNED-git -1".to_owned(),
    ];
    for line in &lines {
        let c = check(&d, &[], line);
        assert_ne!(c["decision"], "allow", "{line}: {c}");
    }
    // What they do where the read-only profile is not in force.
    std::fs::create_dir_all(&docker).unwrap();
    std::fs::write(docker.join("config.json"), r#"{"auth":"DOCKER-SECRET"}"#).unwrap();
    let run: Vec<&str> = [2, 5, 6, 7, 8, 10, 11, 12, 13]
        .iter()
        .map(|&i| lines[i].as_str())
        .collect();
    let results = batch(&d, &["--sandbox", "off"], &run);
    for (line, r) in run.iter().zip(&results) {
        assert!(!content(r).contains("DOCKER-SECRET"), "{line}: {r}");
    }
    assert!(pwned(&d.ws).is_empty(), "{:?}", pwned(&d.ws));
    assert!(!outside.exists(), "env time wrote {}", outside.display());
}

/// Finding: `echo $GITHUB_TOKEN` asks (a credential-like `shell.pass_env` variable would
/// reach the output), but `printenv GITHUB_TOKEN` and `env` print it free.
#[test]
fn printing_a_credential_pass_env_variable_is_not_free() {
    let d = world();
    d.write_user_config("[shell]\npass_env = [\"GITHUB_TOKEN\"]\n");
    assert_ne!(
        check(&d, &[], "echo $GITHUB_TOKEN")["decision"],
        "allow",
        "the policy's own rule"
    );
    let lines = ["printenv GITHUB_TOKEN", "env | grep TOKEN", "printenv"];
    let calls: Vec<Value> = lines
        .iter()
        .map(|l| json!({"name": "run_shell", "args": {"command": l}}))
        .collect();
    let results = batch_calls(&d, &[], &[("GITHUB_TOKEN", "ghp_SECRETTOKEN")], &calls);
    for (line, r) in lines.iter().zip(&results) {
        assert!(!content(r).contains("ghp_SECRETTOKEN"), "{line}: {r}");
    }
}

/// The opposite defect: ordinary reading commands a person would let run, which ask or are
/// refused.
#[test]
fn ordinary_reads_run_free() {
    let d = world();
    for line in [
        "find -L . -name '*.md'",
        "git -c color.ui=never log -1",
        "git config user.name",
        "stdbuf -o L grep first README.md",
    ] {
        let c = check(&d, &[], line);
        assert_eq!(c["decision"], "allow", "{line}: {c}");
    }
}
