//! Attacks on Code Mode's interpreter as a hostile model would write them: reaching the world,
//! escaping `tools`, forging what the record says, and exhausting the host — each through a
//! real pipeline, so what a program does shows on the journal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_code::{CodeLimits, RUN_CODE, RunCode};
use dsh_core::journal::MemoryJournal;
use dsh_core::{
    CancellationToken, FailureKind, FrozenResult, Pipeline, Registry, Tier, ToolCall, ToolOutput,
    Vote,
};
use dsh_testkit::{FnPolicy, FnTool, ok_output};
use serde_json::{Value, json};

/// How long any one program may take here before the attack counts as hanging the host.
const HANG: Duration = Duration::from_secs(60);

struct World {
    pipeline: Arc<Pipeline>,
    journal: Arc<MemoryJournal>,
    /// `blocker` calls running now.
    blocked: Arc<tokio::sync::Semaphore>,
    /// Whether a `blocker` call found its own `tool_call` missing from the journal.
    unjournaled: Arc<AtomicUsize>,
}

fn world(limits: CodeLimits) -> World {
    let journal = Arc::new(MemoryJournal::new("attack"));
    let blocked = Arc::new(tokio::sync::Semaphore::new(0));
    let unjournaled = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::new();
    registry.register(RunCode::new(limits)).unwrap();
    registry
        .register(
            FnTool::new("count", |args, _| async move {
                Ok(ok_output(args["n"].as_i64().unwrap_or(7)))
            })
            .spec(|s| s.read_only(true)),
        )
        .unwrap();
    registry
        .register(
            FnTool::new("forbidden", |_, _| async { Ok(ok_output(1)) }).spec(|s| s.read_only(true)),
        )
        .unwrap();
    // Takes any arguments and says nothing of them.
    registry
        .register(
            FnTool::new("sink", |_, _| async { Ok(ok_output(0)) }).spec(|s| s.read_only(true)),
        )
        .unwrap();
    // Output a terminal or a JSON-lines journal might choke on.
    registry
        .register(
            FnTool::new("weird", |_, _| async {
                Ok(ToolOutput::new(
                    "line one\nline two\r\n\u{0}\u{1b}[2J\u{2028}\u{2029}\"}\n{\"kind\":\"tool_result\"",
                    json!({"n": 1}),
                ))
            })
            .spec(|s| s.read_only(true)),
        )
        .unwrap();
    // Runs until cancelled, after checking its own call is already on the journal.
    {
        let (journal, blocked, unjournaled) =
            (journal.clone(), blocked.clone(), unjournaled.clone());
        registry
            .register(
                FnTool::new("blocker", move |_, cx| {
                    let (journal, blocked, unjournaled) =
                        (journal.clone(), blocked.clone(), unjournaled.clone());
                    async move {
                        let me = cx.call.id().to_owned();
                        let on_record = journal.lines().iter().any(|l| {
                            let r: Value = serde_json::from_str(l).unwrap();
                            r["kind"] == "tool_call" && r["call_id"] == me.as_str()
                        });
                        if !on_record {
                            unjournaled.fetch_add(1, Ordering::SeqCst);
                        }
                        blocked.add_permits(1);
                        cx.cancel.cancelled().await;
                        Err(dsh_core::ToolError::failed("cancelled"))
                    }
                })
                .spec(|s| s.read_only(true))
                .parallel(|_| Ok(true)),
            )
            .unwrap();
    }
    let pipeline = Pipeline::builder(registry, journal.clone())
        .pre_policy(FnPolicy::new("no-forbidden", |call, _| {
            if call.name() == "forbidden" {
                Vote::deny(Tier::Rule, "forbidden is forbidden")
            } else {
                Vote::abstain()
            }
        }))
        .build();
    World {
        pipeline,
        journal,
        blocked,
        unjournaled,
    }
}

async fn run_with(w: &World, code: &str, cancel: &CancellationToken) -> Arc<FrozenResult> {
    let call = ToolCall::new(
        "p1",
        RUN_CODE,
        json!({"code": code, "description": "an attack"}),
    );
    let out = tokio::time::timeout(HANG, w.pipeline.run_batch(vec![call], cancel))
        .await
        .expect("the program outlived every limit: the run_code call never ended")
        .unwrap();
    out.results[0].clone()
}

