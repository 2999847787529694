//! `dsh exec` end to end: the real binary against scripted model servers speaking real
//! HTTP/SSE on 127.0.0.1. Only the model's *content* is scripted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::stderr;
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

    /// `dsh --workspace WS exec` with a clean environment: `PATH`, `DSH_HOME`,
    /// `DSH_CONFIG_HOME` and nothing else (no keys, no provider variables).
    fn bare(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsh"));
        cmd.arg("--workspace")
            .arg(&self.ws)
            .arg("exec")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DSH_HOME", &self.home)
            .env("DSH_CONFIG_HOME", &self.cfg)
            .stdin(Stdio::null());
        cmd
    }

    /// `dsh exec` against the OpenAI-compatible server at `url`.
    fn openai(&self, url: &str, extra: &[&str]) -> Command {
        let mut cmd = self.bare();
        cmd.args([
            "--provider",
            "openai",
            "--base-url",
            url,
            "--model",
            "scripted",
        ])
        .args(extra)
        .env("OPENAI_API_KEY", "sk-test");
        cmd
    }

    fn exec(&self, url: &str, extra: &[&str], prompt: &str) -> Output {
        self.openai(url, extra).arg(prompt).output().unwrap()
    }

    /// `dsh exec` against the Anthropic server at `url`.
    fn anthropic(&self, url: &str, prompt: &str) -> Output {
        self.bare()
            .args([
                "--provider",
                "anthropic",
                "--base-url",
                url,
                "--model",
                "scripted",
            ])
            .env("ANTHROPIC_API_KEY", "sk-ant-test")
            .arg(prompt)
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
        t.records
            .into_iter()
            .map(|e| Value::Object(e.json))
            .collect()
    }
}

