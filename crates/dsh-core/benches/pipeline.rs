//! Criterion benchmarks of the dsh-core pipeline; BENCHMARKS.md at the repository root
//! reports the figures.
//!
//! ```text
//! cargo bench -p dsh-core --bench pipeline
//! ```
//!
//! Three groups:
//!
//! * `overhead` — the cost the pipeline adds to one call: `Pipeline::run_batch` with a batch of
//!   one call to a no-op tool, five gate-1 listeners, a guard, a disposition and an observer
//!   (`full`), recording into a [`MemoryJournal`], against calling the same tool directly
//!   (`direct_tool_run`: `Tool::run`, same arguments). Variants without listeners (`bare`),
//!   with a `Timeout` wrapper (`full_timeout`), on a current-thread runtime and with batches of
//!   100 calls tell where the time goes.
//! * `jsonl` — the same pipeline recording into a [`JsonlJournal`] in a temporary directory:
//!   one `write(2)` per record and no fsync at all (`flush_only`, through a bench-side wrapper
//!   whose `sync` does nothing: no [`SyncPolicy`] skips the fsync, `BatchEnd` fsyncs once at
//!   the end of every batch, so once per call with 1-call batches), `SyncPolicy::BatchEnd` with
//!   1-call and 100-call batches, and `SyncPolicy::EveryRecord` (an fsync per record, three
//!   records per call).
//! * `parallel` — 64 parallel-safe calls that each sleep 10 ms, `max_parallel = 64`: wall time
//!   of the batch, against one such call run directly (64 × that is the serial sum).
//!
//! Every measurement uses `iter_custom`: the pipeline and its journal are built afresh for
//! each sample, outside the timed region (so the in-memory journal and the file stay bounded),
//! and the timed loop of `iters` batches runs inside one future on a tokio runtime, multi-thread
//! unless the id says `current_thread`. The last part of an id says where that loop runs:
//! `block_on` directly in `Runtime::block_on`, as an agent loop under `#[tokio::main]` would,
//! or `worker` in a task spawned on the runtime (see [`Driver`]). Ids containing `per_call`
//! run batches of 100 calls and report the time per call (the batch time divided by 100).

// The workspace denies `unwrap`/`expect` outside tests, and a bench is not a test to clippy.
// Here a failed setup or a failed sanity check must stop the run loudly rather than produce
// figures for something that did not happen, which is exactly what `unwrap`/`expect` do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use dsh_core::journal::{Body, Journal, JournalError, JsonlJournal, MemoryJournal, SyncPolicy};
use dsh_core::{
    Action, CancellationToken, Candidate, Disposition, ExecContext, FrozenResult, Guard, Observer,
    Pipeline, PipelineConfig, PolicyContext, PrePolicy, Registry, Tier, Timeout, Tool, ToolCall,
    ToolError, ToolOutput, ToolSpec, Vote, async_trait,
};
use dsh_testkit::counter_schema;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

/// How long each sleeping call of the `parallel` group takes.
const SLEEP: Duration = Duration::from_millis(10);
/// How many sleeping calls the `parallel` batch holds (and its `max_parallel`).
const PARALLEL_CALLS: usize = 64;
/// Calls per batch in the `per_call` variants.
const BIG_BATCH: usize = 100;

// ---------------------------------------------------------------------------------------------
// The pieces plugged into the pipeline: each does (close to) nothing, so what is measured is
// the mechanism around them.
// ---------------------------------------------------------------------------------------------

/// The tool's input schema: a small object, as real tools have.
fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": false
    })
}

/// The arguments of every benchmarked call.
fn args() -> Value {
    json!({"path": "src/lib.rs"})
}

/// A read-only tool that returns a tiny output matching [`counter_schema`] at once, or after
/// `sleep` (the `parallel` group). Parallel-safe.
struct BenchTool {
    name: &'static str,
    sleep: Option<Duration>,
}

const NOOP: BenchTool = BenchTool {
    name: "noop",
    sleep: None,
};

const SLEEPY: BenchTool = BenchTool {
    name: "sleepy",
    sleep: Some(SLEEP),
};

