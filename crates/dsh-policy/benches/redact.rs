//! What redaction adds to a call with a 1 MB output (issue 27, "Measure").
//!
//! ```text
//! cargo bench -p dsh-policy --bench redact -- --warm-up-time 1 --measurement-time 5
//! ```
//!
//! The output is 1 MiB of source-code, build, test, git and log lines, with near misses
//! (`task-runner`, a certificate block, `Authorization` in prose, hashes and UUIDs) but no
//! secret; `_secrets` adds eight (a GitHub token, AWS keys, a private-key block, a bearer
//! header, a JWT, a known key) spread through it. The redactor knows five values, as a
//! session with a model key and an MCP token set does.
//!
//! * `text/copy` — `content.to_owned()`: the floor of any rewrite of 1 MiB;
//! * `text/redact_clean`, `text/redact_secrets` — `Redact::redact_text` (one scan; no copy
//!   when nothing matched); `text_4k/redact_clean` the same on the first 4 KiB (an ordinary
//!   result's size);
//! * `call/{none,spill,redact_spill}_clean` and `call/redact_spill_secrets` — one call
//!   through a real pipeline (in-memory journal) whose tool returns the output, with no
//!   disposition, with the spill disposition alone (the session before redaction: the output
//!   saved to a temp dir, head and tail kept), and with redaction then spill (the session
//!   now). `redact_spill − spill` is the latency redaction adds per call.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use dsh_core::journal::MemoryJournal;
use dsh_core::{CancellationToken, Pipeline, Registry, SpillStore, ToolCall, ToolOutput};
use dsh_policy::{Redact, Spill};
use dsh_testkit::FnTool;
use serde_json::json;

const MIB: usize = 1 << 20;

/// One line of ordinary output for line `i`.
fn line(i: usize) -> String {
    let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    match i % 12 {
        0 => format!(
            "    let value_{i} = compute(&input, {})?; // task-runner config",
            i % 97
        ),
        1 => format!(
            "2026-12-03T10:{:02}:{:02}.{:03}Z INFO  dsh_agent::turn: step {} finished in {} ms (request {} bytes)",
            i % 60,
            (i / 60) % 60,
            i % 1000,
            i % 40,
            h % 900,
            h % 90_000
        ),
        2 => format!("commit {h:016x}{:016x}{:08x}", h.rotate_left(17), i),
        3 => format!(
            "src/module_{}/lib.rs:{}:    println!(\"hello {{}}\", name);",
            i % 31,
            i % 500
        ),
        4 => format!("test tests::case_{i}_is_handled ... ok"),
        5 => format!("   Compiling crate-{} v1.{}.{}", i % 50, i % 20, i % 9),
        6 => format!(
            "{{\"id\":\"{:08x}-e89b-12d3-a456-{:012x}\",\"sha256\":\"{h:016x}{h:016x}\",\"url\":\"https://example.com/api/v1/items?page={}\"}}",
            i,
            h & 0xFFFF_FFFF_FFFF,
            i % 100
        ),
        7 => "warning: the Authorization header is missing; see https://docs.example.com/auth"
            .to_owned(),
        8 => format!("    assert_eq!(risk_score(&ask_user({i})), expected); // bearer of news"),
        9 => format!(
            "data: {}",
            "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0MTIzNDU2Nzg5".repeat(2)
        ),
        10 => "-----BEGIN CERTIFICATE-----".to_owned(),
        _ => format!(
            "diff --git a/src/f{i}.rs b/src/f{i}.rs  index {h:07x}..{:07x} 100644",
            h >> 7
        ),
    }
}

/// 1 MiB of ordinary lines.
fn clean_output() -> String {
    let mut out = String::with_capacity(MIB + 256);
    let mut i = 0;
    while out.len() < MIB {
        out.push_str(&line(i));
        out.push('\n');
        i += 1;
    }
    out.truncate(MIB);
    out
}

const KNOWN: &str = "local-key-Zq8XvT41mNw";

