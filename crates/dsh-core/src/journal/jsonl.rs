//! The JSONL file journal: `DSH_HOME/sessions/<session-id>.jsonl`, mode 0600, locked
//! (`File::try_lock`) by the process writing it.
//!
//! A full disk must not cost a session its ending: a small *reserve* file on the same disk
//! ([`JsonlJournal::with_reserve`], [`RESERVE_BYTES`] of real blocks) holds space for the
//! closing records. When a closing record cannot be written, the reserve is deleted and the
//! record tried once more. The reserve goes when the journal is dropped; a process killed
//! before that leaves it for its owner to sweep (dsh-agent removes those of dead sessions).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{BlobStore, Body, Chain, Journal, JournalError, Mirror};

/// When records become durable. Every record is handed to the OS (one `write`) before
/// `append` returns either way; this decides when `fsync` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// fsync once at the end of each batch (default).
    #[default]
    BatchEnd,
    /// fsync after every record.
    EveryRecord,
}

/// Whether records may still be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Health {
    Good,
    /// A write failed and what it left was taken back: the file ends with a whole record,
    /// so closing records may still be tried.
    Failed,
    /// A write failed and its torn tail could not be taken back: nothing more is written.
    Torn,
}

/// The space set aside for `stop` and `session_end` (a few hundred bytes each, with room
/// for a long error text and a file system's block size).
pub const RESERVE_BYTES: usize = 16 * 1024;

struct State {
    file: File,
    /// The reserve file, until it was given up for a closing record.
    reserve: Option<PathBuf>,
    /// Where every line is copied too (`--json`); it never makes the journal wait.
    mirror: Option<Arc<Mirror>>,
    chain: Chain,
    /// The bytes of whole records in the file.
    len: u64,
    dirty: bool,
    health: Health,
}

/// A journal file. Created new (never appended to an existing file), readable only by its
/// owner on Unix.
pub struct JsonlJournal {
    path: PathBuf,
    display: String,
    session: String,
    policy: SyncPolicy,
    /// `<stem>.blobs` beside the file: arguments over 1 MiB (made at the first one).
    blobs: BlobStore,
    state: Mutex<State>,
}

