//! Re-entrant dispatch (DESIGN §3, "Nested calls"): a running tool submits calls through its
//! `ExecContext`; they are journaled with `parent` and `source`, pass every gate, and draw
//! from the session's one `max_parallel` budget without deadlocking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_core::journal::MemoryJournal;
use dsh_core::{
    CallSource, CancellationToken, ExecContext, FrozenResult, Pipeline, PipelineConfig, Registry,
    Tier, ToolCall, ToolError, Vote,
};
use dsh_testkit::{FnPolicy, FnTool, ok_output};
use serde_json::{Value, json};

/// How many leaf bodies run at once, and the most ever.
#[derive(Default)]
struct Concurrency {
    now: AtomicUsize,
    max: AtomicUsize,
    /// Exclusive bodies that found another body running.
    overlapped_exclusive: AtomicUsize,
}

impl Concurrency {
    fn enter(&self, exclusive: bool) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        if exclusive && n > 1 {
            self.overlapped_exclusive.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `leaf{exclusive?}`: counts itself while it runs and yields a few times so that others
/// get the chance to overlap it. `parent{subs:[{…}], parallel?}`: submits `subs` as `leaf`
/// calls through its dispatch handle and reports their outcomes.
fn pipeline(max_parallel: usize, conc: Arc<Concurrency>) -> (Arc<Pipeline>, Arc<MemoryJournal>) {
    let leaf = FnTool::new("leaf", move |args: Value, _cx: ExecContext| {
        let conc = conc.clone();
        async move {
            let exclusive = args["exclusive"].as_bool().unwrap_or(false);
            conc.enter(exclusive);
            for _ in 0..50 {
                tokio::task::yield_now().await;
            }
            conc.leave();
            Ok(ok_output(1))
        }
    })
    .parallel(|args| Ok(!args["exclusive"].as_bool().unwrap_or(false)));
    let parent = FnTool::new("parent", |args: Value, cx: ExecContext| async move {
        let subs: Vec<ToolCall> = args["subs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, a)| ToolCall::new(format!("{}.{i}", cx.call.id()), "leaf", a))
            .collect();
        let out = cx
            .submit(CallSource::Code, subs)
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?;
        let oks = out.results.iter().filter(|r| r.ok()).count();
        Ok(ok_output(i64::try_from(oks).unwrap()))
    })
    .parallel(|args| Ok(args["parallel"].as_bool().unwrap_or(false)));

    let mut registry = Registry::new();
    registry.register(leaf).unwrap();
    registry.register(parent).unwrap();
    let journal = Arc::new(MemoryJournal::new("dispatch"));
    let p = Pipeline::builder(registry, journal.clone())
        .pre_policy(FnPolicy::new("rules", |call, _| {
            if call.args()["deny"].as_bool() == Some(true) {
                Vote::deny(Tier::Rule, "deny rule `leaf(denied)`")
            } else {
                Vote::allow(Tier::Rule, "test allows it")
            }
        }))
        .config(PipelineConfig {
            max_parallel,
            ..PipelineConfig::default()
        })
        .build();
    (p, journal)
}

fn parent(id: &str, subs: Value, parallel: bool) -> ToolCall {
    ToolCall::new(id, "parent", json!({"subs": subs, "parallel": parallel}))
}

/// Runs a batch, failing (instead of hanging) if it deadlocks.
async fn run(p: &Pipeline, calls: Vec<ToolCall>) -> Vec<Arc<FrozenResult>> {
    tokio::time::timeout(
        Duration::from_secs(60),
        p.run_batch(calls, &CancellationToken::new()),
    )
    .await
    .expect("the batch deadlocked")
    .unwrap()
    .results
}

fn records(journal: &MemoryJournal) -> Vec<Value> {
    journal
        .lines()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sub_calls_are_journaled_with_parent_and_source_and_pass_the_gates() {
    let (p, journal) = pipeline(4, Arc::default());
    let results = run(
        &p,
        vec![parent(
            "p1",
            json!([{}, {"deny": true}, {"exclusive": true}]),
            false,
        )],
    )
    .await;
    // Two of the three sub-calls ran; the parent saw the denial as a result.
    assert_eq!(results[0].content(), "n=2");

    let recs = records(&journal);
    let subs: Vec<&Value> = recs
        .iter()
        .filter(|r| r["kind"] == "tool_call" && r["name"] == "leaf")
        .collect();
    assert_eq!(subs.len(), 3);
    for s in &subs {
        assert_eq!(s["parent"], "p1", "{s}");
        assert_eq!(s["source"], "code", "{s}");
    }
    let top = recs
        .iter()
        .find(|r| r["kind"] == "tool_call" && r["name"] == "parent")
        .unwrap();
    assert_eq!(top["source"], "model");
    assert!(top["parent"].is_null());
    let denied = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "p1.1")
        .unwrap();
    assert_eq!(denied["failure_kind"], "denied");
    assert_eq!(denied["decided_by"]["gate"], "pre_policy");
    // The sub-calls' results are committed before the parent's.
    let pos = |id: &str| {
        recs.iter()
            .position(|r| r["kind"] == "tool_result" && r["call_id"] == id)
            .unwrap()
    };
    assert!(pos("p1.2") < pos("p1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nested_calls_never_exceed_max_parallel() {
    let conc = Arc::new(Concurrency::default());
    let (p, _) = pipeline(2, conc.clone());
    let subs = json!([{}, {}, {}, {}]);
    let results = run(
        &p,
        vec![
            parent("a", subs.clone(), true),
            parent("b", subs.clone(), true),
            parent("c", subs, true),
        ],
    )
    .await;
    assert!(results.iter().all(|r| r.content() == "n=4"), "{results:?}");
    // Without one budget each nested batch would run two leaves beside the others'.
    assert!(conc.max.load(Ordering::SeqCst) <= 2, "{:?}", conc.max);
    assert!(p.slots().peak() <= 2, "{}", p.slots().peak());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_parent_waiting_on_sub_calls_gives_its_slot_back_with_max_parallel_one() {
    let (p, _) = pipeline(1, Arc::default());
    let results = run(
        &p,
        vec![
            parent("a", json!([{}, {"exclusive": true}, {}]), true),
            parent("b", json!([{}]), false),
        ],
    )
    .await;
    assert_eq!(results[0].content(), "n=3");
    assert_eq!(results[1].content(), "n=1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_parallel_parents_with_exclusive_sub_calls_take_turns() {
    let conc = Arc::new(Concurrency::default());
    let (p, _) = pipeline(4, conc.clone());
    let results = run(
        &p,
        vec![
            parent("a", json!([{"exclusive": true}]), true),
            parent("b", json!([{"exclusive": true}]), true),
        ],
    )
    .await;
    assert_eq!(results[0].content(), "n=1");
    assert_eq!(results[1].content(), "n=1");
    assert_eq!(conc.overlapped_exclusive.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelling_the_parent_cancels_its_sub_calls() {
    let started = Arc::new(tokio::sync::Notify::new());
    let mut registry = Registry::new();
    let s = started.clone();
    registry
        .register(
            FnTool::new("hang", move |_, cx: ExecContext| {
                let s = s.clone();
                async move {
                    s.notify_one();
                    cx.cancel.cancelled().await;
                    Err(ToolError::failed("stopped"))
                }
            })
            .parallel(|_| Ok(true)),
        )
        .unwrap();
    registry
        .register(FnTool::new("parent", |_, cx: ExecContext| async move {
            let sub = ToolCall::new("sub", "hang", json!({}));
            let out = cx
                .submit(CallSource::Code, vec![sub])
                .await
                .map_err(|e| ToolError::failed(e.to_string()))?;
            Err(ToolError::failed(format!(
                "sub-call ended as {:?}",
                out.results[0].failure_kind()
            )))
        }))
        .unwrap();
    let journal = Arc::new(MemoryJournal::new("cancel"));
    let p = Pipeline::builder(registry, journal.clone())
        .pre_policy(FnPolicy::new("all", |_, _| Vote::allow(Tier::Rule, "ok")))
        .build();
    let cancel = CancellationToken::new();
    let batch = p.run_batch(vec![ToolCall::new("p", "parent", json!({}))], &cancel);
    let trigger = async {
        started.notified().await;
        cancel.cancel();
    };
    let (out, ()) = tokio::join!(batch, trigger);
    let out = out.unwrap();
    assert_eq!(
        out.results[0].failure_kind(),
        Some(dsh_core::FailureKind::CancelledAfter)
    );
    let recs = records(&journal);
    let sub = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "sub")
        .unwrap();
    assert_eq!(sub["failure_kind"], "cancelled_after", "{sub}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_calls_are_their_parents_agents() {
    let (p, journal) = pipeline(2, Arc::default());
    let call = parent("p", json!([{}]), false).with_agent(Some("sub-3".into()));
    run(&p, vec![call]).await;
    let recs = records(&journal);
    let sub = recs
        .iter()
        .find(|r| r["kind"] == "tool_call" && r["call_id"] == "p.0")
        .unwrap();
    assert_eq!(sub["agent"], "sub-3", "{sub}");
    assert_eq!(sub["parent"], "p");
}

/// Sets its flag when dropped.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>, Arc<tokio::sync::Notify>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
        self.1.notify_one();
    }
}

/// A parent that stops waiting for its submission (drops it, as a timeout would) takes the
/// sub-call's work with it, even one that ignores cancellation: nothing outlives its batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_submission_stops_its_sub_calls() {
    let started = Arc::new(tokio::sync::Notify::new());
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let gone = Arc::new(tokio::sync::Notify::new());
    let mut registry = Registry::new();
    let (s, d, g) = (started.clone(), dropped.clone(), gone.clone());
    registry
        .register(
            FnTool::new("stubborn", move |_, _cx: ExecContext| {
                let (s, flag) = (s.clone(), DropFlag(d.clone(), g.clone()));
                async move {
                    let _flag = flag;
                    s.notify_one();
                    // Ignores cancellation: only being dropped ends it.
                    std::future::pending::<()>().await;
                    Ok(ok_output(0))
                }
            })
            .parallel(|_| Ok(true)),
        )
        .unwrap();
    let s = started.clone();
    registry
        .register(FnTool::new("parent", move |_, cx: ExecContext| {
            let s = s.clone();
            async move {
                let sub = ToolCall::new("sub", "stubborn", json!({}));
                tokio::select! {
                    _ = cx.submit(CallSource::Code, vec![sub]) => {}
                    () = s.notified() => {}
                }
                Ok(ok_output(1))
            }
        }))
        .unwrap();
    let journal = Arc::new(MemoryJournal::new("drop"));
    let p = Pipeline::builder(registry, journal)
        .pre_policy(FnPolicy::new("all", |_, _| Vote::allow(Tier::Rule, "ok")))
        .build();
    let results = run(&p, vec![ToolCall::new("p", "parent", json!({}))]).await;
    assert_eq!(results[0].content(), "n=1");
    tokio::time::timeout(Duration::from_secs(30), async {
        while !dropped.load(Ordering::SeqCst) {
            gone.notified().await;
        }
    })
    .await
    .expect("the sub-call's work outlived its dropped batch");
}

/// A parent whose sub-call ignores its cancellation for `sub_runs`, then winds down for a
/// second after its submission returned; the batch is cancelled once the sub-call runs.
/// The journal's records, and the parent's result.
async fn cancel_a_parent_with_a_slow_sub_call(
    sub_runs: Duration,
) -> (Vec<Value>, Arc<FrozenResult>) {
    let started = Arc::new(tokio::sync::Notify::new());
    let mut registry = Registry::new();
    let s = started.clone();
    registry
        .register(FnTool::new("stubborn", move |_, _cx: ExecContext| {
            let s = s.clone();
            async move {
                s.notify_one();
                // Ignores its cancellation token.
                tokio::time::sleep(sub_runs).await;
                Ok(ok_output(1))
            }
        }))
        .unwrap();
    registry
        .register(FnTool::new("parent", |_, cx: ExecContext| async move {
            let sub = ToolCall::new("sub", "stubborn", json!({}));
            let out = cx
                .submit(CallSource::Code, vec![sub])
                .await
                .map_err(|e| ToolError::failed(e.to_string()))?;
            // Winding down takes a moment (a sub-agent records its ending).
            tokio::time::sleep(Duration::from_secs(1)).await;
            Err(ToolError::failed(format!(
                "the parent saw its sub-call end as {:?}",
                out.results[0].failure_kind()
            )))
        }))
        .unwrap();
    let journal = Arc::new(MemoryJournal::new("stubborn"));
    let p = Pipeline::builder(registry, journal.clone())
        .pre_policy(FnPolicy::new("all", |_, _| Vote::allow(Tier::Rule, "ok")))
        .build();
    let cancel = CancellationToken::new();
    let batch = p.run_batch(vec![ToolCall::new("p", "parent", json!({}))], &cancel);
    let trigger = async {
        started.notified().await;
        cancel.cancel();
    };
    let (out, ()) = tokio::join!(batch, trigger);
    let parent = out.unwrap().results[0].clone();
    (records(&journal), parent)
}

fn result_of<'a>(recs: &'a [Value], id: &str) -> &'a Value {
    recs.iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == id)
        .unwrap_or_else(|| panic!("no tool_result for {id}: {recs:?}"))
}

#[tokio::test(start_paused = true)]
async fn a_parent_waiting_on_a_stubborn_sub_call_is_not_dropped_before_it_records_it() {
    // The sub-call outlives its grace: it is dropped and recorded; the parent, waiting on
    // it, is not dropped with it and records its own ending after.
    let (recs, parent) = cancel_a_parent_with_a_slow_sub_call(Duration::from_secs(3600)).await;
    let sub = result_of(&recs, "sub");
    assert_eq!(sub["failure_kind"], "cancelled_after", "{sub}");
    assert!(
        sub["content"]
            .as_str()
            .unwrap()
            .contains("stopped by force"),
        "{sub}"
    );
    assert_eq!(
        parent.failure_kind(),
        Some(dsh_core::FailureKind::CancelledAfter)
    );
    assert!(
        parent
            .content()
            .contains("the parent saw its sub-call end as Some(CancelledAfter)"),
        "{}",
        parent.content()
    );
}

#[tokio::test(start_paused = true)]
async fn a_parent_whose_submission_just_ended_gets_a_grace_to_wind_down() {
    // The sub-call ends on its own just before the grace does; the parent, winding down
    // past the grace's end, is not dropped: its submission had begun within that grace.
    let (recs, parent) = cancel_a_parent_with_a_slow_sub_call(Duration::from_millis(4500)).await;
    assert_eq!(result_of(&recs, "sub")["ok"], true);
    assert!(
        parent
            .content()
            .contains("the parent saw its sub-call end as None"),
        "{}",
        parent.content()
    );
}
