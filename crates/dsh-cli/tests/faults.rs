//! Faults from outside, produced for real against the built binary (issue 13): dsh killed or
//! signalled while a command runs, a file-size limit on the journal, `--json` into a pipe
//! nobody reads, git's detached maintenance under the sandbox. Each test would fail if its
//! rule broke: before the fixes, commands outlived a killed dsh, SIGTERM wrote no ending,
//! `ulimit -f` killed dsh silently and an unread pipe froze the journal.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Dirs, stderr};
use dsh_testkit::model_server::{ScriptedServer, Turn};
use serde_json::Value;

/// Lets `bash SCRIPT` run without asking.
const ALLOW_BASH: &str = "[permissions]\nallow = [\"run_shell(bash *)\"]\n";

/// A command tree: the script's shell, a subshell with a child of its own, a background
/// child; every pid written to `pids` (four), and `ready`.
const TREE: &str = "echo $$ > pids\n\
    (sleep 60 & echo $! >> pids; wait) &\n\
    echo $! >> pids\n\
    sleep 60 &\n\
    echo $! >> pids\n\
    touch ready\n\
    wait\n";

/// Waits for `cond`, failing after `limit` (a hang detector: the state is polled, never
/// assumed after a sleep).
fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` runs (exists and is neither a zombie nor dead).
fn runs(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 1..]
                .trim_start()
                .chars()
                .next();
            !matches!(state, Some('Z' | 'X' | 'x'))
        }
        Err(_) => false,
    }
}

fn pids(ws: &Path) -> Vec<i32> {
    std::fs::read_to_string(ws.join("pids"))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

fn signal(child: &Child, sig: i32) {
    let pid = i32::try_from(child.id()).unwrap();
    #[allow(unsafe_code)]
    // SAFETY: kill takes plain integers.
    let r = unsafe { libc::kill(pid, sig) };
    assert_eq!(r, 0);
}

/// The one journal under DSH_HOME, once it exists.
fn journal_path(home: &Path) -> PathBuf {
    let dir = home.join("sessions");
    wait_for("the journal", Duration::from_secs(30), || {
        std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some())
    });
    std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

fn records(path: &Path) -> Vec<Value> {
    let t = dsh_core::journal::read_journal(path).unwrap();
    assert!(t.torn_tail.is_none(), "a torn tail in {}", path.display());
    t.records
        .into_iter()
        .map(|e| Value::Object(e.json))
        .collect()
}

fn kinds(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect()
}

/// A world whose workspace holds the tree script, with bash allowed.
fn tree_world() -> Dirs {
    let d = Dirs::new();
    d.write_user_config(ALLOW_BASH);
    std::fs::write(d.ws.join("tree.sh"), TREE).unwrap();
    d
}

/// `dsh [extra] batch FILE` running `bash tree.sh`, started and waited for until the whole
/// tree runs.
fn batch_with_tree(d: &Dirs, extra: &[&str]) -> (Child, Vec<i32>) {
    let calls = d.root().join("calls.jsonl");
    std::fs::write(
        &calls,
        "{\"name\":\"run_shell\",\"args\":{\"command\":\"bash tree.sh\"},\"id\":\"tree\"}\n",
    )
    .unwrap();
    let mut args = extra.to_vec();
    args.extend(["batch", calls.to_str().unwrap()]);
    let child = d
        .dsh(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pids = wait_for_tree(d);
    (child, pids)
}

/// The tree's four pids, once all of them run.
fn wait_for_tree(d: &Dirs) -> Vec<i32> {
    wait_for("the command tree", Duration::from_secs(30), || {
        d.ws.join("ready").exists() && pids(&d.ws).len() == 4
    });
    let pids = pids(&d.ws);
    assert!(pids.iter().all(|p| runs(*p)), "{pids:?}");
    pids
}

/// `dsh exec "run the tree"` against the scripted server at `url`, output captured.
fn exec_against(d: &Dirs, url: &str) -> Child {
    d.dsh(&[
        "exec",
        "--provider",
        "openai",
        "--base-url",
        url,
        "--model",
        "scripted",
        "run the tree",
    ])
    .env("OPENAI_API_KEY", "sk-test")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

fn assert_tree_gone(pids: &[i32]) {
    // The helper kills the tree the moment dsh is gone; a second is generous.
    wait_for("the command tree to die", Duration::from_secs(3), || {
        !pids.iter().any(|p| runs(*p))
    });
}

#[test]
fn sigkill_of_batch_leaves_no_process_of_the_command() {
    for sandbox in ["auto", "off"] {
        let d = tree_world();
        let (mut child, pids) = batch_with_tree(&d, &["--sandbox", sandbox]);
        signal(&child, libc::SIGKILL);
        let _ = child.wait();
        assert_tree_gone(&pids);
        // The dead session's private TMPDIR is left behind, until the next session starts.
        let tmp = d.home.join("tmp");
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
        assert_eq!(left.len(), 1, "{left:?}");
        let out = d.batch_output(&[], &[], &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            !left[0].path().exists(),
            "the dead session's TMPDIR was not removed"
        );
    }
}

#[test]
fn a_command_holding_the_lifeline_open_still_dies_with_dsh() {
    // Unconfined, a command can open the helper's lifeline for writing, so the helper never
    // reads end-of-file; it notices its parent is gone instead.
    let d = tree_world();
    let tree = std::fs::read_to_string(d.ws.join("tree.sh")).unwrap();
    std::fs::write(
        d.ws.join("tree.sh"),
        format!("exec 9>/proc/$PPID/fd/0 || exit 7\n{tree}"),
    )
    .unwrap();
    let (mut child, pids) = batch_with_tree(&d, &["--sandbox", "off"]);
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    assert_tree_gone(&pids);
}

#[test]
fn sigkill_of_exec_leaves_no_process_of_the_command() {
    let d = tree_world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", r#"{"command":"bash tree.sh"}"#).into(),
    ]);
    let mut child = exec_against(&d, &server.url);
    let pids = wait_for_tree(&d);
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    assert_tree_gone(&pids);
}

#[test]
fn each_ending_signal_cancels_records_and_exits_with_its_code() {
    for (sig, code, reason, name) in [
        (libc::SIGTERM, 143, "terminated", "SIGTERM"),
        (libc::SIGHUP, 129, "hung_up", "SIGHUP"),
        (libc::SIGINT, 130, "interrupted", "SIGINT"),
    ] {
        let d = tree_world();
        let (child, pids) = batch_with_tree(&d, &[]);
        // The open journal is locked by the process writing it (DESIGN §6).
        let path = journal_path(&d.home);
        let open = std::fs::File::open(&path).unwrap();
        assert!(
            matches!(open.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
            "the journal is not locked"
        );
        signal(&child, sig);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{name}: {}", stderr(&out));
        assert_tree_gone(&pids);
        let r = records(&path);
        let k = kinds(&r);
        assert_eq!(
            &k[k.len() - 3..],
            ["tool_result", "stop", "session_end"],
            "{name}: {k:?}"
        );
        let result = &r[r.len() - 3];
        assert_eq!(result["call_id"], "tree");
        assert_eq!(
            result["failure_kind"], "cancelled_after",
            "{name}: {result}"
        );
        let (stop, end) = (&r[r.len() - 2], &r[r.len() - 1]);
        assert_eq!(stop["reason"], "interrupted", "{name}");
        assert_eq!(end["reason"], reason, "{name}");
        assert_eq!(end["signal"], name);
        for rec in [stop, end] {
            for total in ["steps", "prompt_tokens", "completion_tokens", "cost_usd"] {
                assert!(rec.get(total).is_some(), "{name}: no {total} in {rec}");
            }
        }
    }
}

#[test]
fn sigterm_of_exec_cancels_the_command_and_ends_the_journal() {
    let d = tree_world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", r#"{"command":"bash tree.sh"}"#)
            .usage(40, 4)
            .into(),
    ]);
    let child = exec_against(&d, &server.url);
    let pids = wait_for_tree(&d);
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    assert_tree_gone(&pids);
    let r = records(&journal_path(&d.home));
    let k = kinds(&r);
    assert_eq!(&k[k.len() - 2..], ["stop", "session_end"], "{k:?}");
    let (stop, end) = (&r[r.len() - 2], &r[r.len() - 1]);
    assert_eq!(stop["reason"], "interrupted");
    assert_eq!(end["reason"], "terminated");
    for rec in [stop, end] {
        assert_eq!(rec["steps"], 1, "{rec}");
        assert_eq!(rec["prompt_tokens"], 40, "{rec}");
        assert_eq!(rec["completion_tokens"], 4, "{rec}");
    }
}

#[test]
fn a_file_size_limit_stops_the_run_with_the_journal_error() {
    let d = Dirs::new();
    // Each read puts about 15 KB in the journal; the limit is 100 KiB, so a read's result
    // fails part-way while the short closing records still fit.
    std::fs::write(d.ws.join("page.txt"), "0123456789abcd\n".repeat(1000)).unwrap();
    let calls = d.root().join("calls.jsonl");
    let line = "{\"name\":\"read_file\",\"args\":{\"path\":\"page.txt\"}}\n";
    std::fs::write(&calls, line.repeat(40)).unwrap();
    let dsh = d.dsh(&[]);
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg("ulimit -f 100 && exec \"$@\"")
        .arg("bash")
        .arg(dsh.get_program())
        .args(dsh.get_args())
        .args(["batch", calls.to_str().unwrap()])
        .envs(dsh.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("cannot write the journal").count(), 1, "{err}");
    assert_eq!(err.matches("File too large").count(), 1, "{err}");
    // The results committed before the fault are printed.
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(printed.lines().count() >= 3, "{printed}");
    let r = records(&journal_path(&d.home));
    let k = kinds(&r);
    assert_eq!(&k[k.len() - 2..], ["stop", "session_end"], "{k:?}");
    assert_eq!(r[r.len() - 2]["reason"], "journal_error");
    assert_eq!(r[r.len() - 1]["reason"], "error");
}

#[test]
fn json_into_an_unread_pipe_completes_the_journal_and_sigint_still_works() {
    let d = Dirs::new();
    std::fs::write(d.ws.join("page.txt"), "0123456789abcd\n".repeat(1000)).unwrap();
    let calls = d.root().join("calls.jsonl");
    // About 600 KB of journal: far beyond a pipe's buffer.
    let line = "{\"name\":\"read_file\",\"args\":{\"path\":\"page.txt\"}}\n";
    std::fs::write(&calls, line.repeat(40)).unwrap();
    let mut child = d
        .dsh(&["--json", "batch", calls.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Nobody reads stdout; the journal completes anyway.
    let path = journal_path(&d.home);
    wait_for("session_end", Duration::from_secs(60), || {
        std::fs::read_to_string(&path).is_ok_and(|t| t.contains("\"kind\":\"session_end\""))
    });
    let r = records(&path);
    assert_eq!(
        kinds(&r).iter().filter(|k| **k == "tool_result").count(),
        40
    );
    // Still nobody reads (the pipe stays open, unread): SIGINT ends the process anyway.
    let unread = child.stdout.take();
    signal(&child, libc::SIGINT);
    let status = child.wait().unwrap();
    drop(unread);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("stdout is not being read"), "{err}");
}

#[test]
fn git_maintenance_does_not_try_to_detach_inside_the_sandbox() {
    let d = Dirs::new();
    d.write_user_config(ALLOW_BASH);
    // gc.auto = 1 makes the commit run automatic maintenance, which detaches by default.
    std::fs::write(
        d.ws.join("g.sh"),
        "git init -q . && git config user.email a@b && git config user.name a \
         && git config gc.auto 1\n\
         for i in $(seq 1 300); do echo $i > f$i; done\n\
         git add . && git commit -qm one\n",
    )
    .unwrap();
    let out = d.batch_output(
        &[serde_json::json!({"name": "run_shell", "args": {"command": "bash g.sh"}})],
        &[],
        &[],
    );
    let results = common::json_lines(&out);
    let content = results[0]["content"].as_str().unwrap();
    assert_eq!(results[0]["ok"], true, "{content}");
    assert!(!content.contains("setsid"), "{content}");
    assert!(content.contains("[exit code 0]"), "{content}");
}