fn kinds(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect()
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
    assert_eq!(stop_reason(&records), "final_answer");
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
    assert_eq!(stop_reason(&e.journal()), "max_steps");
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
    assert_eq!(stop_reason(&records), "repeated_call");
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
    assert_eq!(stop_reason(&e.journal()), "token_budget");
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
    assert_eq!(stop_reason(&e.journal()), "model_error");
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

fn records_of(records: &[Value], kind: &str) -> Vec<Value> {
    records
        .iter()
        .filter(|r| r["kind"] == kind)
        .cloned()
        .collect()
}

fn stop_reason(records: &[Value]) -> String {
    let stops = records_of(records, "stop");
    assert_eq!(stops.len(), 1, "one stop record: {stops:?}");
    stops[0]["reason"].as_str().unwrap().to_owned()
}

#[test]
fn the_same_task_runs_against_the_anthropic_wire_format() {
    let e = Env::new();
    let server = ScriptedServer::start_anthropic(vec![
        Turn::tool_call("toolu_1", "grep", r#"{"pattern":"hello"}"#)
            .usage(120, 10)
            .into(),
        Turn::tool_call("toolu_2", "read_file", r#"{"path":"src/main.rs"}"#)
            .with_text("Reading it.")
            .usage(200, 12)
            .split_awkwardly()
            .into(),
        Turn::tool_call(
            "toolu_3",
            "edit_file",
            r#"{"path":"src/main.rs","old_string":"hello","new_string":"héllo wörld"}"#,
        )
        .usage(300, 20)
        .into(),
        Turn::text("Done: the greeting now says héllo wörld.")
            .usage(400, 15)
            .into(),
    ]);
    // The Anthropic base URL has no `/v1`: requests go to `{base_url}/v1/messages`.
    let out = e
        .bare()
        .args([
            "--provider",
            "anthropic",
            "--base-url",
            &server.url,
            "--model",
            "scripted",
        ])
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .arg("make the greeting fancier")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "Done: the greeting now says héllo wörld.\n"
    );
    let main = std::fs::read_to_string(e.ws.join("src/main.rs")).unwrap();
    assert!(main.contains("héllo wörld"), "{main}");

    let records = e.journal();
    assert_eq!(records[0]["provider"], "anthropic");
    assert_eq!(stop_reason(&records), "final_answer");
    let tokens: Vec<(u64, u64)> = records_of(&records, "llm_call")
        .iter()
        .map(|r| {
            assert_eq!(r["tokens_estimated"], false);
            (
                r["prompt_tokens"].as_u64().unwrap(),
                r["completion_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(tokens, [(120, 10), (200, 12), (300, 20), (400, 15)]);
    let results = records_of(&records, "tool_result");
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|r| r["ok"] == true), "{results:?}");

    let recorded = server.recorded();
    assert_eq!(recorded.len(), 4);
    for r in &recorded {
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(
            r.headers.get("x-api-key").map(String::as_str),
            Some("sk-ant-test")
        );
        assert!(r.headers.contains_key("anthropic-version"));
        assert!(!r.headers.contains_key("authorization"));
    }
    let first = &recorded[0].body;
    assert!(first["system"].is_string() || first["system"].is_array());
    let tools = first["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "edit_file" && t["input_schema"].is_object())
    );
    // The tool result answers its tool_use in the next user turn.
    let last = recorded[3].body["messages"].as_array().unwrap();
    let answered = last.iter().any(|m| {
        m["role"] == "user"
            && m["content"].as_array().is_some_and(|blocks| {
                blocks
                    .iter()
                    .any(|b| b["type"] == "tool_result" && b["tool_use_id"] == "toolu_3")
            })
    });
    assert!(answered, "{last:?}");
}

#[test]
fn a_429_with_retry_after_is_waited_out_and_the_run_succeeds() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![
        Reply::error(429, "Rate limit reached for requests").retry_after("1"),
        Reply::text("after the wait"),
    ]);
    let begun = Instant::now();
    let out = e.exec(&server.url, &[], "hi");
    let took = begun.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "after the wait\n");
    assert_eq!(server.requests().len(), 2);
    // Without the header the first backoff is 250–500 ms: the wait is the server's second.
    assert!(took >= Duration::from_millis(950), "{took:?}");
    assert_eq!(stop_reason(&e.journal()), "final_answer");
}

#[test]
fn a_storm_of_500s_ends_with_exit_1_and_says_what_to_check() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![
        Reply::error(500, "upstream overloaded"),
        Reply::error(500, "upstream overloaded"),
        Reply::error(500, "upstream overloaded"),
        Reply::error(500, "upstream overloaded"),
        Reply::text("never reached"),
    ]);
    let out = e.exec(&server.url, &[], "hi");
    assert_eq!(out.status.code(), Some(1));
    let msg = stderr(&out);
    assert!(msg.contains("500: upstream overloaded"), "{msg}");
    assert!(msg.contains("tried 4 times"), "{msg}");
    assert!(msg.contains(&server.url), "{msg}");
    assert_eq!(server.requests().len(), 4);
    assert_eq!(server.remaining(), 1);
    let records = e.journal();
    assert_eq!(stop_reason(&records), "model_error");
    assert_eq!(kinds(&records).last(), Some(&"session_end"));
}

#[test]
fn a_stream_cut_before_any_content_is_retried() {
    let e = Env::new();
    // Only the role chunk arrives, then the connection closes mid-body.
    let role = serde_json::json!({"id": "c", "object": "chat.completion.chunk", "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]})
    .to_string();
    let server = ScriptedServer::start(vec![
        Turn::raw(vec![role]).cut_midway().into(),
        Reply::text("second try"),
    ]);
    let out = e.exec(&server.url, &[], "hi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "second try\n");
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_stream_cut_after_content_ends_with_exit_1() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![
        Turn::text("This answer is long enough to be cut off in the middle of it.")
            .cut_midway()
            .into(),
        Reply::text("a retry would have shown the text twice"),
    ]);
    let out = e.exec(&server.url, &[], "hi");
    assert_eq!(out.status.code(), Some(1));
    let msg = stderr(&out);
    assert!(msg.contains("stream broke off"), "{msg}");
    assert_eq!(server.requests().len(), 1, "not retried");
    assert_eq!(stop_reason(&e.journal()), "model_error");
}

#[test]
fn a_404_gives_the_servers_message_and_the_model_and_url_to_check() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![Reply::error(
        404,
        "The model `scripted` does not exist or you do not have access to it.",
    )]);
    let out = e.exec(&server.url, &[], "hi");
    assert_eq!(out.status.code(), Some(1));
    let msg = stderr(&out);
    assert!(msg.contains("The model `scripted` does not exist"), "{msg}");
    assert!(msg.contains("check the model name (scripted)"), "{msg}");
    assert!(
        msg.contains(&format!("{}/chat/completions", server.url)),
        "{msg}"
    );
    assert_eq!(server.requests().len(), 1, "a 404 is not retried");
}

