//! What sessions that died leave under `DSH_HOME`.
//!
//! **Crash artefacts** (DESIGN §6): a journal whose process died before its first record was
//! complete — an empty file, or a first line cut off before its newline. It holds no session
//! (no `session_start`, nothing to resume, list or verify), so readers recognise it once
//! ([`crash_artefact`]) and leave it out without a warning, and `dsh sessions prune`
//! ([`prune`]) removes it. A file whose first line is no record but which goes on after it is
//! not one: that is a changed or damaged journal, kept for `dsh sessions verify` to name.
//!
//! **Temporary directories**: the private `TMPDIR` of each session
//! (`tmp/<id>`), which its `run_shell` removes when the session ends normally. A session
//! whose journal is no longer locked (DESIGN §6: the writing process holds the lock until it
//! exits) is over, so its temporary directory is removed when a new session starts. A
//! directory without a journal is left alone: nothing says whose it is. The journal's
//! reserve file (`reserve/<id>`, space kept for the closing records) of such a session goes
//! the same way, and so does one whose journal is gone. The same start also
//! removes the file seam's temporary files that dead processes left in the workspace
//! (`dsh_tools::sweep_stale_temp_files`). Both run on a thread of their own, so a large
//! workspace never delays a session's start; `Session::finish` waits for them.

use std::fs::{File, TryLockError};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

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
    session_entries(&dsh_home.join("tmp"), true)
        .filter(|(id, _)| is_over(&journal_of(dsh_home, id)))
        // `remove_dir_all` does not follow symlinks inside the tree.
        .filter(|(_, path)| std::fs::remove_dir_all(path).is_ok())
        .count()
}

/// The entries of `dir` that are ours: named by a session id, and a real directory
/// (`dirs`) or a regular file — never a symlink. With the id.
fn session_entries(dir: &Path, dirs: bool) -> impl Iterator<Item = (String, PathBuf)> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(move |e| {
            e.file_type()
                .is_ok_and(|t| if dirs { t.is_dir() } else { t.is_file() })
        })
        .filter_map(|e| {
            let id = e.file_name().into_string().ok()?;
            crate::session_id::looks_like(&id).then(|| (id, e.path()))
        })
}

fn journal_of(dsh_home: &Path, id: &str) -> PathBuf {
    dsh_home.join("sessions").join(format!("{id}.jsonl"))
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
    session_entries(&dsh_home.join(RESERVE_DIR), false)
        .filter(|(id, _)| {
            let journal = journal_of(dsh_home, id);
            is_over(&journal) || !journal.exists()
        })
        .filter(|(_, path)| std::fs::remove_file(path).is_ok())
        .count()
}

/// What makes a journal file a crash artefact (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Artefact {
    /// Created, never written.
    Empty,
    /// The first line has no newline: its write was cut off after `bytes` bytes.
    TornFirstLine { bytes: usize },
    /// The first line ends in a newline but is no JSON object (`bytes` long, 0 for an empty
    /// line), and nothing follows it.
    NoFirstRecord { bytes: usize },
}

impl std::fmt::Display for Artefact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Artefact::Empty => f.write_str("the file is empty"),
            Artefact::TornFirstLine { bytes } => {
                write!(f, "its first line is torn, {bytes} bytes without a newline")
            }
            Artefact::NoFirstRecord { bytes: 0 } => f.write_str("its only line is empty"),
            Artefact::NoFirstRecord { bytes } => {
                write!(f, "its only line, {bytes} bytes, is not a record")
            }
        }
    }
}

/// Whether the journal at `path` is a crash artefact, and why.
pub fn crash_artefact(path: &Path) -> std::io::Result<Option<Artefact>> {
    artefact_of(&File::open(path)?)
}

fn artefact_of(file: &File) -> std::io::Result<Option<Artefact>> {
    let mut reader = BufReader::new(file);
    let mut first = Vec::new();
    reader.read_until(b'\n', &mut first)?;
    classify(&first, &mut reader)
}

/// [`crash_artefact`] of a file whose first line (with its newline, if it has one) is
/// `first` and whose remaining bytes `rest` yields.
pub(crate) fn classify(first: &[u8], rest: &mut impl Read) -> std::io::Result<Option<Artefact>> {
    let Some(line) = first.strip_suffix(b"\n") else {
        // No newline: the file ends inside its first line.
        return Ok(Some(match first.len() {
            0 => Artefact::Empty,
            bytes => Artefact::TornFirstLine { bytes },
        }));
    };
    if serde_json::from_slice::<serde_json::Value>(line).is_ok_and(|v| v.is_object()) {
        return Ok(None);
    }
    // Records after it: damaged or changed, not cut short (module docs).
    let mut buf = [0u8; 8192];
    loop {
        let n = rest.read(&mut buf)?;
        if n == 0 {
            return Ok(Some(Artefact::NoFirstRecord { bytes: line.len() }));
        }
        if !buf[..n].iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
    }
}

