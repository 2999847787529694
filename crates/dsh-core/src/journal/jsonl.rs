//! The JSONL file journal: `DSH_HOME/sessions/<session-id>.jsonl`, mode 0600.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Chain, Journal, JournalError};

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

struct State {
    file: File,
    /// Where every line is copied too (e.g. stdout for `--json`); its failures are ignored:
    /// the file is the record.
    mirror: Option<Box<dyn Write + Send>>,
    chain: Chain,
    dirty: bool,
    broken: bool,
}

/// A journal file. Created new (never appended to an existing file), readable only by its
/// owner on Unix.
pub struct JsonlJournal {
    path: PathBuf,
    display: String,
    session: String,
    policy: SyncPolicy,
    state: Mutex<State>,
}

impl JsonlJournal {
    /// Creates the file at `path`; fails if it exists.
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
        let file = options.open(&path).map_err(|source| JournalError::Io {
            path: display.clone(),
            source,
        })?;
        Ok(JsonlJournal {
            path,
            display,
            session: session.into(),
            policy,
            state: Mutex::new(State {
                file,
                mirror: None,
                chain: Chain::new(),
                dirty: false,
                broken: false,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copies every line, as written, to `mirror` too (`dsh exec --json` streams the journal
    /// to stdout this way). A failing mirror never fails the journal.
    #[must_use]
    pub fn with_mirror(self, mirror: Box<dyn Write + Send>) -> Self {
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
    fn append(&self, kind: &str, fields: &str) -> Result<u64, JournalError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| JournalError::Broken(self.display.clone()))?;
        if state.broken {
            return Err(JournalError::Broken(self.display.clone()));
        }
        let (line, hash, seq) = state.chain.line(&self.session, kind, fields)?;
        // One write of the whole line: a crash leaves either the line or a torn tail that
        // readers recognise by its missing newline.
        if let Err(e) = state.file.write_all(line.as_bytes()) {
            state.broken = true;
            return Err(self.io(e));
        }
        state.chain.commit(hash, seq);
        state.dirty = true;
        if let Some(mirror) = state.mirror.as_mut()
            && (mirror.write_all(line.as_bytes()).is_err() || mirror.flush().is_err())
        {
            state.mirror = None;
        }
        if self.policy == SyncPolicy::EveryRecord {
            if let Err(e) = state.file.sync_data() {
                state.broken = true;
                return Err(self.io(e));
            }
            state.dirty = false;
        }
        Ok(seq)
    }

    fn sync(&self) -> Result<(), JournalError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| JournalError::Broken(self.display.clone()))?;
        if state.broken {
            return Err(JournalError::Broken(self.display.clone()));
        }
        if state.dirty {
            if let Err(e) = state.file.sync_data() {
                state.broken = true;
                return Err(self.io(e));
            }
            state.dirty = false;
        }
        Ok(())
    }

    fn session(&self) -> &str {
        &self.session
    }
}
