//! Budgets shared by parallel children (issue 21, item 8; SPEC A1, A11): each child reserves
//! its next request's estimate against its parent's budget before sending it and settles the
//! reservation with the real usage when the reply comes, so children in flight together
//! cannot pass the budget by more than what their replies use beyond their estimates.
//!
//! Against a real HTTP/SSE server: every child's reply is held until every child has either
//! sent its request or stopped, so all the requests that will ever be in flight together
//! are — the case where checking "spent so far" before each request lets all of them through.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::provider;
use dsh_agent::{Agent, EventKind, EventSink, LoopConfig, Session, SessionSettings, StopReason};
use dsh_core::CancellationToken;
use dsh_testkit::model_server::{Gate, Reply, ScriptedServer, Turn};
use serde_json::{Value, json};

/// How many search children the parent starts in one step.
const CHILDREN: usize = 8;
/// Each child's task, in characters: its request is at least a quarter of that in tokens.
const TASK_CHARS: usize = 28_000;
/// What each child's reply reports: the task's share of its prompt, and a short answer —
/// never more than the request's estimate (its text at four characters a token, plus the
/// output estimate), so a run within the stated bound stays within the budget itself.
const REPLY_PROMPT: u64 = (TASK_CHARS / 4) as u64;
const REPLY_COMPLETION: u64 = 100;
/// The parent's own first call.
const PARENT_PROMPT: u64 = 1_000;

/// Which budget the run is held to.
#[derive(Clone, Copy, Debug)]
enum Budget {
    /// `[limits] max_tokens`.
    Tokens(u64),
    /// `[limits] max_cost_usd`, at one dollar per million tokens in and out.
    Cost(f64),
}

/// What one run under `budget` came to.
struct Run {
    tokens: u64,
    cost_usd: Option<f64>,
    /// `(stop, steps)` of each child's `sub_agent_end`.
    ends: Vec<(String, u64)>,
    /// Requests the children sent.
    child_requests: usize,
}