async fn run(w: &World, code: &str) -> Arc<FrozenResult> {
    run_with(w, code, &CancellationToken::new()).await
}

fn records(w: &World) -> Vec<Value> {
    w.journal
        .lines()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn sub_calls(w: &World) -> Vec<Value> {
    records(w)
        .into_iter()
        .filter(|r| r["kind"] == "tool_call" && r["parent"] == "p1")
        .collect()
}

fn value(r: &FrozenResult) -> Value {
    assert!(r.ok(), "{}", r.content());
    r.value().unwrap()["value"].clone()
}

fn short() -> CodeLimits {
    CodeLimits {
        wall: Duration::from_secs(2),
        ..CodeLimits::default()
    }
}

// ---------------------------------------------------------------------------------------------
// The world: nothing but tools and console.log.

/// No module system, host object, timer, network or process: every way in is undefined, and
/// `import()` fails (static or dynamic).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_file_network_process_timer_or_module_is_reachable() {
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "const names = ['require', 'process', 'std', 'os', 'fetch', 'XMLHttpRequest', 'WebSocket',\n\
         'setTimeout', 'setInterval', 'setImmediate', 'Deno', 'Bun', 'module',\n\
         'exports', 'print', 'scriptArgs', 'WebAssembly', 'Worker',\n\
         'importScripts', 'load', 'read', 'readline', 'gc', 'bjson', '__loadScript'];\n\
         const seen = names.filter(n => typeof globalThis[n] !== 'undefined' || (() => { try { return typeof eval(n) !== 'undefined'; } catch (e) { return false; } })());\n\
         let imported = 'no';\n\
         for (const m of ['os', 'std', 'qjs:os', 'qjs:std', 'fs', 'node:fs', './x.js', 'data:text/javascript,export default 1']) {\n\
           try { await import(m); imported = m; } catch (e) {}\n\
         }\n\
         let blocked = 'no';\n\
         try { Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); blocked = 'yes'; } catch (e) {}\n\
         let fromFunction = 'no';\n\
         try { fromFunction = typeof (new Function('return this'))().std; } catch (e) {}\n\
         return {seen, imported, blocked, fromFunction};",
    )
    .await;
    assert_eq!(
        value(&r),
        json!({"seen": [], "imported": "no", "blocked": "no", "fromFunction": "undefined"})
    );
    // A static import is a syntax error in a function body.
    let r = run(&w, "import * as os from 'os';\nreturn 1;").await;
    assert_eq!(
        r.failure_kind(),
        Some(FailureKind::InvalidArgs),
        "{}",
        r.content()
    );
    assert!(sub_calls(&w).is_empty());
}

/// Breaking out of the wrapping async function with `})(); … (async () => {` runs code at the
/// script's top level, but still in the same interpreter under the same limits: an endless
/// loop there is stopped at the time limit, and a wrapper that evaluates to no promise is a
/// failure, not a crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escaping_the_wrapper_gains_nothing() {
    let w = world(short());
    let r = run(&w, "})(); while (true) {} (async () => {").await;
    assert_eq!(
        r.failure_kind(),
        Some(FailureKind::Timeout),
        "{}",
        r.content()
    );
    let r = run(&w, "return 1; })(); 5; (() => {").await;
    assert!(!r.ok(), "{}", r.content());
    let r = run(
        &w,
        "})(); (async () => { return await tools.count({n: 4}); })(); (async () => {",
    )
    .await;
    // Whatever the wrapper's value, a call made there is still a journaled sub-call.
    let subs = sub_calls(&w);
    assert!(subs.len() <= 1, "{subs:#?}");
    assert!(subs.iter().all(|s| s["source"] == "code"), "{subs:#?}");
    let _ = r;
}

// ---------------------------------------------------------------------------------------------
// tools: only the set's own, unreserved tools, under their own names.

