//! Attacks on the `auto` permission mode, second round (against a4b12cb, where all but the
//! three marked "Held" failed): what a command or a file-tool call `auto` runs without a
//! person can leave behind for the person's next `git` or session, read past the deny rules,
//! or reach outside the workspace. Linux only, like `auto_mode.rs`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{Dirs, content, git, json_lines, kind, shell_call, stderr, wait_for_file};
use serde_json::{Value, json};

const AUTO: &[&str] = &["--mode", "auto"];

fn world() -> Dirs {
    let d = Dirs::new();
    git(&d.ws, &["init", "-q", "."]);
    std::fs::write(d.ws.join("x"), "x\n").unwrap();
    d
}

fn run(d: &Dirs, calls: &[Value], envs: &[(&str, &str)]) -> Vec<Value> {
    let out = d.batch_output(calls, AUTO, envs);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_lines(&out)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// husky's `core.hooksPath = .husky/_`: the hooks directory is bind-mounted read-only, but
/// its parent `.husky` is an ordinary directory, and a directory holding a mount point can
/// be renamed. `.husky` moved aside and a new `.husky/_/pre-commit` made: nothing checks a
/// kept path that existed before, and the person's next `git commit` runs the hook outside
/// any sandbox.
#[test]
fn a_renamed_parent_does_not_unprotect_the_hooks_directory() {
    let d = world();
    git(&d.ws, &["config", "core.hooksPath", ".husky/_"]);
    std::fs::create_dir_all(d.ws.join(".husky/_")).unwrap();
    std::fs::write(d.ws.join(".husky/_/pre-commit"), "#!/bin/sh\n").unwrap();
    let r = run(
        &d,
        &[shell_call(
            r##"perl -e 'rename ".husky", ".husky.old" or die $!; mkdir ".husky"; mkdir ".husky/_"; open F, ">.husky/_/pre-commit" or die $!; print F "#!/bin/sh\necho PLANTED\n"'"##,
        )],
        &[],
    );
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    assert!(
        !read(&d.ws.join(".husky/_/pre-commit")).contains("PLANTED"),
        "a hook git runs was planted: {}",
        r[0]
    );
}

/// `AGENTS.md -> docs/agents.md`: the bind mount follows the symlink and keeps
/// `docs/agents.md` read-only, but `docs` can be renamed and a new `docs/agents.md` made.
/// The symlink itself is untouched, so nothing is put back: the next session's system
/// prompt holds what the command wrote.
#[test]
fn a_renamed_parent_does_not_unprotect_a_prompt_files_symlink_target() {
    let d = world();
    std::fs::create_dir_all(d.ws.join("docs")).unwrap();
    std::fs::write(d.ws.join("docs/agents.md"), "real notes\n").unwrap();
    std::os::unix::fs::symlink("docs/agents.md", d.ws.join("AGENTS.md")).unwrap();
    let r = run(
        &d,
        &[shell_call(
            r##"perl -e 'rename "docs", "docs.old" or die $!; mkdir "docs"; open F, ">docs/agents.md" or die $!; print F "EVIL"'"##,
        )],
        &[],
    );
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    assert!(
        !read(&d.ws.join("AGENTS.md")).contains("EVIL"),
        "AGENTS.md now leads to what the command wrote: {}",
        r[0]
    );
}

/// A protected pattern (`*.pem`) is judged by walking the workspace, and the settle compares
/// paths, not files: after `mv conf conf2` and a new `conf/k.pem`, the new file sits at a
/// path that was kept before (so it is not "created"), and the untouched original at
/// `conf2/k.pem` is the one moved to the quarantine — with a note saying the command
/// *created* it.
#[test]
fn a_renamed_parent_does_not_swap_a_protected_file_for_another() {
    let d = world();
    d.write_user_config("[guards]\nprotected = [\"*.pem\"]\n");
    std::fs::create_dir_all(d.ws.join("conf")).unwrap();
    std::fs::write(d.ws.join("conf/k.pem"), "orig").unwrap();
    let r = run(
        &d,
        &[shell_call(
            r##"perl -e 'rename "conf", "conf2" or die $!; mkdir "conf"; open F, ">conf/k.pem" or die $!; print F "EVIL"'"##,
        )],
        &[],
    );
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    assert_ne!(
        read(&d.ws.join("conf/k.pem")),
        "EVIL",
        "the protected file was replaced: {}",
        r[0]
    );
    assert!(
        read(&d.ws.join("conf/k.pem")) == "orig" || read(&d.ws.join("conf2/k.pem")) == "orig",
        "the untouched original was moved out of the workspace: {}",
        r[0]
    );
}

/// A configured ask rule on a file tool (`write_file(migrations/**)`) keeps what it matches
/// read-only for `auto` commands; a renamed `migrations` and a new `migrations/001.sql`
/// change the file the rule names without a person.
#[test]
fn a_renamed_parent_does_not_lift_a_configured_ask_rule() {
    let d = world();
    d.write_user_config("[permissions]\nask = [\"write_file(migrations/**)\"]\n");
    std::fs::create_dir_all(d.ws.join("migrations")).unwrap();
    std::fs::write(d.ws.join("migrations/001.sql"), "create table t;\n").unwrap();
    let r = run(
        &d,
        &[shell_call(
            r##"perl -e 'rename "migrations", "m2" or die $!; mkdir "migrations"; open F, ">migrations/001.sql" or die $!; print F "drop table t;\n"'"##,
        )],
        &[],
    );
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    assert!(
        !read(&d.ws.join("migrations/001.sql")).contains("drop"),
        "a file an ask rule keeps was rewritten: {}",
        r[0]
    );
}

/// The repository's configuration names workspace paths that need not exist yet
/// (`core.hooksPath = .githooks` before the hooks are installed, an optional
/// `include.path`). Only existing ones are kept (`named_in_workspace` drops the rest), and
/// nothing checks for them afterwards: the command plants a hook and an included config
/// (`core.fsmonitor` runs on every `git status`), which git runs outside any sandbox.
#[test]
fn paths_the_git_config_names_that_do_not_exist_yet_stay_unwritten() {
    let d = world();
    git(&d.ws, &["config", "core.hooksPath", ".githooks"]);
    git(&d.ws, &["config", "include.path", "../.gitconfig.shared"]);
    let r = run(
        &d,
        &[shell_call(
            r##"perl -e 'mkdir ".githooks"; open F, ">.githooks/pre-commit" or die $!; print F "#!/bin/sh\necho HOOK\n"; close F; chmod 0755, ".githooks/pre-commit"; open G, ">.gitconfig.shared" or die $!; print G "[core]\n\tfsmonitor = echo FSMONITOR\n"'"##,
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

/// Git's global configuration may name workspace paths too: `core.hooksPath = .githooks`
/// in `~/.gitconfig` ("every repository's own hooks") is relative to the work tree. Only
/// the repository's own configuration is read for kept paths.
#[test]
fn hooks_the_global_git_config_names_in_the_workspace_stay_unwritten() {
    let d = world();
    std::fs::write(
        d.user_home.join(".gitconfig"),
        "[core]\n\thooksPath = .githooks\n",
    )
    .unwrap();
    std::fs::create_dir_all(d.ws.join(".githooks")).unwrap();
    std::fs::write(d.ws.join(".githooks/pre-commit"), "#!/bin/sh\n").unwrap();
    let r = run(
        &d,
        &[shell_call(
            r##"perl -e 'open F, ">.githooks/pre-commit" or die $!; print F "#!/bin/sh\necho PLANTED\n"'"##,
        )],
        &[],
    );
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    assert_eq!(
        read(&d.ws.join(".githooks/pre-commit")),
        "#!/bin/sh\n",
        "a hook git runs was changed: {}",
        r[0]
    );
}

/// The hooks the repository's configuration names are kept from `auto` commands by a bind
/// mount, but `auto` also lifts file-tool writes inside the workspace, and the file tools
/// run outside that sandbox: `write_file` replaces the hook without a person.
#[test]
fn write_file_cannot_replace_a_hook_the_git_config_names() {
    let d = world();
    git(&d.ws, &["config", "core.hooksPath", ".githooks"]);
    std::fs::create_dir_all(d.ws.join(".githooks")).unwrap();
    std::fs::write(d.ws.join(".githooks/pre-commit"), "#!/bin/sh\n").unwrap();
    let r = run(
        &d,
        &[
            json!({"name": "read_file", "args": {"path": ".githooks/pre-commit"}}),
            json!({"name": "write_file", "args": {"path": ".githooks/pre-commit", "content": "#!/bin/sh\necho PLANTED\n"}}),
        ],
        &[],
    );
    assert_eq!(
        read(&d.ws.join(".githooks/pre-commit")),
        "#!/bin/sh\n",
        "a hook git runs was replaced: {}",
        r[1]
    );
}

/// Only the top-level `.git` is kept. A submodule's `sub/.git` is a file naming its git
/// directory; replaced by one naming a git directory the command made (with a
/// `core.fsmonitor`), the person's next `git status` in the workspace — which looks into
/// every submodule — runs the planted command outside any sandbox.
#[test]
fn a_submodules_git_file_cannot_be_replaced() {
    let d = world();
    let sub_repo = d.outside.join("subrepo");
    std::fs::create_dir_all(&sub_repo).unwrap();
    git(&sub_repo, &["init", "-q", "."]);
    git(&sub_repo, &["commit", "-q", "--allow-empty", "-m", "s"]);
    git(
        &d.ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            sub_repo.to_str().unwrap(),
            "sub",
        ],
    );
    git(&d.ws, &["commit", "-q", "-m", "sub"]);
    let before = read(&d.ws.join("sub/.git"));
    assert!(before.starts_with("gitdir:"), "precondition: {before}");
    let marker = d.outside.join("fsmonitor-ran");
    let script = format!(
        r##"unlink "sub/.git" or die $!;
mkdir "evil"; mkdir "evil/objects"; mkdir "evil/refs";
open H, ">evil/HEAD" or die $!; print H "ref: refs/heads/master\n"; close H;
open C, ">evil/config" or die $!;
print C "[core]\n\trepositoryformatversion = 0\n\tworktree = ../sub\n\tfsmonitor = touch {}; false\n"; close C;
open G, ">sub/.git" or die $!; print G "gitdir: ../evil\n";
"##,
        marker.display()
    );
    std::fs::write(d.ws.join("plant.pl"), script).unwrap();
    let r = run(&d, &[shell_call("perl plant.pl")], &[]);
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    // The person runs `git status` in the workspace, outside dsh.
    let _ = Command::new("git")
        .arg("status")
        .current_dir(&d.ws)
        .env("HOME", &d.user_home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        !marker.exists(),
        "the person's `git status` ran a command the auto call planted: {}",
        r[0]
    );
    assert_eq!(
        read(&d.ws.join("sub/.git")),
        before,
        "the submodule's .git was replaced: {}",
        r[0]
    );
}

/// A deny rule on reading `config/.env` hides that file from `auto` commands (a mount over
/// it), and the file itself cannot be moved — but its directory can: after `mv config cfg`
/// in one call, `cfg/.env` matches no rule and the next call reads it.
#[test]
fn a_renamed_parent_does_not_unhide_a_denied_file() {
    let d = world();
    d.write_user_config("[permissions]\ndeny = [\"read_file(config/.env)\"]\n");
    std::fs::create_dir_all(d.ws.join("config")).unwrap();
    std::fs::write(d.ws.join("config/.env"), "DB_PASSWORD=ENV-SECRET\n").unwrap();
    let r = run(
        &d,
        &[
            shell_call(r##"perl -e 'rename "config", "cfg" or die $!'"##),
            shell_call(r##"perl -e 'open F, "<cfg/.env" or die $!; print <F>'"##),
        ],
        &[],
    );
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    assert!(
        !content(&r[1]).contains("ENV-SECRET"),
        "a denied file was read: {}",
        r[1]
    );
}

/// The survey walks the workspace by absolute paths and skips, without a word, a directory
/// it cannot list — as one deeper than `PATH_MAX` (4096 bytes), which a command reaches with
/// relative paths. One call moves the directories holding a hidden `.env` and a protected
/// `k.pem` down there (the mounts go with them); in the next call's survey neither is seen,
/// so neither is covered: the secret is read and the protected file written.
#[test]
fn files_moved_beyond_path_max_stay_hidden_and_protected() {
    let d = world();
    d.write_user_config(
        "[guards]\nprotected = [\"*.pem\"]\n[permissions]\ndeny = [\"read_file(.env)\"]\n",
    );
    std::fs::create_dir_all(d.ws.join("sub")).unwrap();
    std::fs::create_dir_all(d.ws.join("conf")).unwrap();
    std::fs::write(d.ws.join("sub/.env"), "DB_PASSWORD=DEEP-SECRET\n").unwrap();
    std::fs::write(d.ws.join("conf/k.pem"), "orig").unwrap();
    std::fs::write(
        d.ws.join("deep.pl"),
        r##"use Cwd; my $ws = getcwd; my $n = "d" x 250;
if ($ARGV[0] eq "down") {
  for (1..20) { mkdir $n; chdir $n or die "chdir: $!"; }
  rename("$ws/sub", "sub") or die "sub: $!";
  rename("$ws/conf", "conf") or die "conf: $!";
  print "moved\n";
} else {
  for (1..20) { chdir $n or die "chdir: $!"; }
  open F, "<sub/.env" and print <F>;
  open G, ">conf/k.pem" and print G "EVIL" and print "WROTE-PEM\n";
}
"##,
    )
    .unwrap();
    let r = run(
        &d,
        &[
            shell_call("perl deep.pl down"),
            shell_call("perl deep.pl up"),
        ],
        &[],
    );
    assert!(
        !content(&r[1]).contains("DEEP-SECRET"),
        "a denied file was read: {}",
        r[1]
    );
    assert!(
        !content(&r[1]).contains("WROTE-PEM"),
        "a protected file was written: {}",
        r[1]
    );
}

/// Commands the shell policy lets run free (`grep -r`, `git grep --no-index`) run in the
/// read-only profile, which hides nothing: a recursive reader prints the file a deny rule
/// keeps from reading, with no person asked — in `auto` as in every mode.
#[test]
fn free_recursive_readers_do_not_read_denied_files() {
    let d = world();
    d.write_user_config("[permissions]\ndeny = [\"read_file(.env)\"]\n");
    std::fs::create_dir_all(d.ws.join("sub")).unwrap();
    std::fs::write(d.ws.join("sub/.env"), "DB_PASSWORD=ENV-SECRET\n").unwrap();
    let r = run(
        &d,
        &[
            shell_call("grep -r DB_PASSWORD ."),
            shell_call("git grep --no-index DB_PASSWORD"),
        ],
        &[],
    );
    for x in &r {
        assert!(
            !content(x).contains("ENV-SECRET"),
            "a denied file was read: {x}"
        );
    }
}

/// A protected pattern naming a nested path (`/secrets/db.key`) that does not exist is
/// checked after the command by that path, following symlinks: a command that makes
/// `secrets` a symlink to a directory outside gets dsh itself to move that directory's
/// `db.key` into the quarantine — a file outside the workspace removed from its place.
#[test]
fn the_quarantine_never_moves_files_outside_the_workspace() {
    let d = world();
    d.write_user_config("[guards]\nprotected = [\"/secrets/db.key\"]\n");
    std::fs::write(d.outside.join("db.key"), "OUTSIDE DATA\n").unwrap();
    let r = run(
        &d,
        &[shell_call(&format!(
            r##"perl -e 'symlink "{}", "secrets" or die $!'"##,
            d.outside.display()
        ))],
        &[],
    );
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    assert_eq!(
        read(&d.outside.join("db.key")),
        "OUTSIDE DATA\n",
        "a file outside the workspace was moved away: {}",
        r[0]
    );
}

/// Unmounts on drop, so the temp dir is never removed through a bind mount.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A read-only mount inside the workspace (a vendored tree bound in from elsewhere, as
/// containers do) stays read-only in the ordinary workspace-write sandbox. The hardened
/// profile clears `RDONLY` recursively on the workspace's mounts, so an `auto` command
/// writes through it — into the directory outside the workspace it shows.
#[test]
fn a_read_only_mount_inside_the_workspace_stays_read_only() {
    let d = world();
    let lib = d.outside.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("f"), "orig\n").unwrap();
    let vendor = d.ws.join("vendor");
    std::fs::create_dir_all(&vendor).unwrap();
    let bound = Command::new("mount")
        .arg("--bind")
        .arg(&lib)
        .arg(&vendor)
        .status()
        .unwrap();
    assert!(bound.success(), "precondition: mount --bind (run as root)");
    let _guard = Unmount(vendor.clone());
    let ro = Command::new("mount")
        .args(["-o", "remount,bind,ro"])
        .arg(&vendor)
        .status()
        .unwrap();
    assert!(ro.success(), "precondition: remount read-only");
    assert!(
        std::fs::write(vendor.join("f"), "x").is_err(),
        "precondition"
    );
    let r = run(
        &d,
        &[shell_call(
            r##"perl -e 'open F, ">vendor/f" or die $!; print F "EVIL\n"'"##,
        )],
        &[],
    );
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    assert_eq!(
        read(&lib.join("f")),
        "orig\n",
        "a read-only mount was written through: {}",
        r[0]
    );
}

/// A workspace that is a subdirectory of a repository reads the whole work tree around it
/// (for git), not only its git directory: an `auto` command reads the enclosing project's
/// `.env` and every other file outside the workspace there, without a person.
#[test]
fn a_workspace_inside_a_repository_reads_no_files_outside_it() {
    let d = world();
    let repo = d.outside.join("repo");
    let ws = repo.join("app");
    std::fs::create_dir_all(&ws).unwrap();
    git(&repo, &["init", "-q", "."]);
    std::fs::write(repo.join(".env"), "PARENT-SECRET\n").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsh"));
    cmd.arg("--workspace")
        .arg(&ws)
        .args(["--mode", "auto", "batch", "-"])
        .env("DSH_HOME", &d.home)
        .env("DSH_CONFIG_HOME", &d.cfg)
        .env("HOME", &d.user_home);
    let out = common::run_with_calls(
        cmd,
        &[shell_call(
            r##"perl -e 'open F, "<../.env" or die $!; print <F>'"##,
        )],
    );
    let r = json_lines(&out);
    assert!(
        !content(&r[0]).contains("PARENT-SECRET"),
        "a file outside the workspace was read without a person: {}",
        r[0]
    );
}

/// A cancelled `auto` call is settled (what it made on a protected path is moved away),
/// but its result says only "cancelled … nothing partial is reported": neither the result
/// nor the journal tells the person that the command wrote `AGENTS.md` and it was
/// quarantined.
#[test]
fn a_cancelled_calls_quarantine_is_reported() {
    let d = world();
    let mut cmd = d.dsh(&["--mode", "auto", "batch", "-"]);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let call = shell_call(
            r##"perl -e 'open F, ">AGENTS.md" or die; print F "obey"; close F; sleep 120'"##,
        );
        writeln!(stdin, "{call}").unwrap();
    }
    wait_for_file(&d.ws.join("AGENTS.md"));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out: Output = child.wait_with_output().unwrap();
    let r = json_lines(&out);
    assert!(!d.ws.join("AGENTS.md").exists(), "{}", r[0]);
    let journal: String = common::journals(&d.home)
        .iter()
        .map(|j| std::fs::read_to_string(j).unwrap())
        .collect();
    assert!(
        content(&r[0]).contains("AGENTS.md") || journal.contains("quarantine"),
        "the quarantine is reported nowhere: {}",
        r[0]
    );
}

/// Held: with no capability left, `security.capability` cannot be set — not even from a new
/// user namespace, where the command holds every capability (`unshare` is not refused), as
/// long as its id map cannot be written (`/proc` is mounted read-only). A root-owned file
/// with `cap_setuid` left in the workspace would make any local user root.
#[cfg(target_arch = "x86_64")]
#[test]
fn no_file_capability_can_be_set_in_the_workspace() {
    let d = world();
    std::fs::copy("/bin/true", d.ws.join("tool")).unwrap();
    std::fs::write(
        d.ws.join("fcap.pl"),
        r##"my ($p, $n) = ("tool", "security.capability");
my $v = pack("VVVVV", 0x02000001, 1 << 7, 0, 0, 0);
syscall(188, $p, $n, $v, length($v), 0) == 0 and print "SET-PLAIN\n";
syscall(272, 0x10000000) == 0 and print "USERNS\n";
for (["/proc/self/setgroups", "deny"], ["/proc/self/uid_map", "0 0 1"], ["/proc/self/gid_map", "0 0 1"]) {
  open(my $f, ">", $_->[0]) and print $f $_->[1] and close($f) and print "MAPPED $_->[0]\n";
}
syscall(188, $p, $n, $v, length($v), 0) == 0 and print "SET-IN-USERNS\n";
"##,
    )
    .unwrap();
    let r = run(&d, &[shell_call("perl fcap.pl")], &[]);
    assert_eq!(r[0]["decided_by"]["policy"], "mode", "{}", r[0]);
    assert!(!content(&r[0]).contains("SET-"), "{}", r[0]);
    let probe = Command::new("python3")
        .args([
            "-c",
            "import os,sys\ntry:\n os.getxattr(sys.argv[1], 'security.capability'); print('HAS')\nexcept OSError: print('NONE')",
        ])
        .arg(d.ws.join("tool"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&probe.stdout).trim(),
        "NONE",
        "{}",
        r[0]
    );
}

/// Held: a process that enters new user and PID namespaces (`unshare` is allowed) and
/// forks a grandchild writing `AGENTS.md` in a loop is still below the helper: once dsh has
/// returned, none of it runs and `AGENTS.md` is gone.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_process_in_new_namespaces_does_not_outlive_the_call() {
    let d = world();
    std::fs::write(
        d.ws.join("ns-survivor-5k2.pl"),
        r##"syscall(272, 0x10000000);
syscall(272, 0x20000000);
my $p = fork;
if ($p == 0) {
  exit 0 if fork;
  close STDOUT; close STDERR;
  for (1..100000) { if (open F, ">AGENTS.md") { print F "SURVIVOR"; close F } select(undef, undef, undef, 0.01) }
  exit 0;
}
print "forked\n";
"##,
    )
    .unwrap();
    let r = run(&d, &[shell_call("perl ns-survivor-5k2.pl")], &[]);
    assert!(content(&r[0]).contains("forked"), "{}", r[0]);
    // dsh has returned: every process still running the script is a survivor.
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            !matches!(state, Some('Z' | 'X'))
                && String::from_utf8_lossy(&cmdline).contains("ns-survivor-5k2.pl")
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(survivors.is_empty(), "{survivors:?}: {}", r[0]);
    assert!(!d.ws.join("AGENTS.md").exists(), "{}", r[0]);
}

/// Held: ordinary work runs in `auto` without a person — an offline `cargo build` of a crate
/// with a dependency from `~/.cargo/registry` (the toolchain's directories are readable),
/// `make`, a Python script writing in the workspace, `git status`.
#[test]
fn ordinary_work_runs_in_auto() {
    let d = world();
    // The registry the tests' own build filled (dsh depends on `libc`).
    let home = std::env::var("HOME").unwrap();
    std::fs::create_dir_all(d.ws.join("src")).unwrap();
    std::fs::write(
        d.ws.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nlibc = \"0.2\"\n",
    )
    .unwrap();
    std::fs::write(
        d.ws.join("src/main.rs"),
        "fn main() { println!(\"pid-ok {}\", unsafe { libc::getpid() } > 0); }\n",
    )
    .unwrap();
    std::fs::write(d.ws.join("Makefile"), "all:\n\techo made > made.txt\n").unwrap();
    std::fs::write(d.ws.join("w.py"), "open('py.txt', 'w').write('py')\n").unwrap();
    let calls: Vec<Value> = [
        "cargo run --offline -q",
        "make",
        "python3 w.py",
        "git status --short",
    ]
    .iter()
    .map(|l| json!({"name": "run_shell", "args": {"command": l, "timeout_s": 600}}))
    .collect();
    let r = run(&d, &calls, &[("HOME", &home)]);
    for x in &r {
        assert_eq!(kind(x), "ok", "{x}");
        assert_eq!(x["exit_code"], 0, "{x}");
    }
    assert!(content(&r[0]).contains("pid-ok true"), "{}", r[0]);
    assert_eq!(read(&d.ws.join("made.txt")), "made\n");
    assert_eq!(read(&d.ws.join("py.txt")), "py");
}