#[test]
fn sigint_while_the_model_streams_stops_with_130_and_a_closed_journal() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![
        Turn::text("an answer that stalls after its first event")
            .stall_after(1, Duration::from_secs(60))
            .into(),
    ]);
    let child = e
        .openai(&server.url, &[])
        .arg("take your time")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let waiting = Instant::now();
    while server.requests().is_empty() {
        assert!(
            waiting.elapsed() < Duration::from_secs(30),
            "no request arrived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The request is in flight. Whether the stalled stream's first event has arrived yet
    // does not matter: dsh's handlers are installed before the request is sent, and an
    // interrupt at any point of the stream ends the run the same way.
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let sent = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));

    let records = e.journal();
    let k = kinds(&records);
    assert_eq!(&k[k.len() - 2..], ["stop", "session_end"], "{k:?}");
    assert_eq!(records[k.len() - 2]["reason"], "interrupted");
    assert_eq!(records[k.len() - 1]["reason"], "interrupted");
    assert!(records_of(&records, "llm_call").is_empty());
}

#[test]
fn json_with_a_tool_call_shows_every_record_kind_in_order() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "read_file", r#"{"path":"src/lib.rs"}"#)
            .usage(50, 5)
            .into(),
        Turn::text("it says hello").usage(70, 7).into(),
    ]);
    let out = e.exec(&server.url, &["--json"], "what does lib say?");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        e.journal(),
        "stdout is the journal, record for record"
    );
    let seqs: Vec<u64> = lines.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    // Session assembly opens the journal (it may add records of its own before the task);
    // from the user's message on, the records are the loop's, in this order.
    assert_eq!(lines[0]["kind"], "session_start");
    let start = kinds(&lines)
        .iter()
        .position(|k| *k == "user_message")
        .unwrap();
    let run = &lines[start..];
    assert_eq!(
        kinds(run),
        [
            "user_message",
            "llm_call",
            "assistant_message",
            "tool_call",
            "tool_started",
            "tool_result",
            "llm_call",
            "assistant_message",
            "stop",
            "session_end",
        ]
    );
    assert_eq!(run[0]["text"], "what does lib say?");
    assert_eq!(run[1]["prompt_tokens"], 50);
    assert_eq!(run[1]["completion_tokens"], 5);
    assert_eq!(run[1]["tokens_estimated"], false);
    assert_eq!(run[6]["prompt_tokens"], 70);
    assert_eq!(run[6]["completion_tokens"], 7);
    assert_eq!(run[2]["tool_calls"][0]["id"], "c1");
    assert_eq!(run[3]["call_id"], run[5]["call_id"]);
    assert_eq!(run[5]["ok"], true);
    assert_eq!(run[7]["content"], "it says hello");
    assert_eq!(run[8]["reason"], "final_answer");
    assert_eq!(run[9]["reason"], "finished");
    // Both closing records carry the session's totals (DESIGN §6).
    for end in &run[8..] {
        assert_eq!(end["steps"], 2, "{end}");
        assert_eq!(end["prompt_tokens"], 120, "{end}");
        assert_eq!(end["completion_tokens"], 12, "{end}");
        assert!(end["cost_usd"].is_null(), "{end}");
    }
}

#[test]
fn a_dash_reads_the_prompt_from_stdin() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![Reply::text("read from stdin")]);
    let prompt = "first line of the task\nsecond line: fix the greeting\n";
    let mut child = e
        .openai(&server.url, &[])
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(prompt.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "read from stdin\n");
    let messages = server.requests()[0]["messages"].clone();
    let user = messages
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone();
    assert_eq!(user["content"], prompt);
    assert_eq!(records_of(&e.journal(), "user_message")[0]["text"], prompt);
}

#[test]
fn an_empty_prompt_is_a_usage_error() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![Reply::text("unreached")]);
    for prompt in ["", "  \n\t", "-"] {
        // `-` reads stdin, which is empty here.
        let out = e.exec(&server.url, &[], prompt);
        assert_eq!(out.status.code(), Some(2), "{prompt:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("the prompt is empty"),
            "{}",
            stderr(&out)
        );
    }
    assert!(server.requests().is_empty());
    assert!(
        !e.home.join("sessions").exists()
            || e.home.join("sessions").read_dir().unwrap().next().is_none()
    );
}