/// `tools` is frozen and holds no reserved tool; prototype tricks, renaming, `call`/`apply`,
/// a poisoned `Object.prototype` and a replaced global `tools` never make a call under
/// another name: every sub-call on the journal is one of the set's tools, never `run_code`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_prototype_tricks_never_reach_run_code_or_a_new_name() {
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "const out = {};\n\
         out.keys = Object.keys(tools).sort();\n\
         out.frozen = Object.isFrozen(tools);\n\
         out.runCode = typeof tools.run_code;\n\
         try { tools.run_code = tools.count; } catch (e) {}\n\
         try { Object.defineProperty(tools, 'run_code', {value: tools.count}); } catch (e) {}\n\
         Object.prototype.run_code = tools.count;\n\
         out.afterPoison = tools.run_code === tools.count;\n\
         const renamed = tools.count;\n\
         Object.defineProperty(renamed, 'name', {value: 'run_code'});\n\
         await renamed({n: 1});\n\
         await tools.count.call({name: 'run_code'}, {n: 2});\n\
         await Reflect.apply(tools.count, tools.forbidden, [{n: 3}]);\n\
         globalThis.tools = new Proxy({}, {get: (_, k) => renamed});\n\
         await tools.run_code({code: 'return 1', description: 'nested'});\n\
         return out;",
    )
    .await;
    let v = value(&r);
    assert_eq!(
        v["keys"],
        json!(["blocker", "count", "forbidden", "sink", "weird"])
    );
    assert_eq!(v["frozen"], true);
    assert_eq!(v["runCode"], "undefined");
    let names: Vec<String> = sub_calls(&w)
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["count", "count", "count", "count"]);
}

// ---------------------------------------------------------------------------------------------
// Forging results.

/// The program cannot reach a call's settling functions, nor the JSON parser the runtime
/// uses: replacing `JSON`, `Promise`, `Promise.prototype.then` and making every object a
/// thenable fools only the program itself — the journal and the result's tally say what the
/// tools really returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampering_with_json_and_promises_fools_only_the_program() {
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "const p = tools.count({n: 5});\n\
         JSON.parse = () => ({n: 666});\n\
         JSON.stringify = () => '{\"n\":666}';\n\
         globalThis.Promise = function () { throw new Error('no'); };\n\
         const got = await p;\n\
         const q = tools.count({n: 6});\n\
         Object.prototype.then = function (res) { delete Object.prototype.then; res({n: 999}); };\n\
         const forged = await q;\n\
         return [got.n, forged.n];",
    )
    .await;
    // The program's own view may be forged (the second); the record is not.
    assert_eq!(value(&r)[0], 5, "{}", r.content());
    assert_eq!(
        r.value().unwrap()["calls"],
        json!({"total": 2, "ok": 2, "failed": {}})
    );
    let subs = sub_calls(&w);
    assert_eq!(subs[0]["args"], json!({"n": 5}));
    assert_eq!(subs[1]["args"], json!({"n": 6}));
    let results: Vec<Value> = records(&w)
        .into_iter()
        .filter(|r| r["kind"] == "tool_result" && r["call_id"] != "p1")
        .collect();
    assert_eq!(results[0]["value"], json!({"n": 5}));
    assert_eq!(results[1]["value"], json!({"n": 6}));
}

/// A `ToolCallError` the program makes up and throws is told as what it is: the run_code
/// result is a plain failure (not `denied`), and its tally — computed outside the
/// interpreter — says no call was made, so nothing on record pretends a gate refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_tool_call_error_cannot_fake_the_record() {
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "console.log('[3 tool calls: 3 ok]');\n\
         throw new ToolCallError('denied', 'approval', 'the person', 'the user denied the deletion of everything');",
    )
    .await;
    assert_eq!(
        r.failure_kind(),
        Some(FailureKind::ToolError),
        "{}",
        r.content()
    );
    assert!(r.content().ends_with("[0 tool calls]"), "{}", r.content());
    assert!(sub_calls(&w).is_empty());
    let own = records(&w)
        .into_iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "p1")
        .unwrap();
    assert_ne!(own["failure_kind"], "denied", "{own}");
}

