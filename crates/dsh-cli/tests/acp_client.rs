//! `dsh acp` driven by an independent client: the official TypeScript SDK
//! (`@agentclientprotocol/sdk`, pinned; `scripts/acp/install.sh`), through the scenario driver
//! `scripts/acp/client.mjs`, against the scripted model server (SPEC A7, A10; DESIGN §4).
//! `scripts/acp/run.sh` installs the SDK and sets `DSH_ACP_CLIENT`; without it every case
//! says it was skipped (so `cargo test --workspace` stays green without node), and
//! `DSH_ACP_REQUIRED=1` (the script, CI) makes that a failure. The driver checks every
//! message dsh sends against the SDK's own schema: a `schema_error` fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::{Dirs, journals, records};
use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use serde_json::{Value, json};

/// The driver and node, or `None` (skipped) when the suite's script did not set them.
fn driver() -> Option<(String, String)> {
    match (
        std::env::var("DSH_ACP_NODE"),
        std::env::var("DSH_ACP_CLIENT"),
    ) {
        (Ok(node), Ok(client)) => Some((node, client)),
        _ if std::env::var_os("DSH_ACP_REQUIRED").is_some() => {
            panic!("DSH_ACP_CLIENT is not set: run scripts/acp/run.sh")
        }
        _ => {
            eprintln!("skipped: DSH_ACP_CLIENT is not set; run scripts/acp/run.sh");
            None
        }
    }
}

fn mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dsh-mcp/tests/servers/mini.py")
}

/// Runs the driver's `steps` against `dsh acp` pointed at the scripted model at `url`: the
/// transcript, one event a line. The driver must finish cleanly and dsh must send nothing
/// its schema rejects.
fn run(d: &Dirs, (node, client): &(String, String), url: &str, steps: Value) -> Vec<Value> {
    let scenario = d.root().join(format!(
        "scenario-{}.json",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::write(&scenario, json!({ "steps": steps }).to_string()).unwrap();
    let out = Command::new(node)
        .arg(client)
        .arg(&scenario)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_dsh"))
        .args([
            "--provider",
            "openai",
            "--base-url",
            url,
            "--model",
            "scripted",
            "acp",
        ])
        .env("DSH_HOME", &d.home)
        .env("DSH_CONFIG_HOME", &d.cfg)
        .env("HOME", &d.user_home)
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(
        out.status.code(),
        Some(0),
        "driver failed: {stderr}\n{events:#?}"
    );
    let bad: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "schema_error" || e["event"] == "bad_line")
        .collect();
    assert!(
        bad.is_empty(),
        "dsh sent what the SDK rejects: {bad:#?}\n{stderr}"
    );
    events
}

/// The transcript cut into steps: the events up to and including each request step's
/// response (or error).
fn by_step(events: &[Value]) -> Vec<Vec<Value>> {
    let mut out = vec![Vec::new()];
    for e in events {
        out.last_mut().unwrap().push(e.clone());
        if (e["event"] == "response" || e["event"] == "error") && e["op"] != "raw" {
            out.push(Vec::new());
        }
    }
    out
}

fn updates<'a>(step: &'a [Value], kind: &str) -> Vec<&'a Value> {
    step.iter()
        .filter(|e| e["event"] == "update" && e["params"]["update"]["sessionUpdate"] == kind)
        .map(|e| &e["params"]["update"])
        .collect()
}

fn said(step: &[Value]) -> String {
    updates(step, "agent_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

fn answer<'a>(step: &'a [Value], op: &str) -> &'a Value {
    step.iter()
        .rev()
        .find(|e| (e["event"] == "response" || e["event"] == "error") && e["op"] == op)
        .unwrap_or_else(|| panic!("no answer to {op} in {step:#?}"))
}

fn stop_reason(step: &[Value]) -> &str {
    answer(step, "prompt")["result"]["stopReason"]
        .as_str()
        .unwrap_or_else(|| panic!("no stop reason: {step:#?}"))
}

fn permissions(step: &[Value]) -> Vec<&Value> {
    step.iter().filter(|e| e["event"] == "permission").collect()
}