/// The same output with eight secrets spread through it (same length, give or take).
fn with_secrets(clean: &str) -> String {
    let secrets = [
        "token: ghp_0123456789abcdefghijABCDEFGHIJ012345".to_owned(),
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE".to_owned(),
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_owned(),
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAwJ2\n-----END RSA PRIVATE KEY-----"
            .to_owned(),
        "curl -H 'Authorization: Bearer abcDEF0123456789ghiJKLmno'".to_owned(),
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N".to_owned(),
        format!("OPENAI_API_KEY={KNOWN}"),
        "slack xoxb-123456789012-1234567890123-AbCdEfGhIjKl".to_owned(),
    ];
    let lines: Vec<&str> = clean.lines().collect();
    let step = lines.len() / (secrets.len() + 1);
    let mut out = String::with_capacity(clean.len() + 1024);
    for (n, l) in lines.iter().enumerate() {
        out.push_str(l);
        out.push('\n');
        if n > 0 && n % step == 0 && n / step <= secrets.len() {
            out.push_str(&secrets[n / step - 1]);
            out.push('\n');
        }
    }
    out
}

fn redactor() -> Redact {
    Redact::new(
        [
            ("OPENAI_API_KEY", KNOWN),
            (
                "ANTHROPIC_API_KEY",
                "sk-ant-api03-notreal0123456789abcdefXYZ",
            ),
            ("DEEPSEEK_API_KEY", "sk-0123456789abcdef0123456789abcdef"),
            ("MY_MODEL_KEY", "mk_live_0000aaaa1111bbbb2222"),
            ("WEB_TOKEN", "wt-9f8e7d6c5b4a39281706"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    )
}

/// A pipeline whose one tool returns `output`, with `dispositions` registered in order.
fn pipeline(output: Arc<String>, redact: bool, spill: Option<Arc<SpillStore>>) -> Arc<Pipeline> {
    let mut r = Registry::new();
    let tool = FnTool::new("big", move |_, _| {
        let output = output.clone();
        async move { Ok(ToolOutput::new(output.as_str(), json!({"n": 1}))) }
    })
    .spec(|s| s.read_only(true));
    r.register(tool).unwrap();
    let mut b = Pipeline::builder(r, Arc::new(MemoryJournal::new("bench")));
    if redact {
        b = b.disposition(redactor());
    }
    if let Some(store) = spill {
        b = b.disposition(Spill::new(store, 20_000));
    }
    b.build()
}

fn bench(c: &mut Criterion) {
    let clean = clean_output();
    let secrets = with_secrets(&clean);
    let r = redactor();
    assert!(r.redact_text(&clean).is_none(), "the clean output is clean");
    let redacted = r.redact_text(&secrets).expect("secrets found");
    assert_eq!(
        redacted.matches("[redacted: ").count(),
        8,
        "all eight found"
    );

    let mut g = c.benchmark_group("text");
    g.throughput(Throughput::Bytes(MIB as u64));
    g.bench_function("copy", |b| {
        b.iter(|| black_box(black_box(&clean).to_owned()))
    });
    g.bench_function("redact_clean", |b| {
        b.iter(|| black_box(r.redact_text(black_box(&clean))))
    });
    g.bench_function("redact_secrets", |b| {
        b.iter(|| black_box(r.redact_text(black_box(&secrets))))
    });
    g.finish();

    // An ordinary result's size, for the cost on most calls.
    let small = &clean[..clean[..4096].rfind('\n').unwrap_or(4096) + 1];
    let mut g = c.benchmark_group("text_4k");
    g.throughput(Throughput::Bytes(small.len() as u64));
    g.bench_function("redact_clean", |b| {
        b.iter(|| black_box(r.redact_text(black_box(small))))
    });
    g.finish();

    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (clean, secrets) = (Arc::new(clean), Arc::new(secrets));
    let mut g = c.benchmark_group("call");
    g.throughput(Throughput::Bytes(MIB as u64));
    let cases: [(&str, &Arc<String>, bool, bool); 4] = [
        ("none_clean", &clean, false, false),
        ("spill_clean", &clean, false, true),
        ("redact_spill_clean", &clean, true, true),
        ("redact_spill_secrets", &secrets, true, true),
    ];
    for (id, output, redact, spill) in cases {
        g.bench_function(id, |b| {
            // A fresh pipeline, journal and spill directory per call (set up and dropped
            // outside the timing), so no iteration pays for the ones before it.
            b.iter_batched(
                || {
                    let dir = tempfile::tempdir().unwrap();
                    let store = spill.then(|| Arc::new(SpillStore::new(dir.path().join("s"))));
                    (pipeline(output.clone(), redact, store), dir)
                },
                |(p, dir)| {
                    let out = rt.block_on(p.run_batch(
                        vec![ToolCall::new("c1", "big", json!({}))],
                        &CancellationToken::new(),
                    ));
                    assert!(out.unwrap().results[0].ok());
                    (p, dir)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
