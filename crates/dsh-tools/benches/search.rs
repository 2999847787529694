//! Criterion benchmarks of the read-only tools, against ripgrep where it applies.
//!
//! ```text
//! cargo bench -p dsh-tools --bench search
//! ```
//!
//! * `grep_50k` — a generated tree of 500 directories × 100 small files (about 50 000 files
//!   of pseudo-random text from a fixed seed, with a `.gitignore` and a skipped `target/`),
//!   searched for a literal and for a regex by `Grep::run` called directly (no pipeline), and
//!   by `rg -n --max-count 50` over the same tree with the same pattern (ripgrep's defaults
//!   skip the same hidden and ignored files; `target/` is in the `.gitignore` for its sake).
//!   rg's figures include starting a process (about 1 ms). When `rg` is not on the `PATH`,
//!   the comparison is skipped with a note (`cargo install ripgrep --locked` to measure it).
//! * `find_50k` — `find_files` for `*.rs` over the same tree, and `rg --files -g '*.rs'`.
//! * `read_10mb` — `read_file` on a 10 MB file of 200 000 lines: the first page (2000 lines,
//!   the default) and a 100-line page near the end (every line before it is skipped).
//! * `edit_10mb` / `write_10mb` — `edit_file` and `write_file` on a 10 MB file of the same
//!   shape, read once through `read_file` so the file seam has observed it. The edit replaces
//!   a unique marker near the end, flipping between two markers so that every iteration
//!   really changes the file; the write flips between two whole contents. Each iteration is
//!   the full change: version check, read (edit), temporary file, `fsync`, rename.
//!
//! The tree lives in a temporary directory, written once per run; all measurements are warm
//! (page cache), as an agent's repeated searches are.

// A bench is not a test to clippy; a failed setup must stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use dsh_core::{CancellationToken, ExecContext, Tool, ToolCall, Workspace};
use dsh_tools::{EditFile, FileSeam, FindFiles, Grep, ReadCaps, ReadFile, WriteFile};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

const DIRS: usize = 500;
const FILES_PER_DIR: usize = 100;
const LITERAL: &str = "needle_literal_42";
const REGEX: &str = r"fn [a-z]+_[0-9]{3}\(";

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn word(rng: &mut Rng) -> String {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "ta", "zo", "pe", "si", "do", "gu", "ha", "ve", "xi", "bo",
        "ju",
    ];
    let n = 1 + rng.below(3);
    (0..n).map(|_| SYLLABLES[rng.below(16) as usize]).collect()
}

/// Writes the tree; returns (files written, files holding the literal, lines matching the
/// regex).
fn generate_tree(root: &Path) -> (usize, usize, usize) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut files, mut literal, mut regex) = (0, 0, 0);
    std::fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
    for d in 0..DIRS {
        let dir = root.join(format!("pkg{:03}/src", d));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let mut text = String::new();
            let lines = 10 + rng.below(30);
            for _ in 0..lines {
                match rng.below(50) {
                    0 => {
                        regex += 1;
                        text.push_str(&format!(
                            "fn {}_{:03}(x: u32) {{}}\n",
                            word(&mut rng),
                            rng.below(1000)
                        ));
                    }
                    1 if rng.below(40) == 0 => {
                        literal += 1;
                        text.push_str(&format!("let {} = \"{LITERAL}\";\n", word(&mut rng)));
                    }
                    _ => {
                        let words = 4 + rng.below(8);
                        let line: Vec<String> = (0..words).map(|_| word(&mut rng)).collect();
                        text.push_str(&line.join(" "));
                        text.push('\n');
                    }
                }
            }
            let ext = if f % 3 == 0 { "rs" } else { "txt" };
            std::fs::write(dir.join(format!("f{f:03}.{ext}")), text).unwrap();
            files += 1;
        }
    }
    // Skipped by both tools: ignored output and a hidden directory.
    for skipped in ["target/debug", ".cache"] {
        let dir = root.join(skipped);
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..200 {
            std::fs::write(dir.join(format!("s{f}.rs")), format!("{LITERAL}\n")).unwrap();
        }
    }
    (files, literal, regex)
}

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