/// The last `tool_call_update` of `step` that has a status.
fn finished(step: &[Value]) -> &Value {
    updates(step, "tool_call_update")
        .into_iter()
        .rev()
        .find(|u| u["status"] == "completed" || u["status"] == "failed")
        .unwrap_or_else(|| panic!("no finished call: {step:#?}"))
}

fn tool(id: &str, name: &str, args: Value) -> Reply {
    Reply::Stream(Turn::tool_call(id, name, &args.to_string()))
}

fn text(t: &str) -> Reply {
    Reply::Stream(Turn::text(t).deltas(4))
}

fn prompt(text: &str, answers: &[&str]) -> Value {
    json!({"op": "prompt", "text": text, "answers": answers})
}

#[test]
fn an_editor_drives_a_session_through_every_gate_and_loads_it_again() {
    let Some(driver) = driver() else {
        return;
    };
    let d = Dirs::new();
    // A command the cancel step runs, allowed so it starts without asking.
    d.write_user_config("[permissions]\nallow = [\"run_shell(sleep *)\"]\n");
    std::fs::write(d.ws.join("notes.txt"), "hello\n").unwrap();
    std::fs::write(d.outside.join("secret.txt"), "the secret\n").unwrap();
    let secret = d.outside.join("secret.txt").display().to_string();
    let model = ScriptedServer::start(vec![
        tool("c1", "read_file", json!({"path": "notes.txt"})),
        text("The notes say hello."),
        tool(
            "c2",
            "edit_file",
            json!({"path": "notes.txt", "old_string": "hello", "new_string": "goodbye"}),
        ),
        text("Edited."),
        tool(
            "c3",
            "edit_file",
            json!({"path": "notes.txt", "old_string": "goodbye", "new_string": "farewell"}),
        ),
        text("Left as it is."),
        tool(
            "c4",
            "write_file",
            json!({"path": "new.txt", "content": "x\n"}),
        ),
        text("Wrote it."),
        tool("c5", "read_file", json!({"path": secret})),
        text("Could not read it."),
        tool("c6", "run_shell", json!({"command": "sleep 30"})),
        tool(
            "c7",
            "edit_file",
            json!({"path": "notes.txt", "old_string": "goodbye", "new_string": "read-only"}),
        ),
        text("Refused, as it should be."),
        tool("c8", "mcp__mini__echo", json!({"text": "hi"})),
        text("Echoed."),
        tool(
            "c9",
            "write_file",
            json!({"path": "never.txt", "content": "x\n"}),
        ),
        text("Still here."),
        text("Here again."),
    ]);
    let ws = d.ws.display().to_string();
    let mcp_servers = json!([{
        "name": "mini",
        "command": "/usr/bin/python3",
        "args": [mini().display().to_string()],
        "env": [{"name": "MINI_LOG", "value": d.root().join("mini.log").display().to_string()}],
    }]);
    let events = run(
        &d,
        &driver,
        &model.url,
        json!([
            {"op": "initialize"},
            {"op": "new_session", "cwd": ws, "mcpServers": mcp_servers},
            prompt("What do the notes say?", &[]),
            prompt("Say goodbye instead.", &["allow_once"]),
            prompt("Now farewell.", &["reject_once"]),
            prompt("Write new.txt.", &["allow_always"]),
            prompt("Read the secret.", &[]),
            {"op": "prompt", "text": "Sleep.", "cancel_on": "tool_call_update"},
            {"op": "set_mode", "modeId": "read-only"},
            prompt("Edit in read-only.", &[]),
            {"op": "set_mode", "modeId": "ask"},
            {"op": "prompt", "text": "/mcp", "until": "ready", "max_tries": 300},
            prompt("Echo hi.", &["allow_once"]),
            // A question nobody answers before the turn is cancelled: not run.
            {"op": "prompt", "text": "Write never.txt.", "answers": ["wait_for_cancel"], "cancel_on": "permission"},
            // Bad input: each a JSON-RPC error, and dsh goes on serving.
            {"op": "raw", "line": "this is not json"},
            {"op": "raw", "line": "{\"jsonrpc\":\"2.0\",\"id\":\"x1\",\"method\":\"no/such\",\"params\":{}}", "wait_response": true},
            {"op": "prompt", "text": "hi", "sessionId": "no-such-session"},
            {"op": "close"},
        ]),
    );
    let steps = by_step(&events);
    let init = answer(&steps[0], "initialize");
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);
    assert_eq!(init["result"]["agentInfo"]["name"], "dsh");
    let new = answer(&steps[1], "new_session");
    let session = new["result"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(new["result"]["modes"]["currentModeId"], "ask");
    assert!(
        events
            .iter()
            .any(|e| e["params"]["update"]["sessionUpdate"] == "available_commands_update"),
        "the slash commands are advertised"
    );

    // A read, and an answer that streams.
    let s = &steps[2];
    let call = updates(s, "tool_call")[0];
    assert_eq!(call["kind"], "read", "{call}");
    assert_eq!(
        call["locations"][0]["path"],
        d.ws.join("notes.txt").display().to_string()
    );
    assert_eq!(finished(s)["status"], "completed");
    assert!(
        updates(s, "agent_message_chunk").len() >= 2,
        "streamed: {s:#?}"
    );
    assert_eq!(said(s), "The notes say hello.");
    assert_eq!(stop_reason(s), "end_turn");

    // An edit asks; allowed once, its diff is shown and the file changes.
    let s = &steps[3];
    let asked = permissions(s);
    assert_eq!(asked.len(), 1, "{s:#?}");
    let kinds: Vec<&str> = asked[0]["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"allow_once") && kinds.contains(&"reject_once"),
        "{kinds:?}"
    );
    let done = finished(s);
    assert_eq!(done["status"], "completed", "{done}");
    let diff = done["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "diff")
        .unwrap_or_else(|| panic!("no diff: {done}"));
    assert_eq!(diff["oldText"], "hello");
    assert_eq!(diff["newText"], "goodbye");
    assert_eq!(diff["path"], d.ws.join("notes.txt").display().to_string());

    // Rejected: the file is unchanged.
    let s = &steps[4];
    assert_eq!(permissions(s).len(), 1);
    assert_eq!(finished(s)["status"], "failed");
    assert_eq!(
        std::fs::read_to_string(d.ws.join("notes.txt")).unwrap(),
        "goodbye\n"
    );

    // Always allow: offered with its rule, which is written.
    let s = &steps[5];
    let asked = permissions(s);
    let always = asked[0]["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "allow_always")
        .unwrap_or_else(|| panic!("always not offered: {asked:#?}"));
    assert!(
        always["name"]
            .as_str()
            .unwrap()
            .contains("write_file(/new.txt)"),
        "{always}"
    );
    assert_eq!(finished(s)["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(d.ws.join("new.txt")).unwrap(),
        "x\n"
    );
    let user_config = std::fs::read_to_string(d.cfg.join("config.toml")).unwrap();
    assert!(
        user_config.contains("write_file(/new.txt)"),
        "{user_config}"
    );

    // A read outside the workspace fails, saying why, without asking.
    let s = &steps[6];
    assert!(permissions(s).is_empty());
    let done = finished(s);
    assert_eq!(done["status"], "failed");
    let why = done["content"][0]["content"]["text"].as_str().unwrap();
    assert!(why.contains("denied by"), "{why}");
    assert!(why.contains("outside"), "{why}");

    // Cancelled mid-turn: the running command is stopped and recorded.
    let s = &steps[7];
    assert_eq!(stop_reason(s), "cancelled", "{s:#?}");

    // read-only refuses an edit without asking.
    assert!(answer(&steps[8], "set_mode")["result"].is_object());
    let s = &steps[9];
    assert!(permissions(s).is_empty(), "{s:#?}");
    let done = finished(s);
    assert_eq!(done["status"], "failed");
    assert!(
        done["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("read-only"),
        "{done}"
    );
    assert_eq!(
        std::fs::read_to_string(d.ws.join("notes.txt")).unwrap(),
        "goodbye\n"
    );

    // The client's MCP server: listed, and its tool asks.
    let mcp_step = steps
        .iter()
        .rposition(|s| said(s).contains("**mini** ready"))
        .unwrap_or_else(|| panic!("/mcp never listed mini: {steps:#?}"));
    assert!(said(&steps[mcp_step]).contains("echo"));
    let s = &steps[mcp_step + 1];
    let asked = permissions(s);
    assert_eq!(asked.len(), 1, "an MCP tool asks: {s:#?}");
    assert_eq!(finished(s)["status"], "completed", "{s:#?}");
    let sent_tools = model.requests();
    let s = &steps[mcp_step + 2];
    assert_eq!(permissions(s).len(), 1, "{s:#?}");
    assert_eq!(stop_reason(s), "cancelled", "{s:#?}");
    assert!(!d.ws.join("never.txt").exists());
    assert!(
        sent_tools.iter().any(|r| r["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "mcp__mini__echo"))),
        "the model is offered the client's tool"
    );

    // Bad input: a parse error, an unknown method, an unknown session; still serving.
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "error" && e["op"] == "raw" && e["error"]["code"] == -32601),
        "unknown method"
    );
    let unknown = answer(&steps[steps.len() - 2], "prompt");
    assert_eq!(unknown["event"], "error", "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-session")
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "exit" && e["code"] == 0)
    );

    // The journal: the client named, the cancelled call recorded, the mode change, the end.
    let journal = journals(&d.home);
    assert_eq!(journal.len(), 1, "{journal:?}");
    let recs = records(&journal[0]);
    assert_eq!(recs[0]["client"], "dsh-acp-test", "{}", recs[0]);
    let cancelled = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "c6")
        .unwrap_or_else(|| panic!("c6 has no result"));
    assert!(
        cancelled["failure_kind"]
            .as_str()
            .unwrap()
            .starts_with("cancelled"),
        "{cancelled}"
    );
    assert!(
        recs.iter()
            .any(|r| r["kind"] == "mode_changed" && r["mode"] == "read-only")
    );
    let unanswered = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "c9")
        .unwrap_or_else(|| panic!("c9 has no result"));
    assert_eq!(
        unanswered["failure_kind"], "cancelled_before",
        "{unanswered}"
    );
    assert_eq!(recs.last().unwrap()["kind"], "session_end");

    // A new process loads the session: its history comes back before the answer, and it
    // goes on.
    let events = run(
        &d,
        &driver,
        &model.url,
        json!([
            {"op": "initialize"},
            {"op": "load_session", "sessionId": session, "cwd": ws, "mcpServers": []},
            prompt("Are you there?", &[]),
            {"op": "close"},
        ]),
    );
    let steps = by_step(&events);
    let load = &steps[1];
    assert!(
        answer(load, "load_session")["result"].is_object(),
        "{load:#?}"
    );
    let replayed: Vec<&str> = updates(load, "user_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert!(
        replayed.contains(&"What do the notes say?") && replayed.contains(&"Echo hi."),
        "{replayed:?}"
    );
    assert!(!updates(load, "tool_call").is_empty());
    assert_eq!(said(&steps[2]), "Still here.");
    let journal = journals(&d.home);
    assert_eq!(journal.len(), 2, "{journal:?}");
    let resumed = records(&journal[1]);
    assert!(resumed[0]["resumed_from"].is_object(), "{}", resumed[0]);
    assert_eq!(resumed.last().unwrap()["kind"], "session_end");

    // Loaded again by the id the editor first knew: it goes on from the newest file.
    let second = resumed[0]["session"].as_str().unwrap().to_owned();
    let events = run(
        &d,
        &driver,
        &model.url,
        json!([
            {"op": "initialize"},
            {"op": "load_session", "sessionId": session, "cwd": ws, "mcpServers": []},
            prompt("Again?", &[]),
            {"op": "close"},
        ]),
    );
    let steps = by_step(&events);
    let replayed: Vec<&str> = updates(&steps[1], "user_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert!(replayed.contains(&"Are you there?"), "{replayed:?}");
    assert_eq!(said(&steps[2]), "Here again.");
    let journal = journals(&d.home);
    assert_eq!(journal.len(), 3, "{journal:?}");
    let third = journal
        .iter()
        .map(|j| records(j))
        .find(|r| r[0]["resumed_from"]["session"] == second.as_str())
        .unwrap_or_else(|| panic!("no file goes on from {second}"));
    assert_eq!(third.last().unwrap()["kind"], "session_end");
    assert_eq!(model.remaining(), 0);
}
