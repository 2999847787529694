//! Resource bounds (issue 30; DESIGN §6): inputs far larger than a session's usual, each
//! through the real `dsh` binary against the scripted model server, each ending in one
//! clear, bounded result, with the dsh process's peak RSS under a bound stated here.
//!
//! | case | what dsh gets | the bounded result |
//! |------|---------------|--------------------|
//! | [`a_50_mb_single_line_file_is_read_and_searched`] | `read_file` and `grep` of one 50 MB line | a page, the line cut; grep stops at a line over 8 MiB and says so |
//! | [`a_command_writing_1_gb_is_kept_to_its_head_and_tail`] | `run_shell` of a command writing 1 GB (one line) | 1 GB counted, 5 MB kept and saved, a few KB shown |
//! | [`a_10_mb_argument_is_stored_beside_the_journal`] | `write_file` of 10 MB, then verify, replay, resume | the file written; the argument in one blob both records name; replay and resume have it whole; a damaged blob named |
//! | [`ten_thousand_calls_in_one_reply_each_get_one_result`] | one model reply of 10,000 `read_file` calls | 10,000 results, in order |
//! | [`a_shell_line_nested_200_deep_is_judged`] | a `run_shell` line of 200 nested `$(…)` | refused at gate 1, the reason saying how deep the policy follows a line |
//! | [`a_5_mb_answer_is_shown_in_the_repl`] | a 5 MB final answer in the REPL | shown to its last line, the prompt back |
//!
//! **Peak RSS.** For `dsh exec` it is `ru_maxrss` from `wait4(2)`. Linux starts a child's
//! `ru_maxrss` at its parent's high-water mark when it `execve`s from a `vfork`/`posix_spawn`
//! (as `Command::spawn` does), so the figure is never under dsh's own peak but may be this
//! test process's ([`Run::floor_kib`], printed beside it). For the REPL, whose process the
//! PTY harness waits for, it is the process's own `VmHWM` (`/proc/PID/status`) read at the
//! prompt after the answer, before it leaves: the answer's whole cost is behind it by then.
//! The cases run one at a time ([`SERIAL`]) so each figure is one case's; run together in one
//! test process, a case after the 10 MB one may print that process's mark (the line says
//! whose it is), so BENCHMARKS.md's figures come from one case per process
//! (`-- --exact NAME --nocapture`).
//!
//! Time is never asserted: [`DEADLINE`] only ends a run that hangs.
#![cfg(target_os = "linux")]
#![allow(unsafe_code, clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/pty.rs"]
mod pty;
#[path = "common/repl.rs"]
mod repl_kit;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use common::{Dirs, journals, records, scripted_exec as exec, stderr, stdout};
use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use serde_json::{Value, json};

/// A run that has not ended by then hung: it is killed and the test fails.
const DEADLINE: Duration = Duration::from_secs(600);

/// The peak RSS every case must stay under, in KiB: 512 MiB — generous (each case peaks far
/// lower; see BENCHMARKS.md), yet under what holding any of these inputs whole a few times
/// over would take (the 1 GB output once, the 50 MB line ten times).
const PEAK_MAX_KIB: u64 = 512 * 1024;

/// One case at a time: each peak is one case's, and the machine is not asked for six at once.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One finished `dsh` process.
struct Run {
    out: Output,
    /// `ru_maxrss` from `wait4(2)`, in KiB: at least dsh's own peak (see the module docs).
    peak_kib: u64,
    /// This test process's high-water mark when it spawned dsh, in KiB: `peak_kib` may be
    /// this figure rather than dsh's own.
    floor_kib: u64,
    wall: Duration,
}

impl Run {
    /// Prints the figures and asserts the bound.
    fn report(&self, case: &str) {
        let whose = if self.peak_kib > self.floor_kib {
            "dsh's own"
        } else {
            "this test process's own: dsh's is at most that"
        };
        println!(
            "resource bound: {case}: peak RSS {:.1} MiB (ru_maxrss, {whose}; the test process \
             was at {:.1} MiB when it spawned dsh), wall {:.2} s",
            self.peak_kib as f64 / 1024.0,
            self.floor_kib as f64 / 1024.0,
            self.wall.as_secs_f64()
        );
        assert!(
            self.peak_kib < PEAK_MAX_KIB,
            "{case}: dsh peaked at {} MiB, over the bound of {} MiB",
            self.peak_kib / 1024,
            PEAK_MAX_KIB / 1024
        );
    }