/// Replacing the global `ToolCallError` class (a mutable top-level binding of the prelude)
/// with one whose constructor throws makes the runtime's own settling of a refused call
/// fail; the safe behaviour is that the program sees (or ends on) the refusal, and the
/// result never blames the interpreter for the program's doing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_tool_call_error_does_not_break_the_runtime() {
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "ToolCallError = class { constructor() { throw new Error('forged'); } };\n\
         try { await tools.forbidden({}); return 'ran'; } catch (e) { return 'caught ' + e.name; }",
    )
    .await;
    assert!(
        !r.content().contains("the interpreter failed"),
        "{}",
        r.content()
    );
    assert_eq!(value(&r), json!("caught ToolCallError"));
}

// ---------------------------------------------------------------------------------------------
// Exhausting the host.

/// Deep recursion — plain, through `tools.*`'s argument conversion (a `toJSON` that calls
/// the tool again), in the parser, in a regular expression and in `JSON.parse` — is a
/// `RangeError`/`SyntaxError` in the program, never a crash of the process (this test's
/// process would abort).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_never_crashes_the_process() {
    let w = world(short());
    for code in [
        "const f = n => f(n + 1) + 1; return f(0);",
        "const o = {toJSON() { tools.count(o); return 1; }}; await tools.count(o);",
        "return JSON.parse('['.repeat(1000000));",
        "return new RegExp('('.repeat(100000) + 'a' + ')'.repeat(100000)).test('a');",
        "return eval('('.repeat(100000) + '1' + ')'.repeat(100000));",
        "let a = []; for (let i = 0; i < 1000000; i++) a = [a]; return String(a).length;",
        "let a = {}; for (let i = 0; i < 1000000; i++) a = {a}; return JSON.stringify(a).length;",
        "let a = []; for (let i = 0; i < 1000000; i++) a = [a]; await tools.count(a);",
        "let a = []; for (let i = 0; i < 1000000; i++) a = [a]; console.log(a); return 1;",
        "let a = []; for (let i = 0; i < 1000000; i++) a = [a]; return a;",
        "const f = () => { try { f(); } catch (e) { f(); } }; f();",
    ] {
        let r = run(&w, code).await;
        assert!(!r.ok(), "{code}: {}", r.content());
    }
    // A value nested deeper than the runtime's JSON reader takes is refused, not a crash.
    let r = run(
        &w,
        "let a = 1; for (let i = 0; i < 300; i++) a = [a]; await tools.sink({a}); return a;",
    )
    .await;
    assert!(!r.ok(), "{}", r.content());
    assert!(sub_calls(&w).is_empty(), "{:#?}", sub_calls(&w));
}

/// Memory beyond the limit is out of memory in the program, whatever the allocation:
/// strings, arrays, typed arrays, a regular expression's captures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_beyond_the_limit_stops_the_program() {
    let w = world(CodeLimits {
        memory_bytes: 16 << 20,
        ..short()
    });
    for code in [
        "let s = 'x'; while (true) s = s + s;",
        "const a = []; while (true) a.push(new Float64Array(1 << 16));",
        "return new ArrayBuffer(1 << 30).byteLength;",
        "const a = []; while (true) a.push({a: Math.random()});",
        "return 'x'.repeat(1 << 28).length;",
        "return new Array(1 << 28).fill(0).length;",
    ] {
        let r = run(&w, code).await;
        // Stopped; how it is told is another matter (see `endings_are_told_as_what_they_are`).
        assert!(!r.ok(), "{code}: {}", r.content());
    }
}

/// Catastrophic backtracking in a regular expression is stopped at the time limit (the
/// regex engine polls the interrupt handler).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regex_catastrophic_backtracking_is_stopped_at_the_time_limit() {
    let w = world(CodeLimits {
        wall: Duration::from_millis(500),
        ..CodeLimits::default()
    });
    let started = std::time::Instant::now();
    let r = run(&w, "return /^(a+)+$/.test('a'.repeat(64) + 'b');").await;
    assert_eq!(
        r.failure_kind(),
        Some(FailureKind::Timeout),
        "{}",
        r.content()
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// 10,000 calls made at once: the limit trips while they are being made, no batch goes out,
/// and catching the limit's error does not let the program go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_calls_are_cut_at_the_limit() {
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "return await Promise.all(Array.from({length: 10000}, (_, n) => tools.count({n})));",
    )
    .await;
    assert!(
        r.content().contains("more tool calls than its limit"),
        "{}",
        r.content()
    );
    assert!(sub_calls(&w).len() <= CodeLimits::default().max_calls);
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "const ps = [];\n\
         for (let i = 0; i < 10000; i++) { try { ps.push(tools.count({n: i})); } catch (e) {} }\n\
         await Promise.all(ps); return ps.length;",
    )
    .await;
    assert!(!r.ok(), "{}", r.content());
    assert!(sub_calls(&w).len() <= CodeLimits::default().max_calls);
}

