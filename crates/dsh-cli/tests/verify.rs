//! `dsh exec --verify` (issue 23): after a turn that changed files, the configured check
//! runs as a call of its own (`source: config`, judged like a model's call) and a failure
//! goes back to the model, at most `[verify] max_rounds` times. The real binary against a
//! scripted model server speaking real HTTP/SSE.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Dirs, journals, records, scripted_exec, stderr, stdout};
use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use serde_json::json;

fn write(path: &str, content: &str) -> Reply {
    Reply::Stream(Turn::tool_call(
        "w1",
        "write_file",
        &json!({"path": path, "content": content}).to_string(),
    ))
}

#[test]
fn a_failed_check_goes_back_to_the_model_until_it_passes() {
    let d = Dirs::new();
    d.write_user_config(
        "[permissions]\nallow = [\"write_file(a.txt)\"]\n\n[verify]\ncommand = \"grep -q fixed a.txt\"\nmax_rounds = 2\n",
    );
    let server = ScriptedServer::start(vec![
        write("a.txt", "broken\n"),
        Reply::text("done"),
        write("a.txt", "fixed\n"),
        Reply::text("fixed it"),
    ]);
    let out = scripted_exec(&d, &server.url, &["--verify"], "make a.txt")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(stdout(&out).trim(), "fixed it");
    assert!(
        err.contains("verify: failed; handing the failure to the model (round 1 of 2)"),
        "{err}"
    );
    assert!(err.contains("verify: passed"), "{err}");
    // The failure is the model's next prompt.
    let third = server.requests()[2]["messages"].to_string();
    assert!(
        third.contains("The verify command `grep -q fixed a.txt` failed (exit 1)"),
        "{third}"
    );
    // The check's calls are on record as the configuration's, not the person's.
    let recs = records(&journals(&d.home)[0]);
    let checks: Vec<_> = recs
        .iter()
        .filter(|r| r["kind"] == "tool_call" && r["name"] == "run_shell")
        .collect();
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(|r| r["source"] == "config"), "{checks:?}");
}

#[test]
fn without_verify_the_check_does_not_run() {
    let d = Dirs::new();
    d.write_user_config(
        "[permissions]\nallow = [\"write_file(a.txt)\"]\n\n[verify]\ncommand = \"grep -q fixed a.txt\"\n",
    );
    let server = ScriptedServer::start(vec![write("a.txt", "broken\n"), Reply::text("done")]);
    let out = scripted_exec(&d, &server.url, &[], "make a.txt")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("verify:"));
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_check_a_person_would_be_asked_for_does_not_run_headless() {
    let d = Dirs::new();
    d.write_user_config(
        "[permissions]\nallow = [\"write_file(a.txt)\"]\n\n[verify]\ncommand = \"frobnicate --all\"\n",
    );
    let server = ScriptedServer::start(vec![write("a.txt", "x\n"), Reply::text("done")]);
    let out = scripted_exec(&d, &server.url, &["--verify"], "make a.txt")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("verify: the command did not run"), "{err}");
    // Nothing was handed to the model.
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn verify_without_a_configured_command_is_a_usage_error() {
    let d = Dirs::new();
    let server = ScriptedServer::start(vec![Reply::text("never asked")]);
    let out = scripted_exec(&d, &server.url, &["--verify"], "go")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no [verify] command is configured"));
    assert!(server.requests().is_empty());
}
