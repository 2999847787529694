//! Sub-agents end to end (issue 12, Measure): the release `dsh exec` binary against a
//! [`ScriptedServer`] on 127.0.0.1, every process with its own throwaway workspace, state
//! dir and config dir (`[limits] max_parallel = 64`, so up to 64 children may be live).
//!
//! 1. **What a child costs.** A task of 20 steps, each one `call_sub_agent` (profile
//!    `search`) whose child answers at once (2 model requests per step), against a task of
//!    40 steps of one cheap tool call each (`read_file` / `list_dir`, alternating): both make
//!    41 model requests. (children − plain) ÷ 20 is what a child adds over one cheap call
//!    and its model request. Wall and CPU time (`wait4(2)`), medians, the two tasks run
//!    alternately; with the journals on the temp dir's disk and on a tmpfs.
//! 2. **Memory per live child.** One step of K `search` children whose replies are held
//!    until all K requests wait ([`Rendezvous`]): all K children are alive at once. Peak
//!    RSS through GNU time; (RSS_K − RSS_1) ÷ (K − 1) per live child.
//! 3. **Parallel against one by one.** Four `search` children, each one `grep` and then an
//!    answer: in one step (four calls at once) and in four steps (one call each), with every
//!    reply (the main agent's and the children's) paused once for a fixed latency after its
//!    first event (`Turn::stall_after(1, …)`), and with none.
//!
//! ```sh
//! cargo bench -p dsh-cli --bench subagents --locked
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "common/env.rs"]
mod env;
#[path = "common/process.rs"]
mod process;

use std::path::Path;
use std::time::{Duration, Instant};

use dsh_testkit::model_server::{Rendezvous, Reply, ScriptedServer, ServerHandle, Turn};
use env::Env;
use process::{Usage, median, peak_rss_kib, run};
use serde_json::{Value, json};

/// Children (and twice as many plain steps) in the overhead tasks.
const CHILDREN: usize = 20;
/// Files in the workspace's `src`.
const FILES: usize = 20;
/// The default `max_parallel` (8) would hold back the K = 32 and K = 64 rows.
const CONFIG: &str = "[limits]\nmax_parallel = 64\n";

fn sub_agent_args(task: &str) -> String {
    json!({"profile": "search", "task": task}).to_string()
}

/// The main agent's final answer.
fn done() -> Turn {
    Turn::text("Every module returns its index.").deltas(64)
}

/// `n` steps of one `search` child each, whose child answers at once; then a final answer.
fn children_script(n: usize) -> Vec<Reply> {
    let mut replies = Vec::new();
    for i in 0..n {
        replies.push(
            Turn::tool_call(
                &format!("m{i}"),
                "call_sub_agent",
                &sub_agent_args(&format!("find where f{i} is defined")),
            )
            .deltas(64)
            .into(),
        );
        replies.push(
            Turn::text(format!("f{i} is in src/m{i}.rs line 1."))
                .deltas(64)
                .into(),
        );
    }
    replies.push(done().into());
    replies
}