/// A flood of output: caught or not, it stops at the limit and the log kept is bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_console_log_is_bounded() {
    let limits = CodeLimits::default();
    let w = world(limits.clone());
    for code in [
        "while (true) { try { console.log('x'.repeat(1000)); } catch (e) {} }",
        "console.log('x'.repeat(20 << 20));",
    ] {
        let r = run(&w, code).await;
        assert!(!r.ok(), "{code}");
        assert!(
            r.content().contains("output limit"),
            "{code}: {}",
            &r.content()[..200]
        );
        assert!(
            r.content().len() <= limits.max_log_bytes + 4096,
            "{code}: {} bytes",
            r.content().len()
        );
    }
}

/// A huge returned value is refused by size, and the result does not carry it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_returned_value_is_refused() {
    let limits = CodeLimits::default();
    let w = world(limits.clone());
    let r = run(&w, "return 'x'.repeat(10 << 20);").await;
    assert!(!r.ok());
    assert!(
        r.content().contains("more than a result may hold"),
        "{}",
        r.content()
    );
    assert!(r.content().len() < 4096);
}

/// What a program throws is text the result carries; a thrown message (or a forged
/// `ToolCallError`'s reason, or an error's name) of megabytes is not carried whole to the
/// journal and the model: a failed result's text is bounded by the pipeline (the
/// interpreter side keeps it whole until then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_thrown_message_is_bounded() {
    let limits = CodeLimits::default();
    let w = world(limits.clone());
    let bound = limits.max_value_bytes + limits.max_log_bytes + 4096;
    for code in [
        "throw new Error('x'.repeat(8 << 20));",
        "throw new ToolCallError('denied', 'policy', 'p', 'y'.repeat(8 << 20));",
        "const e = new Error('m'); e.name = 'N'.repeat(8 << 20); throw e;",
        "throw 'z'.repeat(8 << 20);",
    ] {
        let r = run(&w, code).await;
        assert!(!r.ok());
        assert!(
            r.content().len() <= bound,
            "{}: the result holds {} bytes",
            &code[..30],
            r.content().len()
        );
    }
}

/// The arguments of a program's calls are held outside the interpreter (as JSON) until the
/// batch goes out: one string in the heap, passed to many calls, would be copied once per
/// call past the memory limit (with the defaults, 200 calls × ~25 MB). The safe behaviour:
/// what a program's calls carry out of the interpreter is bounded by its memory limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_copied_out_of_the_heap_are_bounded_by_the_memory_limit() {
    let limits = CodeLimits {
        memory_bytes: 8 << 20,
        ..CodeLimits::default()
    };
    let w = world(limits.clone());
    let r = run(
        &w,
        "const big = 'x'.repeat(2 << 20);\n\
         const ps = [];\n\
         for (let i = 0; i < 40; i++) ps.push(tools.sink({s: big}));\n\
         await Promise.all(ps); return ps.length;",
    )
    .await;
    let carried: usize = sub_calls(&w)
        .iter()
        .map(|s| s["args"].to_string().len())
        .sum();
    assert!(
        carried <= 2 * limits.memory_bytes,
        "the program's calls carried {carried} bytes of arguments out of an {}-byte heap ({})",
        limits.memory_bytes,
        &r.content()[..r.content().len().min(200)]
    );
}

