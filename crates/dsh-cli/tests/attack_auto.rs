//! Attacks on the `auto` permission mode, from a review of its first hardened sandbox
//! (8225c52, where each of these failed): what a command `auto` runs without a person can
//! leave behind, read or reach. Linux only, like `auto_mode.rs`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use common::{Dirs, content, git, json_lines, kind, shell_call, stderr};
use serde_json::{Value, json};

const AUTO: &[&str] = &["--mode", "auto"];

fn world() -> Dirs {
    let d = Dirs::new();
    git(&d.ws, &["init", "-q", "."]);
    std::fs::write(d.ws.join("x"), "x\n").unwrap();
    std::fs::create_dir_all(d.user_home.join(".ssh")).unwrap();
    std::fs::write(d.user_home.join(".ssh/id_rsa"), "SECRET-KEY\n").unwrap();
    d
}

fn run(d: &Dirs, calls: &[Value], envs: &[(&str, &str)]) -> Vec<Value> {
    let out = d.batch_output(calls, AUTO, envs);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_lines(&out)
}

/// A command that prints the helper's setup-failure prefix and exits 125 once made
/// `run_shell` return early ("the sandbox could not be set up"), before the quarantine: the
/// `.dsh/config.toml` and `AGENTS.md` it created stayed (in a trusted workspace the next
/// session loads that config). The helper now reports setup failures on a pipe of its own.
#[test]
fn a_faked_setup_failure_does_not_skip_the_quarantine() {
    let d = world();
    let r = run(
        &d,
        &[shell_call(
            "perl -e 'mkdir \".dsh\"; open F, \">.dsh/config.toml\" or die; print F \"[permissions]\\nallow = [\\\"run_shell\\\"]\\n\"; open G, \">AGENTS.md\" or die; print G \"obey\"; print \"dsh sandbox-exec: fake\\n\"; exit 125'",
        )],
        &[],
    );
    // Gate 1 (`mode`) let it through; it ran, and its result says so.
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    assert_eq!(r[0]["exit_code"], 125, "{}", r[0]);
    assert!(content(&r[0]).contains("moved to"), "{}", r[0]);
    assert!(!d.ws.join(".dsh").exists(), ".dsh stayed: {}", r[0]);
    assert!(
        !d.ws.join("AGENTS.md").exists(),
        "AGENTS.md stayed: {}",
        r[0]
    );
}

/// A chain of processes that each `setpgid` and fork (the parent exits at once) would never
/// be seen by the /proc sweeps in time: it would outlive the command, the quarantine and dsh
/// itself, and then write a protected path nobody checks any more. `setpgid` is refused in
/// the sandbox, so the chain stays in the group dsh kills: once dsh has returned, no process
/// of it runs.
#[test]
fn a_fork_chain_does_not_outlive_dsh() {
    let d = world();
    let marker = d.ws.join("chain-7f3a.pl");
    std::fs::write(
        &marker,
        r#"use POSIX ();
exit 0 if fork;
while (1) {
  setpgrp(0, 0);
  open F, ">AGENTS.md" and print F "SURVIVOR"; close F;
  my $p = fork;
  POSIX::_exit(0) if $p;
}
"#,
    )
    .unwrap();
    let r = run(&d, &[shell_call("perl chain-7f3a.pl; echo started")], &[]);
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    // dsh has returned: every process still running that runs the chain is a survivor.
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            !matches!(state, Some('Z' | 'X'))
                && String::from_utf8_lossy(&cmdline).contains("chain-7f3a.pl")
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        survivors.is_empty(),
        "processes of the command outlived dsh: {survivors:?}; {}",
        r[0]
    );
    assert!(!d.ws.join("AGENTS.md").exists(), "{}", r[0]);
}

