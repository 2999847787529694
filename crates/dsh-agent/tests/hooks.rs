//! The hook events the runtime fires itself, through the runtime handle (issue 27): a
//! `Notification` hook is told while a call waits for a person (the question is not held up
//! by it), and a `PreCompact` hook before old turns are summarized — both real processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::provider;
use dsh_agent::hooks::HookSetting;
use dsh_agent::{
    Agent, Approval, Command, EventKind, EventSink, LoopConfig, Reply, Runtime, Session,
    SessionSettings, VerifyConfig,
};
use dsh_config::{Hook, HookEvent, OnError};
use dsh_core::{ApprovalOutcome, CancellationToken};
use dsh_testkit::model_server::{Reply as Scripted, ScriptedServer, Turn};
use serde_json::{Value, json};

/// A hook that writes the event it is given to `out`.
fn recorder(event: HookEvent, out: &Path) -> HookSetting {
    HookSetting {
        hook: Hook {
            event,
            matcher: None,
            command: format!("cat > '{}'", out.display()),
            timeout_ms: 10_000,
            on_error: OnError::Deny,
            env: Default::default(),
        },
        origin: "test".to_owned(),
        approved: true,
        approval: None,
    }
}

/// Waits (bounded) for `path` to hold a whole JSON event.
fn event_in(path: &Path) -> Value {
    for _ in 0..1000 {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(v) = serde_json::from_str::<Value>(&text)
        {
            return v;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{} never held the hook's event", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notification_and_pre_compact_hooks_are_told() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let notified = out.path().join("notified.json");
    let compacting = out.path().join("compacting.json");
    let mut settings = SessionSettings::new(ws.path(), home.path());
    settings.approval = Approval::Interactive;
    settings.hooks = vec![
        recorder(HookEvent::Notification, &notified),
        recorder(HookEvent::PreCompact, &compacting),
    ];
    let (events, mut stream) = EventSink::channel();
    settings.events = events;
    let session = std::sync::Arc::new(Session::assemble(&settings).unwrap());
    let long = |w: &str| format!("{w} ").repeat(400);
    let server = ScriptedServer::start(vec![
        Scripted::Stream(Turn::tool_call(
            "c1",
            "write_file",
            &json!({"path": "b.txt", "content": "beta\n"}).to_string(),
        )),
        Scripted::text("one"),
        Scripted::text("two"),
        Scripted::text("three"),
        Scripted::text("the summary"),
    ]);
    let agent = Agent::new(session.clone(), provider(&server), LoopConfig::default());
    let runtime = Runtime::start(agent, VerifyConfig::default(), CancellationToken::new());
    let mut last = 0;
    for word in ["one", "two", "three"] {
        last = runtime.send(Command::Prompt(long(word))).unwrap();
    }
    let compact = runtime
        .send(Command::Compact(Some("keep b.txt".into())))
        .unwrap();
    let stream_task = tokio::spawn(async move {
        let mut compacted = None;
        while let Some(e) = stream.recv().await {
            match e.kind {
                EventKind::ApprovalAsked { reply, .. } => {
                    // The person is asked while the hook is told.
                    let seen = tokio::task::spawn_blocking({
                        let notified = notified.clone();
                        move || event_in(&notified)
                    })
                    .await
                    .unwrap();
                    reply.send(ApprovalOutcome::AllowedOnce.into()).unwrap();
                    assert_eq!(seen["hook_event_name"], "Notification");
                    assert!(
                        seen["message"]
                            .as_str()
                            .unwrap()
                            .contains("needs your permission to use write_file"),
                        "{seen}"
                    );
                }
                EventKind::Done { command, reply } if command == compact => {
                    compacted = Some(reply);
                    break;
                }
                _ => {}
            }
        }
        compacted
    });
    let reply = tokio::time::timeout(Duration::from_secs(60), stream_task)
        .await
        .unwrap()
        .unwrap();
    assert!(last < compact);
    // Told before the summary is asked for (whether it is then kept or refused).
    assert!(matches!(reply, Some(Reply::Compacted(Ok(_)))), "{reply:?}");
    let seen = event_in(&compacting);
    assert_eq!(seen["hook_event_name"], "PreCompact");
    assert_eq!(seen["trigger"], "manual");
    assert_eq!(seen["custom_instructions"], "keep b.txt");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("b.txt")).unwrap(),
        "beta\n"
    );
}
