//! Extension faults kept as tests (issue 30, stage b), through the real `dsh` binary: each
//! fault of an extension ends in one result of the kind the code names for it, the session
//! goes on (a later call in the same session still works), and `dsh sessions verify` finds
//! every journal intact and ended afterwards.
//!
//! - MCP (tests/servers/hostile.py, plain Python 3 speaking JSON-RPC by hand): a server killed
//!   mid-call, one that never answers, one that answers invalid JSON, one that sends a 100 MB
//!   message (over `MAX_MESSAGE_BYTES`: a `tool_error` at once, the connection closed, dsh's
//!   memory bounded) and one that floods 100 MB of lines that are not JSON-RPC;
//! - hooks (tests/servers/fault_hook.py): one that hangs past its timeout, one that crashes,
//!   one that prints garbage, on each event that decides something;
//! - a plugin command that SIGKILLs itself mid-answer;
//! - Code Mode programs that exhaust memory, loop forever, flood `console.log`, and make
//!   10,000 sub-calls (at once and one after another);
//! - an ACP client that disconnects while the model's answer streams.
//!
//! docs/testing.md ("Extension faults") has the table of fault → test → result.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::acp_wire::Agent;
use common::{
    Dirs, content, journals, json_lines, kind, records, scripted_exec, stderr, stdout, verify_all,
};
use dsh_testkit::model_server::{Gate, Reply, ScriptedServer, ServerHandle, Turn};
use serde_json::{Value, json};

fn servers() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/servers")
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "args": args})
}

/// Every record of every journal under the world's sessions, in file order.
fn all_records(d: &Dirs) -> Vec<Value> {
    journals(&d.home)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .flat_map(|p| records(p))
        .collect()
}

/// The `tool_result` records of call `id`, across every journal: a fault must leave exactly
/// one.
fn results_of<'a>(recs: &'a [Value], id: &str) -> Vec<&'a Value> {
    recs.iter()
        .filter(|r| r["kind"] == "tool_result" && r["call_id"] == id)
        .collect()
}

/// The one `tool_result` of call `id` (asserting there is exactly one).
fn one_result<'a>(recs: &'a [Value], id: &str) -> &'a Value {
    let found = results_of(recs, id);
    assert_eq!(found.len(), 1, "call {id}: {found:#?}");
    found[0]
}

/// Runs `dsh batch -` on `calls` (exit 0 asserted), sampling dsh's own peak resident set
/// while it runs: the results, and the last peak read before it exited (KiB). `VmHWM` only
/// grows, so the last reading holds every peak before it.
fn batch_with_peak(d: &Dirs, calls: &[Value]) -> (Vec<Value>, u64) {
    let mut child = d
        .dsh(&["batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        for c in calls {
            writeln!(stdin, "{c}").unwrap();
        }
    }
    let pid = child.id();
    let (out_tx, out_rx) = std::sync::mpsc::channel();
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    std::thread::spawn(move || {
        use std::io::Read;
        let (mut o, mut e) = (Vec::new(), Vec::new());
        let t = std::thread::spawn(move || {
            let _ = se.read_to_end(&mut e);
            e
        });
        let _ = so.read_to_end(&mut o);
        let _ = out_tx.send((o, t.join().unwrap()));
    });
    let mut peak = 0;
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if let Some(kib) = common::vm_hwm_kib(&pid.to_string()) {
            peak = peak.max(kib);
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "dsh batch hung"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let (so, se) = out_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    let out = Output {
        status,
        stdout: so,
        stderr: se,
    };
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (json_lines(&out), peak)
}

// ---------------------------------------------------------------------------------------
// MCP
// ---------------------------------------------------------------------------------------

/// Where hostile.py logs what happened to it.
fn events(d: &Dirs) -> PathBuf {
    d.root().join("hostile-events.log")
}

/// The pids hostile.py logged at each start.
fn starts(d: &Dirs) -> Vec<u32> {
    std::fs::read_to_string(events(d))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("start "))
        .map(|p| p.parse().unwrap())
        .collect()
}