/// The parent (one step: it starts the children, then stops at its step limit) starts
/// [`CHILDREN`] search children at once; their replies are held until each child has sent
/// its request or stopped.
/// Each child's reply reports `reply_prompt` prompt tokens and [`REPLY_COMPLETION`].
async fn run_children(budget: Budget, reply_prompt: u64) -> Run {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mut settings = SessionSettings::new(ws.path(), home.path());
    let (events, mut stream) = EventSink::channel();
    settings.events = events;
    let session = Arc::new(Session::assemble(&settings).unwrap());
    drop(settings);

    let finished = Arc::new(AtomicUsize::new(0));
    let counted = finished.clone();
    tokio::spawn(async move {
        while let Some(e) = stream.recv().await {
            if matches!(e.kind, EventKind::SubAgentFinished { .. }) {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        }
    });

    let gate = Gate::new();
    let mut parent_turn = Turn::default().deltas(4_096);
    for i in 0..CHILDREN {
        let task = format!("task {i}: {}", "t".repeat(TASK_CHARS));
        parent_turn = parent_turn.call(
            &format!("m{i}"),
            "call_sub_agent",
            &json!({"profile": "search", "task": task}).to_string(),
        );
    }
    let mut script: Vec<Reply> = vec![parent_turn.usage(PARENT_PROMPT, 0).into()];
    for _ in 0..CHILDREN {
        script.push(
            Reply::from(Turn::text("found").usage(reply_prompt, REPLY_COMPLETION)).held(&gate),
        );
    }
    let server = ScriptedServer::start(script);

    let mut config = LoopConfig {
        max_steps: 1,
        ..LoopConfig::default()
    };
    match budget {
        Budget::Tokens(n) => config.max_tokens = n,
        Budget::Cost(usd) => {
            config.max_cost_usd = usd;
            config.price = Some(dsh_config::Price {
                input: 1.0,
                cached_input: None,
                output: 1.0,
            });
        }
    }
    let mut agent = Agent::new(session.clone(), provider(&server), config);
    let run = tokio::spawn(async move {
        let out = agent.run("go", &CancellationToken::new()).await.unwrap();
        (agent, out)
    });

    // Each child either sends its first request or stops without one; once all have, the
    // replies go.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let sent = server.requests().len().saturating_sub(1);
        if sent + finished.load(Ordering::SeqCst) >= CHILDREN {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the children neither asked their model nor stopped: {sent} requests, {} stopped",
            finished.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gate.open();
    let (agent, out) = run.await.unwrap();
    assert_ne!(out.stop, StopReason::Interrupted);

    let records: Vec<Value> =
        dsh_core::journal::read_journal(session.journal_path.as_ref().unwrap())
            .unwrap()
            .records
            .into_iter()
            .map(|e| Value::Object(e.json))
            .collect();
    let ends = records
        .iter()
        .filter(|r| r["kind"] == "sub_agent_end")
        .map(|r| {
            (
                r["stop"].as_str().unwrap().to_owned(),
                r["steps"].as_u64().unwrap(),
            )
        })
        .collect();
    let totals = agent.totals();
    Run {
        tokens: totals.prompt_tokens + totals.completion_tokens,
        cost_usd: totals.cost_usd,
        ends,
        child_requests: server.requests().len() - 1,
    }
}

/// Some children ran, and those the budget had no room for stopped at it without asking
/// their model anything.
fn children_ran_and_the_rest_stopped_at(run: &Run, stop: &str) {
    assert_eq!(run.ends.len(), CHILDREN);
    let answered = run
        .ends
        .iter()
        .filter(|(s, n)| s == "final_answer" && *n == 1)
        .count();
    let stopped = run
        .ends
        .iter()
        .filter(|(s, n)| s == stop && *n == 0)
        .count();
    assert_eq!(answered, run.child_requests, "{:?}", run.ends);
    assert!(answered >= 1, "no child ran: {:?}", run.ends);
    assert!(stopped >= 1, "every child was let through: {:?}", run.ends);
    assert_eq!(answered + stopped, CHILDREN, "{:?}", run.ends);
}

/// The case: eight search children under `max_tokens = 50000`. Checking what was
/// spent before each request let all eight through (1,000 + 8 × 7,100 = 57,800 tokens);
/// with reservations the replies, none above its estimate, stay within the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_children_stay_within_the_token_budget_when_replies_meet_their_estimates() {
    let budget = 50_000;
    let run = run_children(Budget::Tokens(budget), REPLY_PROMPT).await;
    assert!(
        run.tokens <= budget,
        "{} tokens spent under a budget of {budget} ({} children asked their model)",
        run.tokens,
        run.child_requests
    );
    children_ran_and_the_rest_stopped_at(&run, "token_budget");
}

/// The same under `max_cost_usd`: the reservation carries the estimate's cost at the
/// model's prices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_children_stay_within_the_cost_budget_when_replies_meet_their_estimates() {
    let budget = 0.05;
    let run = run_children(Budget::Cost(budget), REPLY_PROMPT).await;
    let cost = run.cost_usd.unwrap();
    assert!(
        cost <= budget + 1e-12,
        "${cost} spent under a budget of ${budget} ({} children asked their model)",
        run.child_requests
    );
    children_ran_and_the_rest_stopped_at(&run, "cost_budget");
}

/// A reply may use more than its request was estimated at (a model that counts tokens
/// differently, a long answer): the budget is then passed, by no more than one reply per
/// child that was let through — and the reservations still kept the others from asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_beyond_their_estimates_pass_the_budget_by_at_most_one_reply_per_live_child() {
    let budget = 50_000;
    let reply_prompt = 3 * REPLY_PROMPT;
    let run = run_children(Budget::Tokens(budget), reply_prompt).await;
    let reply = reply_prompt + REPLY_COMPLETION;
    let live = run.child_requests as u64;
    assert!(
        run.tokens <= budget + live * reply,
        "{} tokens: more than the budget {budget} plus one reply ({reply}) per live child ({live})",
        run.tokens
    );
    assert!(run.child_requests < CHILDREN, "{:?}", run.ends);
    children_ran_and_the_rest_stopped_at(&run, "token_budget");
}
