//! `dsh exec` end to end: the release binary, started as a process, runs a scripted task
//! against a [`ScriptedServer`] on 127.0.0.1 that answers instantly (no delays, whole SSE
//! events per write). What is measured is the harness: process start-up, configuration,
//! session assembly, request building, HTTP/SSE, the pipeline, the tools and the journal.
//!
//! - `e2e/version`: `dsh --version` (start-up and exit).
//! - `e2e/exec_1_step`: a one-turn task (a final answer, no tool call).
//! - `e2e/exec_20_tool_calls`: 20 turns of one cheap tool call each (`read_file` of a small
//!   file, `list_dir`, alternating so the repeated-call stop line never fires), then a final
//!   answer: 21 model calls, 20 tool calls.
//!
//! After criterion, a summary (only under `cargo bench`) runs each task again, reading each
//! child's CPU time with `wait4(2)` and its peak RSS through GNU time, and prints the per-step
//! overhead, the first request's size, and the same task with the journals on a tmpfs (what
//! the journal's fsyncs cost).
//!
//! ```sh
//! cargo bench -p dsh-cli --bench e2e
//! ```
//!
//! With `DSH_BASELINE_BIN` naming another `dsh` binary (an older build), the summary ends
//! with a before/after pass: both tasks run with this build (A) and that one (B), alternated
//! run by run (A B A B …, each binary with a state dir of its own), and it prints both
//! per-step figures and their ratio, with the journals on ext4 and then on a tmpfs, and
//! each binary's peak RSS.
//! `DSH_BASELINE_RUNS` sets the runs per binary and task (default 31). A criterion filter
//! that matches nothing skips criterion's part:
//!
//! ```sh
//! DSH_BASELINE_BIN=/path/to/old/dsh cargo bench -p dsh-cli --bench e2e -- summary-only
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "common/env.rs"]
mod env;
#[path = "common/process.rs"]
mod process;
#[path = "common/task.rs"]
mod task;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::Criterion;
use dsh_testkit::model_server::{ScriptedServer, ServerHandle};
use env::{BIN, Env};
use process::{Usage, median, peak_rss_kib, run};
use serde_json::Value;
use task::script;

const TOOL_CALLS: usize = 20;

fn version_cmd() -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Runs a task of `steps` tool calls once; returns the child's figures and the server.
fn exec_once(env: &Env, steps: usize) -> (Usage, ServerHandle) {
    let server = ScriptedServer::start(script(steps));
    let usage = run(env.exec(&server.url));
    assert_eq!(server.remaining(), 0, "the whole script was used");
    (usage, server)
}

fn criterion_benches(c: &mut Criterion) {
    let env = Env::new(TOOL_CALLS, "", None);
    let mut group = c.benchmark_group("e2e");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    group.bench_function("version", |b| b.iter(|| run(version_cmd())));
    for (name, steps) in [("exec_1_step", 0), ("exec_20_tool_calls", TOOL_CALLS)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // The server starts outside the timed part.
                    let server = ScriptedServer::start(script(steps));
                    let cmd = env.exec(&server.url);
                    let begun = Instant::now();
                    run(cmd);
                    total += begun.elapsed();
                    assert_eq!(server.remaining(), 0);
                }
                total
            });
        });
    }
    group.finish();
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// What one configuration of the 20-tool task gave.
struct Task {
    one: Vec<Usage>,
    twenty: Vec<Usage>,
    /// Sum of the 21 `llm_call` `elapsed_ms` of each 20-tool run, sorted.
    model_ms: Vec<u64>,
    server: ServerHandle,
}

fn task(env: &Env, runs: usize) -> Task {
    let one: Vec<Usage> = (0..runs).map(|_| exec_once(env, 0).0).collect();
    let mut twenty = Vec::new();
    let mut model_ms = Vec::new();
    let mut last_server = None;
    for _ in 0..runs {
        let (u, server) = exec_once(env, TOOL_CALLS);
        twenty.push(u);
        let records = env.last_journal();
        let calls: Vec<&Value> = records.iter().filter(|r| r["kind"] == "llm_call").collect();
        assert_eq!(calls.len(), TOOL_CALLS + 1);
        let results = records
            .iter()
            .filter(|r| r["kind"] == "tool_result" && r["ok"] == true)
            .count();
        assert_eq!(results, TOOL_CALLS);
        model_ms.push(
            calls
                .iter()
                .map(|r| r["elapsed_ms"].as_u64().unwrap())
                .sum::<u64>(),
        );
        last_server = Some(server);
    }
    model_ms.sort_unstable();
    Task {
        one,
        twenty,
        model_ms,
        server: last_server.unwrap(),
    }
}

