//! Kill at a journal write (cargo feature `fault-injection`, off by default; tests only).
//!
//! With the feature, the environment variable [`VAR`] = `N:MODE` makes the process SIGKILL
//! itself at its `N`th journal record write (counted from 1), where `MODE` is
//! * `before` — before any byte of record `N` is written;
//! * `half` — after the first half of its bytes (`len / 2`, so possibly mid-character) are in
//!   the file (one `write` to the unbuffered file: the kernel has them, a killed process
//!   cannot lose them);
//! * `after` — after the whole line is written and, under [`SyncPolicy::EveryRecord`], synced.
//!
//! Writes are counted per process, across every journal file the process writes (a resumed
//! session's new file, a sub-agent's records in its parent's file: all one count), in the
//! order they reach [`JsonlJournal`]'s one write site. SIGKILL, not `abort` or `exit`: nothing
//! is flushed, no destructor or signal handler runs, as in a real crash. Without the
//! variable nothing changes; a malformed value is a panic naming it (a typo must not pass for
//! a sweep that never killed anything). Without the feature this module does not exist.
//!
//! [`SyncPolicy::EveryRecord`]: super::SyncPolicy::EveryRecord
//! [`JsonlJournal`]: super::JsonlJournal

use std::fs::File;
use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The variable naming the write to die at: `N:before`, `N:half` or `N:after`.
pub const VAR: &str = "DSH_FAULT_KILL_AT";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Before,
    Half,
    After,
}

/// Journal record writes of this process so far.
static WRITES: AtomicU64 = AtomicU64::new(0);

fn target() -> Option<(u64, Mode)> {
    static TARGET: OnceLock<Option<(u64, Mode)>> = OnceLock::new();
    *TARGET.get_or_init(|| {
        let value = std::env::var(VAR).ok()?;
        let parsed = value.split_once(':').and_then(|(n, mode)| {
            let n = n.parse::<u64>().ok().filter(|n| *n > 0)?;
            let mode = match mode {
                "before" => Mode::Before,
                "half" => Mode::Half,
                "after" => Mode::After,
                _ => return None,
            };
            Some((n, mode))
        });
        assert!(
            parsed.is_some(),
            "{VAR}={value:?}: expected N:before, N:half or N:after with N >= 1"
        );
        parsed
    })
}

/// Called with each record's whole `line` just before it is written to `file`: counts the
/// write and dies here for `before` and `half`; `true` when the caller must call [`kill`] once
/// the line is written (`after`).
pub(super) fn at_write(file: &mut File, line: &[u8]) -> bool {
    let n = WRITES.fetch_add(1, Ordering::SeqCst) + 1;
    match target() {
        Some((at, mode)) if at == n => match mode {
            Mode::Before => kill(),
            Mode::Half => {
                let _ = file.write_all(&line[..line.len() / 2]);
                kill()
            }
            Mode::After => true,
        },
        _ => false,
    }
}

/// SIGKILLs this process.
pub(super) fn kill() -> ! {
    #[allow(unsafe_code)]
    // SAFETY: kill and getpid take and return plain integers.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // SIGKILL to oneself is delivered before kill returns; never reached.
    loop {
        std::thread::park();
    }
}
