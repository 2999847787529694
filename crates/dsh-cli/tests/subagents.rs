//! Sub-agents through the real binary (SPEC A9; DESIGN §5): profiles from configuration —
//! a user profile runs, an untrusted project's is ignored, a profile naming a missing tool
//! stops the session before it starts with the file, line and key — and a child headless.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Output;

use common::{Dirs, json_lines, stderr};
use dsh_testkit::model_server::{Reply, ScriptedServer, ServerHandle, Turn};
use serde_json::{Value, json};

fn exec(d: &Dirs, server: &ServerHandle, extra: &[&str], prompt: &str) -> Output {
    let mut args = vec![
        "exec",
        "--provider",
        "openai",
        "--base-url",
        &server.url,
        "--model",
        "scripted",
    ];
    args.extend_from_slice(extra);
    args.push(prompt);
    d.dsh(&args)
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap()
}

fn sub_agent(id: &str, profile: &str, task: &str) -> Reply {
    Turn::tool_call(
        id,
        "call_sub_agent",
        &json!({"profile": profile, "task": task}).to_string(),
    )
    .into()
}

fn call_sub_agent_description(request: &Value) -> String {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "call_sub_agent")
        .map(|t| t["function"]["description"].as_str().unwrap().to_owned())
        .unwrap()
}

#[test]
fn a_profile_naming_a_missing_tool_stops_the_session_with_its_file_line_and_key() {
    let d = Dirs::new();
    d.write_user_config(
        "[agents.helper]\ndescription = \"helps\"\ntools = [\"read_file\", \"read_flie\"]\n",
    );
    let server = ScriptedServer::start(vec![]);
    let out = exec(&d, &server, &[], "go");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    let at = format!(
        "{}:3: agents.helper.tools[1]",
        d.cfg.join("config.toml").display()
    );
    assert!(err.contains(&at), "{err}");
    assert!(err.contains("there is no tool named `read_flie`"), "{err}");
    assert!(
        server.requests().is_empty(),
        "no model call before the error"
    );
}

#[test]
fn a_user_profile_runs_with_its_tools_and_model_and_an_untrusted_projects_is_ignored() {
    let d = Dirs::new();
    std::fs::write(d.ws.join("notes.txt"), "alpha\n").unwrap();
    d.write_user_config(
        "[agents.reader]\ndescription = \"reads one file\"\ntools = [\"read_file\"]\nsystem = \"You read.\"\nmodel = \"small\"\nmax_steps = 3\n",
    );
    d.project_config(
        "[agents.sneaky]\ndescription = \"from the clone\"\ntools = [\"run_shell\"]\n",
    );
    let server = ScriptedServer::start(vec![
        sub_agent("m1", "reader", "read notes.txt"),
        Turn::tool_call("c1", "read_file", r#"{"path":"notes.txt"}"#).into(),
        Reply::text("it says alpha"),
        sub_agent("m2", "sneaky", "run something"),
        Reply::text("done"),
    ]);
    let out = exec(&d, &server, &["--json"], "go");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The untrusted project's profile is ignored, with the notice that says how to trust.
    assert!(stderr(&out).contains("agents (sneaky)"), "{}", stderr(&out));
    let requests = server.requests();
    let description = call_sub_agent_description(&requests[0]);
    assert!(
        description.contains("- reader: reads one file (tools: read_file)"),
        "{description}"
    );
    assert!(!description.contains("sneaky"), "{description}");
    // The child: its own system prompt, its model, its one tool.
    let child = &requests[1];
    assert_eq!(child["model"], "small");
    assert!(
        child["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You read.")
    );
    let tools: Vec<&str> = child["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read_file"]);

    let records = json_lines(&out);
    let result = |id: &str| {
        records
            .iter()
            .find(|r| r["kind"] == "tool_result" && r["call_id"] == id && r.get("agent").is_none())
            .unwrap()
            .clone()
    };
    assert!(
        result("m1")["content"]
            .as_str()
            .unwrap()
            .starts_with("it says alpha")
    );
    // The unknown profile fails its schema: no child starts.
    assert_eq!(
        result("m2")["failure_kind"],
        "invalid_args",
        "{}",
        result("m2")
    );
    assert_eq!(
        records
            .iter()
            .filter(|r| r["kind"] == "sub_agent_start")
            .count(),
        1
    );
}

#[test]
fn a_headless_code_child_cannot_write_without_an_approver() {
    let d = Dirs::new();
    let server = ScriptedServer::start(vec![
        sub_agent("m1", "code", "write x"),
        Turn::tool_call("c1", "write_file", r#"{"path":"x.txt","content":"x"}"#).into(),
        Reply::text("could not write"),
        Reply::text("done"),
    ]);
    let out = exec(&d, &server, &["--json"], "go");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!d.ws.join("x.txt").exists());
    let records = json_lines(&out);
    let c1 = records
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["agent"] == "sub-1")
        .unwrap();
    assert_eq!(c1["failure_kind"], "unavailable", "{c1}");
    // `dsh sessions show` nests the child's lines under its start.
    let id = records[0]["session"].as_str().unwrap();
    let shown = d.dsh(&["sessions", "show", id]).output().unwrap();
    let text = String::from_utf8(shown.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains("sub-agent sub-1 (code) starts: write x"))
        .unwrap();
    assert!(lines[start + 1].starts_with("  │ "), "{text}");
    assert!(
        lines[start + 1..]
            .iter()
            .any(|l| l.contains("write_file") && l.starts_with("  │ ")),
        "{text}"
    );
}