fn wall(u: &[Usage]) -> Duration {
    median(u.iter().map(|x| x.wall).collect())
}

fn cpu(u: &[Usage]) -> Duration {
    median(u.iter().map(|x| x.cpu).collect())
}

fn print_task(label: &str, t: &Task) {
    let steps = u32::try_from(TOOL_CALLS).unwrap();
    println!(
        "[{label}] exec, 1 model call, no tool      wall {}  cpu {}",
        ms(wall(&t.one)),
        ms(cpu(&t.one))
    );
    println!(
        "[{label}] exec, 21 model calls, 20 tools   wall {}  cpu {}",
        ms(wall(&t.twenty)),
        ms(cpu(&t.twenty))
    );
    println!(
        "[{label}] per step ((20-tool − 1-step) / 20)   wall {}  cpu {}",
        ms(wall(&t.twenty).saturating_sub(wall(&t.one)) / steps),
        ms(cpu(&t.twenty).saturating_sub(cpu(&t.one)) / steps)
    );
    println!(
        "[{label}] sum of the 21 llm_call elapsed_ms (whole ms, rounded down): median {}, range {}–{}",
        t.model_ms[t.model_ms.len() / 2],
        t.model_ms[0],
        t.model_ms[t.model_ms.len() - 1]
    );
}

/// The figures criterion does not give: CPU time, peak RSS, per-step overhead, request size.
fn summary(runs: usize) {
    let env = Env::new(TOOL_CALLS, "", None);
    let version: Vec<Usage> = (0..runs * 3).map(|_| run(version_cmd())).collect();
    let disk = task(&env, runs);

    println!();
    println!(
        "== dsh exec end to end (medians of {runs} runs; {} for --version) ==",
        runs * 3
    );
    println!(
        "dsh --version                    wall {}  cpu {}",
        ms(wall(&version)),
        ms(cpu(&version))
    );
    print_task("state on ext4", &disk);

    let server = ScriptedServer::start(script(TOOL_CALLS));
    let rss_twenty = peak_rss_kib(&env.exec(&server.url));
    let server_one = ScriptedServer::start(script(0));
    let rss_one = peak_rss_kib(&env.exec(&server_one.url));
    let rss_version = peak_rss_kib(&version_cmd());
    let kib = |k: Option<u64>| k.map_or("n/a (no /usr/bin/time)".into(), |k| format!("{k} KiB"));
    println!(
        "peak RSS (GNU time %M): --version {}, 1-step exec {}, 20-tool exec {}",
        kib(rss_version),
        kib(rss_one),
        kib(rss_twenty)
    );

    let requests = disk.server.requests();
    let first = serde_json::to_string(&requests[0]).unwrap();
    let tools = serde_json::to_string(&requests[0]["tools"]).unwrap();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap_or("");
    let n_tools = requests[0]["tools"].as_array().map_or(0, Vec::len);
    let last = serde_json::to_string(requests.last().unwrap()).unwrap();
    println!(
        "first request: {} bytes ({n_tools} tools: {} bytes of schemas; system prompt {} bytes)",
        first.len(),
        tools.len(),
        system.len()
    );
    println!("last request (21st): {} bytes", last.len());

    // The same task with the journals on a tmpfs: what the per-batch fsync costs.
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let env = Env::new(TOOL_CALLS, "", Some(shm));
        let t = task(&env, runs);
        print_task("state on tmpfs", &t);
        let _ = std::fs::remove_dir_all(&env.home);
    }
}

/// One binary's runs in the before/after pass.
#[derive(Default)]
struct Side {
    one: Vec<Usage>,
    twenty: Vec<Usage>,
}

impl Side {
    fn per_step(&self, f: fn(&[Usage]) -> Duration) -> Duration {
        f(&self.twenty).saturating_sub(f(&self.one)) / u32::try_from(TOOL_CALLS).unwrap()
    }
}

/// Counts of `kind`s in the newest journal under `home`, read as plain JSON lines (not
/// through this build's reader: the baseline's journal format may differ).
fn kinds_in_newest(home: &Path) -> (usize, usize) {
    let newest = std::fs::read_dir(home.join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .max_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap())
        .unwrap();
    let text = std::fs::read_to_string(newest).unwrap();
    let (mut llm, mut ok) = (0, 0);
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["kind"] == "llm_call" {
            llm += 1;
        } else if v["kind"] == "tool_result" && v["ok"] == true {
            ok += 1;
        }
    }
    (llm, ok)
}

