//! The runtime handle (issue 23; DESIGN §2–§3): a front end sends commands and reads the
//! ordered event stream, nothing else — the same sequence `dsh exec` and the REPL use. One
//! session drives a turn with a sub-agent and an approval, an interrupted turn, a
//! compaction, a model switch and the end of the session, against real HTTP/SSE servers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::provider;
use dsh_agent::runtime::CommandId;
use dsh_agent::{
    Agent, Approval, Command, Ending, Event, EventKind, EventSink, EventStream, LoopConfig, Reply,
    Runtime, Session, SessionSettings, StopReason, VerifyConfig,
};
use dsh_core::{ApprovalOutcome, CancellationToken};
use dsh_testkit::model_server::{Gate, Reply as Scripted, ScriptedServer, Turn};
use serde_json::json;

/// Reads events up to command `id`'s end: the events before it, and its reply. Approval
/// questions are answered `allow once`.
async fn until_done(stream: &mut EventStream, id: CommandId) -> (Vec<Event>, Reply) {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), stream.recv())
            .await
            .expect("the runtime answers every command")
            .expect("the stream stays open while the runtime runs");
        match event.kind {
            EventKind::Done { command, reply } if command == id => return (seen, reply),
            EventKind::ApprovalAsked { request, reply } => {
                reply.send(ApprovalOutcome::AllowedOnce.into()).unwrap();
                seen.push(Event {
                    agent: event.agent,
                    kind: EventKind::ToolProposed { call: request.call },
                });
            }
            kind => seen.push(Event {
                agent: event.agent,
                kind,
            }),
        }
    }
}

fn turn_of(reply: Reply) -> dsh_agent::Outcome {
    match reply {
        Reply::Turn(outcome) => outcome.unwrap(),
        other => panic!("expected a turn, got {other:?}"),
    }
}

/// A long prompt, so the turns compaction replaces outweigh its summary.
fn long(word: &str) -> String {
    format!("{word} ").repeat(400)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_end_drives_a_session_by_commands_and_reads_only_events() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mut settings = SessionSettings::new(ws.path(), home.path());
    settings.approval = Approval::Interactive;
    let (events, mut stream) = EventSink::channel();
    settings.events = events;
    let session = std::sync::Arc::new(Session::assemble(&settings).unwrap());
    let journal = session.journal_path.clone().unwrap();
    drop(settings);

    let held = Gate::new();
    let first = ScriptedServer::start(vec![
        // Turn 1: a sub-agent, then a write a person approves, then the answer.
        Scripted::Stream(Turn::tool_call(
            "c1",
            "call_sub_agent",
            &json!({"profile": "search", "task": "find alpha"}).to_string(),
        )),
        Scripted::text("alpha is in a.txt"),
        Scripted::Stream(Turn::tool_call(
            "c2",
            "write_file",
            &json!({"path": "b.txt", "content": "beta\n"}).to_string(),
        )),
        Scripted::text("wrote b.txt"),
        // Turn 2: held until the test has interrupted it.
        Scripted::text("never seen").held(&held),
        // Turn 3, then the summary compaction asks for.
        Scripted::text("third answer"),
        Scripted::text("earlier: the user asked about alpha and beta"),
    ]);
    let second = ScriptedServer::start(vec![Scripted::text("from the other model")]);

    let agent = Agent::new(session.clone(), provider(&first), LoopConfig::default());
    drop(session);
    let runtime = Runtime::start(agent, VerifyConfig::default(), CancellationToken::new());

    // A turn with a sub-agent and an approval.
    let id = runtime.send(Command::Prompt(long("one"))).unwrap();
    let (seen, reply) = until_done(&mut stream, id).await;
    let outcome = turn_of(reply);
    assert_eq!(outcome.stop, StopReason::FinalAnswer);
    assert_eq!(outcome.text, "wrote b.txt");
    let started = seen
        .iter()
        .position(|e| matches!(&e.kind, EventKind::SubAgentStarted { profile, .. } if profile == "search"))
        .expect("the sub-agent started");
    let finished = seen
        .iter()
        .position(|e| matches!(e.kind, EventKind::SubAgentFinished { .. }))
        .expect("the sub-agent finished");
    let asked = seen
        .iter()
        .position(
            |e| matches!(&e.kind, EventKind::ToolProposed { call } if call.name() == "write_file"),
        )
        .expect("the write was proposed");
    assert!(started < finished && finished < asked);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("b.txt")).unwrap(),
        "beta\n"
    );

    // An interrupted turn: the model is known to be waiting (its request arrived), then
    // the front end interrupts.
    let id = runtime.send(Command::Prompt(long("two"))).unwrap();
    assert!(first.wait_for_requests(5, Duration::from_secs(60)));
    runtime.interrupt();
    let (_, reply) = until_done(&mut stream, id).await;
    assert_eq!(turn_of(reply).stop, StopReason::Interrupted);
    held.open();

    // A third turn, then a compaction of all but the last two.
    let id = runtime.send(Command::Prompt(long("three"))).unwrap();
    let (_, reply) = until_done(&mut stream, id).await;
    assert_eq!(turn_of(reply).text, "third answer");
    let id = runtime.send(Command::Compact(None)).unwrap();
    let (seen, reply) = until_done(&mut stream, id).await;
    assert!(matches!(reply, Reply::Compacted(Ok(true))), "{reply:?}");
    assert!(
        seen.iter()
            .any(|e| matches!(e.kind, EventKind::ContextCompacted { turns: 1, .. }))
    );

    // A model switch: the next turn goes to the other server.
    let id = runtime
        .send(Command::SwitchModel(provider(&second)))
        .unwrap();
    let (_, reply) = until_done(&mut stream, id).await;
    // Journaled (`model_changed`), so a resume takes it up.
    assert!(matches!(reply, Reply::Recorded(Ok(()))));
    let id = runtime.send(Command::Prompt("four".into())).unwrap();
    let (_, reply) = until_done(&mut stream, id).await;
    assert_eq!(turn_of(reply).text, "from the other model");
    assert_eq!(second.requests().len(), 1);
    // The summary stands in for the first turn in what the other model is sent.
    let sent = second.requests()[0]["messages"].to_string();
    assert!(sent.contains("earlier: the user asked about alpha and beta"));
    assert_eq!(runtime.status().turns, 4);

    // The end: `session_end` is written, then the stream ends once the handle is gone.
    let id = runtime.send(Command::Finish(Ending::Finished)).unwrap();
    let (_, reply) = until_done(&mut stream, id).await;
    assert!(matches!(reply, Reply::Finished(Ok(()))));
    drop(runtime);
    while stream.recv().await.is_some() {}
    let records = dsh_core::journal::read_journal(&journal).unwrap().records;
    let last = records.last().unwrap();
    assert_eq!(last.json["kind"], "session_end");
}