    fn code(&self) -> Option<i32> {
        self.out.status.code()
    }
}

/// Runs `cmd` to its end, reaping it with `wait4(2)` for its peak RSS; kills it and fails
/// at [`DEADLINE`].
fn run(mut cmd: Command) -> Run {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let floor_kib = common::vm_hwm_kib("self").unwrap();
    let begun = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).unwrap();
            v
        })
    };
    let out_thread = drain(Box::new(child.stdout.take().unwrap()));
    let err_thread = drain(Box::new(child.stderr.take().unwrap()));
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain old data, fully written by a successful wait4.
    let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own child, not yet reaped; both pointers are valid.
        let r = unsafe { libc::wait4(pid, &raw mut status, libc::WNOHANG, &raw mut rusage) };
        if r == pid {
            break;
        }
        assert_eq!(r, 0, "wait4: {}", std::io::Error::last_os_error());
        if begun.elapsed() > DEADLINE {
            child.kill().unwrap();
            panic!("dsh did not end within {DEADLINE:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let wall = begun.elapsed();
    drop(child); // reaped above; dropping a Child never waits
    let status = {
        use std::os::unix::process::ExitStatusExt;
        ExitStatus::from_raw(status)
    };
    Run {
        out: Output {
            status,
            stdout: out_thread.join().unwrap(),
            stderr: err_thread.join().unwrap(),
        },
        peak_kib: u64::try_from(rusage.ru_maxrss).unwrap(),
        floor_kib,
        wall,
    }
}

/// The only journal of `d`'s sessions.
fn the_journal(d: &Dirs) -> PathBuf {
    let all: Vec<PathBuf> = journals(&d.home)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(all.len(), 1, "{all:?}");
    all.into_iter().next().unwrap()
}

/// The records of `kind`, in order.
fn of_kind<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["kind"] == kind).collect()
}

/// The request bodies' sizes in bytes, as JSON text.
fn request_sizes(requests: &[Value]) -> Vec<usize> {
    requests.iter().map(|r| r.to_string().len()).collect()
}

/// Writes `len` bytes of one line (`x`s with `mark` at the end, then a newline) to `path`,
/// a megabyte at a time.
fn write_one_line(path: &Path, len: usize, mark: &str) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let chunk = vec![b'x'; 1 << 20];
    let mut left = len - mark.len() - 1;
    while left > 0 {
        let n = left.min(chunk.len());
        f.write_all(&chunk[..n]).unwrap();
        left -= n;
    }
    f.write_all(mark.as_bytes()).unwrap();
    f.write_all(b"\n").unwrap();
    f.flush().unwrap();
}

