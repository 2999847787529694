//! MCP (issue 26, "Measure"), against the real servers `scripts/mcp/install.sh` installs (run
//! it first: `eval "$(scripts/mcp/install.sh)"`): the everything server (Node.js),
//! mcp-server-time and mcp-server-git (Python).
//!
//! - Start-up with 0, 1 (everything) and 3 (everything, time, git) stdio servers configured:
//!   the time from starting `dsh exec` until its first model request reaches the scripted
//!   server (the first prompt: servers start beside it), and the wall time of
//!   `dsh check mcp__…` against `dsh check read_file` (a check of an MCP tool waits until
//!   every server is ready or has failed; a built-in's starts none).
//! - Per call: `dsh --yolo batch` of 400 calls of the everything server's `echo`, and of a
//!   built-in (`read_file` of a small file), one at a time (`max_parallel = 1`): the time
//!   from the first `tool_call` record to the last `tool_result` in the journal, over 400 —
//!   the server's start-up, which dominates a batch's wall time, left out. Every result is
//!   checked to be `ok`.
//! - dsh's own peak RSS (`VmHWM` of its process, read until it exits — GNU time would count
//!   the servers, its children) for a batch that calls each of the 3 servers and one that
//!   calls only built-ins with no server configured.
//!
//! ```sh
//! eval "$(scripts/mcp/install.sh)" && cargo bench -p dsh-cli --bench mcp
//! ```
//!
//! `MCP_RUNS` sets the runs per figure (default 10).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "common/env.rs"]
mod env;
#[path = "common/process.rs"]
mod process;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_testkit::model_server::{Gate, Reply, ScriptedServer, Turn};
use env::{BIN, Env};
use process::{median, run};

const OFFLINE: &str = "HTTP_PROXY = \"http://127.0.0.1:9\", HTTPS_PROXY = \"http://127.0.0.1:9\"";

fn argv(var: &str) -> Vec<String> {
    let json = std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} is not set: eval \"$(scripts/mcp/install.sh)\" first"));
    serde_json::from_str(&json).unwrap()
}

fn server(name: &str, argv: &[String]) -> String {
    let (program, args) = argv.split_first().unwrap();
    format!(
        "[mcp.servers.{name}]\ncommand = {program:?}\nargs = {args:?}\nenv = {{ {OFFLINE} }}\n\n"
    )
}

/// A config with the first `n` of everything, time, git.
fn config(n: usize, ws: &std::path::Path) -> String {
    let mut git = argv("DSH_MCP_GIT_ARGV");
    git.extend(["--repository".to_owned(), ws.display().to_string()]);
    let all = [
        server("everything", &argv("DSH_MCP_EVERYTHING_ARGV")),
        server("time", &argv("DSH_MCP_TIME_ARGV")),
        server("git", &git),
    ];
    let mut text =
        "[permissions]\nallow = [\"mcp__everything__*\", \"mcp__time__*\", \"mcp__git__*\"]\n\n"
            .to_owned();
    for s in all.iter().take(n) {
        text.push_str(s);
    }
    text
}

fn world(n: usize) -> Env {
    let e = Env::new(4, "", None);
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(&e.ws)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    git(&["init", "-q"]);
    std::fs::write(e.cfg.join("config.toml"), config(n, &e.ws)).unwrap();
    e
}