#[test]
fn with_nothing_configured_and_no_ollama_it_says_how_to_configure_a_model() {
    let e = Env::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = e
        .bare()
        .env("OLLAMA_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
        .arg("hi")
        .output()
        .unwrap();
    // Nothing configured and no local model: a set-up problem, exit 2 (issue 24).
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let msg = stderr(&out);
    assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
    assert!(
        msg.contains("no model is configured, no API key is set"),
        "{msg}"
    );
    for how in [
        "OPENAI_API_KEY, ANTHROPIC_API_KEY or DEEPSEEK_API_KEY",
        "--provider openai|anthropic|deepseek|ollama",
        "[model]",
        "ollama serve",
    ] {
        assert!(msg.contains(how), "{how} missing: {msg}");
    }
    assert_eq!(records_of(&e.journal(), "stop")[0]["reason"], "model_error");
}

#[test]
fn anthropic_overload_is_retried_and_a_slow_stream_still_completes() {
    let e = Env::new();
    let overloaded = serde_json::json!({"type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"}})
    .to_string();
    let server = ScriptedServer::start_anthropic(vec![
        // A 529 with Retry-After: 0, then an `error` event mid-stream before any content.
        Reply::error(529, "Overloaded").retry_after("0"),
        Turn::raw(vec![overloaded]).without_done().into(),
        Turn::text("slow but whole")
            .deltas(2)
            .slow(Duration::from_millis(30))
            .usage(10, 3)
            .into(),
    ]);
    let out = e.anthropic(&server.url, "hi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "slow but whole\n");
    assert_eq!(server.requests().len(), 3);
    let records = e.journal();
    let llm = records_of(&records, "llm_call");
    assert_eq!(llm.len(), 1);
    assert_eq!(
        (&llm[0]["prompt_tokens"], &llm[0]["completion_tokens"]),
        (&Value::from(10), &Value::from(3))
    );
}

#[test]
fn anthropic_refusals_and_bad_tool_input_are_reported_like_openai_ones() {
    let e = Env::new();
    let server = ScriptedServer::start_anthropic(vec![
        Turn::tool_call("toolu_bad", "read_file", r#"{"path": "src/lib.rs""#).into(),
        Turn::tool_call("toolu_good", "read_file", r#"{"path": "src/lib.rs"}"#).into(),
        Reply::error(401, "invalid x-api-key"),
    ]);
    let out = e.anthropic(&server.url, "read lib");
    assert_eq!(out.status.code(), Some(1));
    let msg = stderr(&out);
    assert!(msg.contains("401: invalid x-api-key"), "{msg}");
    assert!(
        msg.contains("check the API key in ANTHROPIC_API_KEY"),
        "{msg}"
    );
    let records = e.journal();
    let results = records_of(&records, "tool_result");
    assert_eq!(results[0]["failure_kind"], "invalid_args");
    assert_eq!(results[1]["ok"], true);
    assert_eq!(stop_reason(&records), "model_error");
    // The model saw the failure as the tool_result answering its tool_use.
    let second = &server.requests()[1];
    let answer = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == "toolu_bad")
        .unwrap();
    assert!(answer.to_string().contains("not valid JSON"), "{answer}");
}

#[test]
fn a_hundred_call_task_finishes_with_default_settings() {
    // Issue 9: no 60-unit window, no 50-step limit, no token budget by default. Every
    // request carries the whole history, so the task is still in the last one.
    let e = Env::new();
    let mut script: Vec<Reply> = (0..100)
        .map(|i| {
            let (name, args) = if i % 2 == 0 {
                ("read_file", r#"{"path":"src/lib.rs"}"#)
            } else {
                ("list_dir", r#"{"path":"src"}"#)
            };
            Turn::tool_call(&format!("c{i}"), name, args)
                .usage(5_000, 20)
                .into()
        })
        .collect();
    script.push(Turn::text("all hundred done").into());
    let server = ScriptedServer::start(script);
    let out = e.exec(&server.url, &[], "the first task, to be kept");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "all hundred done"
    );
    let records = e.journal();
    assert_eq!(records_of(&records, "tool_result").len(), 100);
    let requests = server.requests();
    assert_eq!(requests.len(), 101);
    let last = requests.last().unwrap().to_string();
    assert!(last.contains("the first task, to be kept"));
    assert!(
        last.contains("\"c0\""),
        "the first call is still in the history"
    );
}

#[test]
fn a_silent_server_is_said_as_such_each_retry_on_stderr_and_the_config_sets_the_limits() {
    let e = Env::new();
    std::fs::write(
        e.cfg.join("config.toml"),
        "[model]\nidle_timeout_s = 1\nmax_retries = 1\n",
    )
    .unwrap();
    let server = ScriptedServer::start(vec![Reply::Silent, Reply::Silent, Reply::text("x")]);
    let out = e.exec(&server.url, &[], "hi");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let msg = stderr(&out);
    assert!(
        msg.contains("connected, but no response within 1 s (tried 2 times)"),
        "{msg}"
    );
    // The retry was told as it happened, once: max_retries = 1.
    assert_eq!(msg.matches("attempt 2 follows").count(), 1, "{msg}");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(stop_reason(&e.journal()), "model_error");
}

#[test]
fn a_json_reply_to_the_stream_runs_the_task_as_if_streamed() {
    let e = Env::new();
    let server = ScriptedServer::start(vec![Reply::status_body(
        200,
        &serde_json::json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "answered whole"}}]})
        .to_string(),
    )]);
    let out = e.exec(&server.url, &[], "hi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "answered whole\n");
}