#[test]
fn a_50_mb_single_line_file_is_read_and_searched() {
    let _one = serial();
    let d = Dirs::new();
    write_one_line(&d.ws.join("big.txt"), 50_000_000, "NEEDLE");
    let server = ScriptedServer::start(vec![
        Turn::tool_call("r1", "read_file", r#"{"path":"big.txt"}"#)
            .call("g1", "grep", r#"{"pattern":"NEEDLE","path":"big.txt"}"#)
            .into(),
        Reply::text("read and searched"),
    ]);
    let r = run(exec(&d, &server.url, &[], "look at big.txt"));
    assert_eq!(r.code(), Some(0), "{}", stderr(&r.out));
    assert_eq!(stdout(&r.out).trim(), "read and searched");
    let recs = records(&the_journal(&d));
    let results = of_kind(&recs, "tool_result");
    assert_eq!(results.len(), 2, "{results:?}");
    for res in &results {
        assert_eq!(res["ok"], true, "{res}");
        let content = res["content"].as_str().unwrap();
        assert!(content.len() < 64 * 1024, "{} bytes", content.len());
    }
    // The page shows the line's start, cut; the search stops at the line, and says so.
    let page = results[0]["content"].as_str().unwrap();
    assert!(page.starts_with("     1\txxxx"), "{}", &page[..100]);
    assert!(page.contains("cut"), "{page}");
    assert_eq!(
        results[1]["content"],
        "No matches for `NEEDLE` in `big.txt` (1 files searched).\n\
         [`big.txt` was not searched past a line longer than 8 MiB]"
    );
    let sizes = request_sizes(&server.requests());
    assert!(sizes.iter().all(|&s| s < 256 * 1024), "{sizes:?}");
    r.report("50 MB single-line file, read_file + grep");
}

#[test]
fn a_command_writing_1_gb_is_kept_to_its_head_and_tail() {
    let _one = serial();
    let d = Dirs::new();
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "s1",
            "run_shell",
            &json!({"command": "head -c 1000000000 /dev/zero | tr '\\0' x"}).to_string(),
        )
        .into(),
        Reply::text("ran it"),
    ]);
    let r = run(exec(&d, &server.url, &["--yolo"], "make a lot of output"));
    assert_eq!(r.code(), Some(0), "{}", stderr(&r.out));
    assert_eq!(stdout(&r.out).trim(), "ran it");
    let recs = records(&the_journal(&d));
    let results = of_kind(&recs, "tool_result");
    assert_eq!(results.len(), 1, "{results:?}");
    let res = results[0];
    assert_eq!(res["ok"], true, "{res}");
    assert_eq!(res["exit_code"], 0, "{res}");
    // All 1 GB counted; 5 MB (4 MiB of head, 1 MiB of tail) kept and saved; a few KB for
    // the model, pointing at the saved output.
    assert_eq!(
        res["value"]["output_bytes"], 1_000_000_000u64,
        "{}",
        res["value"]
    );
    assert_eq!(res["value"]["truncated"], true);
    let content = res["content"].as_str().unwrap();
    assert!(content.len() < 16 * 1024, "{} bytes shown", content.len());
    assert!(
        content.contains("characters omitted; the full output is saved as `out-s1`"),
        "{}",
        &content[..content.len().min(4000)]
    );
    let spill: Vec<PathBuf> = std::fs::read_dir(d.home.join("spill"))
        .unwrap()
        .flat_map(|s| std::fs::read_dir(s.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(spill.len(), 1, "{spill:?}");
    let saved = std::fs::read_to_string(&spill[0]).unwrap();
    assert!(saved.len() < 6 << 20, "{} bytes saved", saved.len());
    assert!(
        saved.contains("bytes of output were not kept …]"),
        "the saved output does not say what was dropped"
    );
    drop(saved);
    let sizes = request_sizes(&server.requests());
    assert!(sizes.iter().all(|&s| s < 64 * 1024), "{sizes:?}");
    r.report("1 GB of output, run_shell");
}

/// The blob a record's field names: its hex digest and size.
fn blob_of(v: &Value) -> (String, u64) {
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("not a reference: {v}"));
    assert_eq!(obj.len(), 2, "{v}");
    let digest = v["$blob"]
        .as_str()
        .unwrap()
        .strip_prefix("sha256:")
        .unwrap();
    (digest.to_owned(), v["bytes"].as_u64().unwrap())
}

