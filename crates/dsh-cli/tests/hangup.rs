//! Closing the terminal in the middle of a turn (issue 21, item 1): the real `dsh` REPL in a
//! real pseudo-terminal whose master side the test closes, as closing a terminal window does
//! — at an approval question, during a running tool, while an answer streams. Each time the
//! session ends at once as hung up (exit 129; the journal's last records `stop` and
//! `session_end` `hung_up`), the journal is unlocked (a later `--resume` takes it) and no
//! process of the run is left. Each case runs twice: with the terminal as dsh's controlling
//! terminal (closing it also sends SIGHUP), and with dsh in a session of its own, where only
//! the terminal itself tells (its hang-up, which dsh watches for: src/hangup.rs). And signals end a REPL stuck in a turn: one
//! SIGTERM ends a turn waiting on a command (143, the journal closed); when dsh cannot even
//! write to its terminal (nobody reads it), a second one ends the process anyway.
//!
//! crossterm's event reader spins on the dead terminal (`read` returning 0 forever, upstream
//! crossterm#793); before the fix the REPL waited for it: no exit, no `session_end`, a
//! locked journal, and signals changed nothing.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/pty.rs"]
mod pty;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Dirs, stderr};
use dsh_testkit::model_server::{ScriptedServer, ServerHandle, Turn};
use pty::{Pty, PtySpec};
use serde_json::Value;

/// The prompt marker.
const PROMPT: &str = "›";

/// How soon dsh must be gone once its terminal is: the requirement is a second; the bound
/// leaves room for a loaded machine, and a hang (the fault) never meets it.
const HANG_UP_BOUND: Duration = Duration::from_secs(5);

/// A second signal exits at most 2 s later (README); this leaves room for a loaded machine.
const INSIST_BOUND: Duration = Duration::from_secs(8);

/// A command tree: the script's shell, a subshell with a child of its own, a background
/// child; every pid written to `pids` (four), then `ready`.
const TREE: &str = "echo $$ > pids\n\
    (sleep 60 & echo $! >> pids; wait) &\n\
    echo $! >> pids\n\
    sleep 60 &\n\
    echo $! >> pids\n\
    touch ready\n\
    wait\n";

/// Waits for `cond`, failing after `limit` (polled, never assumed after a sleep).
fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A world where `bash tree.sh` runs without asking.
fn world() -> Dirs {
    let d = Dirs::new();
    d.write_user_config("[permissions]\nallow = [\"run_shell(bash *)\"]\n");
    std::fs::write(d.ws.join("tree.sh"), TREE).unwrap();
    d
}

fn model_args(url: &str) -> Vec<&str> {
    vec![
        "--provider",
        "openai",
        "--base-url",
        url,
        "--model",
        "scripted",
    ]
}

/// How dsh holds its terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// As a shell starts it: its controlling terminal, so closing it sends SIGHUP too.
    Controlling,
    /// In a session of its own (`setsid`, under a shell that ignores SIGHUP and writes down
    /// dsh's exit code): closing the terminal signals nothing; only dsh's reads see it.
    OwnSession,
}

const MODES: [Mode; 2] = [Mode::Controlling, Mode::OwnSession];

/// Where [`Mode::OwnSession`]'s shell writes dsh's exit code.
fn exit_file(d: &Dirs) -> PathBuf {
    d.root().join("dsh-exit-code")
}

/// The REPL in its terminal, and dsh's pid: killed when dropped if still there (a test that
/// failed on a hang must not leave a process spinning; in its own session, closing the
/// terminal does not end it).
struct Repl {
    pty: Pty,
    dsh: u32,
}

impl std::ops::Deref for Repl {
    type Target = Pty;
    fn deref(&self) -> &Pty {
        &self.pty
    }
}

impl std::ops::DerefMut for Repl {
    fn deref_mut(&mut self) -> &mut Pty {
        &mut self.pty
    }
}

impl Drop for Repl {
    fn drop(&mut self) {
        if runs(i32::try_from(self.dsh).unwrap()) {
            signal(self.dsh, libc::SIGKILL);
        }
    }
}

/// The child processes of `pid`.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// The REPL against `server` in a 40×120 terminal, at its first prompt.
fn spawn(d: &Dirs, server: &ServerHandle, mode: Mode) -> Repl {
    spawn_with(d, server, mode, &[])
}

