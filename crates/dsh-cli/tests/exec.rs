//! `dsh exec` end to end: the real binary against scripted model servers speaking real
//! HTTP/SSE on 127.0.0.1. Only the model's *content* is scripted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use serde_json::Value;

struct Env {
    _root: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    cfg: PathBuf,
}

impl Env {
    fn new() -> Env {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(
            ws.join("src/main.rs"),
            "fn main() {\n    println!(\"hello\");\n}\n",
        )
        .unwrap();
        std::fs::write(
            ws.join("src/lib.rs"),
            "pub fn hello() -> &'static str { \"hello\" }\n",
        )
        .unwrap();
        let cfg = root.path().join("cfg");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(
            cfg.join("config.toml"),
            "[permissions]\nallow = [\"edit_file(src/**)\"]\n",
        )
        .unwrap();
        Env {
            ws: ws.canonicalize().unwrap(),
            home: root.path().join("home"),
            cfg,
            _root: root,
        }
    }

    fn exec(&self, url: &str, extra: &[&str], prompt: &str) -> Output {
        Command::new(env!("CARGO_BIN_EXE_dsh"))
            .arg("--workspace")
            .arg(&self.ws)
            .arg("exec")
            .args([
                "--provider",
                "openai",
                "--base-url",
                url,
                "--model",
                "scripted",
            ])
            .args(extra)
            .arg(prompt)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DSH_HOME", &self.home)
            .env("DSH_CONFIG_HOME", &self.cfg)
            .env("OPENAI_API_KEY", "sk-test")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn journal(&self) -> Vec<Value> {
        let dir = self.home.join("sessions");
        let path = std::fs::read_dir(dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let t = dsh_core::journal::read_journal(&path).unwrap();
        assert!(t.torn_tail.is_none());
        t.records.into_iter().map(Value::Object).collect()
    }
}

fn kinds(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_multi_step_task_reads_greps_edits_and_answers() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "grep", r#"{"pattern":"hello"}"#)
            .usage(120, 10)
            .into(),
        Turn::tool_call("c2", "read_file", r#"{"path":"src/main.rs"}"#)
            .with_text("Reading it.")
            .usage(200, 12)
            .split_awkwardly()
            .into(),
        Turn::tool_call(
            "c3",
            "edit_file",
            r#"{"path":"src/main.rs","old_string":"hello","new_string":"héllo wörld"}"#,
        )
        .usage(300, 20)
        .into(),
        Turn::text("Done: the greeting now says héllo wörld.")
            .usage(400, 15)
            .into(),
    ]);
    let out = e.exec(&server.url, &[], "make the greeting fancier");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "Done: the greeting now says héllo wörld.\n"
    );
    let main = std::fs::read_to_string(e.ws.join("src/main.rs")).unwrap();
    assert!(main.contains("héllo wörld"), "{main}");

    let records = e.journal();
    let k = kinds(&records);
    assert_eq!(k.first(), Some(&"session_start"));
    assert_eq!(k.last(), Some(&"session_end"));
    for kind in [
        "user_message",
        "llm_call",
        "assistant_message",
        "tool_call",
        "tool_started",
        "tool_result",
        "stop",
    ] {
        assert!(k.contains(&kind), "{kind} missing: {k:?}");
    }
    let llm: Vec<&Value> = records.iter().filter(|r| r["kind"] == "llm_call").collect();
    assert_eq!(llm.len(), 4);
    let tokens: Vec<(u64, u64)> = llm
        .iter()
        .map(|r| {
            (
                r["prompt_tokens"].as_u64().unwrap(),
                r["completion_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(tokens, [(120, 10), (200, 12), (300, 20), (400, 15)]);
    assert_eq!(llm[0]["has_tool_calls"], true);
    assert_eq!(llm[3]["has_tool_calls"], false);
    let results: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "tool_result")
        .collect();
    assert!(results.iter().all(|r| r["ok"] == true), "{results:?}");
    let stop = records.iter().find(|r| r["kind"] == "stop").unwrap();
    assert_eq!(stop["reason"], "final_answer");
    let start = &records[0];
    assert_eq!(start["provider"], "openai");
    assert_eq!(start["model"], "scripted");

    // What the model was sent: the tools with their schemas, the tool results as tool
    // messages, and the system prompt first.
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let names: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for n in [
        "read_file",
        "write_file",
        "edit_file",
        "grep",
        "find_files",
        "list_dir",
        "read_output",
    ] {
        assert!(names.contains(&n), "{n} not offered: {names:?}");
    }
    let last = requests[3]["messages"].as_array().unwrap();
    assert_eq!(last[0]["role"], "system");
    assert!(
        last.iter()
            .any(|m| m["role"] == "tool" && m["tool_call_id"] == "c3")
    );
}

#[test]
fn the_first_request_stays_small() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![Reply::text("ok")]);
    let out = e.exec(&server.url, &[], "hi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let body = serde_json::to_string(&server.requests()[0]).unwrap();
    assert!(
        body.len() <= 10 * 1024,
        "first request is {} bytes",
        body.len()
    );
}

#[test]
fn json_streams_journal_records_on_stdout() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![Reply::text("fine")]);
    let out = e.exec(&server.url, &["--json"], "hi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        e.journal(),
        "stdout carries exactly the journal's records"
    );
}