#[test]
fn a_10_mb_argument_is_stored_beside_the_journal() {
    let _one = serial();
    let d = Dirs::new();
    let content: String = (0..)
        .map(|i| format!("line {i} of a large file\n"))
        .take_while({
            let mut len = 0;
            move |l: &String| {
                len += l.len();
                len <= 10_000_000
            }
        })
        .collect();
    let arguments = json!({"path": "big.out", "content": content}).to_string();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("w1", "write_file", &arguments)
            .deltas(1 << 16)
            .into(),
        Reply::text("wrote it"),
    ]);
    let r = run(exec(&d, &server.url, &["--yolo"], "write a large file"));
    assert_eq!(r.code(), Some(0), "{}", stderr(&r.out));
    assert_eq!(
        std::fs::read_to_string(d.ws.join("big.out")).unwrap(),
        content
    );
    r.report("10 MB tool-call argument, write_file");
    drop(server);

    // The journal names one blob from both records; the blob holds the model's text.
    let journal = the_journal(&d);
    let id = journal.file_stem().unwrap().to_str().unwrap().to_owned();
    let jlen = std::fs::metadata(&journal).unwrap().len();
    assert!(jlen < 64 * 1024, "the journal is {jlen} bytes");
    let recs = records(&journal);
    let asked = of_kind(&recs, "assistant_message")[0];
    let (digest, bytes) = blob_of(&asked["tool_calls"][0]["arguments"]);
    let call = of_kind(&recs, "tool_call")[0];
    assert_eq!(blob_of(&call["args"]), (digest.clone(), bytes));
    assert_eq!(bytes, arguments.len() as u64);
    let blobs = d.home.join("sessions").join(format!("{id}.blobs"));
    let names: Vec<String> = std::fs::read_dir(&blobs)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, [format!("sha256-{digest}")]);
    let blob = blobs.join(&names[0]);
    let stored = std::fs::read(&blob).unwrap();
    assert_eq!(stored, arguments.as_bytes());
    assert_eq!(dsh_core::journal::sha256_hex(&stored), digest);
    drop(stored);
    println!(
        "resource bound: 10 MB tool-call argument: a journal of {jlen} bytes and one blob of {bytes} bytes"
    );
    let line_of = |v: &Value| v["seq"].as_u64().unwrap();
    let asked_line = line_of(asked);

    // `dsh sessions verify` checks the blob.
    let verify = |d: &Dirs| d.dsh(&["sessions", "verify", &id]).output().unwrap();
    let out = verify(&d);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );

    // The transcript names the blob instead of reading it for a one-line summary.
    let out = d.dsh(&["sessions", "show", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!(
            "tool write_file [arguments in blob sha256:{digest} ({bytes} bytes)] → ok"
        )),
        "{}",
        stdout(&out)
    );

    // Replay judges the call with its whole argument: as recorded, nothing changed.
    let out = d.dsh(&["replay", &id, "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows = common::json_lines(&out);
    let write = rows.iter().find(|r| r["tool"] == "write_file").unwrap();
    assert_eq!(write["changed"], false, "{write}");
    assert_eq!(
        write["today"]["decision"], write["recorded"]["decision"],
        "{write}"
    );
    assert!(write["today"]["decision"].is_string(), "{write}");

    // Resume: the conversation sent on carries the argument whole.
    let server = ScriptedServer::start(vec![Reply::text("resumed")]);
    let r = run(exec(&d, &server.url, &["--yolo", "--resume", &id], "go on"));
    assert_eq!(r.code(), Some(0), "{}", stderr(&r.out));
    assert_eq!(stdout(&r.out).trim(), "resumed");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|m| m["tool_calls"][0]["function"]["arguments"].as_str())
        .unwrap();
    assert!(sent == arguments, "the resumed request's argument differs");
    drop(requests);
    r.report("10 MB tool-call argument, resume");

    // An altered blob, then a missing one: verify names the record, resume refuses.
    let mut altered = std::fs::read(&blob).unwrap();
    altered[100] ^= 1;
    std::fs::write(&blob, &altered).unwrap();
    drop(altered);
    for (what, damage) in [("altered", None), ("missing", Some(()))] {
        if damage.is_some() {
            std::fs::remove_file(&blob).unwrap();
        }
        let out = verify(&d);
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(
            said.contains(&format!("BROKEN at line {asked_line} "))
                && said.contains(&format!("sha256:{digest}"))
                && said.contains(what),
            "{said}"
        );
        let server = ScriptedServer::start(vec![Reply::text("never")]);
        let out = exec(&d, &server.url, &["--resume", &id], "again")
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("sha256:{digest}")),
            "{}",
            stderr(&out)
        );
        assert!(server.requests().is_empty());
    }
}