/// [`spawn`], with `env` added to dsh's environment.
fn spawn_with(d: &Dirs, server: &ServerHandle, mode: Mode, env: &[(&str, &str)]) -> Repl {
    let mut c = d.dsh(&model_args(&server.url));
    c.env("OPENAI_API_KEY", "sk-test");
    c.envs(env.iter().copied());
    if mode == Mode::OwnSession {
        let mut w = std::process::Command::new("sh");
        w.arg("-c")
            .arg("trap '' HUP; setsid -w \"$0\" \"$@\"; echo $? > \"$DSH_TEST_EXIT_FILE\"")
            .arg(c.get_program())
            .args(c.get_args())
            .env("DSH_TEST_EXIT_FILE", exit_file(d));
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => w.env(k, v),
                None => w.env_remove(k),
            };
        }
        c = w;
    }
    let pty = PtySpec::from_command(&c).size(40, 120).spawn();
    pty.wait_for_text(PROMPT);
    let mut dsh = pty.pid().unwrap();
    if mode == Mode::OwnSession {
        // The shell's child: setsid, which became dsh (or forked it first).
        let program = |pid: u32| {
            let line = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let first = line.split(|b| *b == 0).next().unwrap_or_default().to_vec();
            String::from_utf8(first).unwrap()
        };
        dsh = children(dsh)[0];
        if !program(dsh).ends_with("/dsh") {
            dsh = children(dsh)[0];
        }
        assert!(program(dsh).ends_with("/dsh"), "{}", program(dsh));
    }
    Repl { pty, dsh }
}