fn rg_available() -> bool {
    Command::new("rg")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn rg(root: &Path, args: &[&str]) {
    // Captured, as the tool's output is: rg writes it all to a pipe we drain.
    let out = Command::new("rg")
        .args(["--no-config", "-n", "--max-count", "50"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    // 0: matches; 1: no match. Anything else is a broken comparison.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "rg failed: {}",
        out.status
    );
    std::hint::black_box(out.stdout);
}

fn benches(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let (files, literal, regex) = generate_tree(&root);
    eprintln!(
        "tree: {files} files, {literal} literal hits, {regex} regex hits, in {}",
        root.display()
    );
    let ws = Arc::new(Workspace::new(&root).unwrap());
    let limits = ReadCaps::default();
    let have_rg = rg_available();
    if !have_rg {
        eprintln!(
            "note: `rg` not found on PATH; skipping the ripgrep comparison (cargo install ripgrep --locked)"
        );
    }

    let grep = Grep::new(ws.clone(), &limits);
    let mut group = c.benchmark_group("grep_50k");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(15));
    for (id, pattern) in [("literal", LITERAL), ("regex", REGEX)] {
        let args = json!({"pattern": pattern});
        let cx = cx("grep", &args, &grep);
        // Sanity: the tool finds what was planted, and says how many files it searched.
        let out = rt.block_on(grep.run(&args, &cx)).unwrap();
        assert_eq!(out.value["files_searched"], files);
        assert!(!out.value["matches"].as_array().unwrap().is_empty());
        group.bench_function(format!("dsh_{id}"), |b| {
            b.iter(|| rt.block_on(grep.run(&args, &cx)).unwrap())
        });
        if have_rg {
            group.bench_function(format!("rg_{id}"), |b| b.iter(|| rg(&root, &[pattern])));
        }
    }
    group.finish();

    let find = FindFiles::new(ws.clone(), &limits);
    let mut group = c.benchmark_group("find_50k");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    let args = json!({"pattern": "*.rs"});
    let find_cx = cx("find_files", &args, &find);
    group.bench_function("dsh_find_files", |b| {
        b.iter(|| rt.block_on(find.run(&args, &find_cx)).unwrap())
    });
    if have_rg {
        group.bench_function("rg_files", |b| {
            b.iter(|| {
                let out = Command::new("rg")
                    .args(["--no-config", "--files", "-g", "*.rs"])
                    .current_dir(&root)
                    .output()
                    .unwrap();
                assert!(out.status.success());
                std::hint::black_box(out.stdout);
            })
        });
    }
    group.finish();

    // 200 000 lines of 50 bytes: 10 MB.
    let body: String = (1..=200_000)
        .map(|i| format!("{i:>8} {}\n", "y".repeat(40)))
        .collect();
    std::fs::write(root.join("big.log"), &body).unwrap();
    let read = ReadFile::new(ws.clone(), &limits);
    let mut group = c.benchmark_group("read_10mb");
    for (id, args) in [
        ("first_page", json!({"path": "big.log"})),
        (
            "page_near_end",
            json!({"path": "big.log", "offset": 199_900, "limit": 100}),
        ),
    ] {
        let cx = cx("read_file", &args, &read);
        group.bench_function(id, |b| {
            b.iter(|| rt.block_on(read.run(&args, &cx)).unwrap())
        });
    }
    group.finish();

    bench_changes(c, &rt, &root, ws, &limits, &body);
}

/// `edit_file` and `write_file` on a 10 MB file the session has read once.
fn bench_changes(
    c: &mut Criterion,
    rt: &Runtime,
    root: &Path,
    ws: Arc<Workspace>,
    limits: &ReadCaps,
    body: &str,
) {
    const MARKS: [&str; 2] = ["EDIT_MARK_ALPHA", "EDIT_MARK_OMEGA"];
    // The marker sits on one line near the end: the edit matches over the whole file.
    let near_end = body.len() - 50 * 100;
    let edited = format!("{}{}\n{}", &body[..near_end], MARKS[0], &body[near_end..]);
    std::fs::write(root.join("edit.log"), &edited).unwrap();
    std::fs::write(root.join("write.log"), &edited).unwrap();
    let seam = Arc::new(FileSeam::new());
    let read = ReadFile::new(ws.clone(), limits).with_seam(seam.clone());
    for path in ["edit.log", "write.log"] {
        let args = json!({"path": path, "limit": 1});
        rt.block_on(read.run(&args, &cx("read_file", &args, &read)))
            .unwrap();
    }

    let edit = EditFile::new(ws.clone(), seam.clone());
    let flips: Vec<(Value, ExecContext)> = [(0, 1), (1, 0)]
        .into_iter()
        .map(|(from, to)| {
            let args =
                json!({"path": "edit.log", "old_string": MARKS[from], "new_string": MARKS[to]});
            let cx = cx("edit_file", &args, &edit);
            (args, cx)
        })
        .collect();
    let mut group = c.benchmark_group("edit_10mb");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    let mut turn = 0usize;
    group.bench_function("edit_file", |b| {
        b.iter(|| {
            let (args, cx) = &flips[turn % 2];
            turn += 1;
            let out = rt.block_on(edit.run(args, cx)).unwrap();
            assert_eq!(out.value["replacements"], 1);
            out
        })
    });
    group.finish();

    let write = WriteFile::new(ws, seam);
    let other = edited.replace(MARKS[0], MARKS[1]);
    let flips: Vec<(Value, ExecContext)> = [&other, &edited]
        .into_iter()
        .map(|content| {
            let args = json!({"path": "write.log", "content": content});
            let cx = cx("write_file", &args, &write);
            (args, cx)
        })
        .collect();
    let mut group = c.benchmark_group("write_10mb");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    let mut turn = 0usize;
    group.bench_function("write_file", |b| {
        b.iter(|| {
            let (args, cx) = &flips[turn % 2];
            turn += 1;
            let out = rt.block_on(write.run(args, cx)).unwrap();
            assert_eq!(out.value["created"], false);
            out
        })
    });
    group.finish();
}

criterion_group!(search, benches);
criterion_main!(search);