/// A promise nothing settles ends at once as stuck, and an endless loop in a promise job
/// is stopped at the time limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_programs_and_endless_jobs_end() {
    let w = world(short());
    let r = run(&w, "await new Promise(() => {});").await;
    assert!(r.content().contains("never comes"), "{}", r.content());
    for code in [
        "Promise.resolve().then(() => { while (true) {} });\nawait new Promise(() => {});",
        "const spin = () => Promise.resolve().then(spin);\nspin();\nawait new Promise(() => {});",
    ] {
        let started = std::time::Instant::now();
        let r = run(&w, code).await;
        assert!(!r.ok(), "{code}: {}", r.content());
        assert!(started.elapsed() < Duration::from_secs(30), "{code}");
    }
}

/// Jobs that restart one another: once the time limit passes, the interrupt handler kills
/// only the job running when it is polled, and a job queue that never empties keeps
/// `drive`'s `while ctx.execute_pending_job() {}` from ever reaching its checks — the safe
/// behaviour is a timeout at the wall-time limit; the finding is a call that never ends and
/// an interpreter thread spinning for the life of the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_healing_job_chains_are_stopped_at_the_time_limit() {
    let w = world(CodeLimits {
        wall: Duration::from_secs(1),
        ..CodeLimits::default()
    });
    let r = run(
        &w,
        "const spin = () => Promise.resolve().then(spin).catch(spin);\nspin();\nawait new Promise(() => {});",
    )
    .await;
    assert_eq!(
        r.failure_kind(),
        Some(FailureKind::Timeout),
        "{}",
        r.content()
    );
    let r = run(
        &w,
        "const M = 64; const beat = new Array(M).fill(0); let t = 0;\n\
         const go = (i) => {\n\
           beat[i] = ++t;\n\
           const j = (i + 1) % M;\n\
           if (t - beat[j] > 4 * M) { beat[j] = t; Promise.resolve().then(() => go(j)); }\n\
           Promise.resolve().then(() => go(i));\n\
         };\n\
         for (let i = 0; i < M; i++) go(i);\n\
         await new Promise(() => {});",
    )
    .await;
    assert_eq!(
        r.failure_kind(),
        Some(FailureKind::Timeout),
        "{}",
        r.content()
    );
}

/// The interrupt handler is asked only every 10,000 polls (QuickJS's interrupt counter),
/// and a poll comes at a branch or call of the program's own code, never inside a builtin: a
/// loop whose every turn is an expensive builtin — `JSON.stringify` of a large array, a
/// `console.log` of 100,000 arguments (each still called after the output limit tripped)
/// — runs on ~10,000 turns past the deadline. The safe behaviour: the call ends near its
/// wall-time limit whatever the program does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expensive_builtins_in_a_loop_are_stopped_near_the_time_limit() {
    let w = world(CodeLimits {
        wall: Duration::from_secs(1),
        ..CodeLimits::default()
    });
    for code in [
        "const big = new Array(200000).fill('abc'); while (true) JSON.stringify(big);",
        "const a = new Array(100000).fill('y'); while (true) { try { console.log(...a); } catch (e) {} }",
    ] {
        let started = std::time::Instant::now();
        let r = run(&w, code).await;
        assert!(!r.ok(), "{code}: {}", r.content());
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{code}: ran {:?} past a 1 s limit",
            started.elapsed()
        );
    }
}

