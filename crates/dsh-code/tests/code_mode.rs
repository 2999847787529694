//! `run_code` through a real pipeline: every sub-call journaled with its parent and judged by
//! the gates, `Promise.all` overlapping calls as the scheduler allows, refusals thrown into
//! the program and binding, and each limit stopping a program with a clear failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_code::{CodeLimits, RUN_CODE, RunCode};
use dsh_core::journal::MemoryJournal;
use dsh_core::{
    CancellationToken, FailureKind, FrozenResult, Pipeline, Registry, Tier, ToolCall, ToolOutput,
    Vote,
};
use dsh_testkit::{FnPolicy, FnTool, ok_output};
use serde_json::{Value, json};

/// A parallel-safe reader that answers only once five calls are running at once (a barrier
/// of five): run one by one, the first would never return, and its deadline fails it.
fn barrier_reader(barrier: Arc<tokio::sync::Barrier>) -> FnTool {
    FnTool::new("read_slow", move |args, _| {
        let barrier = barrier.clone();
        async move {
            tokio::time::timeout(Duration::from_secs(20), barrier.wait())
                .await
                .map_err(|_| dsh_core::ToolError::failed("the five reads did not overlap"))?;
            let n = args["n"].as_i64().unwrap_or(0);
            Ok(ok_output(n))
        }
    })
    .spec(|s| s.read_only(true))
    .parallel(|_| Ok(true))
}

fn counter(name: &str) -> FnTool {
    FnTool::new(name, |args, _| async move {
        Ok(ok_output(args["n"].as_i64().unwrap_or(7)))
    })
    .spec(|s| s.read_only(true))
}

struct World {
    pipeline: Arc<Pipeline>,
    journal: Arc<MemoryJournal>,
}

fn world(limits: CodeLimits) -> World {
    let mut registry = Registry::new();
    registry.register(RunCode::new(limits)).unwrap();
    registry
        .register(barrier_reader(Arc::new(tokio::sync::Barrier::new(5))))
        .unwrap();
    registry.register(counter("count")).unwrap();
    registry.register(counter("forbidden")).unwrap();
    // Returns what its declared schema does not allow.
    registry
        .register(
            FnTool::new("liar", |_, _| async {
                Ok(ToolOutput::new("lies", json!({"n": "not a number"})))
            })
            .spec(|s| s.read_only(true)),
        )
        .unwrap();
    let journal = Arc::new(MemoryJournal::new("code"));
    let pipeline = Pipeline::builder(registry, journal.clone())
        .pre_policy(FnPolicy::new("no-forbidden", |call, _| {
            if call.name() == "forbidden" {
                Vote::deny(Tier::Rule, "forbidden is forbidden")
            } else {
                Vote::abstain()
            }
        }))
        .build();
    World { pipeline, journal }
}

async fn run(w: &World, code: &str) -> Arc<FrozenResult> {
    let call = ToolCall::new(
        "p1",
        RUN_CODE,
        json!({"code": code, "description": "a test program"}),
    );
    let out = w
        .pipeline
        .run_batch(vec![call], &CancellationToken::new())
        .await
        .unwrap();
    out.results[0].clone()
}

