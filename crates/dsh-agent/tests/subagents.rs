//! Sub-agents whose profile is their permission (SPEC A9, A11, P10; DESIGN §3 "Nested calls",
//! "Declarations, not names"): `call_sub_agent` runs a child over the same session whose
//! tools are its profile's list, whose calls pass the same pipeline as the parent's, and
//! whose spend rolls up into the parent's account. Against a real HTTP/SSE server; only the
//! model's replies are scripted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::provider;
use dsh_agent::subagent::ProfileSpec;
use dsh_agent::{
    Agent, Approval, EventKind, EventSink, EventStream, LoopConfig, Session, SessionSettings,
    StopReason,
};
use dsh_core::Decision;
use dsh_core::{ApprovalOutcome, CancellationToken};
use dsh_testkit::model_server::{Gate, Rendezvous, Reply, ScriptedServer, ServerHandle, Turn};
use serde_json::{Value, json};

struct World {
    ws: tempfile::TempDir,
    home: tempfile::TempDir,
    session: Arc<Session>,
    stream: Option<EventStream>,
}

fn world(configure: impl FnOnce(&mut SessionSettings)) -> World {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha requests\n").unwrap();
    std::fs::write(ws.path().join(".env"), "TOKEN=secret\n").unwrap();
    let mut settings = SessionSettings::new(ws.path(), home.path());
    let (events, stream) = EventSink::channel();
    settings.events = events;
    configure(&mut settings);
    let session = Arc::new(Session::assemble(&settings).unwrap());
    World {
        ws,
        home,
        session,
        stream: Some(stream),
    }
}

impl World {
    fn records(&self) -> Vec<Value> {
        dsh_core::journal::read_journal(self.session.journal_path.as_ref().unwrap())
            .unwrap()
            .records
            .into_iter()
            .map(|e| Value::Object(e.json))
            .collect()
    }

    fn agent(&self, server: &ServerHandle) -> Agent {
        self.agent_with(server, LoopConfig::default())
    }

    fn agent_with(&self, server: &ServerHandle, config: LoopConfig) -> Agent {
        Agent::new(self.session.clone(), provider(server), config)
    }

    /// The main agent with default limits runs `prompt` to its stop line.
    async fn run(&self, server: &ServerHandle, prompt: &str) -> dsh_agent::Outcome {
        self.agent(server)
            .run(prompt, &CancellationToken::new())
            .await
            .unwrap()
    }
}

fn rule(kind: Decision, tool: &str, specifier: &str) -> dsh_core::Rule {
    dsh_core::Rule {
        decision: kind,
        tool: tool.into(),
        specifier: Some(specifier.into()),
        origin: dsh_core::Origin::builtin(),
    }
}

fn sub_agent_call(id: &str, profile: &str, task: &str) -> (String, String, String) {
    (
        id.to_owned(),
        "call_sub_agent".to_owned(),
        json!({"profile": profile, "task": task}).to_string(),
    )
}

/// A turn calling every one of `calls` at once.
fn calls(calls: &[(String, String, String)]) -> Reply {
    let mut turn = Turn::default();
    for (id, name, args) in calls {
        turn = turn.call(id, name, args);
    }
    turn.into()
}

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The one record of `kind` matching `pred`.
fn find<'a>(recs: &'a [Value], kind: &str, pred: impl Fn(&Value) -> bool) -> &'a Value {
    let found: Vec<&Value> = recs
        .iter()
        .filter(|r| r["kind"] == kind && pred(r))
        .collect();
    assert_eq!(found.len(), 1, "{kind}: {found:?}");
    found[0]
}

