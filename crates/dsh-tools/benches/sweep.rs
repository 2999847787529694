//! Criterion benchmark of the sweep of leftover temporary files a session start runs.
//!
//! ```text
//! cargo bench -p dsh-tools --bench sweep
//! ```
//!
//! * `sweep_20k/clean` — [`dsh_tools::sweep_stale_temp_files`] over a generated tree of 200
//!   directories × 100 small files (20 000 files, with a `.gitignore`; a skipped `target/`
//!   and a hidden `.cache/` hold 1 000 more files each, which are not walked), none of them
//!   a leftover: the cost every session start pays.
//!
//! The tree lives in a temporary directory, written once per run; the measurement is warm
//! (page cache), as it is for a workspace a person works in.

// A bench is not a test to clippy; a failed setup must stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use dsh_core::Workspace;

const DIRS: usize = 200;
const FILES_PER_DIR: usize = 100;

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join(".gitignore"), "*.log\n").unwrap();
    for d in 0..DIRS {
        let sub = root.join(format!("pkg{d:03}/src"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..FILES_PER_DIR {
            std::fs::write(sub.join(format!("m{f:03}.rs")), "fn main() {}\n").unwrap();
        }
    }
    for skipped in ["target/debug", ".cache/x"] {
        let sub = root.join(skipped);
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..1000 {
            std::fs::write(sub.join(format!("o{f:04}")), "x\n").unwrap();
        }
    }
    let ws = Workspace::new(&root).unwrap();
    assert_eq!(dsh_tools::sweep_stale_temp_files(&ws), 0);

    let mut g = c.benchmark_group("sweep_20k");
    g.sample_size(30).measurement_time(Duration::from_secs(10));
    g.bench_function("clean", |b| {
        b.iter(|| dsh_tools::sweep_stale_temp_files(&ws))
    });
    g.finish();
}

criterion_group!(sweep, benches);
criterion_main!(sweep);