/// Cost from configured prices in every `llm_call` and in the totals; `null` without prices.
#[test]
fn cost_comes_from_configured_prices_and_is_null_without_them() {
    let e = Env::new();
    std::fs::write(
        e.cfg.join("config.toml"),
        "[model]\nprice = { input = 2.0, cached_input = 0.5, output = 8.0 }\n",
    )
    .unwrap();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "list_dir", r#"{"path":"."}"#)
            .usage(1_000, 100)
            .into(),
        Turn::text("done").usage(2_000, 50).into(),
    ]);
    let out = e.exec(&server.url, &[], "look");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let records = e.journal();
    let costs: Vec<f64> = records_of(&records, "llm_call")
        .iter()
        .map(|r| r["cost_usd"].as_f64().unwrap())
        .collect();
    // 1000 × 2 + 100 × 8 per million; 2000 × 2 + 50 × 8 per million.
    let want = [0.0028, 0.0044];
    for (got, want) in costs.iter().zip(want) {
        assert!((got - want).abs() < 1e-12, "{costs:?}");
    }
    for kind in ["stop", "session_end"] {
        let total = records_of(&records, kind)[0]["cost_usd"].as_f64().unwrap();
        assert!((total - 0.0072).abs() < 1e-12, "{kind}: {total}");
    }

    // The model `scripted` has no preset price and none is configured: unknown, not zero.
    let e = Env::new();
    let server = ScriptedServer::start(vec![Turn::text("done").usage(10, 1).into()]);
    let out = e.exec(&server.url, &[], "look");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let records = e.journal();
    assert!(records_of(&records, "llm_call")[0]["cost_usd"].is_null());
    assert!(records_of(&records, "session_end")[0]["cost_usd"].is_null());
}

#[test]
fn the_cost_budget_stops_the_run() {
    let e = Env::new();
    std::fs::write(
        e.cfg.join("config.toml"),
        "[model]\nprice = { input = 1000.0, output = 1000.0 }\n[limits]\nmax_cost_usd = 0.5\n",
    )
    .unwrap();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "list_dir", r#"{"path":"."}"#)
            .usage(1_000, 0)
            .into(),
        Reply::text("never asked"),
    ]);
    let out = e.exec(&server.url, &[], "look");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("cost budget"), "{}", stderr(&out));
    assert_eq!(stop_reason(&e.journal()), "cost_budget");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_cost_budget_without_prices_is_said_to_be_unenforced() {
    let e = Env::new();
    std::fs::write(e.cfg.join("config.toml"), "[limits]\nmax_cost_usd = 1.0\n").unwrap();
    let server = ScriptedServer::start(vec![Reply::text("fine")]);
    let out = e.exec(&server.url, &[], "hi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("max_cost_usd is set, but the prices of scripted are unknown"),
        "{}",
        stderr(&out)
    );
}

