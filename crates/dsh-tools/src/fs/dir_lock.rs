//! The file seam's lock across processes: an exclusive `flock(2)` on the handle of the
//! target's parent directory, the handle the seam already opens to write through, taken
//! before the version check and released after the rename.
//!
//! **Why the directory, not the file or a lock file.** The change replaces the target by
//! renaming a new inode over it; a lock on the target would be a lock on the old inode, and a
//! process that waited for it would then hold a lock nobody else checks. A lock file beside
//! the target (`.NAME.dsh-lock`) is stable only if it is never removed — litter next to every
//! file ever edited, shown by `git status` — or removed with a re-check-after-lock protocol
//! (lock, compare the locked inode with the name's, retry) that every remover, the sweep
//! included, must follow. The directory is stable while the change runs (the change renames
//! inside it, never it), is what the seam holds open anyway, and leaves nothing behind.
//!
//! **What the lock costs.** It covers the whole directory, so two processes changing two
//! files in one directory wait for each other for the length of one change (a read, a write
//! and an `fsync`: milliseconds). Within one process the seam's mutex already serializes
//! every change, so this adds waiting only between processes (or between two sessions of one
//! process: `flock` locks belong to the open file, not the process).
//!
//! **What it does not cover.** It is advisory: a program that does not take it (an editor,
//! `sed -i`, a build) is not stopped by it; the seam's second version check, just before the
//! rename, is the only defence against those, and leaves a window of one `renameat(2)`. Where
//! the file system refuses the lock (NFS emulates `flock` with byte-range locks, which a
//! directory opened read-only cannot take; some FUSE file systems have none), the change
//! proceeds under the process's own mutex and that second check only; so it does on a Unix
//! whose standard library has no `flock` (`File::try_lock` reports it unsupported). On
//! systems other than Unix there is no lock across processes at all.
//!
//! **Bounded.** A process that hangs while holding the lock (or a person's `flock DIR cmd`)
//! must not hang dsh: the lock is tried without blocking, with a pause doubling from 1 ms to
//! 50 ms, until [`WAIT`] (5 s) has passed or the call is cancelled; then the change fails
//! as a `timeout` that says what holds it.

#[cfg(unix)]
use std::fs::{File, TryLockError};
#[cfg(unix)]
use std::time::{Duration, Instant};

use dsh_core::{CancellationToken, ToolError};

/// How long a change waits for another process's lock on its directory.
#[cfg(unix)]
const WAIT: Duration = Duration::from_secs(5);
/// The longest pause between two attempts.
#[cfg(unix)]
const MAX_PAUSE: Duration = Duration::from_millis(50);

/// The lock, held until dropped. `None` inside: the file system refused it (see above).
#[must_use]
pub(crate) struct Held<'a> {
    #[cfg(unix)]
    dir: Option<&'a File>,
    #[cfg(not(unix))]
    _dir: std::marker::PhantomData<&'a ()>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Unlocked explicitly rather than by closing the handle: a child forked at this moment
        // shares the open file until it execs, and closing ours would not release it.
        #[cfg(unix)]
        if let Some(dir) = self.dir {
            let _ = dir.unlock();
        }
    }
}

/// Takes the lock on `dir` (the parent directory of `given`), waiting at most [`WAIT`].
#[cfg(unix)]
pub(crate) fn lock<'a>(
    dir: &'a File,
    given: &str,
    cancel: &CancellationToken,
) -> Result<Held<'a>, ToolError> {
    let deadline = Instant::now() + WAIT;
    let mut pause = Duration::from_millis(1);
    loop {
        match dir.try_lock() {
            Ok(()) => return Ok(Held { dir: Some(dir) }),
            Err(TryLockError::Error(_)) => return Ok(Held { dir: None }),
            Err(TryLockError::WouldBlock) => {}
        }
        if cancel.is_cancelled() {
            return Err(crate::cancelled());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(held_too_long(given));
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// Without Unix there is no lock across processes (see above).
#[cfg(not(unix))]
pub(crate) fn lock(_given: &str, _cancel: &CancellationToken) -> Result<Held<'static>, ToolError> {
    Ok(Held {
        _dir: std::marker::PhantomData,
    })
}

#[cfg(unix)]
fn held_too_long(given: &str) -> ToolError {
    ToolError::new(
        dsh_core::ToolErrorKind::Timeout,
        format!(
            "`{given}` was not changed: another process has held the lock on its directory for {} s (another dsh session changing a file there, or a program holding `flock` on the directory); try again, and if it persists find the holder with `fuser` or `lsof` on the directory",
            WAIT.as_secs()
        ),
    )
}