#[test]
fn max_steps_stops_with_exit_3() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("a", "list_dir", r#"{"path":"."}"#).into(),
        Turn::tool_call("b", "list_dir", r#"{"path":"src"}"#).into(),
        Reply::text("never asked"),
    ]);
    let out = e.exec(&server.url, &["--max-steps", "2"], "look around");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let stop = e
        .journal()
        .into_iter()
        .find(|r| r["kind"] == "stop")
        .unwrap();
    assert_eq!(stop["reason"], "max_steps");
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn the_same_call_repeated_stops_the_loop() {
    let e = Env::new();
    let same = || -> Reply { Turn::tool_call("x", "read_file", r#"{"path":"src/lib.rs"}"#).into() };
    let server = ScriptedServer::start(vec![same(), same(), same(), Reply::text("unreached")]);
    let out = e.exec(&server.url, &[], "read it");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let records = e.journal();
    let stop = records.iter().find(|r| r["kind"] == "stop").unwrap();
    assert_eq!(stop["reason"], "repeated_call");
    // The third identical request is not executed.
    assert_eq!(
        records.iter().filter(|r| r["kind"] == "tool_call").count(),
        2
    );
}

#[test]
fn the_token_budget_stops_the_loop() {
    let e = Env::new();
    std::fs::write(e.cfg.join("config.toml"), "[limits]\nmax_tokens = 1000\n").unwrap();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("a", "list_dir", r#"{"path":"."}"#)
            .usage(900, 200)
            .into(),
        Reply::text("unreached"),
    ]);
    let out = e.exec(&server.url, &[], "look");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let stop = e
        .journal()
        .into_iter()
        .find(|r| r["kind"] == "stop")
        .unwrap();
    assert_eq!(stop["reason"], "token_budget");
}

#[test]
fn arguments_that_are_not_json_come_back_as_invalid_args_the_model_can_fix() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("bad", "read_file", r#"{"path": "src/lib.rs""#).into(),
        Turn::tool_call("good", "read_file", r#"{"path": "src/lib.rs"}"#).into(),
        Reply::text("read it"),
    ]);
    let out = e.exec(&server.url, &[], "read lib");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let records = e.journal();
    let results: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "tool_result")
        .collect();
    assert_eq!(results[0]["failure_kind"], "invalid_args");
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    assert_eq!(results[1]["ok"], true);
    // The model saw the failure as the tool message answering its call.
    let second = &server.requests()[1];
    let tool_msg = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
}

#[test]
fn a_server_refusal_ends_with_its_own_message_and_exit_1() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![Reply::error(
        401,
        "Incorrect API key provided: sk-test",
    )]);
    let out = e.exec(&server.url, &[], "hi");
    assert_eq!(out.status.code(), Some(1));
    let msg = stderr(&out);
    assert!(msg.contains("Incorrect API key provided"), "{msg}");
    assert!(msg.contains("OPENAI_API_KEY"), "{msg}");
    let stop = e
        .journal()
        .into_iter()
        .find(|r| r["kind"] == "stop")
        .unwrap();
    assert_eq!(stop["reason"], "model_error");
}

#[test]
fn an_unreachable_endpoint_says_how_to_point_dsh_at_a_model() {
    let e = Env::new();
    // A port that nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = e.exec(&format!("http://127.0.0.1:{port}/v1"), &[], "hi");
    assert_eq!(out.status.code(), Some(1));
    let msg = stderr(&out);
    assert!(msg.contains("cannot reach"), "{msg}");
}
