//! `dsh acp` on the wire, line by line (newline-delimited JSON-RPC, as ACP's stdio transport
//! defines it), without any SDK: what an editor sends and what dsh answers, byte for byte
//! where it matters — bad input answered with JSON-RPC errors while dsh goes on serving, the
//! workspace a session may have, modes, the client's MCP servers and their environment, and
//! the end of every session when stdin closes. The full editor flow, driven by the official
//! TypeScript SDK, is `acp_client.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::acp_wire::{Agent, error_code};
use common::{Dirs, journals, records};
use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use serde_json::{Value, json};

#[test]
fn bad_input_gets_json_rpc_errors_and_dsh_goes_on_serving() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![Reply::Stream(Turn::text("Hello there.").deltas(3))]);
    let mut a = Agent::start(&d, &model.url, &[]);
    let init = a.initialize();
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_eq!(init["result"]["authMethods"], json!([]));
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );
    assert_eq!(
        init["result"]["agentCapabilities"]["mcpCapabilities"]["http"],
        true
    );

    // Garbage: a parse error with a null id.
    a.send_bytes(b"{this is not json");
    let parse = a.answer(&Value::Null);
    assert_eq!(error_code(&parse), -32700, "{parse}");
    // An unknown method.
    let unknown = a.request("u", "session/fly", json!({}));
    assert_eq!(error_code(&unknown), -32601, "{unknown}");
    // Malformed parameters.
    let malformed = a.request("m", "session/prompt", json!({"sessionId": 7}));
    assert_eq!(error_code(&malformed), -32602, "{malformed}");
    // A prompt for a session nobody opened.
    let nobody = a.prompt("no-such-session", "hi");
    assert_eq!(error_code(&nobody), -32602, "{nobody}");
    assert!(
        nobody["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-session")
    );
    // A relative cwd.
    let relative = a.request(
        "r",
        "session/new",
        json!({"cwd": "relative/dir", "mcpServers": []}),
    );
    assert_eq!(error_code(&relative), -32602, "{relative}");
    // Authentication: none needed.
    let auth = a.request("a", "authenticate", json!({"methodId": "anything"}));
    assert!(auth["result"].is_object(), "{auth}");

    // Still serving: a session, a prompt whose answer streams, then its answer.
    let new = a.new_session(&d.ws, json!([]));
    let id = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let answer = a.prompt(&id, "Say hello.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let chunks = a
        .seen
        .iter()
        .filter(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .count();
    assert!(chunks >= 2, "the answer streams: {:#?}", a.seen);
    assert_eq!(a.said(), "Hello there.");
    a.close();

    // stdin closed: the session ended in its journal, the client named at its start.
    let recs = records(&journals(&d.home)[0]);
    assert_eq!(recs[0]["client"], "wire-test");
    assert_eq!(recs.last().unwrap()["kind"], "session_end", "{recs:#?}");
}

#[test]
fn modes_switch_through_the_journal_and_never_into_yolo() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let new = a.new_session(&d.ws, json!([]));
    let id = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let modes: Vec<&str> = new["result"]["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["read-only", "ask", "auto"]);
    let yolo = a.request(
        "y",
        "session/set_mode",
        json!({"sessionId": id, "modeId": "yolo"}),
    );
    assert_eq!(error_code(&yolo), -32602, "{yolo}");
    let nonsense = a.request(
        "n",
        "session/set_mode",
        json!({"sessionId": id, "modeId": "sideways"}),
    );
    assert_eq!(error_code(&nonsense), -32602, "{nonsense}");
    let ro = a.request(
        "ro",
        "session/set_mode",
        json!({"sessionId": id, "modeId": "read-only"}),
    );
    assert!(ro["result"].is_object(), "{ro}");
    a.close();
    let recs = records(&journals(&d.home)[0]);
    let changes: Vec<&Value> = recs
        .iter()
        .filter(|r| r["kind"] == "mode_changed")
        .collect();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["mode"], "read-only");
    assert_eq!(changes[0]["by"], "client");
}