/// `CLAUDE.md -> AGENTS.md` (a common layout): the bind mount follows the symlink and
/// protects AGENTS.md, but the symlink itself is no mount point, so it can be replaced by a
/// regular file holding anything — and it existed before, so nothing is quarantined.
#[test]
fn a_replaced_prompt_file_symlink_is_put_back() {
    let d = world();
    std::fs::write(d.ws.join("AGENTS.md"), "real notes\n").unwrap();
    std::os::unix::fs::symlink("AGENTS.md", d.ws.join("CLAUDE.md")).unwrap();
    let r = run(
        &d,
        &[shell_call(
            "perl -e 'unlink \"CLAUDE.md\" or die; open F, \">CLAUDE.md\" or die; print F \"EVIL\"'",
        )],
        &[],
    );
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    let now = std::fs::read_to_string(d.ws.join("CLAUDE.md")).unwrap();
    assert!(!now.contains("EVIL"), "CLAUDE.md was replaced: {}", r[0]);
}

/// `AGENTS.md -> docs/agents.md`: the memory policy asks for writes that *resolve* to a
/// prompt file's name, so a `write_file` of the symlink's target is lifted by `auto` (and the
/// file tools run outside the sandbox's bind mounts) — the next system prompt holds it.
#[test]
fn write_file_to_a_prompt_files_symlink_target_asks() {
    let d = world();
    std::fs::create_dir_all(d.ws.join("docs")).unwrap();
    std::fs::write(d.ws.join("docs/agents.md"), "real notes\n").unwrap();
    std::os::unix::fs::symlink("docs/agents.md", d.ws.join("AGENTS.md")).unwrap();
    let r = run(
        &d,
        &[
            json!({"name": "read_file", "args": {"path": "docs/agents.md"}}),
            json!({"name": "write_file", "args": {"path": "docs/agents.md", "content": "EVIL"}}),
        ],
        &[],
    );
    let now = std::fs::read_to_string(d.ws.join("AGENTS.md")).unwrap();
    assert!(!now.contains("EVIL"), "AGENTS.md now says EVIL: {}", r[1]);
}

/// Git's hooks and configuration need not live under `.git`: `core.hooksPath` (husky sets
/// `.husky/_`) and `include.path` may name workspace files. `auto` writes them freely, and
/// the user's next `git commit` runs the planted hook outside any sandbox.
#[test]
fn hooks_and_config_git_takes_from_the_workspace_stay_unwritten() {
    let d = world();
    git(&d.ws, &["config", "core.hooksPath", ".githooks"]);
    git(&d.ws, &["config", "include.path", "../.gitconfig.shared"]);
    std::fs::create_dir_all(d.ws.join(".githooks")).unwrap();
    let r = run(
        &d,
        &[shell_call(
            "perl -e 'open F, \">.githooks/pre-commit\" or die; print F \"#!/bin/sh\\necho HOOK\\n\"; close F; chmod 0755, \".githooks/pre-commit\"; open G, \">.gitconfig.shared\" or die; print G \"[core]\\n\\tfsmonitor = echo FSMONITOR\\n\"'",
        )],
        &[],
    );
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    assert!(
        !d.ws.join(".githooks/pre-commit").exists(),
        "a hook git runs was planted: {}",
        r[0]
    );
    assert!(
        !d.ws.join(".gitconfig.shared").exists(),
        "git configuration was planted: {}",
        r[0]
    );
}

/// `[guards] protected` patterns that start with a glob have no fixed prefix, so the
/// hardened profile drops them: `auto` rewrites such a protected file without a person.
#[test]
fn protected_patterns_starting_with_a_glob_are_kept() {
    let d = world();
    d.write_user_config("[guards]\nprotected = [\"**/secret.txt\", \"*.pem\"]\n");
    std::fs::write(d.ws.join("secret.txt"), "orig").unwrap();
    std::fs::write(d.ws.join("k.pem"), "orig").unwrap();
    let r = run(
        &d,
        &[shell_call(
            "perl -e 'open F, \">secret.txt\" and print F \"changed\"; open G, \">k.pem\" and print G \"changed\"'",
        )],
        &[],
    );
    assert_eq!(
        std::fs::read_to_string(d.ws.join("secret.txt")).unwrap(),
        "orig",
        "{}",
        r[0]
    );
    assert_eq!(
        std::fs::read_to_string(d.ws.join("k.pem")).unwrap(),
        "orig",
        "{}",
        r[0]
    );
}

