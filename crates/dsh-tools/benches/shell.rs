//! What the sandbox costs a command: `run_shell` running `true` and `ls` through the tool's
//! `run`, unsandboxed (no helper: bash in its own process group), supervised (mode `off`
//! with the helper: setsid, subreaper, fork, bash unconfined — what `--sandbox off` runs on
//! Linux) and sandboxed (the helper, whose child sets no_new_privs, capabilities, Landlock
//! and seccomp before bash). Each iteration is the whole call: environment, pipe, spawn, wait, killing and
//! sweeping the tree, output shaping.
//!
//! The sandboxed rows need the real helper: build it first and name it in `DSH_BIN`:
//!
//! ```text
//! cargo build -p dsh-cli --release
//! DSH_BIN=$PWD/target/release/dsh cargo bench -p dsh-tools --bench shell
//! ```
//!
//! Without `DSH_BIN` the sandboxed rows are skipped with a note. The probe the tool runs
//! once per session happens in criterion's warm-up, not in the measurement.
//!
//! Figures on the 2-core CI machine (Linux 6.18, Landlock ABI 7), medians:
//!
//! The `read-only` rows run the same commands cleared to read only (what the shell policy's
//! free commands get): the read-only profile (see BENCHMARKS.md for its figures).
//!
//! | command | unsandboxed | sandboxed | added | ratio |
//! |---------|-------------|-----------|-------|-------|
//! | `true`  | 1.37 ms     | 3.05 ms   | 1.68 ms | 2.2× |
//! | `ls`    | 2.37 ms     | 3.79 ms   | 1.42 ms | 1.6× |
//!
//! About 0.7 ms of the added time is the `/proc` sweep of the command's session when it ends
//! (needed because a descendant may leave the process group with `setpgid`, as `timeout(1)`
//! does); the rest is the helper's own `execve`, Landlock and seccomp. The aim was under 3 ms.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use dsh_core::{CancellationToken, ExecContext, SpillStore, Tool, ToolCall, Workspace};
use dsh_tools::sandbox::SandboxMode;
use dsh_tools::{RunShell, ShellSettings};
use serde_json::json;
use tokio::runtime::Runtime;

fn benches(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    for i in 0..20 {
        std::fs::write(ws.join(format!("file{i}.txt")), "x\n").unwrap();
    }
    let workspace = Arc::new(Workspace::new(&ws).unwrap());
    let spill = Arc::new(SpillStore::new(dir.path().join("spill")));
    let helper = std::env::var_os("DSH_BIN").map(PathBuf::from);
    if helper.is_none() {
        eprintln!(
            "note: DSH_BIN is not set: skipping the sandboxed rows \
             (cargo build -p dsh-cli --release; DSH_BIN=$PWD/target/release/dsh)"
        );
    }
    use dsh_core::Clearance;
    let mut modes = vec![("unsandboxed", SandboxMode::Off, None, Clearance::Write)];
    if let Some(h) = &helper {
        // `--sandbox off` with the helper: unconfined, but supervised (nothing outlives dsh).
        modes.push((
            "supervised",
            SandboxMode::Off,
            Some(h.clone()),
            Clearance::Write,
        ));
        modes.push((
            "sandboxed",
            SandboxMode::Required,
            Some(h.clone()),
            Clearance::Write,
        ));
        // A call the policy let run free: the read-only profile.
        modes.push((
            "read-only",
            SandboxMode::Required,
            Some(h.clone()),
            Clearance::ReadOnly,
        ));
        // A call `auto` let run: the hardened profile (mount namespace, survey and settle of
        // the default protected paths and prompt files).
        modes.push((
            "hardened",
            SandboxMode::Required,
            Some(h.clone()),
            Clearance::Hardened,
        ));
    }

    let mut group = c.benchmark_group("run_shell_spawn");
    for (label, mode, helper, clearance) in modes {
        let tool = RunShell::new(
            workspace.clone(),
            spill.clone(),
            dir.path().join(format!("tmp-{label}")),
            ShellSettings {
                sandbox: mode,
                helper,
                keep: dsh_tools::shell::Keep {
                    fixed: [".git", ".dsh", "AGENTS.md", "AGENT.md", "CLAUDE.md"]
                        .map(PathBuf::from)
                        .to_vec(),
                    judge: None,
                },
                ..ShellSettings::default()
            },
        );
        for command in ["true", "ls"] {
            let args = json!({"command": command});
            let cx = ExecContext {
                call: ToolCall::new("bench", "run_shell", args.clone()),
                spec: Arc::new(tool.spec()),
                cancel: CancellationToken::new(),
                attempt: 1,
                dispatch: None,
                clearance,
            };
            group.bench_function(format!("{label}/{command}"), |b| {
                b.iter(|| {
                    let out = rt.block_on(tool.run(&args, &cx)).unwrap();
                    assert_eq!(out.exit_code, Some(0), "{}", out.content);
                    out
                })
            });
        }
    }
    group.finish();
}

criterion_group!(shell, benches);
criterion_main!(shell);
