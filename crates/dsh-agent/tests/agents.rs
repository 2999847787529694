//! Agents over one session's shared resources (DESIGN §3, "Agents and events"): each has its
//! own tool set — what its model is offered and the only tools its calls may dispatch — and
//! its own identity in the journal and the event stream.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::provider;
use dsh_agent::{Agent, AgentSpec, EventKind, EventSink, LoopConfig, Session, SessionSettings};
use dsh_core::{CancellationToken, ToolSet};
use dsh_testkit::model_server::{ScriptedServer, Turn};
use serde_json::Value;

fn records(session: &Session) -> Vec<Value> {
    dsh_core::journal::read_journal(session.journal_path.as_ref().unwrap())
        .unwrap()
        .records
        .into_iter()
        .map(|e| Value::Object(e.json))
        .collect()
}

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_on_one_session_have_their_own_tool_sets() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha").unwrap();
    let mut settings = SessionSettings::new(ws.path(), home.path());
    // Even a yes to every ask cannot carry a call outside the agent's set.
    settings.approval = dsh_agent::Approval::Yolo;
    let (events, mut stream) = EventSink::channel();
    settings.events = events;
    let session = Arc::new(Session::assemble(&settings).unwrap());
    drop(settings);

    let main_server = ScriptedServer::start(vec![
        Turn::tool_call("m1", "write_file", r#"{"path":"main.txt","content":"m"}"#).into(),
        Turn::text("main done").into(),
    ]);
    let sub_server = ScriptedServer::start(vec![
        // The model names a tool it was not offered.
        Turn::tool_call("s1", "write_file", r#"{"path":"sub.txt","content":"s"}"#)
            .call("s2", "read_file", r#"{"path":"a.txt"}"#)
            .into(),
        Turn::text("sub done").into(),
    ]);
    let cancel = CancellationToken::new();
    let mut main = Agent::new(
        session.clone(),
        provider(&main_server),
        LoopConfig::default(),
    );
    let mut sub = Agent::with_spec(
        session.clone(),
        AgentSpec::sub(1, "search", ToolSet::only(["read_file", "list_dir"])),
        provider(&sub_server),
        LoopConfig::default(),
    );
    let sub_out = sub.run("look around", &cancel).await.unwrap();
    let main_out = main.run("write it", &cancel).await.unwrap();
    assert_eq!(sub_out.text, "sub done");
    assert_eq!(main_out.text, "main done");

    // Offered: the sub-agent only its two tools; the main agent all of them.
    assert_eq!(
        offered(&sub_server.requests()[0]),
        ["list_dir", "read_file"]
    );
    assert!(offered(&main_server.requests()[0]).contains(&"write_file".to_owned()));

    // Dispatched: the sub-agent's write_file was refused at the registry and did not run;
    // its read_file ran; the main agent's write ran.
    assert!(!ws.path().join("sub.txt").exists());
    assert!(ws.path().join("main.txt").exists());
    let recs = records(&session);
    let result = |id: &str| {
        recs.iter()
            .find(|r| r["kind"] == "tool_result" && r["call_id"] == id)
            .unwrap()
            .clone()
    };
    let s1 = result("s1");
    assert_eq!(s1["failure_kind"], "unknown_tool");
    assert_eq!(s1["decided_by"]["gate"], "registry");
    assert!(
        s1["content"].as_str().unwrap().contains("for agent sub-1"),
        "{s1}"
    );
    assert_eq!(result("s2")["ok"], true);
    assert_eq!(result("m1")["ok"], true);
    // Journaled in each agent's name (absent = main).
    for r in recs
        .iter()
        .filter(|r| r["call_id"] == "s1" || r["call_id"] == "s2")
    {
        assert_eq!(r["agent"], "sub-1", "{r}");
    }
    for r in recs.iter().filter(|r| r["call_id"] == "m1") {
        assert!(r.get("agent").is_none(), "{r}");
    }

    // Events carry the agent they are about.
    drop(main);
    drop(sub);
    drop(session);
    let mut finished = Vec::new();
    while let Some(e) = stream.recv().await {
        if let EventKind::ToolFinished { result } = e.kind {
            finished.push((e.agent.to_string(), result.call_id().to_owned()));
        }
    }
    assert_eq!(
        finished,
        [
            ("sub-1".to_owned(), "s1".to_owned()),
            ("sub-1".to_owned(), "s2".to_owned()),
            ("main".to_owned(), "m1".to_owned()),
        ]
    );
}

/// `Approval::Interactive`: each `ask` reaches the event stream's consumer, whose reply
/// decides; a dropped reply is `cancelled`, no consumer is `unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_go_through_the_event_stream() {
    use dsh_core::{ApprovalOutcome, ToolCall};
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut settings = SessionSettings::new(ws.path(), home.path());
    settings.approval = dsh_agent::Approval::Interactive;
    let (events, mut stream) = EventSink::channel();
    settings.events = events;
    let session = Session::assemble(&settings).unwrap();
    drop(settings);

    let answers = tokio::spawn(async move {
        let mut asked = Vec::new();
        while let Some(e) = stream.recv().await {
            if let EventKind::ApprovalAsked { request, reply } = e.kind {
                let path = request.call.args()["path"].as_str().unwrap().to_owned();
                asked.push(path.clone());
                match path.as_str() {
                    "yes.txt" => reply.send(ApprovalOutcome::AllowedOnce.into()).unwrap(),
                    "no.txt" => reply.send(ApprovalOutcome::Rejected.into()).unwrap(),
                    _ => drop(reply),
                }
            }
        }
        asked
    });
    let write = |id: &str, path: &str| {
        ToolCall::new(
            id,
            "write_file",
            serde_json::json!({"path": path, "content": "x"}),
        )
    };
    let out = session
        .pipeline
        .run_batch(
            vec![
                write("1", "yes.txt"),
                write("2", "no.txt"),
                write("3", "dropped.txt"),
            ],
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let kinds: Vec<String> = out
        .results
        .iter()
        .map(|r| {
            r.failure_kind()
                .map_or("ok".into(), |k| k.as_str().to_owned())
        })
        .collect();
    assert_eq!(kinds, ["ok", "rejected", "cancelled_before"]);
    assert!(ws.path().join("yes.txt").exists());
    assert!(!ws.path().join("no.txt").exists());
    // The stream ends with the session (its approver holds the last sender).
    drop(session);
    // Asked once each, in order.
    assert_eq!(answers.await.unwrap(), ["yes.txt", "no.txt", "dropped.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interactive_approver_without_a_consumer_is_unavailable() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut settings = SessionSettings::new(ws.path(), home.path());
    settings.approval = dsh_agent::Approval::Interactive;
    let (events, stream) = EventSink::channel();
    drop(stream);
    settings.events = events;
    let session = Session::assemble(&settings).unwrap();
    let out = session
        .pipeline
        .run_batch(
            vec![dsh_core::ToolCall::new(
                "1",
                "write_file",
                serde_json::json!({"path": "x.txt", "content": "x"}),
            )],
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        out.results[0].failure_kind(),
        Some(dsh_core::FailureKind::Unavailable)
    );
    assert!(!ws.path().join("x.txt").exists());
}

/// Where a person answers asks, the memory file is let out of `.dsh/**` and every write to
/// it asks, even under an allow rule; the rest of `.dsh/` stays protected.
#[tokio::test]
async fn with_a_person_to_ask_the_memory_file_asks_even_under_an_allow_rule() {
    use dsh_core::{Decision, Layer, Origin, Rule, ToolCall};
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut settings = SessionSettings::new(ws.path(), home.path());
    settings.approval = dsh_agent::Approval::Interactive;
    settings.rules.push(Rule {
        decision: dsh_core::Decision::Allow,
        tool: "write_file".into(),
        specifier: None,
        origin: Origin {
            layer: Layer::User,
            ..Origin::builtin()
        },
    });
    let session = Session::assemble_dry(&settings).unwrap();
    let write = |path: &str| {
        ToolCall::new(
            "w",
            "write_file",
            serde_json::json!({"path": path, "content": "x"}),
        )
    };
    let r = session.pipeline.check(&write(".dsh/memory.md")).await;
    assert_eq!(r.decision, Decision::Ask, "{r:?}");
    assert_eq!(r.policy.as_deref(), Some("memory"));
    let r = session.pipeline.check(&write(".dsh/config.toml")).await;
    assert_eq!(r.decision, Decision::Deny, "{r:?}");
    assert_eq!(r.policy.as_deref(), Some("protected_paths"));
}

/// A tool registered while the session runs is offered to an agent from its next step and
/// dispatched through the same pipeline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_registered_at_run_time_is_offered_and_runs() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut settings = SessionSettings::new(ws.path(), home.path());
    settings.approval = dsh_agent::Approval::Yolo;
    let session = Arc::new(Session::assemble(&settings).unwrap());
    let server = ScriptedServer::start(vec![
        Turn::tool_call("x1", "late_tool", "{}").into(),
        Turn::text("used it").into(),
    ]);
    let agent = Agent::new(session.clone(), provider(&server), LoopConfig::default());
    assert!(!agent.tools().iter().any(|t| t.name == "late_tool"));
    session
        .register_tool(Arc::new(dsh_testkit::FnTool::new(
            "late_tool",
            |_, _| async { Ok(dsh_testkit::ok_output(7)) },
        )))
        .unwrap();
    let mut agent = agent;
    let out = agent.run("go", &CancellationToken::new()).await.unwrap();
    assert_eq!(out.text, "used it");
    assert!(offered(&server.requests()[0]).contains(&"late_tool".to_owned()));
    let recs = records(&session);
    let r = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "x1")
        .unwrap();
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["content"], "n=7");
}