/// Runs both tasks `runs` times with each binary, alternating A B A B …; each binary has
/// its own state dir (under `state_in` when given).
fn before_after(baseline: &Path, runs: usize, state_in: Option<&Path>) -> (Side, Side) {
    let bins = [Path::new(BIN), baseline];
    let envs = [
        Env::new(TOOL_CALLS, "", state_in),
        Env::new(TOOL_CALLS, "", state_in),
    ];
    let mut sides = [Side::default(), Side::default()];
    for steps in [0, TOOL_CALLS] {
        for _ in 0..runs {
            for k in 0..2 {
                let server = ScriptedServer::start(script(steps));
                let usage = run(envs[k].exec_with(bins[k], &server.url));
                assert_eq!(
                    server.remaining(),
                    0,
                    "{}: the whole script was used",
                    bins[k].display()
                );
                if steps == 0 {
                    sides[k].one.push(usage);
                } else {
                    assert_eq!(
                        kinds_in_newest(&envs[k].home),
                        (TOOL_CALLS + 1, TOOL_CALLS),
                        "{}: 21 llm_call and 20 ok tool_result records",
                        bins[k].display()
                    );
                    sides[k].twenty.push(usage);
                }
            }
        }
    }
    if state_in.is_some() {
        for env in &envs {
            let _ = std::fs::remove_dir_all(&env.home);
        }
    }
    let [a, b] = sides;
    (a, b)
}

fn print_before_after(label: &str, after: &Side, before: &Side) {
    for (name, side) in [("after (this build)", after), ("before (baseline)", before)] {
        println!(
            "[{label}] {name:<19} 1-step wall {} cpu {}; 20-tool wall {} cpu {}; per step wall {} cpu {}",
            ms(wall(&side.one)),
            ms(cpu(&side.one)),
            ms(wall(&side.twenty)),
            ms(cpu(&side.twenty)),
            ms(side.per_step(wall)),
            ms(side.per_step(cpu)),
        );
    }
    let ratio = |f: fn(&[Usage]) -> Duration| {
        after.per_step(f).as_secs_f64() / before.per_step(f).as_secs_f64()
    };
    println!(
        "[{label}] per step after ÷ before: wall {:.3}, cpu {:.3}",
        ratio(wall),
        ratio(cpu)
    );
}

/// The before/after pass (module docs), when `DSH_BASELINE_BIN` is set.
fn baseline_summary() {
    let Some(baseline) = std::env::var_os("DSH_BASELINE_BIN") else {
        return;
    };
    let baseline = PathBuf::from(baseline);
    let runs: usize = std::env::var("DSH_BASELINE_RUNS")
        .ok()
        .map_or(31, |r| r.parse().expect("DSH_BASELINE_RUNS: a number"));
    let out = Command::new(&baseline).arg("--version").output().unwrap();
    assert!(
        out.status.success(),
        "{} --version failed",
        baseline.display()
    );
    println!();
    println!(
        "== dsh exec per step, this build (after) against DSH_BASELINE_BIN (before): {} ==",
        String::from_utf8_lossy(&out.stdout).trim()
    );
    println!(
        "baseline: {}; medians of {runs} runs per binary and task, run alternately A B A B …",
        baseline.display()
    );
    let (after, before) = before_after(&baseline, runs, None);
    print_before_after("state on ext4", &after, &before);
    let rss = |bin: &Path, steps: usize| {
        let env = Env::new(TOOL_CALLS, "", None);
        let server = ScriptedServer::start(script(steps));
        peak_rss_kib(&env.exec_with(bin, &server.url))
            .map_or("n/a (no /usr/bin/time)".into(), |k| format!("{k} KiB"))
    };
    println!(
        "peak RSS (GNU time %M), after / before: 1-step exec {} / {}, 20-tool exec {} / {}",
        rss(Path::new(BIN), 0),
        rss(&baseline, 0),
        rss(Path::new(BIN), TOOL_CALLS),
        rss(&baseline, TOOL_CALLS)
    );
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let (after, before) = before_after(&baseline, runs, Some(shm));
        print_before_after("state on tmpfs", &after, &before);
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    criterion_benches(&mut c);
    c.final_summary();
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: keep that run short.
    if std::env::args().any(|a| a == "--bench") {
        summary(15);
        baseline_summary();
    }
}
