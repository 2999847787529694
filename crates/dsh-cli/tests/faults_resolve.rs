//! Faults found from outside, round two (issue 21, items 4 and 9), against the built binary:
//! an OS error while resolving a path (`EMFILE`) came back as a confinement denial, an
//! unbounded `max_parallel` let one batch run a process out of descriptors, and a symlink
//! swapped during resolution surfaced raw OS errors or "outside the workspace" for a path
//! whose every state is inside.
//!
//! An OS error on the way is `tool_error` naming it (DESIGN §4), never `denied`; a path that
//! changed under the call says "changed while being resolved; try again". A real escape is
//! still denied.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Dirs, json_lines, kind, run_with_calls, stderr};
use serde_json::{Value, json};

fn reason(r: &Value) -> &str {
    r["decided_by"]["reason"].as_str().unwrap()
}

/// `dsh batch -` whose process may open at most `nofile` descriptors (`RLIMIT_NOFILE`, set
/// in the child before it runs dsh).
fn batch_with_nofile(dirs: &Dirs, calls: &[Value], nofile: u64) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = dirs.dsh(&["batch", "-"]);
    #[allow(unsafe_code)]
    // SAFETY: `setrlimit` is async-signal-safe and touches only the child's own limits.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: nofile,
                rlim_max: nofile,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    run_with_calls(cmd, calls)
}

const DIRS: usize = 20;
const FILES: usize = 30;