/// A world whose server `h` runs hostile.py with `fault` as the action of tool `fault`, a
/// well-behaved tool `t` beside it, both allowed, and `extra` lines in its table.
fn mcp_world(fault: &str, extra: &str) -> Dirs {
    let d = Dirs::new();
    let spec = json!({
        "tools": [
            {"name": fault, "description": "a fault", "inputSchema": {"type": "object"}},
            {"name": "t", "description": "a tool", "inputSchema": {"type": "object"}},
        ],
        "actions": {fault: fault},
    });
    let spec_file = d.root().join("h-spec.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__h__*\"]\n\
         [mcp.servers.h]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}]\n\
         env = {{ HOSTILE_SPEC = {:?}, HOSTILE_LOG = {:?} }}\n{extra}\n",
        servers().join("hostile.py").display().to_string(),
        spec_file.display().to_string(),
        events(&d).display().to_string(),
    ));
    d
}

/// `[fault, t]` in one `dsh batch` session: the two results, each the one result of its call
/// on the journal, and every journal verified.
fn mcp_fault_then_call(d: &Dirs, fault: &str, args: Value) -> (Value, Value) {
    let out = d.batch_output(
        &[
            call(&format!("mcp__h__{fault}"), args),
            call("mcp__h__t", json!({})),
        ],
        &[],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = json_lines(&out);
    assert_eq!(r.len(), 2, "{}", stdout(&out));
    let recs = all_records(d);
    one_result(&recs, r[0]["call_id"].as_str().unwrap());
    one_result(&recs, r[1]["call_id"].as_str().unwrap());
    verify_all(d);
    (r[0].clone(), r[1].clone())
}

#[test]
fn an_mcp_server_killed_mid_call_is_one_tool_error_and_is_started_again() {
    let d = mcp_world("die", "");
    let (died, next) = mcp_fault_then_call(&d, "die", json!({}));
    assert_eq!(kind(&died), "tool_error", "{died}");
    assert!(
        content(&died).contains("MCP server `h` ended while running `die` (killed by signal 9)"),
        "{died}"
    );
    assert_eq!(content(&next), "called t", "{next}");
    assert_eq!(starts(&d).len(), 2, "started again once for the next call");
}

#[test]
fn an_mcp_server_that_never_answers_is_one_timeout_and_goes_on_serving() {
    let d = mcp_world("hang", "timeout_s = 3");
    let (hung, next) = mcp_fault_then_call(&d, "hang", json!({}));
    assert_eq!(kind(&hung), "timeout", "{hung}");
    assert_eq!(content(&next), "called t", "{next}");
    assert_eq!(
        starts(&d).len(),
        1,
        "the same process answers the next call"
    );
}

#[test]
fn an_mcp_server_answering_invalid_json_is_one_timeout_and_goes_on_serving() {
    let d = mcp_world("garbage", "timeout_s = 3");
    let (garbled, next) = mcp_fault_then_call(&d, "garbage", json!({}));
    assert_eq!(kind(&garbled), "timeout", "{garbled}");
    assert_eq!(content(&next), "called t", "{next}");
    assert_eq!(
        starts(&d).len(),
        1,
        "the same process answers the next call"
    );
}

/// The bound dsh's peak resident set must stay under while a server floods 100 MB: well
/// under the flood (buffering it whole would cross it), well over what dsh needs (the bound
/// on one message, 16 MiB, and what a debug build of dsh uses anyway).
const FLOOD_RSS_BOUND_KIB: u64 = 96 * 1024;

/// A 100 MB message (one line) is over `MAX_MESSAGE_BYTES`: the call fails at once — not at
/// its timeout — naming the server and the bound, the connection is closed and the server
/// killed, it is started again for the next call, and dsh never holds more than the bound.
#[test]
fn an_mcp_server_sending_a_100_mb_message_is_one_tool_error_at_once_with_memory_bounded() {
    // The default call timeout (120 s) is far beyond what failing at once takes.
    let d = mcp_world("huge", "");
    let started = Instant::now();
    let (r, peak) = batch_with_peak(
        &d,
        &[
            call("mcp__h__huge", json!({"bytes": 100 * 1024 * 1024})),
            call("mcp__h__t", json!({})),
        ],
    );
    assert!(
        started.elapsed() < Duration::from_secs(100),
        "it waited for the call's timeout: {:?}",
        started.elapsed()
    );
    assert_eq!(kind(&r[0]), "tool_error", "{}", &content(&r[0]));
    assert!(
        content(&r[0]).contains(
            "MCP server `h` sent a message longer than 16 MiB while running `huge` (dsh's bound on one MCP message, MAX_MESSAGE_BYTES); dsh closed the connection and stopped it; it is started again on the next call"
        ),
        "{}",
        content(&r[0])
    );
    assert!(content(&r[0]).len() < 2000, "{}", content(&r[0]).len());
    assert_eq!(content(&r[1]), "called t", "{}", r[1]);
    let pids = starts(&d);
    assert_eq!(pids.len(), 2, "started again for the next call: {pids:?}");
    assert!(
        !Path::new(&format!("/proc/{}", pids[0])).exists(),
        "the flooding server was left running"
    );
    assert!(
        peak > 0 && peak < FLOOD_RSS_BOUND_KIB,
        "dsh's peak RSS {peak} KiB"
    );
    let recs = all_records(&d);
    one_result(&recs, r[0]["call_id"].as_str().unwrap());
    verify_all(&d);
}

/// A tool list over the bound when the server starts: it does not start, saying why, its
/// tools are never offered (a call to one is `unknown_tool`), and the session goes on.
#[test]
fn an_mcp_server_whose_tool_list_is_over_the_bound_does_not_start_and_says_why() {
    let d = Dirs::new();
    let spec = json!({
        "tools": [{"name": "t", "description": "a tool", "inputSchema": {"type": "object"}}],
        "huge_list_bytes": 20 * 1024 * 1024,
    });
    let spec_file = d.root().join("h-spec.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__h__*\"]\n\
         [mcp.servers.h]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}]\n\
         env = {{ HOSTILE_SPEC = {:?}, HOSTILE_LOG = {:?} }}\n",
        servers().join("hostile.py").display().to_string(),
        spec_file.display().to_string(),
        events(&d).display().to_string(),
    ));
    let out = d.batch_output(
        &[
            call("mcp__h__t", json!({})),
            common::shell_call("echo after"),
        ],
        &[],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = json_lines(&out);
    assert!(
        stderr(&out).contains(
            "MCP server `h` did not start: it sent a message longer than 16 MiB (dsh's bound on one MCP message, MAX_MESSAGE_BYTES)"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(kind(&r[0]), "unknown_tool", "{}", r[0]);
    assert!(content(&r[1]).contains("after"), "{}", r[1]);
    verify_all(&d);
}

/// 100 MB of lines that are not JSON-RPC, then the answer: each line is skipped as it
/// comes, the call is answered, and dsh's memory stays bounded.
#[test]
fn an_mcp_server_flooding_100_mb_of_junk_lines_still_answers_with_memory_bounded() {
    let d = mcp_world("junk", "");
    let (r, peak) = batch_with_peak(
        &d,
        &[
            call("mcp__h__junk", json!({"bytes": 100 * 1024 * 1024})),
            call("mcp__h__t", json!({})),
        ],
    );
    assert_eq!(content(&r[0]), "after the junk", "{}", r[0]);
    assert_eq!(content(&r[1]), "called t", "{}", r[1]);
    assert_eq!(starts(&d).len(), 1);
    assert!(
        peak > 0 && peak < FLOOD_RSS_BOUND_KIB,
        "dsh's peak RSS {peak} KiB"
    );
    verify_all(&d);
}

// ---------------------------------------------------------------------------------------
// Hooks
// ---------------------------------------------------------------------------------------

/// A `[[hooks.EVENT]]` table running fault_hook.py (its fault `forced`, else picked from the
/// event), killed after 3 s (ample for a crash or garbage to come first on a loaded machine).
fn fault_hook(event: &str, forced: &str) -> String {
    format!(
        "[[hooks.{event}]]\ncommand = \"/usr/bin/python3 {} {forced}\"\ntimeout_ms = 3000\n",
        servers().join("fault_hook.py").display()
    )
}

fn shell(id: &str, line: &str) -> Reply {
    Turn::tool_call(id, "run_shell", &json!({"command": line}).to_string()).into()
}

fn read(id: &str, path: &str) -> Reply {
    Turn::tool_call(id, "read_file", &json!({"path": path}).to_string()).into()
}

fn exec(d: &Dirs, script: Vec<Reply>, extra: &[&str], prompt: &str) -> (Output, ServerHandle) {
    let server = ScriptedServer::start(script);
    let out = scripted_exec(d, &server.url, extra, prompt)
        .output()
        .unwrap();
    (out, server)
}

fn reason(r: &Value) -> &str {
    r["decided_by"]["reason"].as_str().unwrap_or("")
}

/// A `PreToolUse` hook that hangs, crashes or prints garbage is a hook error: its call is
/// denied (one result naming the hook and what went wrong), and the next call is judged
/// and runs.
#[test]
fn pre_tool_use_hook_faults_each_deny_one_call_and_the_session_goes_on() {
    let d = Dirs::new();
    d.write_user_config(&fault_hook("PreToolUse", ""));
    let (out, _server) = exec(
        &d,
        vec![
            shell("c1", "echo hang-me"),
            shell("c2", "echo crash-me"),
            shell("c3", "echo garbage-me"),
            shell("c4", "echo after"),
            Reply::text("done"),
        ],
        &[],
        "go",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "done");
    let recs = all_records(&d);
    for (id, why) in [
        ("c1", "did not answer within 3000 ms and was killed"),
        (
            "c2",
            "exited with code 1 (RuntimeError: the hook crashed on purpose)",
        ),
        ("c3", "invalid JSON"),
    ] {
        let r = one_result(&recs, id);
        assert_eq!(r["failure_kind"], "denied", "{id}: {r}");
        assert_eq!(r["decided_by"]["policy"], "hooks", "{id}: {r}");
        assert!(reason(r).contains("fault_hook.py"), "{id}: {r}");
        assert!(reason(r).contains(why), "{id}: {}", reason(r));
    }
    let after = one_result(&recs, "c4");
    assert_eq!(after["ok"], true, "{after}");
    assert!(content(after).contains("after"), "{after}");
    verify_all(&d);
}

/// A `PostToolUse` hook that hangs, crashes or prints garbage withholds its call's result
/// (the call ran: it stays a success, its content does not reach the model), and the next
/// call's result reaches it whole.
#[test]
fn post_tool_use_hook_faults_each_withhold_one_result_and_the_session_goes_on() {
    let d = Dirs::new();
    d.write_user_config(&fault_hook("PostToolUse", ""));
    for f in ["hang-me", "crash-me", "garbage-me", "after"] {
        std::fs::write(d.ws.join(format!("{f}.txt")), format!("secret of {f}\n")).unwrap();
    }
    let (out, server) = exec(
        &d,
        vec![
            read("c1", "hang-me.txt"),
            read("c2", "crash-me.txt"),
            read("c3", "garbage-me.txt"),
            read("c4", "after.txt"),
            Reply::text("done"),
        ],
        &[],
        "go",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let recs = all_records(&d);
    for (id, f) in [("c1", "hang-me"), ("c2", "crash-me"), ("c3", "garbage-me")] {
        let r = one_result(&recs, id);
        assert_eq!(r["ok"], true, "{id}: {r}");
        assert!(content(r).contains("result withheld"), "{id}: {r}");
        assert!(
            !r.to_string().contains(&format!("secret of {f}")),
            "{id}: {r}"
        );
    }
    let sent = serde_json::to_string(&server.requests().last().unwrap()["messages"]).unwrap();
    assert!(!sent.contains("secret of hang-me"), "{sent}");
    assert!(sent.contains("secret of after"), "{sent}");
    let after = one_result(&recs, "c4");
    assert!(content(after).contains("secret of after"), "{after}");
    verify_all(&d);
}

/// A `UserPromptSubmit` hook that hangs, crashes or prints garbage blocks its prompt (fail
/// closed: the model is not asked, the run says why), and the session goes on: resumed,
/// its next prompt is sent.
#[test]
fn user_prompt_submit_hook_faults_each_block_one_prompt_and_the_session_goes_on() {
    let d = Dirs::new();
    d.write_user_config(&fault_hook("UserPromptSubmit", ""));
    let (out, _server) = exec(&d, vec![Reply::text("first")], &[], "hello");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for (prompt, why) in [
        ("hang-me", "did not answer within 3000 ms"),
        ("crash-me", "exited with code 1"),
        ("garbage-me", "invalid JSON"),
    ] {
        let (out, server) = exec(&d, vec![Reply::text("never")], &["--continue"], prompt);
        assert_ne!(out.status.code(), Some(0), "{prompt}");
        assert!(
            server.requests().is_empty(),
            "{prompt}: the model was asked"
        );
        let err = stderr(&out);
        assert!(err.contains(why), "{prompt}: {err}");
        assert!(err.contains("the prompt is not sent"), "{prompt}: {err}");
    }
    let (out, server) = exec(&d, vec![Reply::text("resumed")], &["--continue"], "after");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "resumed");
    let sent = serde_json::to_string(&server.requests()[0]["messages"]).unwrap();
    assert!(sent.contains("hello") && sent.contains("after"), "{sent}");
    // Five runs, each its own journal (names sort by the second they started in, so not
    // necessarily in order): three blocked prompts and two answers.
    let mut stops: Vec<String> = all_records(&d)
        .into_iter()
        .filter(|r| r["kind"] == "stop")
        .map(|r| r["reason"].as_str().unwrap().to_owned())
        .collect();
    stops.sort();
    assert_eq!(
        stops,
        [
            "final_answer",
            "final_answer",
            "prompt_blocked",
            "prompt_blocked",
            "prompt_blocked"
        ],
        "{stops:?}"
    );
    assert_eq!(verify_all(&d), 5);
}

/// A `Stop` hook that hangs, crashes or prints garbage decides nothing: the person is told,
/// the turn ends with its answer, and the session goes on.
#[test]
fn stop_hook_faults_are_told_and_each_turn_ends_with_its_answer() {
    let d = Dirs::new();
    d.write_user_config(&fault_hook("Stop", ""));
    for (i, (answer, why)) in [
        ("hang-me", "did not answer within 3000 ms"),
        ("crash-me", "exited with code 1"),
        ("garbage-me", "invalid JSON"),
    ]
    .into_iter()
    .enumerate()
    {
        let extra: &[&str] = if i == 0 { &[] } else { &["--continue"] };
        let (out, server) = exec(&d, vec![Reply::text(answer)], extra, "go");
        assert_eq!(out.status.code(), Some(0), "{answer}: {}", stderr(&out));
        assert_eq!(stdout(&out).trim(), answer);
        assert_eq!(server.requests().len(), 1, "{answer}: sent back to work");
        let err = stderr(&out);
        assert!(err.contains("fault_hook.py"), "{answer}: {err}");
        assert!(err.contains(why), "{answer}: {err}");
    }
    assert_eq!(verify_all(&d), 3);
}

/// `SessionStart` hooks that hang, crash and print garbage: each is told, none adds
/// context, and the session starts and answers.
#[test]
fn session_start_hook_faults_are_told_and_the_session_starts() {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "{}{}{}",
        fault_hook("SessionStart", "hang-me"),
        fault_hook("SessionStart", "crash-me"),
        fault_hook("SessionStart", "garbage-me"),
    ));
    let (out, server) = exec(&d, vec![Reply::text("answered")], &[], "hello");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "answered");
    let err = stderr(&out);
    for why in [
        "did not answer within 3000 ms",
        "exited with code 1",
        "invalid JSON",
    ] {
        assert!(err.contains(why), "{why}: {err}");
    }
    let sent = serde_json::to_string(&server.requests()[0]["messages"]).unwrap();
    assert!(!sent.contains("from hooks"), "{sent}");
    verify_all(&d);
}

