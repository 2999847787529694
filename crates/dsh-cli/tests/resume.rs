//! `dsh exec --resume ID` and `--continue` (DESIGN §4, §6): the conversation rebuilt from the
//! journal into a new, linked journal; a call cut off by a killed process closed as such and
//! the model told; an open or broken session refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::{Dirs, journals, records, scripted_exec, stderr};
use dsh_testkit::model_server::{ScriptedServer, Turn};

const ALLOW_BASH: &str = "[permissions]\nallow = [\"run_shell(bash *)\"]\n";
/// Marks that it runs, then waits far longer than any test.
const HANG: &str = "touch started\nsleep 600\n";

/// Waits for `cond`, failing after `limit` (a hang detector: the state is polled, never
/// assumed after a sleep).
fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn id_of(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

/// A session whose one tool call (`bash hang.sh`) is running, in a live `dsh exec`.
fn running_session(d: &Dirs) -> (Child, PathBuf, dsh_testkit::model_server::ServerHandle) {
    d.write_user_config(ALLOW_BASH);
    std::fs::write(d.ws.join("hang.sh"), HANG).unwrap();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", r#"{"command":"bash hang.sh"}"#).into(),
    ]);
    let child = scripted_exec(d, &server.url, &[], "run the script")
        .spawn()
        .unwrap();
    wait_for("the command to run", Duration::from_secs(30), || {
        d.ws.join("started").exists()
    });
    let path = journals(&d.home).pop().unwrap();
    (child, path, server)
}

fn kill(child: &mut Child) {
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

#[test]
fn a_session_killed_mid_tool_resumes_with_the_call_closed_as_cancelled_after() {
    let d = Dirs::new();
    let (mut child, old, _server) = running_session(&d);
    kill(&mut child);
    let old_records = records(&old);
    assert!(
        !old_records
            .iter()
            .any(|r| r["kind"] == "tool_result" || r["kind"] == "session_end"),
        "the killed process wrote no ending"
    );

    let server = ScriptedServer::start(vec![Turn::text("picked up where we left off").into()]);
    let out: Output = scripted_exec(&d, &server.url, &["--resume", &id_of(&old)], "go on")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "picked up where we left off"
    );
    assert!(stderr(&out).contains("cut off"), "{}", stderr(&out));

    // A new journal, linked to the old one's last record, closing the cut call first.
    let new = journals(&d.home).into_iter().find(|p| p != &old).unwrap();
    let recs = records(&new);
    let link = &recs[0]["resumed_from"];
    let last_old = dsh_core::journal::read_journal(&old)
        .unwrap()
        .records
        .pop()
        .unwrap();
    assert_eq!(link["session"], id_of(&old));
    assert_eq!(link["seq"], last_old.seq);
    assert_eq!(link["hash"], last_old.hash.as_str());
    assert_eq!(recs[1]["kind"], "tool_result", "{:?}", recs[1]);
    assert_eq!(recs[1]["call_id"], "c1");
    assert_eq!(recs[1]["failure_kind"], "cancelled_after");
    // The old file is never written again.
    assert_eq!(records(&old).len(), old_records.len());
    // Nothing re-ran: the tool was not started again.
    assert!(!recs.iter().any(|r| r["kind"] == "tool_started"));

    // The model got the whole conversation, told that the call was cut off.
    let req = &server.requests()[0];
    let msgs = req["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
    assert_eq!(msgs[1]["content"], "run the script");
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "c1");
    let told = msgs[3]["content"].as_str().unwrap();
    assert!(
        told.contains("cut off") && told.contains("may have run"),
        "{told}"
    );
    assert_eq!(msgs[4]["content"], "go on");

    // Verifying the new file follows the link back.
    let v = d
        .dsh(&["sessions", "verify", &id_of(&new)])
        .output()
        .unwrap();
    assert_eq!(v.status.code(), Some(0), "{}", stderr(&v));
}

#[test]
fn a_session_still_open_elsewhere_is_not_resumed() {
    let d = Dirs::new();
    let (mut child, old, _server) = running_session(&d);
    let server = ScriptedServer::start(vec![Turn::text("never asked").into()]);
    let out = scripted_exec(&d, &server.url, &["--resume", &id_of(&old)], "go on")
        .output()
        .unwrap();
    kill(&mut child);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("still open"), "{}", stderr(&out));
    assert_eq!(server.requests().len(), 0);
    // No new journal was started.
    assert_eq!(journals(&d.home), vec![old]);
}

#[test]
fn continue_takes_the_newest_session_of_this_workspace_and_chains_resumes() {
    let d = Dirs::new();
    let first = ScriptedServer::start(vec![Turn::text("one").into()]);
    let out = scripted_exec(&d, &first.url, &[], "first task")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let second = ScriptedServer::start(vec![Turn::text("two").into()]);
    let out = scripted_exec(&d, &second.url, &["--continue"], "second task")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let third = ScriptedServer::start(vec![Turn::text("three").into()]);
    let out = scripted_exec(&d, &third.url, &["--continue"], "third task")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // The third run saw both earlier turns, through two links.
    let msgs = third.requests()[0]["messages"].as_array().unwrap().clone();
    let texts: Vec<&str> = msgs
        .iter()
        .skip(1)
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        ["first task", "one", "second task", "two", "third task"]
    );
    assert_eq!(journals(&d.home).len(), 3);
}

#[test]
fn continue_with_nothing_to_continue_says_so() {
    let d = Dirs::new();
    let server = ScriptedServer::start(vec![]);
    let out = scripted_exec(&d, &server.url, &["--continue"], "x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("can be continued"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_journal_broken_in_the_middle_is_not_resumed_and_the_record_is_named() {
    let d = Dirs::new();
    let first = ScriptedServer::start(vec![Turn::text("answer").into()]);
    let out = scripted_exec(&d, &first.url, &[], "the task")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let old = journals(&d.home).pop().unwrap();
    let text = std::fs::read_to_string(&old).unwrap();
    std::fs::write(&old, text.replacen("the task", "another task", 1)).unwrap();

    let server = ScriptedServer::start(vec![Turn::text("never asked").into()]);
    let out = scripted_exec(&d, &server.url, &["--resume", &id_of(&old)], "go on")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("record 2 is broken"), "{err}");
    assert_eq!(server.requests().len(), 0);
}

#[test]
fn only_a_session_of_dsh_home_named_by_its_id_is_resumed() {
    let d = Dirs::new();
    let first = ScriptedServer::start(vec![Turn::text("answer").into()]);
    let out = scripted_exec(&d, &first.url, &[], "the task")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let old = journals(&d.home).pop().unwrap();
    let copy = d.outside.join("copy.jsonl");
    std::fs::copy(&old, &copy).unwrap();
    let server = ScriptedServer::start(vec![Turn::text("never asked").into()]);
    let out = scripted_exec(
        &d,
        &server.url,
        &["--resume", copy.to_str().unwrap()],
        "go on",
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not a session under"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server.requests().len(), 0);
}