impl JsonlJournal {
    /// Creates the file at `path` and locks it; fails if it exists.
    pub fn create(
        path: impl AsRef<Path>,
        session: impl Into<String>,
        policy: SyncPolicy,
    ) -> Result<Self, JournalError> {
        let path = path.as_ref().to_path_buf();
        let display = path.display().to_string();
        let mut options = OpenOptions::new();
        options.create_new(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let io = |source| JournalError::Io {
            path: display.clone(),
            source,
        };
        let file = options.open(&path).map_err(io)?;
        // The file is new and ours; only a reader probing whether its writer is alive
        // (`dsh sessions list`, a new session's sweep) can hold its lock, for an instant.
        let mut tries = 0;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(TryLockError::WouldBlock) => return Err(JournalError::Locked(display)),
                Err(TryLockError::Error(e)) => return Err(io(e)),
            }
        }
        Ok(JsonlJournal {
            blobs: BlobStore::beside(&path),
            path,
            display,
            session: session.into(),
            policy,
            state: Mutex::new(State {
                file,
                reserve: None,
                mirror: None,
                chain: Chain::new(),
                len: 0,
                dirty: false,
                health: Health::Good,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets [`RESERVE_BYTES`] aside in a new file at `path` (in an existing directory on the
    /// journal's disk, so that deleting it makes room there) for the closing records. Best
    /// effort: when the file cannot be made — the disk is already full — there is no reserve.
    #[must_use]
    pub fn with_reserve(self, path: &Path) -> Self {
        let reserve = make_reserve(path);
        if let Ok(mut state) = self.state.lock() {
            state.reserve = reserve;
        }
        self
    }

    /// Copies every line, as written, to `mirror` too (`--json` streams the journal to stdout
    /// this way). The mirror queues; the journal never waits for its reader.
    #[must_use]
    pub fn with_mirror(self, mirror: Arc<Mirror>) -> Self {
        if let Ok(mut state) = self.state.lock() {
            state.mirror = Some(mirror);
        }
        self
    }

    fn io(&self, source: std::io::Error) -> JournalError {
        JournalError::Io {
            path: self.display.clone(),
            source,
        }
    }

    fn write_line(&self, body: &Body, closing: bool) -> Result<u64, JournalError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| JournalError::Broken(self.display.clone()))?;
        match state.health {
            Health::Good => {}
            Health::Failed if closing => {}
            Health::Failed | Health::Torn => {
                return Err(JournalError::Broken(self.display.clone()));
            }
        }
        let (line, hash, seq) = state.chain.line(&self.session, body)?;
        // The test-only crash point (`fault-injection`): before, half-way through or after
        // this record's write.
        #[cfg(all(feature = "fault-injection", unix))]
        let kill_after = super::fault::at_write(&mut state.file, line.as_bytes());
        // One write of the whole line. When it fails, whatever part of it reached the file is
        // cut off again, so the file still ends with a whole record. A closing record gets one
        // more try after the reserve's space is given back.
        let mut written = state.write_whole(line.as_bytes());
        if written.is_err()
            && closing
            && state.health == Health::Failed
            && let Some(reserve) = state.reserve.take()
        {
            let _ = std::fs::remove_file(reserve);
            written = state.write_whole(line.as_bytes());
        }
        if let Err(e) = written {
            return Err(self.io(e));
        }
        state.chain.commit(hash, seq);
        state.len += line.len() as u64;
        state.dirty = true;
        if let Some(mirror) = &state.mirror {
            mirror.push(&line);
        }
        if self.policy == SyncPolicy::EveryRecord {
            if let Err(e) = state.file.sync_data() {
                state.health = Health::Failed;
                return Err(self.io(e));
            }
            state.dirty = false;
        }
        #[cfg(all(feature = "fault-injection", unix))]
        if kill_after {
            super::fault::kill();
        }
        Ok(seq)
    }
}

impl State {
    /// Writes `line` whole, or leaves the file as it was (health `Failed`) or, when even that
    /// fails, marks it torn.
    fn write_whole(&mut self, line: &[u8]) -> std::io::Result<()> {
        let e = match self.file.write_all(line) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        self.health = match self.file.set_len(self.len) {
            Ok(()) => Health::Failed,
            Err(_) => Health::Torn,
        };
        Err(e)
    }
}

/// Creates the reserve file at `path` with real blocks (zeros written, not a sparse length);
/// `None` when that fails — the disk is already full, or the directory refuses it — and the
/// journal then simply has no reserve.
fn make_reserve(path: &Path) -> Option<PathBuf> {
    let mut options = OpenOptions::new();
    options.create_new(true).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).ok()?;
    if file.write_all(&[0; RESERVE_BYTES]).is_err() {
        drop(file);
        let _ = std::fs::remove_file(path);
        return None;
    }
    Some(path.to_path_buf())
}

impl Drop for JsonlJournal {
    fn drop(&mut self) {
        let reserve = match self.state.get_mut() {
            Ok(state) => state.reserve.take(),
            Err(poisoned) => poisoned.into_inner().reserve.take(),
        };
        if let Some(reserve) = reserve {
            let _ = std::fs::remove_file(reserve);
        }
    }
}

impl std::fmt::Debug for JsonlJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlJournal")
            .field("path", &self.path)
            .field("session", &self.session)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Journal for JsonlJournal {
    fn write(&self, body: &Body, closing: bool) -> Result<u64, JournalError> {
        self.write_line(body, closing)
    }

    fn sync(&self) -> Result<(), JournalError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| JournalError::Broken(self.display.clone()))?;
        if state.health == Health::Torn {
            return Err(JournalError::Broken(self.display.clone()));
        }
        if state.dirty {
            if let Err(e) = state.file.sync_data() {
                state.health = Health::Failed;
                return Err(self.io(e));
            }
            state.dirty = false;
        }
        Ok(())
    }

    fn session(&self) -> &str {
        &self.session
    }

    fn last_seq(&self) -> Option<u64> {
        let state = self.state.lock().ok()?;
        Some(state.chain.seq())
    }

    fn blobs(&self) -> Option<&BlobStore> {
        Some(&self.blobs)
    }
}