// ---------------------------------------------------------------------------------------
// Plugins
// ---------------------------------------------------------------------------------------

/// A plugin command that SIGKILLs itself half-way through its answer is one `tool_error`
/// saying so, and the next plugin call runs.
#[test]
fn a_plugin_command_killed_by_sigkill_is_one_tool_error_and_the_next_call_runs() {
    let d = Dirs::new();
    d.write_user_config("[permissions]\nallow = [\"die\", \"fine\"]\n");
    let dir = d.cfg.join("plugins/p");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("die.py"),
        "import json, os, sys\njson.load(sys.stdin)\n\
         sys.stdout.write('{\"partial\": ')\nsys.stdout.flush()\n\
         os.kill(os.getpid(), 9)\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        "[[tools]]\nname = \"die\"\ndescription = \"dies\"\n\
         command = \"exec python3 \\\"$DSH_PLUGIN_DIR/die.py\\\"\"\n\
         input_schema = { type = \"object\" }\noutput_schema = { type = \"object\" }\n\
         [[tools]]\nname = \"fine\"\ndescription = \"answers\"\n\
         command = \"echo '{\\\"ok\\\": true}'\"\n\
         input_schema = { type = \"object\" }\noutput_schema = { type = \"object\" }\n",
    )
    .unwrap();
    let out = d.batch_output(&[call("die", json!({})), call("fine", json!({}))], &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = json_lines(&out);
    assert_eq!(r.len(), 2, "{}", stdout(&out));
    assert_eq!(kind(&r[0]), "tool_error", "{}", r[0]);
    assert!(
        content(&r[0]).contains("was killed by signal 9"),
        "{}",
        r[0]
    );
    assert_eq!(kind(&r[1]), "ok", "{}", r[1]);
    assert_eq!(r[1]["value"], json!({"ok": true}));
    let recs = all_records(&d);
    one_result(&recs, r[0]["call_id"].as_str().unwrap());
    verify_all(&d);
}