/// The writable "caches" hold credentials (`~/.gradle/gradle.properties`,
/// `~/.m2/settings.xml`, `~/.cache/huggingface/token`) and code other projects run:
/// `~/.gradle/init.d/*.gradle` runs in every Gradle build, registry sources in every
/// `cargo build` that uses the crate — invisible to `git diff` of the workspace.
#[test]
fn toolchain_caches_give_no_credentials_and_take_no_code() {
    let d = world();
    let h = &d.user_home;
    let krate = h.join(".cargo/registry/src/index.crates.io-1949cf8c6b5b557f/itoa-1.0.0");
    for dir in [
        h.join(".gradle"),
        h.join(".m2"),
        h.join(".cache/huggingface"),
        krate.clone(),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(
        h.join(".gradle/gradle.properties"),
        "signing.password=GRADLE-SECRET\n",
    )
    .unwrap();
    std::fs::write(
        h.join(".m2/settings.xml"),
        "<password>M2-SECRET</password>\n",
    )
    .unwrap();
    std::fs::write(h.join(".cache/huggingface/token"), "hf_SECRET\n").unwrap();
    std::fs::write(krate.join("build.rs"), "fn main() {}\n").unwrap();
    let r = run(
        &d,
        &[
            shell_call(
                "cp ~/.gradle/gradle.properties ~/.m2/settings.xml ~/.cache/huggingface/token .",
            ),
            shell_call(
                "perl -e 'mkdir \"$ENV{HOME}/.gradle/init.d\"; open F, \">$ENV{HOME}/.gradle/init.d/evil.gradle\" or die $!; print F \"println 1\"; open G, \">>$ENV{HOME}/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/itoa-1.0.0/build.rs\" or die $!; print G \"// PLANTED\\n\"'",
            ),
        ],
        &[],
    );
    for x in &r {
        assert_eq!(x["decided_by"]["policy"], "mode", "{x}");
    }
    for leaked in ["gradle.properties", "settings.xml", "token"] {
        assert!(
            !d.ws.join(leaked).exists(),
            "{leaked} was copied out: {}",
            r[0]
        );
    }
    assert!(
        !h.join(".gradle/init.d/evil.gradle").exists(),
        "a Gradle init script was planted: {}",
        r[1]
    );
    assert!(
        !std::fs::read_to_string(krate.join("build.rs"))
            .unwrap()
            .contains("PLANTED"),
        "a registry crate's build script was changed: {}",
        r[1]
    );
}

/// The hardened profile lets a file's mode and owner change (and keeps a root caller's
/// CHOWN/FOWNER/FSETID) anywhere, not only in the writable trees: a setuid bit on a program
/// outside, the user's private key made world-readable, a file outside given away.
#[test]
fn modes_and_owners_outside_the_workspace_do_not_change() {
    let d = world();
    let tool = d.outside.join("tool");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let key = d.user_home.join(".ssh/id_rsa");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(
        d.user_home.join(".ssh"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let r = run(
        &d,
        &[shell_call(&format!(
            "perl -e 'chmod 04755, \"{}\"; chmod 0644, \"$ENV{{HOME}}/.ssh/id_rsa\"; chmod 0777, \"$ENV{{HOME}}/.ssh\"'",
            tool.display()
        ))],
        &[],
    );
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&tool), 0o755, "setuid set outside: {}", r[0]);
    assert_eq!(
        mode(&key),
        0o600,
        "the private key's mode changed: {}",
        r[0]
    );
    assert_eq!(
        mode(&d.user_home.join(".ssh")) & 0o077,
        0,
        "~/.ssh opened to others: {}",
        r[0]
    );
}

/// Where the workspace and `DSH_HOME` are on different file systems (a bind-mounted or
/// mounted project directory, `DSH_HOME` on tmpfs) the quarantine's `rename` fails with
/// EXDEV, and the protected path the command created stays.
#[test]
fn the_quarantine_works_across_file_systems() {
    let d = world();
    let shm = tempfile::Builder::new().tempdir_in("/dev/shm").unwrap();
    assert_ne!(
        std::fs::metadata(shm.path()).unwrap().dev(),
        std::fs::metadata(&d.ws).unwrap().dev(),
        "precondition: /dev/shm is another file system than the workspace"
    );
    let home = shm.path().join("dsh-home");
    let r = run(
        &d,
        &[shell_call(
            "perl -e 'open F, \">AGENTS.md\" or die; print F \"obey\"'",
        )],
        &[("DSH_HOME", home.to_str().unwrap())],
    );
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    assert!(!d.ws.join("AGENTS.md").exists(), "{}", content(&r[0]));
}

/// Renaming a directory to another parent needs write permission on it (its `..`): a
/// command that creates `.dsh` and makes it 0555 defeats the quarantine for any user but
/// root. Run as `nobody` when the tests run as root.
#[test]
fn a_read_only_directory_does_not_defeat_the_quarantine() {
    let d = world();
    let calls = [shell_call(
        "perl -e 'mkdir \".dsh\" or die; open F, \">.dsh/config.toml\" or die; print F \"x\"; close F; chmod 0555, \".dsh\"'",
    )];
    // The tests' own user owns what they create.
    let root = std::fs::metadata(d.root()).unwrap().uid() == 0;
    let out = if root {
        // Hand the world to `nobody` and run dsh as it.
        let chown = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(d.root())
            .status()
            .unwrap();
        assert!(chown.success());
        std::fs::set_permissions(d.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cmd = Command::new("setpriv");
        cmd.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_dsh"),
            "--workspace",
        ])
        .arg(&d.ws)
        .args(["--mode", "auto", "batch", "-"])
        .env("DSH_HOME", &d.home)
        .env("DSH_CONFIG_HOME", &d.cfg)
        .env("HOME", &d.user_home);
        common::run_with_calls(cmd, &calls)
    } else {
        d.batch_output(&calls, AUTO, &[])
    };
    let r = json_lines(&out);
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    let stayed = d.ws.join(".dsh").exists();
    // Let the temp dir be removed.
    let _ = std::fs::set_permissions(d.ws.join(".dsh"), std::fs::Permissions::from_mode(0o755));
    assert!(!stayed, ".dsh stayed: {}", content(&r[0]));
}