/// A 300-call task with default settings: it finishes, the model sees every result, and each
/// request is the previous one plus new messages — the same system prompt, the same tools in
/// the same order — so a provider's prompt cache serves every earlier token (issue 10).
#[test]
fn a_300_call_task_finishes_and_every_request_only_appends() {
    let e = Env::new();
    let n = 300;
    let mut script: Vec<Reply> = (0..n)
        .map(|i| {
            // Alternating, so the repeated-call stop line never fires.
            let (name, args) = if i % 2 == 0 {
                ("read_file", r#"{"path":"src/main.rs"}"#)
            } else {
                ("list_dir", r#"{"path":"src"}"#)
            };
            Turn::tool_call(&format!("c{i}"), name, args).into()
        })
        .collect();
    script.push(Reply::text("all done"));
    let server = ScriptedServer::start(script);
    let out = e.exec(&server.url, &[], "walk the tree 300 times");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "all done\n");

    let requests = server.requests();
    assert_eq!(requests.len(), n + 1);
    for (i, pair) in requests.windows(2).enumerate() {
        let (a, b) = (&pair[0], &pair[1]);
        assert_eq!(a["tools"], b["tools"], "tools changed at request {}", i + 1);
        let (ma, mb) = (
            a["messages"].as_array().unwrap(),
            b["messages"].as_array().unwrap(),
        );
        assert!(
            mb.len() > ma.len() && mb[..ma.len()] == ma[..],
            "request {} is not request {} plus new messages",
            i + 2,
            i + 1
        );
        // The result of the call the model just made is the newest message it sees.
        let last = mb.last().unwrap();
        assert_eq!(last["role"], "tool");
        assert_eq!(last["tool_call_id"], format!("c{i}"));
    }
    let results = records_of(&e.journal(), "tool_result");
    assert_eq!(results.len(), n);
}

/// Big files read in the workspace, alternating so the repeated-call stop line never fires.
fn big_reads(e: &Env, n: usize) -> Vec<Reply> {
    for name in ["big_a.txt", "big_b.txt"] {
        let text: String = (0..400).map(|i| format!("{name} line {i:04}\n")).collect();
        std::fs::write(e.ws.join(name), text).unwrap();
    }
    (0..n)
        .map(|i| {
            let name = if i % 2 == 0 { "big_a.txt" } else { "big_b.txt" };
            Turn::tool_call(
                &format!("r{i}"),
                "read_file",
                &format!(r#"{{"path":"{name}"}}"#),
            )
            .into()
        })
        .collect()
}

/// With a small configured window, old big results are cut (head, tail, and where to page
/// the rest back) before a request would pass `max_fraction`; the last steps stay whole.
#[test]
fn a_small_window_prunes_old_results_and_the_run_goes_on() {
    let e = Env::new();
    std::fs::write(
        e.cfg.join("config.toml"),
        "[model]\ncontext_window = 12000\n[context]\nmax_fraction = 0.8\n",
    )
    .unwrap();
    let mut script = big_reads(&e, 8);
    script.push(Reply::text("read them all"));
    let server = ScriptedServer::start(script);
    let out = e.exec(&server.url, &[], "read the big files");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let requests = server.requests();
    let last = requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let tools: Vec<&Value> = last.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 8);
    let pruned = tools
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .unwrap()
                .contains("pruned to make room")
        })
        .count();
    assert!(pruned >= 1, "nothing was pruned");
    // The last three steps' results are whole; a cut one says how to page it back.
    for m in &tools[5..] {
        assert!(!m["content"].as_str().unwrap().contains("pruned"), "{m}");
    }
    let first = tools[0]["content"].as_str().unwrap();
    assert!(
        first.contains("read_output") && first.contains("out-r0-pruned"),
        "{first}"
    );
    // The first user message is still there verbatim, and each call keeps its result.
    assert_eq!(last[1]["content"], "read the big files");
    let stop = records_of(&e.journal(), "stop");
    assert_eq!(stop[0]["reason"], "final_answer");
}

/// A window nobody knows: no room is made ahead; the provider's "context too long" is
/// answered by pruning and one retry of that request.
#[test]
fn context_too_long_is_answered_by_making_room_and_one_retry() {
    let e = Env::new();
    let mut script = big_reads(&e, 5);
    script.push(Reply::error(
        400,
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
    ));
    script.push(Reply::text("fits now"));
    let server = ScriptedServer::start(script);
    let out = e.exec(&server.url, &[], "read the big files");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "fits now\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 7);
    let (refused, retried) = (&requests[5], &requests[6]);
    let text = |r: &Value| r["messages"].to_string();
    assert!(!text(refused).contains("pruned to make room"));
    assert!(text(retried).contains("pruned to make room"));
    assert!(text(retried).len() < text(refused).len());
}

