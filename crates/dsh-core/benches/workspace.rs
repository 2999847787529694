//! Criterion benchmarks of `Workspace::resolve`; BENCHMARKS.md at the repository root reports
//! the figures.
//!
//! ```text
//! cargo bench -p dsh-core --bench workspace
//! ```
//!
//! One group, `resolve`, each id a path:
//!
//! * `short_existing` (`src/lib.rs`) and `short_missing` (`new/dir/file.txt`): what every
//!   file tool call pays.
//! * `deep_existing`: a 4,096-byte path of one-character components (`a/a/…/a/`, 2,048 of
//!   them), every one a real directory — the longest path accepted, and the most components.
//! * `deep_missing`: the same path in a workspace where `a` does not exist.
//! * `too_long`: a 10 MB path of 5,000,000 components, refused for its length.
//!
//! The trees are built once, outside the timed region, with only `std` (so that the same file
//! builds against older versions of the crate for comparisons): the deep tree by changing the
//! current directory one level at a time, since its full path is longer than a system call
//! accepts.

// A failed setup must stop the run loudly rather than produce figures for something that did
// not happen, which is what `unwrap`/`expect` do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use dsh_core::Workspace;

/// Components of the deep path: 4,096 bytes of `a/`.
const DEPTH: usize = 2048;

/// `depth` nested directories named `a` under `root`.
fn deep_tree(root: &Path, depth: usize) {
    let here = std::env::current_dir().unwrap();
    std::env::set_current_dir(root).unwrap();
    for _ in 0..depth {
        std::fs::create_dir("a").unwrap();
        std::env::set_current_dir("a").unwrap();
    }
    std::env::set_current_dir(here).unwrap();
}

fn resolve(c: &mut Criterion) {
    let full = tempfile::tempdir().unwrap();
    std::fs::create_dir(full.path().join("src")).unwrap();
    std::fs::write(full.path().join("src/lib.rs"), "").unwrap();
    deep_tree(full.path(), DEPTH);
    let empty = tempfile::tempdir().unwrap();
    let (full_ws, empty_ws) = (
        Workspace::new(full.path()).unwrap(),
        Workspace::new(empty.path()).unwrap(),
    );
    let deep = "a/".repeat(DEPTH);
    let huge = "a/".repeat(5_000_000);
    // Sanity: each case resolves (or is refused) as its name says.
    assert_eq!(
        full_ws.resolve(&deep).unwrap().rel.components().count(),
        DEPTH
    );
    assert!(empty_ws.resolve(&deep).is_ok());
    assert!(full_ws.resolve(&huge).is_err());

    let mut g = c.benchmark_group("resolve");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    g.bench_function("short_existing", |b| {
        b.iter(|| full_ws.resolve(black_box("src/lib.rs")).unwrap())
    });
    g.bench_function("short_missing", |b| {
        b.iter(|| full_ws.resolve(black_box("new/dir/file.txt")).unwrap())
    });
    g.bench_function("deep_existing", |b| {
        b.iter(|| full_ws.resolve(black_box(&deep)).unwrap())
    });
    g.bench_function("deep_missing", |b| {
        b.iter(|| empty_ws.resolve(black_box(&deep)).unwrap())
    });
    g.bench_function("too_long", |b| {
        b.iter(|| full_ws.resolve(black_box(&huge)).is_err())
    });
    g.finish();
}

criterion_group!(benches, resolve);
criterion_main!(benches);
