//! The session journal (DESIGN §6): one JSONL record per event, hash-chained.
//!
//! Every line is `{"v":1,"seq":N,"ts":"…","session":"…","kind":"…",<fields>,"prev":"<hex>"}`
//! where `prev` is the SHA-256 of the previous line's bytes without its newline (64 zeros for
//! the first). The pipeline writes `tool_call` — flushed to the OS — before gate 1 (SPEC P1),
//! so a crash mid-execution leaves the call on record; `tool_started` when execution begins;
//! `tool_result` with the frozen result; `approval` and `context_attached` as they happen.
//! A write failure is a harness error: the batch stops before the next gate, so nothing runs
//! unrecorded. After one, only the closing records (`stop`, `session_end`) are still tried,
//! through [`Journal::append_closing`]: they describe the end and let nothing run.

mod jsonl;
mod mirror;
mod read;
mod time;

use std::sync::Mutex;

use sha2::{Digest, Sha256};

pub use jsonl::{JsonlJournal, SyncPolicy};
pub use mirror::{DEFAULT_CAPACITY as MIRROR_CAPACITY, Mirror};
pub use read::{ReadError, Transcript, read_journal};
pub use time::rfc3339_millis;

/// The record format version written in every line's `v`.
pub const FORMAT_VERSION: u32 = 1;

/// The `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Why a record could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    #[error("cannot write the journal {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the journal {0} is unusable after an earlier write failure; nothing more is recorded")]
    Broken(String),
    #[error("the journal {0} is locked by another process")]
    Locked(String),
    #[error("record fields must be a JSON object, got: {0}")]
    NotAnObject(String),
    #[error("{0}")]
    Other(String),
}

/// Where records go. Implementations must be safe to call from several tasks; each `append`
/// must have handed the line to the OS (or failed) before it returns.
pub trait Journal: Send + Sync {
    /// Appends one record of `kind`. `fields` is the text of a JSON object whose keys become the
    /// record's fields (they must not be the envelope's `v`, `seq`, `ts`, `session`, `kind`,
    /// `prev`). Returns the record's `seq`.
    fn append(&self, kind: &str, fields: &str) -> Result<u64, JournalError>;

    /// Appends a closing record (`stop`, `session_end`). Unlike [`Journal::append`], it is
    /// tried even after an earlier write failed, when the journal can still be kept whole
    /// (the failed line was taken back); nothing runs after a closing record.
    fn append_closing(&self, kind: &str, fields: &str) -> Result<u64, JournalError> {
        self.append(kind, fields)
    }

    /// Makes every record appended so far durable (fsync). Called at the end of each batch.
    fn sync(&self) -> Result<(), JournalError>;

    /// The session id written in every record.
    fn session(&self) -> &str;
}

/// Serializes `fields` and appends it.
pub fn append<T: serde::Serialize + ?Sized>(
    journal: &dyn Journal,
    kind: &str,
    fields: &T,
) -> Result<u64, JournalError> {
    let text = serde_json::to_string(fields).map_err(|e| JournalError::Other(e.to_string()))?;
    journal.append(kind, &text)
}

/// Serializes `fields` and appends it as a closing record (see [`Journal::append_closing`]).
pub fn append_closing<T: serde::Serialize + ?Sized>(
    journal: &dyn Journal,
    kind: &str,
    fields: &T,
) -> Result<u64, JournalError> {
    let text = serde_json::to_string(fields).map_err(|e| JournalError::Other(e.to_string()))?;
    journal.append_closing(kind, &text)
}

/// The hash chain: builds each line and remembers the last line's hash.
#[derive(Debug)]
pub(crate) struct Chain {
    seq: u64,
    prev: String,
}

impl Chain {
    pub(crate) fn new() -> Self {
        Chain {
            seq: 0,
            prev: GENESIS.to_owned(),
        }
    }

    /// The next line (with its trailing newline) and its hash; call [`Chain::commit`] once it
    /// is written.
    pub(crate) fn line(
        &self,
        session: &str,
        kind: &str,
        fields: &str,
    ) -> Result<(String, String, u64), JournalError> {
        let inner = fields.trim();
        let inner = inner
            .strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .ok_or_else(|| JournalError::NotAnObject(truncate(fields)))?
            .trim();
        let seq = self.seq + 1;
        let mut line = String::with_capacity(160 + inner.len());
        line.push_str(r#"{"v":"#);
        line.push_str(&FORMAT_VERSION.to_string());
        line.push_str(r#","seq":"#);
        line.push_str(&seq.to_string());
        line.push_str(r#","ts":""#);
        line.push_str(&rfc3339_millis(std::time::SystemTime::now()));
        line.push_str(r#"","session":"#);
        push_json_str(&mut line, session);
        line.push_str(r#","kind":"#);
        push_json_str(&mut line, kind);
        if !inner.is_empty() {
            line.push(',');
            line.push_str(inner);
        }
        line.push_str(r#","prev":""#);
        line.push_str(&self.prev);
        line.push_str("\"}");
        let hash = hex(&Sha256::digest(line.as_bytes()));
        line.push('\n');
        Ok((line, hash, seq))
    }

    pub(crate) fn commit(&mut self, hash: String, seq: u64) {
        self.prev = hash;
        self.seq = seq;
    }
}

fn push_json_str(out: &mut String, s: &str) {
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// A journal kept in memory, in the same line format as the file journal. For tests, `dsh
/// check`-like dry runs and benchmarks; it records, so nothing runs unrecorded.
#[derive(Debug)]
pub struct MemoryJournal {
    session: String,
    state: Mutex<(Chain, Vec<String>)>,
}

impl MemoryJournal {
    pub fn new(session: impl Into<String>) -> Self {
        MemoryJournal {
            session: session.into(),
            state: Mutex::new((Chain::new(), Vec::new())),
        }
    }

    /// Every line written so far, without newlines.
    pub fn lines(&self) -> Vec<String> {
        match self.state.lock() {
            Ok(s) => s.1.clone(),
            Err(p) => p.into_inner().1.clone(),
        }
    }
}

impl Journal for MemoryJournal {
    fn append(&self, kind: &str, fields: &str) -> Result<u64, JournalError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| JournalError::Broken("memory".to_owned()))?;
        let (mut line, hash, seq) = state.0.line(&self.session, kind, fields)?;
        line.pop();
        state.1.push(line);
        state.0.commit(hash, seq);
        Ok(seq)
    }

    fn sync(&self) -> Result<(), JournalError> {
        Ok(())
    }

    fn session(&self) -> &str {
        &self.session
    }
}