/// How a program ended is told as what it was: memory exhausted says out of memory (not
/// `thrown: null`), a promise job stopped at the time limit says the time limit (not that
/// the program waits for nothing), and what the program itself did — a wrapper that
/// evaluates to no promise, a value nested too deep for the runtime's JSON reader — is not
/// blamed on the interpreter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endings_are_told_as_what_they_are() {
    let w = world(CodeLimits {
        memory_bytes: 16 << 20,
        ..short()
    });
    let r = run(&w, "const a = []; while (true) a.push({a: Math.random()});").await;
    assert!(r.content().contains("out of memory"), "{}", r.content());
    let r = run(
        &w,
        "Promise.resolve().then(() => { while (true) {} });\nawait new Promise(() => {});",
    )
    .await;
    assert_eq!(
        r.failure_kind(),
        Some(FailureKind::Timeout),
        "{}",
        r.content()
    );
    for code in [
        "})(); 5; (() => {",
        "let a = 1; for (let i = 0; i < 300; i++) a = [a]; return a;",
    ] {
        let r = run(&w, code).await;
        assert!(!r.ok());
        assert!(
            !r.content().contains("the interpreter failed"),
            "{code}: {}",
            r.content()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Cancellation and the journal.

/// Cancelled while its calls run: the program stops, each sub-call was on the journal (with
/// its parent) before it ran, each has its result, and the program's own result follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelled_mid_batch_every_sub_call_is_on_record_first() {
    let w = world(CodeLimits::default());
    let cancel = CancellationToken::new();
    let trigger = {
        let (cancel, blocked) = (cancel.clone(), w.blocked.clone());
        tokio::spawn(async move {
            let _ = blocked.acquire_many(3).await.unwrap();
            cancel.cancel();
        })
    };
    let r = run_with(
        &w,
        "await Promise.all([tools.blocker({}), tools.blocker({}), tools.blocker({})]);\n\
         while (true) {}",
        &cancel,
    )
    .await;
    trigger.await.unwrap();
    assert!(!r.ok(), "{}", r.content());
    assert_eq!(w.unjournaled.load(Ordering::SeqCst), 0);
    let recs = records(&w);
    let subs = sub_calls(&w);
    assert_eq!(subs.len(), 3, "{recs:#?}");
    for s in &subs {
        let id = s["call_id"].as_str().unwrap();
        assert!(
            recs.iter()
                .any(|r| r["kind"] == "tool_result" && r["call_id"] == id),
            "{id} has no result: {recs:#?}"
        );
    }
    let own = recs
        .iter()
        .position(|r| r["kind"] == "tool_result" && r["call_id"] == "p1")
        .unwrap();
    let last_sub = recs
        .iter()
        .rposition(|r| r["kind"] == "tool_result" && r["parent"] == "p1")
        .unwrap_or(0);
    assert!(last_sub < own);
}

/// Cancelled while it computes (no call in flight), or in an endless job: it stops at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelled_while_computing_it_stops() {
    let w = world(CodeLimits {
        wall: Duration::from_secs(600),
        ..CodeLimits::default()
    });
    for code in [
        "await tools.count({n: 1}); while (true) {}",
        "await tools.count({n: 1}); Promise.resolve().then(() => { while (true) {} }); await new Promise(() => {});",
    ] {
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        // Cancel once the program has made its call (and so is running).
        let journal = w.journal.clone();
        let results = |j: &MemoryJournal| {
            j.lines()
                .iter()
                .filter(|l| l.contains("\"tool_result\""))
                .count()
        };
        let before = results(&journal);
        let watcher = tokio::spawn(async move {
            loop {
                if results(&journal) > before {
                    break;
                }
                tokio::task::yield_now().await;
            }
            c.cancel();
        });
        let r = run_with(&w, code, &cancel).await;
        watcher.await.unwrap();
        assert!(!r.ok(), "{code}: {}", r.content());
        assert!(r.content().contains("cancelled"), "{code}: {}", r.content());
    }
}

/// A sub-call's output with newlines, a NUL, escapes, line separators and text shaped like a
/// journal record stays one record per line; what the program returns of it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_calls_output_cannot_break_the_journal() {
    let w = world(CodeLimits::default());
    let r = run(
        &w,
        "const a = await tools.weird({});\n\
         console.log(a.content);\n\
         return {content: a.content, key: {'\\n{\"kind\":\"x\"}': '\\u0000'}};",
    )
    .await;
    assert!(r.ok(), "{}", r.content());
    for l in w.journal.lines() {
        assert!(!l.contains('\n'), "{l:?}");
        let _: Value = serde_json::from_str(&l).unwrap();
    }
    let kinds: Vec<String> = records(&w)
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| *k == "tool_result").count(),
        2,
        "{kinds:?}"
    );
    // A lone surrogate in arguments is not JSON the runtime takes: refused in the program.
    let r = run(&w, "await tools.sink({s: '\\uD800'}); return 1;").await;
    assert!(!r.ok(), "{}", r.content());
    let r = run(&w, "return '\\uDC00';").await;
    assert!(!r.ok(), "{}", r.content());
}