/// Three turns (`--continue` twice) under a tiny window: pruning cuts the oldest results but
/// cannot make enough room, so the oldest turn is compacted — a summary request of its own first,
/// then the conversation with the first user message verbatim, the summary in place of the
/// old work, and still valid for the wire format (the scripted server refuses an orphan
/// tool result as the real APIs do); `context_compacted` is journaled. Both wire formats.
#[test]
fn a_tiny_window_compacts_the_oldest_turn_in_both_wire_formats() {
    for anthropic in [false, true] {
        let e = Env::new();
        std::fs::write(
            e.cfg.join("config.toml"),
            "[permissions]\nallow = [\"edit_file(src/**)\"]\n[model]\ncontext_window = 3000\n",
        )
        .unwrap();
        let reads = big_reads(&e, 4);
        let start = |script: Vec<Reply>| {
            if anthropic {
                ScriptedServer::start_anthropic(script)
            } else {
                ScriptedServer::start(script)
            }
        };
        let run = |url: &str, extra: &[&str], prompt: &str| {
            let (provider, key) = if anthropic {
                ("anthropic", "ANTHROPIC_API_KEY")
            } else {
                ("openai", "OPENAI_API_KEY")
            };
            let out = e
                .bare()
                .args([
                    "--provider",
                    provider,
                    "--base-url",
                    url,
                    "--model",
                    "scripted",
                ])
                .args(extra)
                .env(key, "k")
                .arg(prompt)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            out
        };
        let mut first = reads;
        first.push(Reply::text("one"));
        let s1 = start(first);
        run(&s1.url, &[], "first task");
        let s2 = start(vec![Reply::text("two")]);
        run(&s2.url, &["--continue"], "second task");
        let s3 = start(vec![Reply::text("S-U-M-M-A-R-Y"), Reply::text("three")]);
        let out = run(&s3.url, &["--continue"], "third task");
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "three\n");

        let requests = s3.requests();
        assert_eq!(requests.len(), 2, "a summary request, then the turn's");
        let summary_req = requests[0].to_string();
        // Pruning ran first (the oldest results were cut), and was not enough.
        assert!(summary_req.contains("pruned to make room"), "{summary_req}");
        assert!(
            summary_req.contains("You compress the earlier part"),
            "{summary_req}"
        );
        assert!(summary_req.contains("first task") && summary_req.contains("big_a.txt"));
        let turn = requests[1]["messages"].to_string();
        assert!(
            turn.contains("first task"),
            "the first user message is kept: {turn}"
        );
        assert!(turn.contains("S-U-M-M-A-R-Y"), "{turn}");
        assert!(
            !turn.contains("big_a.txt line 0000"),
            "the old result is gone: {turn}"
        );
        assert!(turn.contains("second task") && turn.contains("third task"));

        // The newest journal has the compaction and the summary's own llm_call.
        let dir = e.home.join("sessions");
        let newest = std::fs::read_dir(&dir)
            .unwrap()
            .map(|d| d.unwrap().path())
            .find(|p| std::fs::read_to_string(p).unwrap().contains("third task"))
            .unwrap();
        let records: Vec<Value> = dsh_core::journal::read_journal(&newest)
            .unwrap()
            .records
            .into_iter()
            .map(|r| Value::Object(r.json))
            .collect();
        let compacted = records_of(&records, "context_compacted");
        assert_eq!(compacted.len(), 1, "{anthropic}");
        assert_eq!(compacted[0]["turns"], 1);
        assert_eq!(compacted[0]["summary"], "S-U-M-M-A-R-Y");
        assert!(compacted[0]["tokens_after"].as_u64() < compacted[0]["tokens_before"].as_u64());
        assert_eq!(records_of(&records, "llm_call").len(), 2);

        // Resumed again, the conversation is rebuilt with the compaction applied: the old
        // result is in no request (compacting once more, or not).
        let s4 = start(vec![Reply::text("S2"), Reply::text("four")]);
        run(&s4.url, &["--continue"], "fourth task");
        for r in s4.requests() {
            let text = r.to_string();
            assert!(!text.contains("big_a.txt line 0000"), "{text}");
            assert!(text.contains("first task"), "{text}");
        }
    }
}