fn records(w: &World) -> Vec<Value> {
    w.journal
        .lines()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_made_together_run_together_and_each_is_journaled_with_its_parent() {
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "const got = await Promise.all([1, 2, 3, 4, 5].map(n => tools.read_slow({n})));\n\
         const c = await tools.count({n: 9});\n\
         return {sum: got.reduce((a, g) => a + g.n, 0), c: c.n};",
    )
    .await;
    assert!(r.ok(), "{}", r.content());
    let v = r.value().unwrap();
    assert_eq!(v["value"], json!({"sum": 15, "c": 9}));
    assert_eq!(v["calls"], json!({"total": 6, "ok": 6, "failed": {}}));
    let recs = records(&w);
    let subs: Vec<&Value> = recs
        .iter()
        .filter(|r| r["kind"] == "tool_call" && r["parent"] == "p1")
        .collect();
    assert_eq!(subs.len(), 6, "{recs:#?}");
    assert!(subs.iter().all(|r| r["source"] == "code"), "{subs:#?}");
    assert_eq!(subs[0]["call_id"], "p1.1");
    assert_eq!(subs[5]["name"], "count");
    // Each sub-call's result is on record before the program's own.
    let last_sub = recs
        .iter()
        .rposition(|r| r["kind"] == "tool_result" && r["call_id"] == "p1.6")
        .unwrap();
    let own = recs
        .iter()
        .position(|r| r["kind"] == "tool_result" && r["call_id"] == "p1")
        .unwrap();
    assert!(last_sub < own);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_call_throws_in_the_program_and_stays_refused_on_record() {
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "try { await tools.forbidden({}); return 'ran'; }\n\
         catch (e) { return {name: e.name, kind: e.kind, gate: e.gate, policy: e.policy, isError: e instanceof ToolCallError}; }",
    )
    .await;
    assert!(r.ok(), "{}", r.content());
    assert_eq!(
        r.value().unwrap()["value"],
        json!({"name": "ToolCallError", "kind": "denied", "gate": "pre_policy", "policy": "no-forbidden", "isError": true})
    );
    assert_eq!(r.value().unwrap()["calls"]["failed"], json!({"denied": 1}));
    let recs = records(&w);
    let denied = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "p1.1")
        .unwrap();
    assert_eq!(denied["failure_kind"], "denied", "{denied}");
    // Not caught, it ends the program and says which call failed.
    let r = run(&w, "await tools.forbidden({});").await;
    assert_eq!(r.failure_kind(), Some(FailureKind::ToolError));
    assert!(
        r.content().contains("denied") && r.content().contains("forbidden is forbidden"),
        "{}",
        r.content()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_whose_output_breaks_its_schema_fails_invalid_output_in_the_program() {
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "try { await tools.liar({}); } catch (e) { return e.kind; }",
    )
    .await;
    assert_eq!(
        r.value().unwrap()["value"],
        "invalid_output",
        "{}",
        r.content()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syntax_errors_and_uncaught_exceptions_say_where() {
    let w = world(CodeLimits::default());
    let r = run(&w, "const a = 1;\nconst b = ;\nreturn a;").await;
    assert_eq!(r.failure_kind(), Some(FailureKind::InvalidArgs));
    assert!(r.content().contains("does not parse"), "{}", r.content());
    assert!(r.content().contains("line 2"), "{}", r.content());
    let r = run(
        &w,
        "console.log('before');\nconst x = 1;\nthrow new RangeError('boom ' + x);",
    )
    .await;
    assert_eq!(r.failure_kind(), Some(FailureKind::ToolError));
    assert!(
        r.content().contains("RangeError: boom 1"),
        "{}",
        r.content()
    );
    assert!(r.content().contains("line 3"), "{}", r.content());
    assert!(
        r.content().contains("before"),
        "the log so far: {}",
        r.content()
    );
    // A runtime error names its kind and a line (QuickJS places some at the last call).
    let r = run(&w, "const x = null;\nreturn x.field;").await;
    assert!(r.content().contains("TypeError"), "{}", r.content());
    assert!(r.content().contains(" at line "), "{}", r.content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_limit_stops_a_program_with_a_clear_failure() {
    let limits = CodeLimits {
        wall: Duration::from_millis(500),
        max_calls: 3,
        max_log_bytes: 1000,
        memory_bytes: 16 << 20,
        ..CodeLimits::default()
    };
    let w = world(limits);
    // An endless loop: the interrupt handler stops it at the wall-time limit.
    let r = run(&w, "while (true) {}").await;
    assert_eq!(
        r.failure_kind(),
        Some(FailureKind::Timeout),
        "{}",
        r.content()
    );
    assert!(r.content().contains("time limit"), "{}", r.content());
    // Memory.
    let r = run(
        &w,
        "const a = []; while (true) { a.push('x'.repeat(1 << 16) + a.length); }",
    )
    .await;
    assert!(r.content().contains("out of memory"), "{}", r.content());
    // Calls: the fourth is never made, and catching its error does not help.
    let r = run(
        &w,
        "for (let i = 0; i < 10; i++) { try { await tools.count({n: i}); } catch (e) {} }\nreturn 'went on';",
    )
    .await;
    assert!(
        r.content().contains("more tool calls than its limit"),
        "{}",
        r.content()
    );
    let calls = records(&w)
        .iter()
        .filter(|r| r["kind"] == "tool_call" && r["name"] == "count")
        .count();
    assert_eq!(calls, 3);
    // Output.
    let r = run(&w, "while (true) { console.log('flood'); }").await;
    assert!(r.content().contains("output limit"), "{}", r.content());
    assert!(!r.ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_program_has_no_world_but_its_tools() {
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "return [typeof require, typeof process, typeof setTimeout, typeof fetch, typeof std, typeof os, Object.keys(tools).sort()];",
    )
    .await;
    assert!(r.ok(), "{}", r.content());
    assert_eq!(
        r.value().unwrap()["value"],
        json!([
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            ["count", "forbidden", "liar", "read_slow"]
        ])
    );
    let r = run(&w, "return await import('os');").await;
    assert!(!r.ok(), "{}", r.content());
    let r = run(&w, "await new Promise(() => {});").await;
    assert!(r.content().contains("never comes"), "{}", r.content());
}
