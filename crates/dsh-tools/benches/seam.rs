//! Criterion benchmarks of a change through the file seam: what one `edit_file` costs.
//!
//! ```text
//! cargo bench -p dsh-tools --bench seam
//! ```
//!
//! * `edit_4k` — `edit_file` on a 4 KiB source-like file (100 lines), the size of a typical
//!   edit, where the seam's fixed costs (opening the directory, its lock, the version checks,
//!   the temporary file, `fsync`, rename) are most of the time.
//! * `edit_1mb` — the same on a 1 MiB file, where reading, matching and writing dominate.
//! * `…/edit_file_checkpointed` — each of those through a seam that keeps pre-images (as a
//!   session's does, for `/undo`), every edit's pre-image new to the store: the cost of a
//!   checkpoint is the difference to `…/edit_file`.
//!
//! Each file is read once through `read_file`, so the seam has observed it; every iteration
//! then replaces a unique marker, flipping between two markers, so that each one really
//! changes the file. Each tool is called through its own `Tool::run`, without the pipeline.
//! The files live in a temporary directory, in `DSH_BENCH_DIR` if it is set and in the system
//! temp directory otherwise (ext4 in the figures of BENCHMARKS.md); everything is warm (page
//! cache). On a disk, the `fsync` of every change dominates and varies by milliseconds from
//! run to run; `DSH_BENCH_DIR=/dev/shm` (tmpfs, where `fsync` returns at once) leaves the
//! seam's own system calls and CPU time. The bench uses only the public API, so the same file
//! builds against an earlier commit for a before/after comparison.

// A bench is not a test to clippy; a failed setup must stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use dsh_core::{CancellationToken, ExecContext, Tool, ToolCall, Workspace};
use dsh_tools::{EditFile, FileSeam, PreImages, ReadCaps, ReadFile};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

const MARKS: [&str; 2] = ["MARKER_ALPHA", "MARKER_OMEGA"];

fn cx(name: &str, args: &Value, tool: &dyn Tool) -> ExecContext {
    ExecContext {
        call: ToolCall::new("bench", name, args.clone()),
        spec: Arc::new(tool.spec()),
        cancel: CancellationToken::new(),
        attempt: 1,
        dispatch: None,
        clearance: dsh_core::Clearance::Write,
    }
}

/// A file of `lines` lines of about 40 bytes with the first marker in the middle.
fn body(lines: usize) -> String {
    let mut text = String::new();
    for i in 0..lines {
        if i == lines / 2 {
            text.push_str(MARKS[0]);
            text.push('\n');
        }
        text.push_str(&format!("    let value_{i:06} = compute({i}) + 1;\n"));
    }
    text
}

/// Where the files (and the pre-images) live.
fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("DSH_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

fn bench_edit(c: &mut Criterion, rt: &Runtime, group: &str, lines: usize) {
    let dir = bench_dir();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), body(lines)).unwrap();
    let ws = Arc::new(Workspace::new(&root).unwrap());
    let seam = Arc::new(FileSeam::new());
    let read = ReadFile::new(ws.clone(), &ReadCaps::default()).with_seam(seam.clone());
    let args = json!({"path": "src/lib.rs", "limit": 1});
    rt.block_on(read.run(&args, &cx("read_file", &args, &read)))
        .unwrap();

    let edit = EditFile::new(ws, seam);
    let flips: Vec<(Value, ExecContext)> = [(0, 1), (1, 0)]
        .into_iter()
        .map(|(from, to)| {
            let args =
                json!({"path": "src/lib.rs", "old_string": MARKS[from], "new_string": MARKS[to]});
            let cx = cx("edit_file", &args, &edit);
            (args, cx)
        })
        .collect();
    let mut g = c.benchmark_group(group);
    g.sample_size(50).measurement_time(Duration::from_secs(10));
    let mut turn = 0usize;
    g.bench_function("edit_file", |b| {
        b.iter(|| {
            let (args, cx) = &flips[turn % 2];
            turn += 1;
            let out = rt.block_on(edit.run(args, cx)).unwrap();
            assert_eq!(out.value["replacements"], 1);
            out
        })
    });
    g.finish();
}

/// The same edits through a seam that keeps each change's pre-image, as a session's does:
/// the content before every edit is new to the store (each iteration's marker is unique), so
/// every edit writes a pre-image; the bench removes it again (one `unlink`, timed with it) so
/// the store does not grow with the iterations.
fn bench_checkpointed(c: &mut Criterion, rt: &Runtime, group: &str, lines: usize) {
    let dir = bench_dir();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        body(lines).replace(MARKS[0], "MARKER_0"),
    )
    .unwrap();
    let store = tempfile::tempdir_in(dir.path()).unwrap();
    let ws = Arc::new(Workspace::new(&root).unwrap());
    let seam = Arc::new(FileSeam::with_pre_images(PreImages::new(store.path())));
    let read = ReadFile::new(ws.clone(), &ReadCaps::default()).with_seam(seam.clone());
    let args = json!({"path": "src/lib.rs", "limit": 1});
    rt.block_on(read.run(&args, &cx("read_file", &args, &read)))
        .unwrap();
    let edit = EditFile::new(ws, seam);
    let mut g = c.benchmark_group(group);
    g.sample_size(50).measurement_time(Duration::from_secs(10));
    let mut n = 0u64;
    g.bench_function("edit_file_checkpointed", |b| {
        b.iter(|| {
            let args = json!({
                "path": "src/lib.rs",
                "old_string": format!("MARKER_{n}\n"),
                "new_string": format!("MARKER_{}\n", n + 1),
            });
            n += 1;
            let out = rt
                .block_on(edit.run(&args, &cx("edit_file", &args, &edit)))
                .unwrap();
            let before = out.changes[0].before.as_deref().unwrap();
            std::fs::remove_file(store.path().join(before)).unwrap();
            out
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    bench_edit(c, &rt, "edit_4k", 100);
    bench_checkpointed(c, &rt, "edit_4k", 100);
    bench_edit(c, &rt, "edit_1mb", 25_000);
    bench_checkpointed(c, &rt, "edit_1mb", 25_000);
}

criterion_group!(seam, benches);
criterion_main!(seam);