/// `steps` steps of one cheap call each (`read_file`, `list_dir`, alternating so the
/// repeated-call stop line never fires); then a final answer.
fn plain_script(steps: usize) -> Vec<Reply> {
    let mut replies: Vec<Reply> = (0..steps)
        .map(|i| {
            let turn = if i % 2 == 0 {
                Turn::tool_call(
                    &format!("c{i}"),
                    "read_file",
                    &format!(r#"{{"path":"src/m{}.rs"}}"#, (i / 2) % FILES),
                )
            } else {
                Turn::tool_call(&format!("c{i}"), "list_dir", r#"{"path":"src"}"#)
            };
            turn.deltas(64).into()
        })
        .collect();
    replies.push(done().into());
    replies
}

/// One step of `k` `search` children, each child's reply held until all `k` wait.
fn live_script(k: usize, rendezvous: &Rendezvous) -> Vec<Reply> {
    let mut step = Turn::default().deltas(64);
    for i in 0..k {
        step = step.call(
            &format!("m{i}"),
            "call_sub_agent",
            &sub_agent_args(&format!("find where f{i} is defined")),
        );
    }
    let mut replies: Vec<Reply> = vec![step.into()];
    for _ in 0..k {
        replies.push(
            Reply::from(Turn::text("It is in src/ (line 1 of one module).").deltas(64))
                .together(rendezvous),
        );
    }
    replies.push(done().into());
    replies
}

const PAIR: usize = 4;

/// A reply paused for `latency` once after its first event.
fn slow(turn: Turn, latency: Duration) -> Reply {
    if latency.is_zero() {
        turn.into()
    } else {
        turn.stall_after(1, latency).into()
    }
}

fn grep_turn() -> Turn {
    Turn::tool_call("g1", "grep", r#"{"pattern":"pub fn","path":"src"}"#).deltas(64)
}

fn found() -> Turn {
    Turn::text("Every module in src/ defines one pub fn, at line 1.").deltas(64)
}

fn task(i: usize) -> String {
    sub_agent_args(&format!("list the functions of module group {i}"))
}

/// Four `search` children in one step; every reply paused for `latency`. The children's
/// replies at each position are the same, so arrival order does not matter.
fn parallel_script(latency: Duration) -> Vec<Reply> {
    let mut step = Turn::default().deltas(64);
    for i in 0..PAIR {
        step = step.call(&format!("m{i}"), "call_sub_agent", &task(i));
    }
    let mut replies = vec![slow(step, latency)];
    replies.extend((0..PAIR).map(|_| slow(grep_turn(), latency)));
    replies.extend((0..PAIR).map(|_| slow(found(), latency)));
    replies.push(slow(done(), latency));
    replies
}

/// The same four children one per step.
fn sequential_script(latency: Duration) -> Vec<Reply> {
    let mut replies = Vec::new();
    for i in 0..PAIR {
        replies.push(slow(
            Turn::tool_call(&format!("m{i}"), "call_sub_agent", &task(i)).deltas(64),
            latency,
        ));
        replies.push(slow(grep_turn(), latency));
        replies.push(slow(found(), latency));
    }
    replies.push(slow(done(), latency));
    replies
}

fn count(records: &[Value], kind: &str) -> usize {
    records.iter().filter(|r| r["kind"] == kind).count()
}

/// Runs `script` once in `env`; checks the whole script was used and the journal holds
/// `children` sub-agent starts, each ended with a final answer.
fn exec_once(env: &Env, script: Vec<Reply>, children: usize) -> (Usage, ServerHandle) {
    let requests = script.len();
    let server = ScriptedServer::start(script);
    let usage = run(env.exec(&server.url));
    assert_eq!(server.remaining(), 0, "the whole script was used");
    assert_eq!(server.requests().len(), requests);
    let records = env.last_journal();
    assert_eq!(count(&records, "sub_agent_start"), children);
    let answered = records
        .iter()
        .filter(|r| r["kind"] == "sub_agent_end" && r["stop"] == "final_answer")
        .count();
    assert_eq!(answered, children, "every child answered");
    (usage, server)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn walls(u: &[Usage]) -> Duration {
    median(u.iter().map(|x| x.wall).collect())
}

fn cpus(u: &[Usage]) -> Duration {
    median(u.iter().map(|x| x.cpu).collect())
}

/// The times between consecutive requests' arrivals at the server.
fn gaps(server: &ServerHandle) -> Vec<Duration> {
    let r = server.recorded();
    r.windows(2)
        .map(|w| w[1].received - w[0].received)
        .collect()
}

/// Part 1: the children task and the two plain ones, alternated, `runs` times each.
/// Prints its table rows; returns its row of request gaps.
fn overhead(label: &str, state_in: Option<&Path>, runs: usize) -> String {
    let env = Env::new(FILES, CONFIG, state_in);
    let (mut kids, mut plain2, mut plain1) = (Vec::new(), Vec::new(), Vec::new());
    let (mut starts, mut ends, mut steps) = (Vec::new(), Vec::new(), Vec::new());
    let mut sizes = (0, 0, 0);
    for _ in 0..runs {
        let (u, server) = exec_once(&env, children_script(CHILDREN), CHILDREN);
        kids.push(u);
        let requests = server.requests();
        let size = |i: usize| serde_json::to_string(&requests[i]).unwrap().len();
        sizes = (size(0), size(1), size(2 * CHILDREN));
        // Requests alternate main, child, main, …: even gaps start a child (the main
        // agent's reply, its call, the child's assembly, its request), odd ones end it.
        for (i, g) in gaps(&server).into_iter().enumerate() {
            if i % 2 == 0 {
                starts.push(g)
            } else {
                ends.push(g)
            }
        }
        plain2.push(exec_once(&env, plain_script(2 * CHILDREN), 0).0);
        let (u, server) = exec_once(&env, plain_script(CHILDREN), 0);
        plain1.push(u);
        steps.extend(gaps(&server));
    }
    let n = f64::from(u32::try_from(CHILDREN).unwrap());
    let row = |task: String, requests: usize, u: &[Usage]| {
        println!(
            "| {label} | {task} | {requests} | {} | {} |",
            ms(walls(u)),
            ms(cpus(u))
        );
    };
    row(
        format!("A: {CHILDREN} steps, one `search` child each"),
        2 * CHILDREN + 1,
        &kids,
    );
    row(
        format!("B: {} steps, one `read_file`/`list_dir` each", 2 * CHILDREN),
        2 * CHILDREN + 1,
        &plain2,
    );
    row(
        format!("C: {CHILDREN} steps, one `read_file`/`list_dir` each"),
        CHILDREN + 1,
        &plain1,
    );
    let per = |a: &[Usage], b: &[Usage], f: fn(&[Usage]) -> Duration| {
        let d = f(a).as_secs_f64() - f(b).as_secs_f64();
        format!("{:.2} ms", d * 1000.0 / n)
    };
    for (what, a, b) in [
        ("a child over two plain steps, (A − B) ÷ 20", &kids, &plain2),
        (
            "a child, its request included, (A − C) ÷ 20",
            &kids,
            &plain1,
        ),
        ("a plain step, (B − C) ÷ 20", &plain2, &plain1),
    ] {
        println!(
            "| {label} | **{what}** | | **{}** | **{}** |",
            per(a, b, walls),
            per(a, b, cpus)
        );
    }
    println!(
        "| {label} | (A's request bytes: the main agent's first {}, its last {}; a child's {}) | | | |",
        sizes.0, sizes.2, sizes.1
    );
    let us = |v: Vec<Duration>| format!("{:.0} µs", median(v).as_secs_f64() * 1e6);
    format!(
        "| {label} | {} | {} | {} |",
        us(steps),
        us(starts),
        us(ends)
    )
}

/// Part 2: peak RSS with `k` live children (median of `runs`), and the median wall.
fn live(k: usize, runs: usize) -> (Option<u64>, Duration) {
    let env = Env::new(FILES, CONFIG, None);
    let mut rss = Vec::new();
    let mut wall = Vec::new();
    for _ in 0..runs {
        let rendezvous = Rendezvous::new(k);
        let server = ScriptedServer::start(live_script(k, &rendezvous));
        let begun = Instant::now();
        rss.push(peak_rss_kib(&env.exec(&server.url)));
        wall.push(begun.elapsed());
        assert!(
            rendezvous.met(),
            "the {k} children were not all live at once"
        );
        assert_eq!(server.remaining(), 0);
        assert_eq!(count(&env.last_journal(), "sub_agent_start"), k);
    }
    let rss: Option<Vec<u64>> = rss.into_iter().collect();
    let rss = rss.map(|mut v| {
        v.sort_unstable();
        v[v.len() / 2]
    });
    (rss, median(wall))
}

/// Part 3: the four children at once and one by one, alternated, `runs` times each.
fn pair(latency: Duration, runs: usize) {
    let env = Env::new(FILES, CONFIG, None);
    let (mut par, mut seq) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (u, server) = exec_once(&env, parallel_script(latency), PAIR);
        // Each child's first request (requests 2–5) came before any child's second: the
        // children were all started before any got its reply.
        for r in &server.requests()[1..=PAIR] {
            assert_eq!(r["messages"].as_array().unwrap().len(), 2, "a fresh child");
        }
        par.push(u);
        seq.push(exec_once(&env, sequential_script(latency), PAIR).0);
    }
    let (p, s) = (walls(&par), walls(&seq));
    // Replies on the critical path: parallel 4 (step, grep, answer, final); one by one 13.
    let ideal = if latency.is_zero() {
        "—".to_owned()
    } else {
        format!("{:.2}", 13.0 / 4.0)
    };
    println!(
        "| {} ms | {} | {} | {} | {} | **{:.2}** | {ideal} |",
        latency.as_millis(),
        ms(p),
        ms(s),
        ms(cpus(&par)),
        ms(cpus(&seq)),
        s.as_secs_f64() / p.as_secs_f64()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: keep that run short.
    let full = std::env::args().any(|a| a == "--bench");
    let runs = if full { 15 } else { 1 };

    println!("== 1. what a child costs (medians of {runs} runs, run alternately) ==");
    println!("| state | task | model requests | wall | CPU |");
    println!("|---|---|---:|---:|---:|");
    let mut gap_rows = vec![overhead("ext4", None, runs)];
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        gap_rows.push(overhead("tmpfs", Some(shm), runs));
    }
    println!();
    println!("median time between consecutive requests' arrival at the server (all runs' gaps):");
    println!(
        "| state | plain step (C) | main reply → the child's request | the child's reply → main's next request |"
    );
    println!("|---|---:|---:|---:|");
    for r in &gap_rows {
        println!("{r}");
    }

    let live_runs = if full { 5 } else { 1 };
    println!();
    println!(
        "== 2. peak RSS with K live `search` children (one step, replies held until all K \
         wait; medians of {live_runs} runs) =="
    );
    println!("| K | peak RSS | per live child over K = 1 | wall |");
    println!("|---:|---:|---:|---:|");
    let ks: &[usize] = if full { &[1, 8, 32, 64] } else { &[1, 8] };
    let mut base = None;
    for &k in ks {
        let (rss, wall) = live(k, live_runs);
        if k == 1 {
            base = rss;
        }
        let per = match (rss, base) {
            (Some(r), Some(b)) if k > 1 => {
                format!("{:.0} KiB", (r as f64 - b as f64) / (k as f64 - 1.0))
            }
            _ => "—".to_owned(),
        };
        let kib = rss.map_or("n/a (no /usr/bin/time)".into(), |r| format!("{r} KiB"));
        println!("| {k} | {kib} | {per} | {} |", ms(wall));
    }

    let pair_runs = if full { 7 } else { 1 };
    println!();
    println!(
        "== 3. four `search` children (one grep, then an answer each): one step against four \
         (medians of {pair_runs} runs, run alternately) =="
    );
    println!(
        "| latency per reply | parallel wall | one by one wall | parallel CPU | one by one CPU | \
         one by one ÷ parallel | replies on the critical path, ratio |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let latencies: &[u64] = if full { &[0, 150] } else { &[0, 20] };
    for &l in latencies {
        pair(Duration::from_millis(l), pair_runs);
    }
}