fn dsh(e: &Env, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--workspace")
        .arg(&e.ws)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &e.home)
        .env("DSH_HOME", &e.home)
        .env("DSH_CONFIG_HOME", &e.cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// From `dsh exec`'s start until its first model request arrives.
fn first_prompt(e: &Env) -> Duration {
    let gate = Gate::new();
    let server = ScriptedServer::start(vec![Reply::from(Turn::text("done")).held(&gate)]);
    let mut cmd = dsh(
        e,
        &[
            "exec",
            "--provider",
            "openai",
            "--base-url",
            &server.url,
            "--model",
            "m",
            "hi",
        ],
    );
    cmd.env("OPENAI_API_KEY", "sk-bench");
    let begun = Instant::now();
    let mut child = cmd.spawn().unwrap();
    while server.requests().is_empty() {
        std::thread::sleep(Duration::from_micros(200));
    }
    let took = begun.elapsed();
    gate.open();
    assert!(child.wait().unwrap().success());
    took
}

fn batch(e: &Env, lines: &[String]) -> Command {
    let file = e.home.join(format!("calls-{}.jsonl", lines.len()));
    std::fs::create_dir_all(&e.home).unwrap();
    let mut f = std::fs::File::create(&file).unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    dsh(e, &["--yolo", "batch", file.to_str().unwrap()])
}

fn echo_lines(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!(r#"{{"name":"mcp__everything__echo","args":{{"message":"m{i}"}}}}"#))
        .collect()
}

fn read_lines(n: usize) -> Vec<String> {
    (0..n)
        .map(|_| r#"{"name":"read_file","args":{"path":"src/m1.rs"}}"#.to_owned())
        .collect()
}

/// dsh's own peak RSS (KiB): its `VmHWM`, read until it exits.
fn own_peak_kib(mut cmd: Command) -> u64 {
    let mut child = cmd.spawn().unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status)
            && let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kib);
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    peak
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs: usize = std::env::var("MCP_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    println!("MCP bench: {runs} runs per figure, medians");
    println!(
        "start-up: servers | first model request | check read_file | check mcp__… (all ready)"
    );
    for n in [0, 1, 3] {
        let e = world(n);
        let first = median((0..runs).map(|_| first_prompt(&e)).collect());
        let builtin = median(
            (0..runs)
                .map(|_| run(dsh(&e, &["check", "read_file", r#"{"path":"src/m1.rs"}"#])).wall)
                .collect(),
        );
        let tool = [
            "mcp__everything__echo",
            "mcp__everything__echo",
            "mcp__git__git_status",
        ][n.min(2)];
        let mcp = if n == 0 {
            "-".to_owned()
        } else {
            ms(median(
                (0..runs)
                    .map(|_| {
                        run(dsh(
                            &e,
                            &["check", tool, r#"{"message":"x","repo_path":"."}"#],
                        ))
                        .wall
                    })
                    .collect(),
            ))
        };
        println!("  {n} | {} | {} | {mcp}", ms(first), ms(builtin));
    }

    let e = world(1);
    let mut text = std::fs::read_to_string(e.cfg.join("config.toml")).unwrap();
    text = text.replacen(
        "[permissions]",
        "[limits]\nmax_parallel = 1\n\n[permissions]",
        1,
    );
    std::fs::write(e.cfg.join("config.toml"), text).unwrap();
    let per_call = |lines: fn(usize) -> Vec<String>| {
        let spans: Vec<Duration> = (0..runs)
            .map(|_| {
                run(batch(&e, &lines(400)));
                let records = e.last_journal();
                let ts = |kind: &str, first: bool| {
                    let mut all = records.iter().filter(|r| r["kind"] == kind);
                    let r = if first { all.next() } else { all.next_back() }.unwrap();
                    seconds_of_day(r["ts"].as_str().unwrap())
                };
                let ok = records
                    .iter()
                    .filter(|r| r["kind"] == "tool_result" && r["ok"] == true)
                    .count();
                assert_eq!(ok, 400, "every call ran");
                Duration::from_secs_f64((ts("tool_result", false) - ts("tool_call", true)) / 400.0)
            })
            .collect();
        median(spans)
    };
    let mcp = per_call(echo_lines);
    let builtin = per_call(read_lines);
    println!(
        "per call (journal span / 400, one at a time): everything echo {} · read_file {} · difference {} ({:.1}×)",
        ms(mcp),
        ms(builtin),
        ms(mcp.saturating_sub(builtin)),
        mcp.as_secs_f64() / builtin.as_secs_f64().max(1e-9)
    );

    let three = world(3);
    let calls: Vec<String> = vec![
        r#"{"name":"mcp__everything__echo","args":{"message":"x"}}"#.to_owned(),
        r#"{"name":"mcp__time__get_current_time","args":{"timezone":"UTC"}}"#.to_owned(),
        format!(
            r#"{{"name":"mcp__git__git_status","args":{{"repo_path":{:?}}}}}"#,
            three.ws.display().to_string()
        ),
        r#"{"name":"read_file","args":{"path":"src/m1.rs"}}"#.to_owned(),
    ];
    let with = median_u64(
        (0..runs)
            .map(|_| own_peak_kib(batch(&three, &calls)))
            .collect(),
    );
    let none = world(0);
    let without = median_u64(
        (0..runs)
            .map(|_| own_peak_kib(batch(&none, &read_lines(4))))
            .collect(),
    );
    println!(
        "dsh's own peak RSS: 3 servers connected {:.1} MB · no server {:.1} MB",
        with as f64 / 1024.0,
        without as f64 / 1024.0
    );
}

/// `…THH:MM:SS.mmmZ` as seconds since midnight.
fn seconds_of_day(ts: &str) -> f64 {
    let time = ts.split('T').nth(1).unwrap().trim_end_matches('Z');
    let mut parts = time.split(':');
    let h: f64 = parts.next().unwrap().parse().unwrap();
    let m: f64 = parts.next().unwrap().parse().unwrap();
    let s: f64 = parts.next().unwrap().parse().unwrap();
    h * 3600.0 + m * 60.0 + s
}

fn median_u64(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}