#[async_trait]
impl Tool for BenchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(self.name, "does nothing, for benchmarks")
            .input_schema(input_schema())
            .output_schema(counter_schema())
            .read_only(true)
            .idempotent(true)
    }

    fn parallel_safe(&self, _args: &Value) -> Result<bool, String> {
        Ok(true)
    }

    async fn run(&self, _args: &Value, _cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        if let Some(d) = self.sleep {
            tokio::time::sleep(d).await;
        }
        Ok(ToolOutput::new("n=1", json!({"n": 1})))
    }
}

/// A gate-1 listener with no opinion.
struct Abstain(&'static str);

#[async_trait]
impl PrePolicy for Abstain {
    fn name(&self) -> &str {
        self.0
    }
    async fn vote(&self, _call: &ToolCall, _cx: &PolicyContext<'_>) -> Vote {
        Vote::abstain()
    }
}

/// A gate-1 listener that allows read-only tools by default, as a built-in classification
/// would.
struct DefaultAllow;

#[async_trait]
impl PrePolicy for DefaultAllow {
    fn name(&self) -> &str {
        "default-allow"
    }
    async fn vote(&self, _call: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        if cx.spec.read_only {
            Vote::allow(Tier::Default, "read-only tools are allowed by default")
        } else {
            Vote::abstain()
        }
    }
}

/// A guard that never refuses.
struct NoRedLine;

impl Guard for NoRedLine {
    fn name(&self) -> &str {
        "no-red-line"
    }
    fn refuses(&self, _call: &ToolCall, _cx: &PolicyContext<'_>) -> Option<dsh_core::Denial> {
        None
    }
}

/// A disposition that accepts every result.
struct AcceptAll;

#[async_trait]
impl Disposition for AcceptAll {
    fn name(&self) -> &str {
        "accept-all"
    }
    async fn dispose(&self, _call: &ToolCall, _candidate: &Candidate) -> Action {
        Action::Accept
    }
}

/// An observer that counts the results it sees (keeping them would grow without bound).
#[derive(Default)]
struct Counter(AtomicUsize);

impl Observer for Counter {
    fn observe(&self, result: &Arc<FrozenResult>) {
        if result.ok() {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A JSONL journal whose `sync` does nothing: every record is still one `write(2)` of the real
/// [`JsonlJournal`] code, but nothing is ever fsynced. The "flush only" cost, which no
/// [`SyncPolicy`] offers (`BatchEnd` fsyncs at the end of every batch).
struct FlushOnly(JsonlJournal);

impl Journal for FlushOnly {
    fn write(&self, body: &Body, closing: bool) -> Result<u64, JournalError> {
        self.0.write(body, closing)
    }
    fn sync(&self) -> Result<(), JournalError> {
        Ok(())
    }
    fn session(&self) -> &str {
        self.0.session()
    }
}

// ---------------------------------------------------------------------------------------------
// Assembly and measurement helpers.
// ---------------------------------------------------------------------------------------------

/// Which listeners a pipeline gets.
#[derive(Clone, Copy)]
enum Listeners {
    /// None: registry, scheduler, journal and freeze only.
    Bare,
    /// Five gate-1 listeners (four abstain, one allows), a guard, a disposition, an observer.
    Full,
    /// `Full` plus a `Timeout` wrapper around the tool.
    FullWithTimeout,
}

fn pipeline(
    tool: BenchTool,
    listeners: Listeners,
    journal: Arc<dyn Journal>,
    max_parallel: usize,
) -> Arc<Pipeline> {
    let mut registry = Registry::new();
    registry.register(tool).unwrap();
    let mut b = Pipeline::builder(registry, journal).config(PipelineConfig {
        max_parallel,
        ..PipelineConfig::default()
    });
    if let Listeners::Full | Listeners::FullWithTimeout = listeners {
        b = b
            .pre_policy(Abstain("abstain-1"))
            .pre_policy(Abstain("abstain-2"))
            .pre_policy(DefaultAllow)
            .pre_policy(Abstain("abstain-3"))
            .pre_policy(Abstain("abstain-4"))
            .guard(NoRedLine)
            .disposition(AcceptAll)
            .observer(Arc::new(Counter::default()));
    }
    if let Listeners::FullWithTimeout = listeners {
        b = b.wrapper(Timeout::new(Duration::from_secs(60)));
    }
    b.build()
}

/// `n` calls to `tool`, ids `c0`, `c1`, ….
fn calls(tool: &str, n: usize) -> Vec<ToolCall> {
    (0..n)
        .map(|i| ToolCall::new(format!("c{i}"), tool, args()))
        .collect()
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `batch` through `p` once and checks that every call succeeded, so that no figure is
/// the cost of a refusal.
fn check_batch(rt: &Runtime, p: &Pipeline, batch: &[ToolCall]) {
    let cancel = CancellationToken::new();
    let out = rt.block_on(p.run_batch(batch.to_vec(), &cancel)).unwrap();
    assert_eq!(out.results.len(), batch.len());
    for r in &out.results {
        assert!(r.ok(), "benchmark call failed: {}", r.to_json());
    }
}

/// Where the loop that submits batches runs.
#[derive(Clone, Copy)]
enum Driver {
    /// Directly in `Runtime::block_on`, as under `#[tokio::main]`: the thread that submits a
    /// batch is not a runtime worker, so the task each call's execution is spawned as runs on a
    /// worker thread, and waking it and being woken by it cross threads.
    BlockOn,
    /// In a task spawned on the runtime: the execution task is spawned next to it, on the same
    /// worker, and normally runs there.
    Worker,
}

/// Times `iters` runs of `batch` through `p`, all in one timed loop driven as `driver` says.
/// Returns the elapsed time divided by `divisor` (the batch size for the `per_call` variants,
/// else 1), which criterion reads as the time of `iters` iterations.
fn time_batches(
    rt: &Runtime,
    driver: Driver,
    p: Arc<Pipeline>,
    batch: &[ToolCall],
    iters: u64,
    divisor: usize,
) -> Duration {
    let batch = batch.to_vec();
    let timed = async move {
        let cancel = CancellationToken::new();
        let start = Instant::now();
        for _ in 0..iters {
            let out = p.run_batch(batch.clone(), &cancel).await.unwrap();
            black_box(out);
        }
        start.elapsed()
    };
    let elapsed = match driver {
        Driver::BlockOn => rt.block_on(timed),
        Driver::Worker => rt.block_on(rt.spawn(timed)).unwrap(),
    };
    elapsed / u32::try_from(divisor).unwrap()
}

/// Times `iters` direct `Tool::run` calls of `tool`, with the same arguments the pipeline
/// passes, inside one `block_on`.
fn time_direct(rt: &Runtime, tool: BenchTool, iters: u64) -> Duration {
    let tool: Arc<dyn Tool> = Arc::new(tool);
    let call = ToolCall::new("c0", tool.spec().name, args());
    let cx = ExecContext {
        call: call.clone(),
        spec: Arc::new(tool.spec()),
        cancel: CancellationToken::new(),
        attempt: 1,
        dispatch: None,
        clearance: dsh_core::Clearance::Write,
    };
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            let out = tool.run(black_box(call.args()), &cx).await.unwrap();
            black_box(out);
        }
        start.elapsed()
    })
}

/// A fresh, not yet existing journal path in `dir`.
fn fresh_path(dir: &Path) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    dir.join(format!(
        "session-{}.jsonl",
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// How a `jsonl` variant records.
#[derive(Clone, Copy)]
enum FileMode {
    FlushOnly,
    Sync(SyncPolicy),
}

fn file_journal(path: &Path, mode: FileMode) -> Arc<dyn Journal> {
    match mode {
        FileMode::FlushOnly => Arc::new(FlushOnly(
            JsonlJournal::create(path, "bench", SyncPolicy::BatchEnd).unwrap(),
        )),
        FileMode::Sync(policy) => Arc::new(JsonlJournal::create(path, "bench", policy).unwrap()),
    }
}

// ---------------------------------------------------------------------------------------------
// The benchmarks.
// ---------------------------------------------------------------------------------------------

fn memory() -> Arc<dyn Journal> {
    Arc::new(MemoryJournal::new("bench"))
}

/// Per-call overhead: the pipeline with an in-memory journal against the bare tool.
fn overhead(c: &mut Criterion) {
    let rt = runtime();
    let current_thread = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let one = calls(NOOP.name, 1);
    let hundred = calls(NOOP.name, BIG_BATCH);
    // (id, runtime, driver, listeners, batch)
    let variants: [(&str, &Runtime, Driver, Listeners, &[ToolCall]); 6] = [
        ("full/block_on", &rt, Driver::BlockOn, Listeners::Full, &one),
        ("full/worker", &rt, Driver::Worker, Listeners::Full, &one),
        (
            "full/current_thread",
            &current_thread,
            Driver::BlockOn,
            Listeners::Full,
            &one,
        ),
        ("bare/worker", &rt, Driver::Worker, Listeners::Bare, &one),
        (
            "full_timeout/worker",
            &rt,
            Driver::Worker,
            Listeners::FullWithTimeout,
            &one,
        ),
        (
            "full_batch100_per_call/worker",
            &rt,
            Driver::Worker,
            Listeners::Full,
            &hundred,
        ),
    ];
    for (_, runtime, _, listeners, batch) in variants {
        check_batch(runtime, &pipeline(NOOP, listeners, memory(), 8), batch);
    }

    let mut g = c.benchmark_group("overhead");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);
    g.bench_function("direct_tool_run", |b| {
        b.iter_custom(|iters| time_direct(&rt, NOOP, iters));
    });
    for (id, runtime, driver, listeners, batch) in variants {
        g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let p = pipeline(NOOP, listeners, memory(), 8);
                time_batches(runtime, driver, p, batch, iters, batch.len())
            });
        });
    }
    g.finish();
}

