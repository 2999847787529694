//! `dsh sessions list` over 1,000 session journals: the release binary, started as a
//! process, with stdout to `/dev/null`.
//!
//! The journals are written at the start with dsh's own `JsonlJournal` (so the chain and the
//! envelope are real) under a temp `DSH_HOME`: each one replays the records of the shipped
//! `examples/sessions/fix-typo.jsonl` (a real `dsh exec` session of 52 records, 9 model
//! calls, 10 tool calls) under an id of its own, with its own workspace. A session that did
//! not end is the same journal cut after 10 to 40 records (no `stop`, no `session_end`), so
//! `list` scans it whole. No writer holds a lock, so those are listed as `did_not_end`.
//!
//! - `sessions_list/ended`: 1,000 sessions that ended.
//! - `sessions_list/ended_json`: the same, `--json`.
//! - `sessions_list/mixed` and `mixed_json`: 900 that ended and 100 that did not, shuffled
//!   by id.
//! - `sessions_list/not_ended`: 1,000 that did not end.
//!
//! After criterion (only under `cargo bench`) each is run again 15 times and the medians
//! printed.
//!
//! ```sh
//! cargo bench -p dsh-cli --bench sessions
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "common/process.rs"]
mod process;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::Criterion;
use dsh_core::journal::{Journal, JsonlJournal, Record, SyncPolicy};
use process::{peak_rss_kib, run};
use serde::Deserialize;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_dsh");
const SESSIONS: usize = 1000;
const EXAMPLE: &str = include_str!("../../../examples/sessions/fix-typo.jsonl");

/// The example's records, envelope fields stripped (the journal writes its own).
fn example_records() -> Vec<Value> {
    EXAMPLE
        .lines()
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).unwrap();
            let o = v.as_object_mut().unwrap();
            for k in ["v", "seq", "ts", "session", "prev", "agent"] {
                o.remove(k);
            }
            v
        })
        .collect()
}

/// An id of the shape `dsh` gives (`20261201T144500Z-1a2b3c4d`), distinct for each `i`.
fn session_id(i: usize) -> String {
    // A cheap mix of `i` (splitmix64's finalizer) for the hex tail.
    let mut x = (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    let (h, m, s) = (i / 3600 % 24, i / 60 % 60, i % 60);
    format!("20261201T{h:02}{m:02}{s:02}Z-{:08x}", x as u32)
}

/// Writes session `i` under `dir`: the whole example, or its first `cut` records.
fn write_session(dir: &Path, i: usize, records: &[Value], cut: Option<usize>) {
    let id = session_id(i);
    let journal = JsonlJournal::create(
        dir.join(format!("{id}.jsonl")),
        id.as_str(),
        SyncPolicy::BatchEnd,
    )
    .unwrap();
    let n = cut.unwrap_or(records.len());
    for (k, r) in records[..n].iter().enumerate() {
        let mut r = r.clone();
        if k == 0 {
            r["workspace"] = Value::String(format!("/home/dev/project-{}", i % 37));
        }
        journal.append(&Record::deserialize(&r).unwrap()).unwrap();
    }
    // No sync: the page cache is what `list` reads, and 1,000 fsyncs would only slow the
    // set-up. Dropping the journal releases its lock.
}

/// A `DSH_HOME` of `SESSIONS` journals; `ended(i)` says whether session `i` ended.
fn home(root: &Path, name: &str, records: &[Value], ended: impl Fn(usize) -> bool) -> PathBuf {
    let home = root.join(name);
    let dir = home.join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..SESSIONS {
        let cut = (!ended(i)).then_some(10 + i % 31);
        write_session(&dir, i, records, cut);
    }
    home
}

fn list(home: &Path, cfg: &Path, json: bool) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["sessions", "list"]);
    if json {
        cmd.arg("--json");
    }
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DSH_HOME", home)
        .env("DSH_CONFIG_HOME", cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// What `list --json` prints for `home`, checked: one line per session, `ended` of them
/// finished and the rest `did_not_end`.
fn check(home: &Path, cfg: &Path, ended: usize) {
    let mut cmd = list(home, cfg, true);
    cmd.stdout(Stdio::piped());
    let out = cmd.output().unwrap();
    assert!(out.status.success());
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), SESSIONS);
    let finished = lines.iter().filter(|l| l["end"] == "finished").count();
    let dead = lines.iter().filter(|l| l["end"] == "did_not_end").count();
    assert_eq!(
        (finished, dead),
        (ended, SESSIONS - ended),
        "{}",
        home.display()
    );
}

fn median_of(runs: usize, mk: impl Fn() -> Command) -> Duration {
    let mut v: Vec<Duration> = (0..runs)
        .map(|_| {
            let cmd = mk();
            let begun = Instant::now();
            run(cmd);
            begun.elapsed()
        })
        .collect();
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let root = tempfile::tempdir().unwrap();
    let cfg = root.path().join("cfg");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "").unwrap();
    let records = example_records();
    assert_eq!(
        records.last().unwrap()["kind"],
        "session_end",
        "the example ends"
    );
    let homes = [
        (
            "ended",
            home(root.path(), "ended", &records, |_| true),
            1000,
        ),
        (
            "mixed",
            home(root.path(), "mixed", &records, |i| i % 10 != 3),
            900,
        ),
        (
            "not_ended",
            home(root.path(), "not_ended", &records, |_| false),
            0,
        ),
    ];
    for (_, h, ended) in &homes {
        check(h, &cfg, *ended);
    }
    let cases: Vec<(String, &Path, bool)> = homes
        .iter()
        .flat_map(|(name, h, _)| {
            let json = (*name != "not_ended").then(|| (format!("{name}_json"), h.as_path(), true));
            std::iter::once(((*name).to_owned(), h.as_path(), false)).chain(json)
        })
        .collect();

    let mut c = Criterion::default().configure_from_args();
    {
        let mut group = c.benchmark_group("sessions_list");
        group
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(5));
        for (name, h, json) in &cases {
            group.bench_function(name, |b| b.iter(|| run(list(h, &cfg, *json))));
        }
        group.finish();
    }
    c.final_summary();
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: keep that run short.
    if std::env::args().any(|a| a == "--bench") {
        println!();
        println!("== dsh sessions list over {SESSIONS} sessions (medians of 15 runs) ==");
        for (name, h, json) in &cases {
            let t = median_of(15, || list(h, &cfg, *json));
            let rss = peak_rss_kib(&list(h, &cfg, *json))
                .map_or("n/a (no /usr/bin/time)".to_owned(), |k| format!("{k} KiB"));
            println!(
                "{name:<16} {:.2} ms   peak RSS {rss}",
                t.as_secs_f64() * 1e3
            );
        }
    }
}
