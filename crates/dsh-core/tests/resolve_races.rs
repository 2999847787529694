//! `Workspace::resolve` and `open_read` while another thread swaps a name on the way (issue 21,
//! item 9): every answer is a path as one of the two states has it, or "changed while being
//! resolved; try again" — never a raw OS error, and never "outside" for a name whose every
//! state is inside. A name that really points outside in one state is still refused as
//! outside.
//!
//! The swap is `renameat2(RENAME_EXCHANGE)`, atomic: at every instant the name is one of its
//! two states, so anything else a resolution reports is the race itself.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dsh_core::{PathError, Workspace};

/// Exchanges `a` and `b` (names in `dir`) until dropped; counts the exchanges.
struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    fn start(dir: &Path, a: &'static str, b: &'static str) -> Swapper {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        let (stop, swaps) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (a, b) = (dir.join(a), dir.join(b));
        let thread = std::thread::spawn({
            let (stop, swaps) = (stop.clone(), swaps.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).unwrap();
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

/// Calls `attempt` until it has reported at least `want` races and run `min` times, or the
/// generous deadline passes; returns how many races it saw. `attempt` returns whether its
/// answer was the race ("changed") and panics on any answer that is wrong in every state.
fn hammer(mut attempt: impl FnMut() -> bool) -> u64 {
    let (want, min) = (3, 2_000);
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut races, mut n) = (0, 0);
    while (races < want || n < min) && Instant::now() < deadline {
        races += u64::from(attempt());
        n += 1;
    }
    races
}

fn world() -> (tempfile::TempDir, PathBuf, PathBuf, Workspace) {
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().join("ws");
    let out = base.path().join("out");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let w = Workspace::new(&ws).unwrap();
    let ws = w.root().to_path_buf();
    (base, ws, out.canonicalize().unwrap(), w)
}

fn changed(e: &PathError) -> bool {
    let is = matches!(e, PathError::Changed { .. });
    if is {
        assert!(
            e.to_string()
                .ends_with("changed while being resolved; try again"),
            "{e}"
        );
        assert!(e.is_failure());
    }
    is
}

#[test]
fn a_directory_swapped_with_a_symlink_to_another_inside_resolves_or_says_it_changed() {
    let (_base, ws, _out, w) = world();
    for d in ["p", "q"] {
        std::fs::create_dir(ws.join(d)).unwrap();
        std::fs::write(ws.join(d).join("f.txt"), d).unwrap();
    }
    symlink("q", ws.join("p.alt")).unwrap();
    let swapper = Swapper::start(&ws, "p", "p.alt");
    let races = hammer(|| match w.resolve("p/f.txt") {
        Ok(r) => {
            assert!(
                r.rel == Path::new("p/f.txt") || r.rel == Path::new("q/f.txt"),
                "{r:?}"
            );
            false
        }
        Err(e) => {
            assert!(changed(&e), "an inside path came back as: {e}");
            true
        }
    });
    let swaps = swapper.swaps.load(Ordering::Relaxed);
    drop(swapper);
    assert!(races > 0, "no race seen in {swaps} swaps");
}

#[test]
fn a_file_swapped_with_a_symlink_to_another_inside_opens_or_says_it_changed() {
    let (_base, ws, _out, w) = world();
    std::fs::write(ws.join("r"), "r").unwrap();
    std::fs::write(ws.join("s.txt"), "s").unwrap();
    symlink("s.txt", ws.join("r.alt")).unwrap();
    let swapper = Swapper::start(&ws, "r", "r.alt");
    let races = hammer(|| match w.open_read("r") {
        Ok((_, r)) => {
            assert!(
                r.rel == Path::new("r") || r.rel == Path::new("s.txt"),
                "{r:?}"
            );
            false
        }
        // Before: the symlink met by `O_NOFOLLOW` after resolution was called "outside".
        Err(e) => {
            assert!(changed(&e), "an inside file came back as: {e}");
            true
        }
    });
    drop(swapper);
    assert!(races > 0, "no race seen");
}

#[test]
fn a_directory_swapped_with_a_symlink_to_the_outside_is_outside_only_in_that_state() {
    let (_base, ws, out, w) = world();
    std::fs::create_dir(ws.join("o")).unwrap();
    std::fs::write(ws.join("o/f.txt"), "in").unwrap();
    std::fs::write(out.join("f.txt"), "secret").unwrap();
    symlink(&out, ws.join("o.alt")).unwrap();
    let outside_seen = std::cell::Cell::new(0);
    let swapper = Swapper::start(&ws, "o", "o.alt");
    let races = hammer(|| match w.resolve("o/f.txt") {
        Ok(r) => {
            assert_eq!(r.rel, Path::new("o/f.txt"));
            false
        }
        Err(PathError::Outside { resolved, .. }) => {
            assert_eq!(resolved.as_deref(), Some(out.join("f.txt").as_path()));
            outside_seen.set(outside_seen.get() + 1);
            false
        }
        Err(e) => {
            assert!(changed(&e), "{e}");
            true
        }
    });
    drop(swapper);
    assert!(races > 0, "no race seen");
    assert!(outside_seen.get() > 0, "the outside state was never judged");
    // At rest, the link out is refused exactly as before.
    let at_rest = if ws.join("o").is_symlink() {
        "o/f.txt"
    } else {
        "o.alt/f.txt"
    };
    assert!(matches!(w.resolve(at_rest), Err(PathError::Outside { .. })));
}

#[test]
fn names_below_a_file_are_not_found_not_a_race() {
    let (_base, ws, _out, w) = world();
    std::fs::write(ws.join("file"), "x").unwrap();
    let e = w.open_read("file/x").unwrap_err();
    assert!(matches!(e, PathError::NotFound { .. }), "{e}");
}