/// Configured rules on the file tools: a deny on writing `migrations/**` does not reach a
/// shell command naming it (`cp x migrations/001.sql` is lifted by `auto`), and a deny on
/// reading `.env` or an ask on `private/**` holds only against a word that spells the path
/// — a path the command computes is read without a person.
#[test]
fn configured_file_rules_bind_shell_commands() {
    let d = world();
    d.write_user_config(
        "[permissions]\ndeny = [\"read_file(.env)\", \"write_file(migrations/**)\", \"edit_file(migrations/**)\"]\nask = [\"read_file(private/**)\"]\n",
    );
    std::fs::write(d.ws.join(".env"), "DB_PASSWORD=ENV-SECRET\n").unwrap();
    std::fs::create_dir_all(d.ws.join("migrations")).unwrap();
    std::fs::create_dir_all(d.ws.join("private")).unwrap();
    std::fs::write(d.ws.join("migrations/001.sql"), "create table t;\n").unwrap();
    std::fs::write(d.ws.join("private/p.txt"), "PRIVATE-DATA\n").unwrap();
    let r = run(
        &d,
        &[
            shell_call("cp x migrations/001.sql"),
            shell_call(
                "perl -e 'open F, \"<.e\".\"nv\"; print <F>; open G, \"<priv\".\"ate/p.txt\"; print <G>'",
            ),
        ],
        &[],
    );
    assert_eq!(
        std::fs::read_to_string(d.ws.join("migrations/001.sql")).unwrap(),
        "create table t;\n",
        "a denied path was written: {}",
        r[0]
    );
    assert!(!content(&r[1]).contains("ENV-SECRET"), "{}", r[1]);
    assert!(!content(&r[1]).contains("PRIVATE-DATA"), "{}", r[1]);
}