/// The full pipeline recording into a JSONL file, with and without fsync. Driven from a
/// worker, so that the figures differ by the journal rather than by cross-thread wake-ups;
/// `flush_only/block_on` compares with `overhead/full/block_on`.
fn jsonl(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let one = calls(NOOP.name, 1);
    let hundred = calls(NOOP.name, BIG_BATCH);
    let batch_end = FileMode::Sync(SyncPolicy::BatchEnd);
    let every_record = FileMode::Sync(SyncPolicy::EveryRecord);
    let variants: [(&str, Driver, FileMode, &[ToolCall]); 6] = [
        (
            "flush_only/block_on",
            Driver::BlockOn,
            FileMode::FlushOnly,
            &one,
        ),
        (
            "flush_only/worker",
            Driver::Worker,
            FileMode::FlushOnly,
            &one,
        ),
        (
            "flush_only_batch100_per_call/worker",
            Driver::Worker,
            FileMode::FlushOnly,
            &hundred,
        ),
        ("batch_end/worker", Driver::Worker, batch_end, &one),
        (
            "batch_end_batch100_per_call/worker",
            Driver::Worker,
            batch_end,
            &hundred,
        ),
        ("every_record/worker", Driver::Worker, every_record, &one),
    ];
    for (_, _, mode, batch) in variants {
        let path = fresh_path(dir.path());
        let p = pipeline(NOOP, Listeners::Full, file_journal(&path, mode), 8);
        check_batch(&rt, &p, batch);
        // Three records per call: tool_call, tool_started, tool_result.
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert_eq!(lines, 3 * batch.len());
    }

    let mut g = c.benchmark_group("jsonl");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    for (id, driver, mode, batch) in variants {
        g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let path = fresh_path(dir.path());
                let p = pipeline(NOOP, Listeners::Full, file_journal(&path, mode), 8);
                let t = time_batches(&rt, driver, p, batch, iters, batch.len());
                // Keep the temporary directory small across samples.
                std::fs::remove_file(&path).unwrap();
                t
            });
        });
    }
    g.finish();
}

/// 64 parallel-safe calls that each sleep 10 ms, `max_parallel = 64`, against one such call.
fn parallel(c: &mut Criterion) {
    let rt = runtime();
    let batch = calls(SLEEPY.name, PARALLEL_CALLS);
    let full = || pipeline(SLEEPY, Listeners::Full, memory(), PARALLEL_CALLS);
    check_batch(&rt, &full(), &batch);

    let mut g = c.benchmark_group("parallel");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    g.bench_function("one_sleep_10ms_direct", |b| {
        b.iter_custom(|iters| time_direct(&rt, SLEEPY, iters));
    });
    g.bench_function("batch_64x_sleep_10ms/block_on", |b| {
        b.iter_custom(|iters| time_batches(&rt, Driver::BlockOn, full(), &batch, iters, 1));
    });
    g.finish();
}

criterion_group!(benches, overhead, jsonl, parallel);
criterion_main!(benches);