fn seq(r: &Value) -> u64 {
    r["seq"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_child_is_offered_no_write_tool_and_cannot_dispatch_one() {
    let w = world(|s| {
        s.rules.push(rule(Decision::Deny, "read_file", ".env"));
        // Even a yes to every ask cannot carry a call outside the child's profile.
        s.approval = Approval::Yolo;
    });
    let server = ScriptedServer::start(vec![
        calls(&[sub_agent_call("m1", "search", "find requests")]),
        // The child's model names a write tool it was not offered, and a denied read.
        Turn::tool_call("c1", "write_file", r#"{"path":"x.txt","content":"x"}"#)
            .call("c2", "read_file", r#"{"path":".env"}"#)
            .call("c3", "read_file", r#"{"path":"a.txt"}"#)
            .into(),
        Reply::text("requests is used in a.txt line 1"),
        Reply::text("done"),
    ]);
    let out = w.run(&server, "look").await;
    assert_eq!(out.text, "done");

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    // The main agent is offered call_sub_agent, with the profiles in its description.
    let main_tools = &requests[0]["tools"];
    let csa = main_tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "call_sub_agent")
        .unwrap();
    let description = csa["function"]["description"].as_str().unwrap();
    for p in ["- search:", "- code:", "- shell:", "- general:"] {
        assert!(description.contains(p), "{description}");
    }
    // The child is offered its profile's tools and nothing else: no write tool, no
    // call_sub_agent; its system prompt is its profile's; its task is its first message.
    assert_eq!(
        offered(&requests[1]),
        ["find_files", "grep", "list_dir", "read_file", "read_output"]
    );
    let child_messages = requests[1]["messages"].as_array().unwrap();
    assert!(
        child_messages[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You are a search sub-agent"),
        "{}",
        child_messages[0]
    );
    assert_eq!(child_messages[1]["content"], "find requests");
    assert_eq!(
        child_messages.len(),
        2,
        "the child sees none of the parent's history"
    );

    // The write it named was refused at the registry and never ran.
    assert!(!w.ws.path().join("x.txt").exists());
    let recs = w.records();
    let in_child = |id: &'static str| move |r: &Value| r["call_id"] == id && r["agent"] == "sub-1";
    let c1 = find(&recs, "tool_result", in_child("c1"));
    assert_eq!(c1["failure_kind"], "unknown_tool");
    assert_eq!(c1["decided_by"]["gate"], "registry");
    // The denied read: in the journal with the child's id, its source and its parent.
    let c2_call = find(&recs, "tool_call", in_child("c2"));
    assert_eq!(c2_call["source"], "sub_agent");
    assert_eq!(c2_call["parent"], "m1");
    let c2 = find(&recs, "tool_result", in_child("c2"));
    assert_eq!(c2["failure_kind"], "denied");
    assert_eq!(c2["decided_by"]["gate"], "pre_policy");
    assert_eq!(find(&recs, "tool_result", in_child("c3"))["ok"], true);

    // Started and ended in the parent's name; the child's own records carry its id.
    let start = find(&recs, "sub_agent_start", |_| true);
    assert!(start.get("agent").is_none(), "{start}");
    assert_eq!(
        (
            &start["child"],
            &start["profile"],
            &start["call_id"],
            &start["task"]
        ),
        (
            &json!("sub-1"),
            &json!("search"),
            &json!("m1"),
            &json!("find requests")
        )
    );
    let end = find(&recs, "sub_agent_end", |_| true);
    assert!(end.get("agent").is_none(), "{end}");
    assert_eq!(
        (&end["child"], &end["stop"]),
        (&json!("sub-1"), &json!("final_answer"))
    );
    assert_eq!(end["steps"], 2);
    let child_stop = find(&recs, "stop", |r| r["agent"] == "sub-1");
    assert_eq!(child_stop["reason"], "final_answer");

    // The parent gets the child's answer and its account as the call's result.
    let m1 = find(&recs, "tool_result", |r| r["call_id"] == "m1");
    assert_eq!(m1["ok"], true, "{m1}");
    let content = m1["content"].as_str().unwrap();
    assert!(
        content.starts_with("requests is used in a.txt line 1"),
        "{content}"
    );
    assert!(
        content.contains("sub-agent sub-1 (search) answered after 2 steps"),
        "{content}"
    );
    // What ran, apart from what was refused.
    assert!(
        content.contains("ran read_file ×1; refused or failed: read_file ×1, write_file ×1"),
        "{content}"
    );
    assert_eq!(m1["value"]["tools"], json!({"read_file": 1}));
    assert_eq!(m1["value"]["stop"], "final_answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_cannot_start_a_child_and_is_refused_before_any_policy() {
    let w = world(|_| {});
    let server = ScriptedServer::start(vec![
        calls(&[sub_agent_call("m1", "general", "delegate further")]),
        calls(&[sub_agent_call("c1", "search", "deeper")]),
        Reply::text("could not delegate"),
        Reply::text("done"),
    ]);
    let out = w.run(&server, "go").await;
    assert_eq!(out.text, "done");
    let requests = server.requests();
    // Not even offered to the child (a `general` child has every other tool).
    let child_tools = offered(&requests[1]);
    assert!(!child_tools.contains(&"call_sub_agent".to_owned()));
    assert!(child_tools.contains(&"write_file".to_owned()));
    let recs = w.records();
    let c1 = find(&recs, "tool_result", |r| r["call_id"] == "c1");
    assert_eq!(c1["agent"], "sub-1");
    assert_eq!(c1["failure_kind"], "unknown_tool");
    assert_eq!(c1["decided_by"]["gate"], "registry", "before any policy");
    assert!(
        c1["content"]
            .as_str()
            .unwrap()
            .contains("sub-agents cannot start sub-agents"),
        "{c1}"
    );
    // No approval asked, no second child started.
    assert!(!recs.iter().any(|r| r["kind"] == "approval"));
    assert_eq!(
        recs.iter()
            .filter(|r| r["kind"] == "sub_agent_start")
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_search_children_overlap() {
    let w = world(|_| {});
    let rendezvous = Rendezvous::new(2);
    let server = ScriptedServer::start(vec![
        calls(&[
            sub_agent_call("m1", "search", "task one"),
            sub_agent_call("m2", "search", "task two"),
        ]),
        // Each child's first request is answered only once both are waiting.
        Reply::text("found").together(&rendezvous),
        Reply::text("found").together(&rendezvous),
        Reply::text("done"),
    ]);
    let out = w.run(&server, "look").await;
    assert!(rendezvous.met(), "the two search children did not overlap");
    assert_eq!(out.text, "done");
    let recs = w.records();
    for id in ["m1", "m2"] {
        let r = find(&recs, "tool_result", |r| r["call_id"] == id);
        assert!(r["content"].as_str().unwrap().starts_with("found"), "{r}");
    }
}

/// The `tool_started` and `tool_result` seqs of the parent's calls `a` then `b`: `b` starts
/// only after `a` finished.
fn one_after_the_other(recs: &[Value], a: &str, b: &str) {
    let a_done = seq(find(recs, "tool_result", |r| {
        r["call_id"] == a && r.get("agent").is_none()
    }));
    let b_started = seq(find(recs, "tool_started", |r| {
        r["call_id"] == b && r.get("agent").is_none()
    }));
    assert!(
        a_done < b_started,
        "{b} started (seq {b_started}) before {a} ended (seq {a_done})"
    );
    let ends: Vec<u64> = recs
        .iter()
        .filter(|r| r["kind"] == "sub_agent_end")
        .map(seq)
        .collect();
    let starts: Vec<u64> = recs
        .iter()
        .filter(|r| r["kind"] == "sub_agent_start")
        .map(seq)
        .collect();
    assert_eq!((starts.len(), ends.len()), (2, 2));
    assert!(
        ends[0] < starts[1],
        "the children overlapped: {starts:?} {ends:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_code_children_never_overlap() {
    let w = world(|s| s.approval = Approval::Yolo);
    let server = ScriptedServer::start(vec![
        calls(&[
            sub_agent_call("m1", "code", "write one"),
            sub_agent_call("m2", "code", "write two"),
        ]),
        Turn::tool_call("c1", "write_file", r#"{"path":"same.txt","content":"one"}"#).into(),
        Reply::text("wrote one"),
        Turn::tool_call(
            "c1",
            "write_file",
            r#"{"path":"other.txt","content":"two"}"#,
        )
        .into(),
        Reply::text("wrote two"),
        Reply::text("done"),
    ]);
    let out = w.run(&server, "write").await;
    assert_eq!(out.text, "done");
    let recs = w.records();
    one_after_the_other(&recs, "m1", "m2");
    // Each child's calls are its own (both models used the id c1).
    for child in ["sub-1", "sub-2"] {
        let r = find(&recs, "tool_result", |r| {
            r["call_id"] == "c1" && r["agent"] == child
        });
        assert_eq!(r["ok"], true, "{r}");
    }
}

fn profile(name: &str, tools: &[&str]) -> ProfileSpec {
    ProfileSpec {
        name: name.into(),
        description: Some(format!("the {name} profile")),
        tools: Some(
            tools
                .iter()
                .enumerate()
                .map(|(i, t)| ((*t).to_owned(), format!("test: agents.{name}.tools[{i}]")))
                .collect(),
        ),
        system: None,
        model: None,
        max_steps: None,
        at: format!("test: agents.{name}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallelism_is_read_from_the_tools_declarations_not_the_profile_name() {
    let w = world(|s| {
        s.agents = vec![
            profile("readonly", &["read_file", "run_shell"]),
            profile("writer", &["read_file", "grep"]),
        ];
    });
    let pipeline = &w.session.pipeline;
    let profiles = &w.session.profiles;
    let parallel = |name: &str| {
        profiles
            .get(name)
            .unwrap()
            .parallel_safe(|n| pipeline.spec(n))
    };
    assert!(
        !parallel("readonly"),
        "run_shell is not always parallel-safe"
    );
    assert!(
        parallel("writer"),
        "a profile of readers is parallel, whatever its name"
    );
    assert!(parallel("search"));
    assert!(!parallel("code") && !parallel("shell") && !parallel("general"));

    // And the scheduler acts on it: two `readonly` children run one after the other.
    let server = ScriptedServer::start(vec![
        calls(&[
            sub_agent_call("m1", "readonly", "one"),
            sub_agent_call("m2", "readonly", "two"),
        ]),
        Reply::text("one done"),
        Reply::text("two done"),
        Reply::text("done"),
    ]);
    let out = w.run(&server, "go").await;
    assert_eq!(out.text, "done");
    one_after_the_other(&w.records(), "m1", "m2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_name_the_sub_agent_that_asks() {
    let mut w = world(|s| s.approval = Approval::Interactive);
    let mut stream = w.stream.take().unwrap();
    let (asked_tx, asked_rx) = std::sync::mpsc::channel();
    // The person: answers yes, noting who asked.
    tokio::spawn(async move {
        while let Some(event) = stream.recv().await {
            if let EventKind::ApprovalAsked { request, reply } = event.kind {
                let by = request.call.agent().map(str::to_owned);
                let _ = asked_tx.send((event.agent.to_string(), by));
                let _ = reply.send(ApprovalOutcome::AllowedOnce.into());
            }
        }
    });
    let server = ScriptedServer::start(vec![
        calls(&[sub_agent_call("m1", "code", "write it")]),
        Turn::tool_call("c1", "write_file", r#"{"path":"new.txt","content":"hi"}"#).into(),
        Reply::text("written"),
        Reply::text("done"),
    ]);
    w.run(&server, "go").await;
    let asked: Vec<_> = asked_rx.try_iter().collect();
    assert_eq!(asked, [("sub-1".to_owned(), Some("sub-1".to_owned()))]);
    assert_eq!(
        std::fs::read_to_string(w.ws.path().join("new.txt")).unwrap(),
        "hi"
    );
    let recs = w.records();
    let approval = find(&recs, "approval", |_| true);
    assert_eq!(
        (&approval["agent"], &approval["call_id"]),
        (&json!("sub-1"), &json!("c1"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_the_parent_stops_a_running_child() {
    let mut w = world(|s| s.rules.push(rule(Decision::Allow, "run_shell", "sleep *")));
    let mut stream = w.stream.take().unwrap();
    let server = ScriptedServer::start(vec![
        calls(&[sub_agent_call("m1", "shell", "wait")]),
        Turn::tool_call("c1", "run_shell", r#"{"command":"sleep 30"}"#).into(),
        Reply::text("never"),
    ]);
    let cancel = CancellationToken::new();
    // Interrupt once the child's command is running.
    let interrupt = cancel.clone();
    let watcher = tokio::spawn(async move {
        while let Some(event) = stream.recv().await {
            if &*event.agent == "sub-1" && matches!(event.kind, EventKind::ToolStarted { .. }) {
                interrupt.cancel();
                return true;
            }
        }
        false
    });
    let out = w.agent(&server).run("go", &cancel).await.unwrap();
    assert!(watcher.await.unwrap());
    assert_eq!(out.stop, StopReason::Interrupted);
    let recs = w.records();
    let c1 = find(&recs, "tool_result", |r| {
        r["call_id"] == "c1" && r["agent"] == "sub-1"
    });
    assert_eq!(c1["failure_kind"], "cancelled_after", "{c1}");
    let end = find(&recs, "sub_agent_end", |_| true);
    assert_eq!(end["stop"], "interrupted");
    assert_eq!(
        find(&recs, "stop", |r| r["agent"] == "sub-1")["reason"],
        "interrupted"
    );
    let m1 = find(&recs, "tool_result", |r| r["call_id"] == "m1");
    assert_eq!(m1["failure_kind"], "cancelled_after", "{m1}");
    // The child's third reply was never asked for.
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_child_is_interrupted_while_it_waits_for_its_model() {
    let w = world(|_| {});
    let gate = Gate::new();
    let server = ScriptedServer::start(vec![
        calls(&[sub_agent_call("m1", "search", "wait")]),
        Reply::text("late").held(&gate),
    ]);
    let cancel = CancellationToken::new();
    let session = w.session.clone();
    let run = {
        let cancel = cancel.clone();
        let provider = provider(&server);
        tokio::spawn(async move {
            Agent::new(session, provider, LoopConfig::default())
                .run("go", &cancel)
                .await
        })
    };
    // The child's request is in, its answer held: the child waits for its model.
    let waited = tokio::task::block_in_place(|| {
        server.wait_for_requests(2, std::time::Duration::from_secs(30))
    });
    assert!(waited);
    cancel.cancel();
    let out = run.await.unwrap().unwrap();
    gate.open();
    assert_eq!(out.stop, StopReason::Interrupted);
    let recs = w.records();
    assert_eq!(
        find(&recs, "sub_agent_end", |_| true)["stop"],
        "interrupted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_spend_rolls_up_into_the_parents_account_and_stop_record() {
    let w = world(|_| {});
    let server = ScriptedServer::start(vec![
        Turn::default()
            .call(
                "m1",
                "call_sub_agent",
                r#"{"profile":"search","task":"count"}"#,
            )
            .usage(1000, 100)
            .into(),
        Turn::tool_call("c1", "list_dir", r#"{"path":"."}"#)
            .usage(300, 30)
            .into(),
        Turn::text("two files").usage(400, 40).into(),
        Turn::text("done").usage(2000, 200).into(),
    ]);
    let config = LoopConfig {
        price: Some(dsh_config::Price {
            input: 1.0,
            cached_input: None,
            output: 2.0,
        }),
        ..LoopConfig::default()
    };
    let mut agent = w.agent_with(&server, config);
    agent.run("go", &CancellationToken::new()).await.unwrap();
    let totals = agent.totals();
    // The parent's own tokens plus its child's; its steps are its own.
    assert_eq!(totals.prompt_tokens, 1000 + 300 + 400 + 2000);
    assert_eq!(totals.completion_tokens, 100 + 30 + 40 + 200);
    assert_eq!(totals.steps, 2);
    let cost = |p: f64, c: f64| (p * 1.0 + c * 2.0) / 1e6;
    let expected = cost(3700.0, 370.0);
    assert!(
        (totals.cost_usd.unwrap() - expected).abs() < 1e-12,
        "{totals:?}"
    );

    let recs = w.records();
    let stop = find(&recs, "stop", |r| r.get("agent").is_none());
    assert_eq!(stop["prompt_tokens"], 3700);
    assert_eq!(stop["completion_tokens"], 370);
    let end = find(&recs, "sub_agent_end", |_| true);
    assert_eq!(end["tokens"], 300 + 30 + 400 + 40);
    assert_eq!(end["steps"], 2);
    let child_cost = end["cost_usd"].as_f64().unwrap();
    assert!((child_cost - cost(700.0, 70.0)).abs() < 1e-12, "{end}");
    let child_stop = find(&recs, "stop", |r| r["agent"] == "sub-1");
    assert_eq!(child_stop["prompt_tokens"], 700);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_hits_its_step_limit_returns_what_it_has_saying_so() {
    let w = world(|s| {
        let mut p = profile("brief", &["list_dir"]);
        p.max_steps = Some(1);
        s.agents = vec![p];
    });
    let server = ScriptedServer::start(vec![
        calls(&[sub_agent_call("m1", "brief", "list")]),
        Turn::tool_call("c1", "list_dir", r#"{"path":"."}"#)
            .with_text("so far: a.txt")
            .into(),
        Reply::text("done"),
    ]);
    w.run(&server, "go").await;
    let recs = w.records();
    let m1 = find(&recs, "tool_result", |r| r["call_id"] == "m1");
    let content = m1["content"].as_str().unwrap();
    assert!(
        content.contains("sub-agent sub-1 (brief) stopped at its step limit (1)"),
        "{content}"
    );
    assert!(content.contains("so far: a.txt"), "{content}");
    assert_eq!(m1["value"]["stop"], "max_steps");
}

#[test]
fn a_profile_naming_a_missing_tool_or_call_sub_agent_fails_assembly_with_its_location() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut settings = SessionSettings::new(ws.path(), home.path());
    settings.agents = vec![profile("helper", &["read_file", "no_such_tool"])];
    let err = Session::assemble_dry(&settings).unwrap_err().to_string();
    assert!(
        err.starts_with("test: agents.helper.tools[1]: there is no tool named `no_such_tool`"),
        "{err}"
    );
    settings.agents = vec![profile("nester", &["call_sub_agent"])];
    let err = Session::assemble_dry(&settings).unwrap_err().to_string();
    assert!(
        err.starts_with("test: agents.nester.tools[0]: a profile cannot list `call_sub_agent`"),
        "{err}"
    );
    settings.agents = vec![profile("code", &["read_file"])];
    let err = Session::assemble_dry(&settings).unwrap_err().to_string();
    assert!(err.contains("built-in agent profile"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_judges_a_childs_calls_by_its_profile() {
    let w = world(|s| s.approval = Approval::Yolo);
    let server = ScriptedServer::start(vec![
        calls(&[sub_agent_call("m1", "search", "look")]),
        Turn::tool_call("c1", "write_file", r#"{"path":"x.txt","content":"x"}"#)
            .call("c2", "read_file", r#"{"path":"a.txt"}"#)
            .into(),
        Reply::text("seen"),
        Reply::text("done"),
    ]);
    w.run(&server, "go").await;
    let entries = dsh_core::journal::read_journal(w.session.journal_path.as_ref().unwrap())
        .unwrap()
        .records;
    let recorded = dsh_agent::replay::recorded_calls(&entries);
    let child: Vec<_> = recorded
        .iter()
        .filter(|c| c.agent.as_deref() == Some("sub-1"))
        .collect();
    assert!(child.iter().all(|c| c.profile.as_deref() == Some("search")));

    let dry = Session::assemble_dry(&SessionSettings::new(w.ws.path(), w.home.path())).unwrap();
    let rows = dsh_agent::replay::replay(recorded, &dry).await;
    let row = |agent: Option<&str>, id: &str| {
        rows.iter()
            .find(|r| r.agent.as_deref() == agent && r.call_id == id)
            .unwrap()
    };
    // Outside the profile today too: refused at the registry, not asked at gate 1 as the
    // main agent's write would be.
    assert_eq!(
        row(Some("sub-1"), "c1").today.gate,
        dsh_core::Gate::Registry
    );
    assert_eq!(
        row(Some("sub-1"), "c2").today.decision,
        dsh_core::Decision::Allow
    );
    assert_eq!(row(None, "m1").today.decision, dsh_core::Decision::Allow);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_share_their_parents_token_budget_as_they_spend_it() {
    let w = world(|s| s.approval = Approval::Yolo);
    let server = ScriptedServer::start(vec![
        Turn::default()
            .call("m1", "call_sub_agent", r#"{"profile":"code","task":"a"}"#)
            .call("m2", "call_sub_agent", r#"{"profile":"code","task":"b"}"#)
            .usage(100, 0)
            .into(),
        Turn::text("A done").usage(8_000, 0).into(),
        Turn::tool_call("c1", "list_dir", r#"{"path":"."}"#)
            .usage(12_000, 0)
            .into(),
        Turn::text("B never gets here").usage(10, 0).into(),
        Turn::text("done").usage(10, 0).into(),
    ]);
    // Far above what one request is estimated at (its text and 1,024 tokens of output),
    // which a child must have room for before it asks its model.
    let config = LoopConfig {
        max_tokens: 20_000,
        ..LoopConfig::default()
    };
    let mut agent = w.agent_with(&server, config);
    let out = agent.run("go", &CancellationToken::new()).await.unwrap();
    let recs = w.records();
    let ends: Vec<&Value> = recs
        .iter()
        .filter(|r| r["kind"] == "sub_agent_end")
        .collect();
    // After A, 20,000 - 100 - 8,000 = 11,900 tokens are left: room for B's first request,
    // whose reply spends them (more than it was estimated at), and B stops there; so does
    // the parent, its budget spent by its children.
    assert_eq!(ends[0]["stop"], "final_answer");
    assert_eq!(ends[1]["stop"], "token_budget", "{:?}", ends[1]);
    assert_eq!(out.stop, StopReason::TokenBudget);
    assert_eq!(agent.totals().prompt_tokens, 20_100);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_whose_spend_cannot_be_priced_is_not_started_under_a_cost_budget() {
    let w = world(|s| {
        let mut p = profile("other", &["list_dir"]);
        p.model = Some("some-unpriced-model".into());
        s.agents = vec![p];
    });
    let server = ScriptedServer::start(vec![
        Turn::tool_call("m1", "call_sub_agent", r#"{"profile":"other","task":"x"}"#)
            .usage(100, 0)
            .into(),
        Turn::text("done").usage(10, 0).into(),
    ]);
    let config = LoopConfig {
        price: Some(dsh_config::Price {
            input: 1.0,
            cached_input: None,
            output: 1.0,
        }),
        max_cost_usd: 0.5,
        ..LoopConfig::default()
    };
    let mut agent = w.agent_with(&server, config);
    agent.run("go", &CancellationToken::new()).await.unwrap();
    let recs = w.records();
    let m1 = find(&recs, "tool_result", |r| r["call_id"] == "m1");
    assert_eq!(m1["failure_kind"], "tool_error", "{m1}");
    assert!(
        m1["content"]
            .as_str()
            .unwrap()
            .contains("`some-unpriced-model` has no known prices"),
        "{m1}"
    );
    assert!(!recs.iter().any(|r| r["kind"] == "sub_agent_start"));
    // The parent's cost stays known.
    assert!(agent.totals().cost_usd.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_whose_tool_ignores_cancellation_still_ends_on_the_record() {
    let mut w = world(|s| s.approval = Approval::Yolo);
    w.session
        .register_tool(Arc::new(
            dsh_testkit::FnTool::new("stubborn", |_, _| async {
                // Ignores its cancellation token: stopped by force after the grace.
                tokio::time::sleep(std::time::Duration::from_secs(60)).await;
                Ok(dsh_testkit::ok_output(1))
            })
            .spec(|s| s.read_only(true)),
        ))
        .unwrap();
    let mut stream = w.stream.take().unwrap();
    let server = ScriptedServer::start(vec![
        calls(&[sub_agent_call("m1", "general", "wait")]),
        Turn::tool_call("c1", "stubborn", "{}").into(),
        Reply::text("never"),
    ]);
    let cancel = CancellationToken::new();
    let interrupt = cancel.clone();
    tokio::spawn(async move {
        while let Some(event) = stream.recv().await {
            if &*event.agent == "sub-1" && matches!(event.kind, EventKind::ToolStarted { .. }) {
                interrupt.cancel();
            }
        }
    });
    let out = w.agent(&server).run("go", &cancel).await.unwrap();
    assert_eq!(out.stop, StopReason::Interrupted);
    let recs = w.records();
    // The child's call, its stop and its end are all recorded, before the parent's call.
    let c1 = find(&recs, "tool_result", |r| r["call_id"] == "c1");
    assert_eq!(c1["failure_kind"], "cancelled_after", "{c1}");
    let child_stop = find(&recs, "stop", |r| r["agent"] == "sub-1");
    assert_eq!(child_stop["reason"], "interrupted");
    let end = find(&recs, "sub_agent_end", |_| true);
    assert_eq!(end["stop"], "interrupted");
    let m1 = find(&recs, "tool_result", |r| r["call_id"] == "m1");
    assert!(seq(end) < seq(m1));
    assert_eq!(m1["failure_kind"], "cancelled_after", "{m1}");
}

#[test]
fn a_rule_for_call_sub_agent_with_a_specifier_is_refused_at_assembly() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut settings = SessionSettings::new(ws.path(), home.path());
    let mut r = rule(Decision::Deny, "call_sub_agent", "general");
    r.origin = dsh_core::Origin {
        layer: dsh_core::Layer::User,
        path: Some("cfg.toml".into()),
        line: Some(2),
        key: Some("permissions.deny[0]".into()),
    };
    settings.rules.push(r);
    // Read as a path pattern, it would deny reading a file named `general` and not stop a
    // `general` sub-agent at all.
    let err = Session::assemble_dry(&settings).unwrap_err();
    assert!(err.is_configuration());
    let err = err.to_string();
    assert!(
        err.starts_with("cfg.toml:2: permissions.deny[0]: `call_sub_agent` takes no path"),
        "{err}"
    );
    // The bare rule turns sub-agents off.
    settings.rules = vec![dsh_core::Rule {
        specifier: None,
        ..rule(Decision::Deny, "call_sub_agent", "x")
    }];
    let session = Session::assemble_dry(&settings).unwrap();
    let call = dsh_core::ToolCall::new(
        "c",
        "call_sub_agent",
        json!({"profile": "search", "task": "t"}),
    );
    let report = block_on(session.pipeline.check(&call));
    assert_eq!(report.decision, dsh_core::Decision::Deny);
}

/// Runs `f` to completion on a small runtime (for the sync tests).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_started_after_its_siblings_spent_the_budget_asks_its_model_nothing() {
    let w = world(|s| s.approval = Approval::Yolo);
    let server = ScriptedServer::start(vec![
        Turn::default()
            .call("m1", "call_sub_agent", r#"{"profile":"code","task":"a"}"#)
            .call("m2", "call_sub_agent", r#"{"profile":"code","task":"b"}"#)
            .call("m3", "call_sub_agent", r#"{"profile":"code","task":"c"}"#)
            .usage(100, 0)
            .into(),
        // A spends past the budget in its one step; B and C must not ask their model.
        Turn::text("A done").usage(20_000, 0).into(),
        Turn::text("done").usage(10, 0).into(),
    ]);
    let config = LoopConfig {
        max_tokens: 20_000,
        ..LoopConfig::default()
    };
    let mut agent = w.agent_with(&server, config);
    let out = agent.run("go", &CancellationToken::new()).await.unwrap();
    assert_eq!(out.stop, StopReason::TokenBudget);
    assert_eq!(server.requests().len(), 2, "B and C made no model call");
    let recs = w.records();
    let ends: Vec<(&Value, &Value)> = recs
        .iter()
        .filter(|r| r["kind"] == "sub_agent_end")
        .map(|r| (&r["stop"], &r["steps"]))
        .collect();
    assert_eq!(
        ends,
        [
            (&json!("final_answer"), &json!(1)),
            (&json!("token_budget"), &json!(0)),
            (&json!("token_budget"), &json!(0)),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_reply_without_usage_does_not_switch_the_cost_budget_off() {
    let w = world(|_| {});
    let server = ScriptedServer::start(vec![
        Turn::tool_call("m1", "call_sub_agent", r#"{"profile":"search","task":"x"}"#)
            .usage(100, 0)
            .into(),
        // No usage reported: its cost is unknown, the total with it.
        Turn::text("child answer").into(),
        // Far past the budget at the known prices.
        Turn::tool_call("m2", "list_dir", r#"{"path":"."}"#)
            .usage(2_000_000, 0)
            .into(),
        Turn::text("never").into(),
    ]);
    let config = LoopConfig {
        price: Some(dsh_config::Price {
            input: 1.0,
            cached_input: None,
            output: 1.0,
        }),
        max_cost_usd: 1.0,
        ..LoopConfig::default()
    };
    let mut agent = w.agent_with(&server, config);
    let out = agent.run("go", &CancellationToken::new()).await.unwrap();
    assert_eq!(out.stop, StopReason::CostBudget);
    // The total is still shown as unknown: part of it is.
    assert_eq!(agent.totals().cost_usd, None);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_gets_no_tool_its_parent_does_not_have() {
    let w = world(|s| s.approval = Approval::Yolo);
    let server = ScriptedServer::start(vec![
        calls(&[sub_agent_call("m1", "code", "write")]),
        Turn::tool_call("c1", "write_file", r#"{"path":"x.txt","content":"x"}"#).into(),
        Reply::text("could not"),
        Reply::text("done"),
    ]);
    // A parent that may read and start sub-agents, nothing else.
    let spec = dsh_agent::AgentSpec {
        tools: dsh_core::ToolSet::only(["call_sub_agent", "read_file", "list_dir"]),
        ..dsh_agent::AgentSpec::main()
    };
    let mut parent = Agent::with_spec(
        w.session.clone(),
        spec,
        provider(&server),
        LoopConfig::default(),
    );
    parent.run("go", &CancellationToken::new()).await.unwrap();
    // The `code` child is offered only what its parent has of its profile...
    assert_eq!(offered(&server.requests()[1]), ["list_dir", "read_file"]);
    // ...and the write its model names anyway is refused at the registry.
    assert!(!w.ws.path().join("x.txt").exists());
    let recs = w.records();
    let c1 = find(&recs, "tool_result", |r| r["call_id"] == "c1");
    assert_eq!(c1["failure_kind"], "unknown_tool", "{c1}");
    assert_eq!(c1["decided_by"]["gate"], "registry");
}

#[test]
fn a_user_profile_must_list_its_tools() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut settings = SessionSettings::new(ws.path(), home.path());
    settings.agents = vec![ProfileSpec {
        tools: None,
        ..profile("helper", &[])
    }];
    let err = Session::assemble_dry(&settings).unwrap_err().to_string();
    assert!(
        err.starts_with("test: agents.helper: the `helper` profile does not list its tools"),
        "{err}"
    );
}