// ---------------------------------------------------------------------------------------
// Code Mode
// ---------------------------------------------------------------------------------------

fn program(id: &str, code: &str) -> Reply {
    Turn::tool_call(
        id,
        "run_code",
        &json!({"code": code, "description": "a fault"}).to_string(),
    )
    .into()
}

/// Through `dsh exec` in the code mode: a program that exhausts memory, one that loops
/// forever, one that floods `console.log`, one that makes 10,000 calls at once and one that
/// makes them one after another (catching each refusal) — each ends in one result saying
/// which limit stopped it, at most the limit's 200 calls ran, and the next program runs.
#[test]
fn code_mode_programs_that_exhaust_memory_loop_flood_or_call_10000_times_each_end_in_one_result() {
    let d = Dirs::new();
    std::fs::write(d.ws.join("f.txt"), "the file\n").unwrap();
    // The loop runs for the whole wall limit; the 200 calls of `serial` take well under it.
    d.write_user_config("[tools]\ncode_timeout_s = 5\n");
    let (out, server) = exec(
        &d,
        vec![
            program("mem", "let s = 'x'; while (true) s = s + s;"),
            program("loop", "while (true) {}"),
            program(
                "flood",
                "while (true) { try { console.log('x'.repeat(1000)); } catch (e) {} }",
            ),
            program(
                "many",
                "return await Promise.all(Array.from({length: 10000}, () => tools.read_file({path: 'f.txt'})));",
            ),
            program(
                "serial",
                "let n = 0;\n\
                 for (let i = 0; i < 10000; i++) { try { await tools.read_file({path: 'f.txt'}); n++; } catch (e) {} }\n\
                 return n;",
            ),
            program(
                "after",
                "return (await tools.read_file({path: 'f.txt'})).content;",
            ),
            Reply::text("done"),
        ],
        &["--tools-mode", "code"],
        "go",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "done");
    assert_eq!(server.requests().len(), 7);
    let recs = all_records(&d);
    for (id, kind_is, says) in [
        ("mem", "tool_error", "out of memory"),
        ("loop", "timeout", "time limit"),
        ("flood", "tool_error", "output limit"),
        ("many", "tool_error", "more tool calls than its limit"),
        ("serial", "tool_error", "more tool calls than its limit"),
    ] {
        let r = one_result(&recs, id);
        assert_eq!(r["ok"], false, "{id}: {r}");
        assert_eq!(r["failure_kind"], kind_is, "{id}: {r}");
        assert!(content(r).contains(says), "{id}: {}", content(r));
        assert!(
            content(r).len() < 100_000,
            "{id}: {} bytes",
            content(r).len()
        );
        let subs = recs
            .iter()
            .filter(|c| c["kind"] == "tool_call" && c["parent"] == id)
            .count();
        assert!(subs <= 200, "{id}: {subs} calls ran");
        if id == "serial" {
            assert_eq!(subs, 200, "the limit's calls ran, one after another");
        }
    }
    let after = one_result(&recs, "after");
    assert_eq!(after["ok"], true, "{after}");
    assert!(
        after["value"]["value"]
            .as_str()
            .is_some_and(|v| v.contains("the file")),
        "{after}"
    );
    verify_all(&d);
}

