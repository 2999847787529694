//! What one `PreToolUse` hook adds to a call: the time gate 1 waits for it.
//!
//! ```text
//! cargo bench -p dsh-policy --bench hooks
//! ```
//!
//! * `no_hook` — the hooks listener with no hook configured (what every call pays);
//! * `sh_exit_0` — one hook `exit 0` (a script that says nothing: abstains);
//! * `sh_reads_input` — one hook `cat >/dev/null` (reads the event JSON, says nothing);
//! * `sh_denies_json` — one hook printing a `permissionDecision: "deny"` answer;
//! * `python_guard` — one hook `python3 -c` reading the JSON and exiting 0 (a typical
//!   Claude Code guard's interpreter start-up).
//!
//! Each fires the hooks for one `run_shell` call through [`Hooks::fire`] (spawn `sh -c` in
//! its own process group, write the event, read the answer, parse it).

#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use dsh_core::HookEvent;
use dsh_policy::Hooks;
use dsh_policy::hooks::{HookHost, HookSpec, Matcher};
use serde_json::{Map, json};

fn hooks(dir: &std::path::Path, command: Option<&str>) -> std::sync::Arc<Hooks> {
    let specs = command
        .map(|c| HookSpec {
            event: HookEvent::PreToolUse,
            matcher: Matcher::Every,
            command: c.to_owned(),
            timeout: Duration::from_secs(30),
            abstain_on_error: false,
            env: Vec::new(),
            origin: "bench".to_owned(),
            approved: true,
            still_approved: None,
        })
        .into_iter()
        .collect();
    Hooks::new(
        HookHost {
            workspace: dir.to_path_buf(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            session_id: "bench".to_owned(),
            transcript_path: dir.join("bench.jsonl"),
            mode: None,
        },
        specs,
    )
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let fields = || {
        let mut m = Map::new();
        m.insert("tool_name".into(), json!("Bash"));
        m.insert("tool_input".into(), json!({"command": "cargo test -q"}));
        m
    };
    let cases = [
        ("no_hook", None),
        ("sh_exit_0", Some("exit 0")),
        ("sh_reads_input", Some("cat >/dev/null")),
        (
            "sh_denies_json",
            Some(
                r#"cat >/dev/null; echo '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"no"}}'"#,
            ),
        ),
        (
            "python_guard",
            Some("python3 -c 'import json,sys; json.load(sys.stdin)'"),
        ),
    ];
    let mut g = c.benchmark_group("pre_tool_use_hook");
    g.sample_size(30);
    for (id, command) in cases {
        let h = hooks(dir.path(), command);
        g.bench_function(id, |b| {
            b.iter(|| {
                rt.block_on(async {
                    black_box(
                        h.fire(HookEvent::PreToolUse, Some(("Bash", "run_shell")), fields())
                            .await,
                    )
                })
            });
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