#[test]
fn ten_thousand_calls_in_one_reply_each_get_one_result() {
    const CALLS: usize = 10_000;
    let _one = serial();
    let d = Dirs::new();
    std::fs::write(d.ws.join("small.txt"), "one\ntwo\nthree\n").unwrap();
    let mut turn = Turn::default().deltas(4096);
    for i in 0..CALLS {
        turn = turn.call(
            &format!("c{i}"),
            "read_file",
            &json!({"path": "small.txt", "limit": i + 1}).to_string(),
        );
    }
    let server = ScriptedServer::start(vec![turn.into(), Reply::text("read them all")]);
    let r = run(exec(&d, &server.url, &[], "read it many times"));
    assert_eq!(r.code(), Some(0), "{}", stderr(&r.out));
    assert_eq!(stdout(&r.out).trim(), "read them all");
    let recs = records(&the_journal(&d));
    let results = of_kind(&recs, "tool_result");
    assert_eq!(results.len(), CALLS);
    let ids: Vec<&str> = results
        .iter()
        .map(|r| r["call_id"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..CALLS).map(|i| format!("c{i}")).collect();
    assert_eq!(ids, expected);
    assert!(results.iter().all(|r| r["ok"] == true));
    // The model got every result back in the next request.
    let requests = server.requests();
    let tools = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    assert_eq!(tools, CALLS);
    drop(requests);
    r.report("10,000 tool calls in one reply, read_file");
}

#[test]
fn a_shell_line_nested_200_deep_is_judged() {
    const DEPTH: usize = 200;
    let _one = serial();
    let d = Dirs::new();
    let line = format!("echo {}deep{}", "$(echo ".repeat(DEPTH), ")".repeat(DEPTH));
    let server = ScriptedServer::start(vec![
        Turn::tool_call("s1", "run_shell", &json!({ "command": line }).to_string()).into(),
        Reply::text("judged"),
    ]);
    let r = run(exec(&d, &server.url, &[], "nest it"));
    assert_eq!(r.code(), Some(0), "{}", stderr(&r.out));
    assert_eq!(stdout(&r.out).trim(), "judged");
    let recs = records(&the_journal(&d));
    let results = of_kind(&recs, "tool_result");
    assert_eq!(results.len(), 1, "{results:?}");
    let res = results[0];
    // Judged by the shell policy at gate 1: the parser follows a line's tree 200 levels
    // deep (each `$(echo …)` is more than one), and refuses a deeper one, saying so.
    assert_eq!(res["failure_kind"], "denied", "{res}");
    assert_eq!(res["decided_by"]["gate"], "pre_policy", "{res}");
    assert_eq!(res["decided_by"]["policy"], "shell", "{res}");
    let reason = res["decided_by"]["reason"].as_str().unwrap();
    assert!(
        reason.ends_with("the line nests constructs more than 200 deep"),
        "{reason}"
    );
    assert!(reason.len() < 200, "{reason}");
    r.report("a shell line nested 200 deep, run_shell");
}

#[test]
fn a_5_mb_answer_is_shown_in_the_repl() {
    let _one = serial();
    let d = repl_kit::world();
    let mut answer = String::with_capacity(5_100_000);
    let mut i = 0;
    while answer.len() < 5_000_000 {
        answer.push_str(&format!("Paragraph {i}: the answer goes on and on.\n\n"));
        i += 1;
    }
    answer.push_str("END-OF-THE-ANSWER");
    let server = ScriptedServer::start(vec![Turn::text(answer).deltas(1 << 16).into()]);
    let mut pty = repl_kit::spawn(&d, &server, &[]);
    pty.set_timeout(DEADLINE);
    let begun = Instant::now();
    pty.send_line("tell me everything");
    pty.wait_for_text("END-OF-THE-ANSWER");
    repl_kit::wait_at_prompt(&pty);
    let wall = begun.elapsed();
    let pid = pty.pid().unwrap().to_string();
    let peak_kib = common::vm_hwm_kib(&pid).unwrap();
    repl_kit::leave_at_prompt(pty);
    let recs = repl_kit::journal(&d);
    let said = of_kind(&recs, "assistant_message");
    assert_eq!(said.len(), 1);
    assert!(
        said[0]["content"]
            .as_str()
            .unwrap()
            .ends_with("END-OF-THE-ANSWER")
    );
    println!(
        "resource bound: 5 MB answer in the REPL: peak RSS {:.1} MiB (VmHWM at the prompt), \
         wall {:.2} s (prompt to prompt)",
        peak_kib as f64 / 1024.0,
        wall.as_secs_f64()
    );
    assert!(
        peak_kib < PEAK_MAX_KIB,
        "the REPL peaked at {} MiB, over the bound of {} MiB",
        peak_kib / 1024,
        PEAK_MAX_KIB / 1024
    );
}