#[test]
fn a_pinned_workspace_refuses_a_session_elsewhere() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![]);
    let ws = d.ws.display().to_string();
    let mut a = Agent::start(&d, &model.url, &["--workspace", &ws]);
    a.initialize();
    let outside = a.new_session(&d.outside, json!([]));
    assert_eq!(error_code(&outside), -32602, "{outside}");
    assert!(
        outside["error"]["message"]
            .as_str()
            .unwrap()
            .contains("outside the workspace")
    );
    std::fs::create_dir(d.ws.join("sub")).unwrap();
    let inside = a.new_session(&d.ws.join("sub"), json!([]));
    assert!(inside["result"]["sessionId"].is_string(), "{inside}");
    a.close();
}

fn mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dsh-mcp/tests/servers/mini.py")
}

#[test]
fn a_client_mcp_server_starts_in_an_untrusted_workspace_without_dsh_keys_and_its_tools_ask() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![
        Reply::Stream(Turn::tool_call("e1", "mcp__mini__env", "{}")),
        Reply::Stream(Turn::text("done")),
    ]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let servers = json!([{
        "name": "mini",
        "command": "/usr/bin/python3",
        "args": [mini().display().to_string()],
        "env": [{"name": "OWN_VAR", "value": "own"}],
    }, {
        "type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": [],
    }]);
    let new = a.new_session(&d.ws, servers);
    let id = new["result"]["sessionId"].as_str().unwrap().to_owned();
    // Its tools come once it is ready (a slow server never holds up a prompt): `/mcp` says.
    let mut listed = String::new();
    for _ in 0..300 {
        let r = a.prompt(&id, "/mcp");
        assert_eq!(r["result"]["stopReason"], "end_turn");
        listed = a.said();
        if listed.contains("**mini** ready") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(listed.contains("**mini** ready"), "{listed}");
    assert!(
        listed.contains("SSE"),
        "the SSE server is named as not started: {listed}"
    );

    // The model calls its tool: it asks the client (no rule allows it); allowed once.
    a.send(
        &json!({"jsonrpc": "2.0", "id": "p", "method": "session/prompt",
                "params": {"sessionId": id, "prompt": [{"type": "text", "text": "env?"}]}}),
    );
    let asked = loop {
        let v = a.next();
        if v["method"] == "session/request_permission" {
            break v;
        }
        a.seen.push(v);
    };
    assert_eq!(asked["params"]["toolCall"]["title"], "mcp__mini__env");
    a.send(&json!({"jsonrpc": "2.0", "id": asked["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));
    let done = a.answer(&json!("p"));
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let finished = a
        .seen
        .iter()
        .rev()
        .find(|v| v["params"]["update"]["status"] == "completed")
        .unwrap_or_else(|| panic!("the call completed: {:#?}", a.seen))
        .clone();
    let env = finished["params"]["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(env.contains("OWN_VAR"), "its own variable: {env}");
    assert!(env.contains("PATH"), "the allowlist: {env}");
    assert!(!env.contains("OPENAI_API_KEY"), "never dsh's key: {env}");
    a.close();
}

#[test]
fn a_prompt_with_an_image_is_refused_and_a_resource_goes_with_the_prompt() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![Reply::Stream(Turn::text("Seen."))]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let new = a.new_session(&d.ws, json!([]));
    let id = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let image = a.request(
        "i",
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}),
    );
    assert_eq!(error_code(&image), -32602, "{image}");
    let ok = a.request(
        "r",
        "session/prompt",
        json!({"sessionId": id, "prompt": [
            {"type": "text", "text": "Look at this:"},
            {"type": "resource", "resource": {"uri": "file:///buffer.rs", "text": "fn unsaved() {}"}},
        ]}),
    );
    assert_eq!(ok["result"]["stopReason"], "end_turn", "{ok}");
    let sent = model.requests();
    let user = sent[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(user.contains("Look at this:"), "{user}");
    assert!(user.contains("fn unsaved() {}"), "{user}");
    a.close();
}
