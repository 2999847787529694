//! How long `dsh batch` takes to exit after SIGINT while `grep` is inside a large file (issue
//! 13, item 8). BENCHMARKS.md reports the figures.
//!
//! ```sh
//! cargo bench -p dsh-cli --bench interrupt            # 20 rounds
//! DSH_BENCH_ROUNDS=50 cargo bench -p dsh-cli --bench interrupt
//! DSH_BENCH_BIN=/path/to/other/dsh cargo bench -p dsh-cli --bench interrupt   # another build
//! ```
//!
//! The workspace holds one 64 MB file of lines with a non-ASCII word, and the pattern is a
//! Unicode `\b…\b` that never matches: the regex cannot use its fast DFA over such lines, so
//! the search is slow per byte and an uncancelled grep takes seconds on little disk. Each
//! round starts the release binary with one grep, waits until the journal has the call's
//! `tool_started` and the process has read 512 KiB (the search is then inside the file),
//! sends SIGINT and times the wait for the process to exit. The time is wall time from the
//! `kill` to `waitpid` returning, so it includes the session's closing records and their
//! fsync. One uncancelled grep is timed first, for scale. Not criterion: each round is one
//! event, and the distribution over rounds (min, median, max) is the figure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_dsh");
const PATTERN: &str = r"\b\w+\s\d{11}\b";

fn journal(home: &Path) -> Option<PathBuf> {
    std::fs::read_dir(home.join("sessions"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
}

fn bytes_read(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("rchar: ").map(|n| n.trim().parse().ok()))
                .flatten()
        })
        .unwrap_or(0)
}

/// Starts `dsh batch -` with one grep, in a fresh state dir under `root`.
fn start(ws: &Path, root: &Path, round: usize) -> (std::process::Child, PathBuf) {
    let home = root.join(format!("home-{round}"));
    let bin = std::env::var_os("DSH_BENCH_BIN").unwrap_or_else(|| BIN.into());
    let mut child = Command::new(bin)
        .arg("--workspace")
        .arg(ws)
        .args(["batch", "-"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DSH_HOME", &home)
        .env("DSH_CONFIG_HOME", root.join("cfg"))
        .env("HOME", root)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let call = serde_json::json!({"id": "g", "name": "grep", "args": {"pattern": PATTERN}});
    writeln!(child.stdin.take().unwrap(), "{call}").unwrap();
    (child, home)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then only build.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rounds: usize = std::env::var("DSH_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20);
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let line = "the quick brown fox jumps over the lazy dog café 0123456789 abcdefghij\n";
    std::fs::write(
        ws.join("big.txt"),
        line.repeat(64 * 1024 * 1024 / line.len()),
    )
    .unwrap();

    let (child, _) = start(&ws, root.path(), 0);
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    println!(
        "uncancelled grep of 64 MB: {:.2} s",
        t.elapsed().as_secs_f64()
    );

    let mut times = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        let (mut child, home) = start(&ws, root.path(), round);
        let waiting = Instant::now();
        loop {
            let started = journal(&home)
                .and_then(|p| std::fs::read_to_string(p).ok())
                .is_some_and(|t| t.contains(r#""kind":"tool_started""#));
            if started && bytes_read(child.id()) >= 512 * 1024 {
                break;
            }
            assert!(waiting.elapsed() < Duration::from_secs(60), "no grep");
            std::thread::sleep(Duration::from_millis(1));
        }
        let kill = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let sent = Instant::now();
        let status = child.wait().unwrap();
        times.push(sent.elapsed());
        assert_eq!(status.code(), Some(130));
        let text = std::fs::read_to_string(journal(&home).unwrap()).unwrap();
        assert!(text.contains(r#""failure_kind":"cancelled_after""#));
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "SIGINT to exit during grep, {rounds} rounds: min {:.1} ms, median {:.1} ms, max {:.1} ms",
        ms(times[0]),
        ms(times[rounds / 2]),
        ms(times[rounds - 1])
    );
}