// ---------------------------------------------------------------------------------------
// ACP
// ---------------------------------------------------------------------------------------

/// The editor goes away while the model's answer streams: dsh exits on its own, the journal
/// ends with `session_end` and verifies, and the session resumes with `dsh exec`.
#[test]
fn an_acp_client_that_disconnects_mid_answer_leaves_an_ended_journal_that_resumes() {
    let d = Dirs::new();
    let gate = Gate::new();
    let model = ScriptedServer::start(vec![
        Turn::text("a long answer that is cut off by the editor leaving")
            .deltas(8)
            .hold_after(3, &gate)
            .into(),
    ]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    a.send_prompt("p", &id, "answer at length");
    loop {
        let v = a.until_method("session/update");
        if v["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    let code = a.close_and_wait();
    gate.open();
    assert_eq!(code, Some(0), "{}", a.stderr());
    let files: Vec<PathBuf> = journals(&d.home);
    assert_eq!(files.len(), 1, "{files:?}");
    let recs = records(&files[0]);
    assert_eq!(recs.last().unwrap()["kind"], "session_end", "{recs:#?}");
    verify_all(&d);
    let session = files[0].file_stem().unwrap().to_string_lossy().into_owned();
    let (out, server) = exec(
        &d,
        vec![Reply::text("resumed")],
        &["--resume", &session],
        "go on",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "resumed");
    let sent = serde_json::to_string(&server.requests()[0]["messages"]).unwrap();
    assert!(sent.contains("answer at length"), "{sent}");
    assert_eq!(verify_all(&d), 2);
}