/// How long after its last change a crash artefact is left alone by [`prune`]. A journal is
/// created and then locked by its writer (`JsonlJournal::create`): between the two, a new
/// session's empty file is unlocked for an instant, and removing it then would leave that
/// session writing to a file nobody can find. No writer waits this long between the two.
pub const PRUNE_GRACE: Duration = Duration::from_secs(10);

/// What [`prune`] did.
#[derive(Debug, Default)]
pub struct Pruned {
    /// The crash artefacts removed, and why each was one.
    pub removed: Vec<(PathBuf, Artefact)>,
    /// Crash artefacts left alone, and why.
    pub left: Vec<(PathBuf, Artefact, Left)>,
    /// Crash artefacts that could not be removed (or read).
    pub failed: Vec<(PathBuf, std::io::Error)>,
}

/// Why [`prune`] left a crash artefact alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Left {
    /// A running process holds its lock: it may still write its first record.
    Open,
    /// Changed within [`PRUNE_GRACE`]: it may be a session that is just starting.
    Recent,
}

/// Removes the crash artefacts among `DSH_HOME/sessions/<session id>.jsonl` (`dsh sessions
/// prune`), and nothing else: a file with a complete first record, a file named otherwise,
/// a file whose lock a running process holds (checked while holding the lock), and one
/// changed within [`PRUNE_GRACE`] stay.
pub fn prune(dsh_home: &Path) -> Pruned {
    let mut pruned = Pruned::default();
    let Ok(entries) = std::fs::read_dir(crate::session_id::sessions_dir(dsh_home)) else {
        return pruned;
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && p.file_stem()
                    .and_then(|s| s.to_str())
                    .is_some_and(crate::session_id::looks_like)
        })
        .collect();
    paths.sort();
    for path in paths {
        match prune_one(&path) {
            Ok(None) => {}
            Ok(Some((artefact, None))) => pruned.removed.push((path, artefact)),
            Ok(Some((artefact, Some(why)))) => pruned.left.push((path, artefact, why)),
            Err(e) => pruned.failed.push((path, e)),
        }
    }
    pruned
}

/// `None`: not a crash artefact. `Some((what, None))`: removed; `Some((what, Some(why)))`:
/// left.
fn prune_one(path: &Path) -> std::io::Result<Option<(Artefact, Option<Left>)>> {
    let file = File::open(path)?;
    // Held until the file is gone: a writer cannot take it meanwhile.
    let locked = match file.try_lock_shared() {
        Ok(()) => true,
        Err(TryLockError::WouldBlock) => false,
        Err(TryLockError::Error(e)) => return Err(e),
    };
    let artefact = match artefact_of(&file) {
        Ok(Some(a)) => a,
        Ok(None) => return Ok(None),
        // Where locks are mandatory a writer's file cannot be read: it is a live session.
        Err(_) if !locked => return Ok(None),
        Err(e) => return Err(e),
    };
    if !locked {
        return Ok(Some((artefact, Some(Left::Open))));
    }
    let changed = file.metadata()?.modified()?;
    let age = SystemTime::now()
        .duration_since(changed)
        .unwrap_or(Duration::ZERO);
    if age < PRUNE_GRACE {
        return Ok(Some((artefact, Some(Left::Recent))));
    }
    std::fs::remove_file(path)?;
    Ok(Some((artefact, None)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn of(bytes: &[u8]) -> Option<Artefact> {
        let mut reader = BufReader::new(bytes);
        let mut first = Vec::new();
        reader.read_until(b'\n', &mut first).unwrap();
        classify(&first, &mut reader).unwrap()
    }

    #[test]
    fn a_file_without_a_complete_first_record_and_nothing_after_is_an_artefact() {
        assert_eq!(of(b""), Some(Artefact::Empty));
        assert_eq!(
            of(br#"{"v":1,"seq":1,"kind":"sess"#),
            Some(Artefact::TornFirstLine { bytes: 27 })
        );
        // Even a whole object is torn without its newline.
        assert_eq!(of(b"{}"), Some(Artefact::TornFirstLine { bytes: 2 }));
        assert_eq!(of(b"\n"), Some(Artefact::NoFirstRecord { bytes: 0 }));
        assert_eq!(
            of(b"\0\0\0\n\n"),
            Some(Artefact::NoFirstRecord { bytes: 3 })
        );
    }

    #[test]
    fn a_complete_first_line_or_lines_after_a_bad_one_are_not_artefacts() {
        assert_eq!(of(b"{\"kind\":\"session_start\"}\n"), None);
        assert_eq!(of(b"{\"kind\":\"session_start\"}\n{\"v\":"), None);
        // Damaged or changed, not cut short: `verify` names it.
        assert_eq!(of(b"garbage\n{\"seq\":2}\n"), None);
        assert_eq!(of(b"\n{\"seq\":2}\n"), None);
    }
}