/// `d1…d20`, each with 30 subdirectories holding one file with one `needle` line.
fn search_tree(ws: &Path) {
    for i in 1..=DIRS {
        for j in 1..=FILES {
            let d = ws.join(format!("d{i}/s{j}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("f.txt"), format!("hay\nneedle {j}\nhay\n")).unwrap();
        }
    }
}

#[test]
fn emfile_while_resolving_is_a_tool_error_naming_it_never_a_denial() {
    let dirs = Dirs::new();
    search_tree(&dirs.ws);
    dirs.write_user_config("[limits]\nmax_parallel = 64\n");
    // Greps that search (holding descriptors while they walk) and greps of missing paths
    // (resolved at gate 1 while the others hold them).
    let calls: Vec<Value> = (0..600)
        .map(|n| {
            let d = n % DIRS + 1;
            let path = if n % 2 == 0 {
                format!("d{d}")
            } else {
                format!("d{d}/missing{n}")
            };
            json!({"id": format!("c{n}"), "name": "grep", "args": {"pattern": "needle", "path": path}})
        })
        .collect();
    // The lowest limits at which dsh still starts; where the first runs out only inside the
    // calls, a higher one is tried.
    let mut emfile = 0;
    for nofile in [24, 28, 32, 40] {
        let out = batch_with_nofile(&dirs, &calls, nofile);
        if out.status.code() != Some(0) {
            // Too few descriptors for dsh itself (its journal, its runtime): a harness error,
            // said as one; the next limit leaves it more.
            assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
            continue;
        }
        let results = json_lines(&out);
        assert_eq!(results.len(), calls.len(), "{}", stderr(&out));
        for (call, r) in calls.iter().zip(&results) {
            let searched = !call["args"]["path"].as_str().unwrap().contains("missing");
            match kind(r) {
                "ok" if searched => {
                    // A search that succeeded saw every file: nothing skipped silently.
                    assert_eq!(
                        r["value"]["matches"].as_array().unwrap().len(),
                        FILES,
                        "{r}"
                    );
                    assert_eq!(r["value"]["files_searched"], FILES, "{r}");
                }
                "not_found" if !searched => {}
                "tool_error" => {
                    assert!(
                        reason(r).contains("Too many open files (os error 24)"),
                        "{r}"
                    );
                    assert!(
                        !reason(r).contains("only paths inside"),
                        "a resource error is not about confinement: {r}"
                    );
                    emfile += 1;
                }
                _ => panic!("with {nofile} descriptors: {r}"),
            }
        }
        if emfile > 0 {
            eprintln!(
                "RLIMIT_NOFILE {nofile}: {emfile} of {} calls hit EMFILE",
                calls.len()
            );
            break;
        }
    }
    assert!(
        emfile > 0,
        "no call ran out of descriptors at any limit tried"
    );
}

#[test]
fn max_parallel_past_its_bound_is_a_config_error_naming_file_line_and_key() {
    let dirs = Dirs::new();
    for (value, code) in [("1000000000", 2), ("65", 2), ("64", 0)] {
        dirs.write_user_config(&format!("# limits\n[limits]\nmax_parallel = {value}\n"));
        let out = run_with_calls(dirs.dsh(&["batch", "-"]), &[]);
        assert_eq!(out.status.code(), Some(code), "{value}: {}", stderr(&out));
        if code == 2 {
            let err = stderr(&out);
            let at = format!(
                "{}:3: limits.max_parallel:",
                dirs.cfg.join("config.toml").display()
            );
            assert!(err.contains(&at), "{err}");
            assert!(err.contains(&format!("{value} is more than 64")), "{err}");
        }
    }
    // The project file is bounded the same way.
    dirs.write_user_config("");
    dirs.project_config("[limits]\nmax_parallel = 100\n");
    let out = run_with_calls(dirs.dsh(&["batch", "-"]), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(".dsh/config.toml:2: limits.max_parallel: 100 is more than 64"),
        "{}",
        stderr(&out)
    );
}

/// Exchanges pairs of names (`renameat2(RENAME_EXCHANGE)`, atomic) in a tight loop until
/// dropped.
struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    fn start(pairs: Vec<(PathBuf, PathBuf)>) -> Swapper {
        let (stop, swaps) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let pairs: Vec<_> = pairs
            .into_iter()
            .map(|(a, b)| {
                use std::os::unix::ffi::OsStrExt;
                let c = |p: PathBuf| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
                (c(a), c(b))
            })
            .collect();
        let thread = std::thread::spawn({
            let (stop, swaps) = (stop.clone(), swaps.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    for (a, b) in &pairs {
                        #[allow(unsafe_code)]
                        // SAFETY: two valid NUL-terminated paths; no other preconditions.
                        let rc = unsafe {
                            libc::renameat2(
                                libc::AT_FDCWD,
                                a.as_ptr(),
                                libc::AT_FDCWD,
                                b.as_ptr(),
                                libc::RENAME_EXCHANGE,
                            )
                        };
                        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
                    }
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Swapper {
            stop,
            swaps,
            thread: Some(thread),
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

#[test]
fn a_symlink_swapped_during_resolution_says_the_path_changed_never_a_raw_os_error() {
    let dirs = Dirs::new();
    let ws = &dirs.ws;
    // `p` is a directory or a symlink to the directory `q`; `r` a file or a symlink to the
    // file `s.txt`: every state of both is inside. `o` is a directory inside or a symlink to
    // a directory outside.
    for d in ["p", "q", "o"] {
        std::fs::create_dir(ws.join(d)).unwrap();
        std::fs::write(ws.join(d).join("f.txt"), format!("{d}\n")).unwrap();
    }
    symlink("q", ws.join("p.alt")).unwrap();
    std::fs::write(ws.join("r"), "r\n").unwrap();
    std::fs::write(ws.join("s.txt"), "s\n").unwrap();
    symlink("s.txt", ws.join("r.alt")).unwrap();
    std::fs::write(dirs.outside.join("f.txt"), "secret\n").unwrap();
    symlink(&dirs.outside, ws.join("o.alt")).unwrap();

    let call = |name: &str, args: Value| json!({"name": name, "args": args});
    let round = [
        call("read_file", json!({"path": "p/f.txt"})),
        call("list_dir", json!({"path": "p"})),
        call("grep", json!({"pattern": "zzz", "path": "p"})),
        call("find_files", json!({"pattern": "*.txt", "path": "p"})),
        call("read_file", json!({"path": "r"})),
        call("read_file", json!({"path": "o/f.txt"})),
    ];
    let calls: Vec<Value> = round
        .iter()
        .cycle()
        .take(round.len() * 50)
        .cloned()
        .collect();

    let swapper = Swapper::start(vec![
        (ws.join("p"), ws.join("p.alt")),
        (ws.join("r"), ws.join("r.alt")),
        (ws.join("o"), ws.join("o.alt")),
    ]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut changed, mut outside, mut batches) = (0, 0, 0);
    while (changed < 3 || batches < 2) && Instant::now() < deadline {
        let out = run_with_calls(dirs.dsh(&["batch", "-"]), &calls);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        batches += 1;
        for (c, r) in calls.iter().zip(json_lines(&out)) {
            let path = c["args"]["path"].as_str().unwrap();
            let text = format!("{}{}", reason(&r), r["content"]);
            assert!(!text.contains("os error"), "a raw OS error for {path}: {r}");
            match kind(&r) {
                "ok" => {
                    if c["name"] == "read_file" {
                        assert!(!r["content"].as_str().unwrap().contains("secret"), "{r}");
                    }
                }
                "tool_error" => {
                    assert!(
                        reason(&r)
                            .contains(&format!("`{path}` changed while being resolved; try again")),
                        "{r}"
                    );
                    assert!(!reason(&r).contains("only paths inside"), "{r}");
                    changed += 1;
                }
                // Refused as outside only where one state really leads outside.
                "denied" if path.starts_with("o/") => {
                    assert!(reason(&r).contains("outside the workspace"), "{r}");
                    outside += 1;
                }
                _ => panic!("{path}: {r}"),
            }
        }
    }
    let swaps = swapper.swaps.load(Ordering::Relaxed);
    drop(swapper);
    eprintln!("{batches} batches, {swaps} swaps: {changed} changed, {outside} outside");
    assert!(
        changed > 0,
        "no race was seen in {batches} batches ({swaps} swaps)"
    );
    assert!(outside > 0, "the link out was never judged");

    // At rest a real escape is denied exactly as before.
    let escape = if ws.join("o").is_symlink() {
        "o"
    } else {
        "o.alt"
    };
    let out = dirs.batch_output(
        &[
            call("read_file", json!({"path": format!("{escape}/f.txt")})),
            call("read_file", json!({"path": "../outside/f.txt"})),
        ],
        &[],
        &[],
    );
    for r in json_lines(&out) {
        assert_eq!(kind(&r), "denied", "{r}");
        assert_eq!(r["decided_by"]["gate"], "pre_policy", "{r}");
        assert!(reason(&r).contains("only paths inside"), "{r}");
    }
}
