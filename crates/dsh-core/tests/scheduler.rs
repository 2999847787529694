//! The scheduler of SPEC P10 (DESIGN §3 "Scheduling"): gates in submission order, execution
//! overlapping only for parallel-safe calls, results committed in submission order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_core::journal::MemoryJournal;
use dsh_core::{
    Access, CancellationToken, ExecContext, FrozenResult, Pipeline, PipelineConfig, Registry,
    Timeout, ToolCall, ToolError, Vote,
};
use dsh_testkit::{FnPolicy, FnTool, Recorder, kinds, ok_output};
use serde_json::{Value, json};
use tokio::sync::{Barrier, Notify};

/// Tracks how many tool bodies run at once and the highest it reached.
#[derive(Default)]
struct Concurrency {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Concurrency {
    fn enter(&self) -> usize {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        n
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

fn args_path(v: &Value) -> String {
    v["path"].as_str().unwrap_or_default().to_owned()
}

fn call(id: &str, name: &str, path: &str) -> ToolCall {
    ToolCall::new(id, name, json!({"path": path}))
}

fn pipeline(
    tools: Vec<FnTool>,
    config: PipelineConfig,
) -> (Arc<Pipeline>, Arc<MemoryJournal>, Arc<Recorder>) {
    let mut registry = Registry::new();
    for t in tools {
        registry.register(t).unwrap();
    }
    let journal = Arc::new(MemoryJournal::new("sched"));
    let recorder = Recorder::new();
    let p = Pipeline::builder(registry, journal.clone())
        .pre_policy(FnPolicy::new("allow-all", |_, _| {
            Vote::allow(dsh_core::Tier::Rule, "test allows everything")
        }))
        .observer(recorder.clone())
        .config(config)
        .build();
    (p, journal, recorder)
}

async fn run(p: &Pipeline, calls: Vec<ToolCall>) -> Vec<Arc<FrozenResult>> {
    p.run_batch(calls, &CancellationToken::new())
        .await
        .unwrap()
        .results
}

fn ids(results: &[Arc<FrozenResult>]) -> Vec<&str> {
    results.iter().map(|r| r.call_id()).collect()
}

/// The seed's own example: read A, read B, write A, read C.
#[tokio::test(start_paused = true)]
async fn seed_example_reads_overlap_write_runs_alone_and_results_commit_in_order() {
    let barrier = Arc::new(Barrier::new(2));
    let b_done = Arc::new(Notify::new());
    let conc = Arc::new(Concurrency::default());
    let reads_done = Arc::new(AtomicUsize::new(0));
    let write_done = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(Mutex::new(Vec::<String>::new()));

    let read = {
        let b_done = b_done.clone();
        let (barrier, conc, reads_done, write_done, finished) = (
            barrier.clone(),
            conc.clone(),
            reads_done.clone(),
            write_done.clone(),
            finished.clone(),
        );
        FnTool::new("read", move |args, _cx: ExecContext| {
            let b_done = b_done.clone();
            let (barrier, conc, reads_done, write_done, finished) = (
                barrier.clone(),
                conc.clone(),
                reads_done.clone(),
                write_done.clone(),
                finished.clone(),
            );
            async move {
                let path = args_path(&args);
                conc.enter();
                let r = async {
                    if path == "C" {
                        // read C waits for write A to have finished.
                        if !write_done.load(Ordering::SeqCst) {
                            return Err(ToolError::failed(
                                "read C started before write A finished",
                            ));
                        }
                    } else {
                        // The two reads must really be running at the same time.
                        tokio::time::timeout(Duration::from_secs(5), barrier.wait())
                            .await
                            .map_err(|_| ToolError::failed("the reads did not overlap"))?;
                        // Finish B before A: completion order differs from submission order.
                        if path == "A" {
                            tokio::time::timeout(Duration::from_secs(5), b_done.notified())
                                .await
                                .map_err(|_| ToolError::failed("read B never finished"))?;
                        }
                        reads_done.fetch_add(1, Ordering::SeqCst);
                    }
                    finished.lock().unwrap().push(format!("read {path}"));
                    if path == "B" {
                        // A permit is kept if A is not waiting yet.
                        b_done.notify_one();
                    }
                    Ok(ok_output(0))
                }
                .await;
                conc.leave();
                r
            }
        })
        .parallel(|_| Ok(true))
        .accesses(|a| {
            vec![Access::Read {
                path: args_path(a).into(),
            }]
        })
    };
    let write = {
        let (conc, reads_done, write_done, finished) = (
            conc.clone(),
            reads_done.clone(),
            write_done.clone(),
            finished.clone(),
        );
        FnTool::new("write", move |args, _| {
            let (conc, reads_done, write_done, finished) = (
                conc.clone(),
                reads_done.clone(),
                write_done.clone(),
                finished.clone(),
            );
            async move {
                let alone = conc.enter() == 1;
                let after_reads = reads_done.load(Ordering::SeqCst) == 2;
                tokio::time::sleep(Duration::from_millis(50)).await;
                let still_alone = conc.now.load(Ordering::SeqCst) == 1;
                conc.leave();
                write_done.store(true, Ordering::SeqCst);
                finished
                    .lock()
                    .unwrap()
                    .push(format!("write {}", args_path(&args)));
                if alone && after_reads && still_alone {
                    Ok(ok_output(1))
                } else {
                    Err(ToolError::failed(format!(
                        "write overlapped: alone={alone} after_reads={after_reads} still_alone={still_alone}"
                    )))
                }
            }
        })
    };
    let (p, journal, recorder) = pipeline(vec![read, write], PipelineConfig::default());
    let calls = vec![
        call("readA", "read", "A"),
        call("readB", "read", "B"),
        call("writeA", "write", "A"),
        call("readC", "read", "C"),
    ];
    let results = run(&p, calls).await;
    for r in &results {
        assert!(r.ok(), "{}: {}", r.call_id(), r.content());
    }
    assert_eq!(conc.max.load(Ordering::SeqCst), 2);
    // Completion order: B before A, then write A, then C.
    assert_eq!(
        *finished.lock().unwrap(),
        ["read B", "read A", "write A", "read C"]
    );
    // Committed order: submission order, in the result list, for observers and in the journal.
    let order = ["readA", "readB", "writeA", "readC"];
    assert_eq!(ids(&results), order);
    assert_eq!(ids(&recorder.seen()), order);
    let committed: Vec<String> = journal
        .lines()
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "tool_result")
        .map(|v| v["call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(committed, order);
}

#[tokio::test(start_paused = true)]
async fn exclusive_calls_never_overlap() {
    let conc = Arc::new(Concurrency::default());
    let c = conc.clone();
    let tool = FnTool::new("exclusive", move |_, _| {
        let c = c.clone();
        async move {
            c.enter();
            tokio::time::sleep(Duration::from_millis(10)).await;
            c.leave();
            Ok(ok_output(0))
        }
    });
    let (p, _, _) = pipeline(vec![tool], PipelineConfig::default());
    let calls = (0..6)
        .map(|i| call(&i.to_string(), "exclusive", "x"))
        .collect();
    let results = run(&p, calls).await;
    assert!(results.iter().all(|r| r.ok()));
    assert_eq!(conc.max.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_safe_calls_overlap_up_to_max_parallel() {
    let conc = Arc::new(Concurrency::default());
    let c = conc.clone();
    // Each wave of three meets at the barrier: they can only pass it by running together,
    // and a fourth could never have joined (the count of three is checked after).
    let wave = Arc::new(Barrier::new(3));
    let tool = FnTool::new("par", move |_, _| {
        let (c, wave) = (c.clone(), wave.clone());
        async move {
            c.enter();
            let met = tokio::time::timeout(Duration::from_secs(5), wave.wait()).await;
            c.leave();
            met.map_err(|_| ToolError::failed("three calls never ran together"))?;
            Ok(ok_output(0))
        }
    })
    .parallel(|_| Ok(true));
    let config = PipelineConfig {
        max_parallel: 3,
        ..PipelineConfig::default()
    };
    let (p, _, _) = pipeline(vec![tool], config);
    let calls = (0..9).map(|i| call(&i.to_string(), "par", "x")).collect();
    let results = run(&p, calls).await;
    assert!(results.iter().all(|r| r.ok()));
    assert_eq!(conc.max.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_classifier_error_or_panic_means_exclusive() {
    for mode in ["err", "panic"] {
        let conc = Arc::new(Concurrency::default());
        let c = conc.clone();
        let tool = FnTool::new("odd", move |_, _| {
            let c = c.clone();
            async move {
                c.enter();
                tokio::time::sleep(Duration::from_millis(20)).await;
                c.leave();
                Ok(ok_output(0))
            }
        })
        .parallel(move |_| {
            if mode == "err" {
                Err("cannot classify".to_owned())
            } else {
                panic!("classifier bug")
            }
        });
        let (p, _, _) = pipeline(vec![tool], PipelineConfig::default());
        let calls = (0..4).map(|i| call(&i.to_string(), "odd", "x")).collect();
        let results = run(&p, calls).await;
        assert!(results.iter().all(|r| r.ok()), "{mode}");
        assert_eq!(conc.max.load(Ordering::SeqCst), 1, "{mode}");
    }
}

#[tokio::test(start_paused = true)]
async fn gates_run_in_submission_order_and_see_what_earlier_calls_left() {
    // A policy with order-sensitive state: it records the order it is asked in, and what the
    // "workspace" (a shared flag set by the write) looked like at that moment.
    let written = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(Mutex::new(Vec::<(String, bool)>::new()));
    let slow_read = FnTool::new("read", |args, _| async move {
        // Earlier reads finish later than later ones.
        let ms = if args_path(&args) == "first" { 80 } else { 5 };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(ok_output(0))
    })
    .parallel(|_| Ok(true));
    let w = written.clone();
    let write = FnTool::new("write", move |_, _| {
        let w = w.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            w.store(true, Ordering::SeqCst);
            Ok(ok_output(1))
        }
    });
    let mut registry = Registry::new();
    registry.register(slow_read).unwrap();
    registry.register(write).unwrap();
    let (a, wr) = (asked.clone(), written.clone());
    let p = Pipeline::builder(registry, Arc::new(MemoryJournal::new("s")))
        .pre_policy(FnPolicy::new("order", move |c, _| {
            a.lock()
                .unwrap()
                .push((c.id().to_owned(), wr.load(Ordering::SeqCst)));
            Vote::allow(dsh_core::Tier::Rule, "ok")
        }))
        .build();
    let calls = vec![
        call("1", "read", "first"),
        call("2", "read", "second"),
        call("3", "write", "f"),
        call("4", "read", "after"),
    ];
    let results = run(&p, calls).await;
    assert!(results.iter().all(|r| r.ok()));
    let asked = asked.lock().unwrap().clone();
    let order: Vec<&str> = asked.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(order, ["1", "2", "3", "4"]);
    // Call 4's policy saw the workspace after the write; call 3's before.
    assert!(!asked[2].1, "call 3 was voted on before the write ran");
    assert!(asked[3].1, "call 4 was voted on before the write finished");
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_call_keeps_its_slot_until_its_work_has_stopped() {
    let cleaned_up = Arc::new(AtomicBool::new(false));
    let c = cleaned_up.clone();
    let stubborn = FnTool::new("stubborn", move |_, cx: ExecContext| {
        let c = c.clone();
        async move {
            cx.cancel.cancelled().await;
            // Killing and reaping a process tree takes a while.
            tokio::time::sleep(Duration::from_millis(150)).await;
            c.store(true, Ordering::SeqCst);
            Err(ToolError::failed("killed"))
        }
    });
    let c = cleaned_up.clone();
    let next = FnTool::new("next", move |_, _| {
        let c = c.clone();
        async move {
            if c.load(Ordering::SeqCst) {
                Ok(ok_output(0))
            } else {
                Err(ToolError::failed(
                    "started while the timed-out call was still stopping",
                ))
            }
        }
    });
    let mut registry = Registry::new();
    registry.register(stubborn).unwrap();
    registry.register(next).unwrap();
    let p = Pipeline::builder(registry, Arc::new(MemoryJournal::new("s")))
        .pre_policy(FnPolicy::new("allow", |_, _| {
            Vote::allow(dsh_core::Tier::Rule, "ok")
        }))
        .wrapper(Timeout::new(Duration::from_millis(30)).with_grace(Duration::from_secs(5)))
        .build();
    let results = run(&p, vec![call("1", "stubborn", "x"), call("2", "next", "x")]).await;
    assert_eq!(
        results[0].failure_kind(),
        Some(dsh_core::FailureKind::Timeout)
    );
    assert!(results[1].ok(), "{}", results[1].content());
}

#[tokio::test(start_paused = true)]
async fn calls_are_journaled_when_they_start_not_before() {
    // The exclusive write's tool_call record comes after both reads started; each call's
    // records appear as tool_call, tool_started, and results follow in submission order.
    let read = FnTool::new("read", |_, _| async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(ok_output(0))
    })
    .parallel(|_| Ok(true));
    let write = FnTool::new("write", |_, _| async { Ok(ok_output(1)) });
    let (p, journal, _) = pipeline(vec![read, write], PipelineConfig::default());
    run(
        &p,
        vec![
            call("1", "read", "a"),
            call("2", "read", "b"),
            call("3", "write", "a"),
        ],
    )
    .await;
    let k = kinds(&journal.lines());
    assert_eq!(
        k,
        [
            "tool_call",
            "tool_started",
            "tool_call",
            "tool_started",
            "tool_result",
            "tool_result",
            "tool_call",
            "tool_started",
            "tool_result"
        ]
    );
}
