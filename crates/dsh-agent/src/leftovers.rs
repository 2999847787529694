//! What sessions that died leave under `DSH_HOME`: the private `TMPDIR` of each session
//! (`tmp/<id>`), which its `run_shell` removes when the session ends normally. A session
//! whose journal is no longer locked (DESIGN §6: the writing process holds the lock until it
//! exits) is over, so its temporary directory is removed when a new session starts. A
//! directory without a journal is left alone: nothing says whose it is. The journal's
//! reserve file (`reserve/<id>`, space kept for the closing records) of such a session goes
//! the same way, and so does one whose journal is gone. The same start also
//! removes the file seam's temporary files that dead processes left in the workspace
//! (`dsh_tools::sweep_stale_temp_files`). Both run on a thread of their own, so a large
//! workspace never delays a session's start; `Session::finish` waits for them.

use std::fs::TryLockError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_core::Workspace;

/// The directory under `DSH_HOME` of the journals' reserve files, one per live session.
pub(crate) const RESERVE_DIR: &str = "reserve";

/// Starts both sweeps on a thread; `None` if no thread could be started (nothing is swept).
pub(crate) fn spawn_sweep(
    dsh_home: PathBuf,
    workspace: Arc<Workspace>,
) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("dsh-leftovers".to_owned())
        .spawn(move || {
            sweep_dead_sessions(&dsh_home);
            sweep_dead_reserves(&dsh_home);
            dsh_tools::sweep_stale_temp_files(&workspace);
        })
        .ok()
}

/// Removes `tmp/<id>` for every session under `dsh_home` whose journal is unlocked; returns
/// how many were removed. Best effort: a directory that cannot be removed stays.
pub(crate) fn sweep_dead_sessions(dsh_home: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dsh_home.join("tmp")) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str() else {
            continue;
        };
        // Only our own directories: a session id, and a real directory (not a symlink).
        if !crate::session_id::looks_like(id) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let journal = dsh_home.join("sessions").join(format!("{id}.jsonl"));
        if !is_over(&journal) {
            continue;
        }
        // `remove_dir_all` does not follow symlinks inside the tree.
        if std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether the session recording to `journal` is over: the file exists and no process holds
/// its lock.
fn is_over(journal: &Path) -> bool {
    let Ok(file) = std::fs::File::open(journal) else {
        return false;
    };
    // A shared probe: it never keeps a writer from its own exclusive lock for long.
    match file.try_lock_shared() {
        Ok(()) => true,
        Err(TryLockError::WouldBlock | TryLockError::Error(_)) => false,
    }
}

/// Removes the journal reserve (`reserve/<id>`) of every session that is over, and of every
/// session whose journal is gone (a reserve is named for its journal, so nothing else can own
/// it; a live journal is created before its reserve); returns how many were removed.
pub(crate) fn sweep_dead_reserves(dsh_home: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dsh_home.join(RESERVE_DIR)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str() else {
            continue;
        };
        if !crate::session_id::looks_like(id) || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let journal = dsh_home.join("sessions").join(format!("{id}.jsonl"));
        if (is_over(&journal) || !journal.exists()) && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}