/// The session's one journal.
fn journal_path(d: &Dirs) -> PathBuf {
    let mut all: Vec<PathBuf> = std::fs::read_dir(d.home.join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(all.len(), 1, "{all:?}");
    all.pop().unwrap()
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

/// Sends `sig` to `pid`; whether it was there to take it.
fn signal(pid: u32, sig: i32) -> bool {
    let pid = i32::try_from(pid).unwrap();
    #[allow(unsafe_code)]
    // SAFETY: kill takes plain integers.
    let r = unsafe { libc::kill(pid, sig) };
    r == 0
}

/// Closes the terminal and waits for dsh to exit: its exit code, and how long it took.
fn hang_up(d: &Dirs, pty: &mut Pty, mode: Mode) -> (u32, Duration) {
    // Far past the bound, so a hang is reported as one (with the screen), then killed.
    pty.set_timeout(Duration::from_secs(20));
    pty.hang_up();
    let start = Instant::now();
    match mode {
        Mode::Controlling => {
            let status = pty.wait_exit();
            (status.exit_code(), start.elapsed())
        }
        Mode::OwnSession => {
            let file = exit_file(d);
            wait_for("dsh to exit", Duration::from_secs(20), || {
                std::fs::read_to_string(&file).is_ok_and(|t| t.ends_with('\n'))
            });
            let took = start.elapsed();
            let code = std::fs::read_to_string(&file)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            (code, took)
        }
    }
}

/// A journal that ended as hung up: its last records `stop` and `session_end` (`hung_up`,
/// `SIGHUP`), and no lock left on it.
fn assert_hung_up(path: &Path) -> Vec<Value> {
    let r = records(path);
    let k = kinds(&r);
    assert_eq!(&k[k.len() - 2..], ["stop", "session_end"], "{k:?}");
    let end = &r[r.len() - 1];
    assert_eq!(end["reason"], "hung_up", "{end}");
    assert_eq!(end["signal"], "SIGHUP", "{end}");
    let file = std::fs::File::open(path).unwrap();
    assert!(file.try_lock().is_ok(), "the journal is still locked");
    r
}

/// `dsh exec --resume` of the session: it takes the journal and goes on.
fn assert_resumes(d: &Dirs, path: &Path) {
    let server = ScriptedServer::start(vec![Turn::text("resumed after the hang-up").into()]);
    let id = path.file_stem().unwrap().to_str().unwrap();
    let mut args = vec!["exec"];
    args.extend(model_args(&server.url));
    args.extend(["--resume", id, "go on"]);
    let out = d
        .dsh(&args)
        .env("OPENAI_API_KEY", "sk-test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "resumed after the hang-up"
    );
}

/// The pids of the command tree, once it all runs (the subshell writes its child's pid
/// when it gets to it).
fn tree_pids(d: &Dirs) -> Vec<i32> {
    let read = || -> Vec<i32> {
        std::fs::read_to_string(d.ws.join("pids"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    };
    wait_for("the command tree", Duration::from_secs(30), || {
        d.ws.join("ready").exists() && read().len() == 4
    });
    read()
}

/// Closes the terminal: dsh exits 129 within the bound, and its journal ended as hung up.
fn hang_up_ends_it(d: &Dirs, pty: &mut Pty, mode: Mode) -> Vec<Value> {
    let (code, took) = hang_up(d, pty, mode);
    eprintln!("{mode:?}: exited {took:?} after the hang-up");
    assert_eq!(code, 129, "{mode:?}\n{}", pty.report());
    assert!(
        took < HANG_UP_BOUND,
        "{mode:?}: exited {took:?} after the hang-up"
    );
    assert_hung_up(&journal_path(d))
}

#[test]
fn a_terminal_closed_at_an_approval_question_ends_the_session_as_hung_up() {
    for mode in MODES {
        let d = world();
        let server = ScriptedServer::start(vec![
            Turn::tool_call("c1", "write_file", r#"{"path":"new.txt","content":"x"}"#).into(),
        ]);
        let mut pty = spawn(&d, &server, mode);
        pty.send_line("write a file");
        pty.wait_for_text("[y] approve once");
        let r = hang_up_ends_it(&d, &mut pty, mode);
        let result = r.iter().find(|r| r["kind"] == "tool_result").unwrap();
        assert_eq!(result["call_id"], "c1", "{mode:?}");
        assert_eq!(result["ok"], false, "{mode:?}: {result}");
        assert!(!d.ws.join("new.txt").exists(), "nobody approved the write");
        assert_resumes(&d, &journal_path(&d));
    }
}

#[test]
fn a_terminal_closed_during_a_running_tool_ends_the_session_and_the_command() {
    for mode in MODES {
        let d = world();
        let server = ScriptedServer::start(vec![
            Turn::tool_call("c1", "run_shell", r#"{"command":"bash tree.sh"}"#).into(),
        ]);
        let mut pty = spawn(&d, &server, mode);
        pty.send_line("run the tree");
        let pids = tree_pids(&d);
        let r = hang_up_ends_it(&d, &mut pty, mode);
        for pid in &pids {
            assert!(
                !runs(*pid),
                "{mode:?}: process {pid} of the command outlived dsh"
            );
        }
        let result = &r[r.len() - 3];
        assert_eq!(result["kind"], "tool_result", "{mode:?}: {result}");
        assert_eq!(
            result["failure_kind"], "cancelled_after",
            "{mode:?}: {result}"
        );
        assert_resumes(&d, &journal_path(&d));
    }
}

#[test]
fn a_terminal_closed_while_an_answer_streams_ends_the_session_as_hung_up() {
    for mode in MODES {
        let d = world();
        // A few words, then a minute of nothing: the answer is still streaming when the
        // terminal goes. The next prompt, typed ahead, must never be sent.
        let server = ScriptedServer::start(vec![
            Turn::text("The first words arrive, and then the rest takes a long while.")
                .deltas(10)
                .stall_after(4, Duration::from_secs(60))
                .into(),
            Turn::text("an answer nobody asked for").into(),
        ]);
        let mut pty = spawn(&d, &server, mode);
        pty.send_line("say something slowly");
        pty.wait_for_text("The first words");
        pty.send_line("and then this");
        pty.wait_for_text("queued for after this turn: and then this");
        let r = hang_up_ends_it(&d, &mut pty, mode);
        assert_eq!(
            r[r.len() - 2]["reason"],
            "interrupted",
            "{mode:?}: the turn was cut off"
        );
        let prompts = r.iter().filter(|r| r["kind"] == "user_message").count();
        assert_eq!(prompts, 1, "{mode:?}: a turn ran after the hang-up");
        assert_eq!(server.requests().len(), 1, "{mode:?}");
        assert_resumes(&d, &journal_path(&d));
    }
}

#[test]
fn a_terminal_closed_at_the_idle_prompt_ends_the_session_as_hung_up() {
    for mode in MODES {
        let d = world();
        let server = ScriptedServer::start(vec![]);
        let mut pty = spawn(&d, &server, mode);
        let (code, took) = hang_up(&d, &mut pty, mode);
        assert_eq!(code, 129, "{mode:?}\n{}", pty.report());
        assert!(
            took < HANG_UP_BOUND,
            "{mode:?}: exited {took:?} after the hang-up"
        );
        let path = journal_path(&d);
        let end = records(&path).pop().unwrap();
        assert_eq!(end["kind"], "session_end", "{mode:?}: {end}");
        assert_eq!(end["reason"], "hung_up", "{mode:?}: {end}");
        assert!(std::fs::File::open(&path).unwrap().try_lock().is_ok());
    }
}

#[test]
fn a_sigterm_ends_a_turn_waiting_on_a_command() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", r#"{"command":"bash tree.sh"}"#).into(),
    ]);
    let mut pty = spawn(&d, &server, Mode::Controlling);
    pty.send_line("run the tree");
    let pids = tree_pids(&d);
    pty.set_timeout(Duration::from_secs(20));
    let start = Instant::now();
    assert!(signal(pty.pid().unwrap(), libc::SIGTERM));
    let status = pty.wait_exit();
    assert_eq!(status.exit_code(), 143, "{}", pty.report());
    assert!(start.elapsed() < HANG_UP_BOUND, "{:?}", start.elapsed());
    for pid in &pids {
        assert!(!runs(*pid), "process {pid} of the command outlived dsh");
    }
    let r = records(&journal_path(&d));
    let k = kinds(&r);
    assert_eq!(
        &k[k.len() - 3..],
        ["tool_result", "stop", "session_end"],
        "{k:?}"
    );
    assert_eq!(r[r.len() - 1]["reason"], "terminated");
}

/// Whether a thread of `pid` is blocked writing to its terminal (stdout or stderr).
fn blocked_writing_to_the_terminal(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).any(|t| {
        let call = std::fs::read_to_string(t.path().join("syscall")).unwrap_or_default();
        [libc::SYS_write, libc::SYS_writev].iter().any(|nr| {
            call.starts_with(&format!("{nr} 0x1 ")) || call.starts_with(&format!("{nr} 0x2 "))
        })
    })
}

#[test]
fn a_second_sigterm_ends_a_repl_stuck_writing_to_a_terminal_nobody_reads() {
    let d = world();
    // Far more answer than a terminal's buffer holds, then the stream stays open.
    let line = "a line of the answer that nobody reads, long enough to fill buffers\n";
    let server = ScriptedServer::start(vec![
        Turn::text(line.repeat(8000))
            .deltas(4000)
            .stall_after(200, Duration::from_secs(60))
            .into(),
    ]);
    // One runtime worker, as on a one-core machine: the REPL blocked in its write holds
    // it, so only what does not run on the runtime can still take a signal.
    let pty = spawn_with(
        &d,
        &server,
        Mode::Controlling,
        &[("TOKIO_WORKER_THREADS", "1")],
    );
    let pid = pty.pid().unwrap();
    pty.stop_reading();
    pty.send_line("say a lot");
    wait_for("dsh blocked writing", Duration::from_secs(30), || {
        blocked_writing_to_the_terminal(pid)
    });
    // A person insisting: SIGTERM again and again (signals that come together count as
    // one), until dsh is gone.
    let start = Instant::now();
    while pty.try_exit_status().is_none() {
        assert!(
            start.elapsed() < INSIST_BOUND,
            "still running {:?} after the first of repeated SIGTERMs\n{}",
            start.elapsed(),
            pty.report()
        );
        signal(pid, libc::SIGTERM);
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("exited {:?} after the first SIGTERM", start.elapsed());
    let status = pty.try_exit_status().unwrap();
    assert_eq!(status.exit_code(), 143, "{}", pty.report());
    // Whole up to its last line, and free for a resume.
    let path = journal_path(&d);
    records(&path);
    let out = d
        .dsh(&["sessions", "verify", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_resumes(&d, &path);
}
