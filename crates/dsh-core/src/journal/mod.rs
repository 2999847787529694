//! The session journal (DESIGN §6): one JSONL record per event, hash-chained.
//!
//! Every line is `{"v":1,"seq":N,"ts":"…","session":"…","kind":"…",<fields>,"prev":"<hex>"}`
//! where `prev` is the SHA-256 of the previous line's bytes without its newline (64 zeros for
//! the first); a record written for an agent other than the main one carries
//! `"agent":"sub-N"` just before `prev`.
//!
//! What may be written is one closed enum, [`Record`]: its variants are DESIGN §6's kinds,
//! their fields the kind's fields, and the kind's name exists only in its serde tag. Writers
//! build a variant and call [`Journal::append`]; [`read_journal`] gives the same variants back
//! ([`Entry::record`]) with the envelope (`seq`, `ts`, the line's hash), and rejects a line
//! that is not JSON, or not a record of a known kind, naming the file and the line. The
//! envelope is put around the serialized record by hand (`Chain`), so a record is
//! serialized once, borrowing what it records (a `tool_result` is the [`FrozenResult`] itself,
//! not a copy).
//!
//! A call's arguments over 1 MiB are not written into `tool_call` and `assistant_message`:
//! they go first to a content-addressed blob beside the journal, durable before the record
//! that names it by digest ([`Stored`], `blob.rs`).
//!
//! The pipeline writes `tool_call` — flushed to the OS — before gate 1 (SPEC P1), so a crash
//! mid-execution leaves the call on record; `tool_started` when execution begins;
//! `tool_result` with the frozen result; `approval` and `context_attached` as they happen.
//! A write failure is a harness error: the batch stops before the next gate, so nothing runs
//! unrecorded. After one, only the closing records (`stop`, `session_end`) are still tried,
//! through [`Journal::append_closing`]: they describe the end and let nothing run.
//!
//! [`FrozenResult`]: crate::FrozenResult

mod blob;
#[cfg(all(feature = "fault-injection", unix))]
pub mod fault;
mod jsonl;
mod mirror;
mod read;
mod record;
mod time;

use std::sync::{Mutex, PoisonError};

use sha2::{Digest, Sha256};

pub use blob::{
    BlobRef, BlobStore, FromBlob, INLINE_MAX, Stored, blobs_of, check_blobs, resolve_blobs,
};
pub use jsonl::{JsonlJournal, RESERVE_BYTES, SyncPolicy};
pub use mirror::{DEFAULT_CAPACITY as MIRROR_CAPACITY, Mirror};
pub use read::{Entry, ReadError, Transcript, read_journal};
pub use record::{Held, Record, RequestedCall, ResumedFrom, Totals};
pub use time::{parse_rfc3339_millis, rfc3339_millis};

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

/// A record serialized for the journal: `{"kind":"…",<fields>[,"agent":"…"]}`. Built only
/// from a [`Record`], so every line's kind and fields are the enum's; serialized once, outside
/// any journal lock.
#[derive(Debug)]
pub struct Body {
    text: String,
}

impl Body {
    /// The record of the main agent.
    pub fn new(record: &Record<'_>) -> Result<Self, JournalError> {
        Body::build(None, record)
    }

    /// The record of the agent `agent` (`sub-N`); `None` is the main agent.
    pub fn build(agent: Option<&str>, record: &Record<'_>) -> Result<Self, JournalError> {
        let mut text =
            serde_json::to_string(record).map_err(|e| JournalError::Other(e.to_string()))?;
        if let Some(agent) = agent
            && text.ends_with('}')
        {
            text.pop();
            text.push_str(r#","agent":"#);
            push_json_str(&mut text, agent);
            text.push('}');
        }
        Ok(Body { text })
    }

    /// The record's kind, as serde named it.
    pub fn kind(&self) -> &str {
        self.text
            .strip_prefix(r#"{"kind":""#)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("")
    }

    /// The fields after the opening brace: `"kind":"…",…` without the closing brace.
    fn inner(&self) -> Result<&str, JournalError> {
        self.text
            .strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .ok_or_else(|| JournalError::NotAnObject(truncate(&self.text)))
    }
}

/// Where records go. Implementations must be safe to call from several tasks; each write
/// must have handed the line to the OS (or failed) before it returns.
pub trait Journal: Send + Sync {
    /// Appends one serialized record and returns its `seq`. `closing` marks `stop` and
    /// `session_end`: unlike other records, they are tried even after an earlier write failed,
    /// when the journal can still be kept whole (the failed line was taken back); nothing
    /// runs after a closing record.
    fn write(&self, body: &Body, closing: bool) -> Result<u64, JournalError>;

    /// Makes every record appended so far durable (fsync). Called at the end of each batch.
    fn sync(&self) -> Result<(), JournalError>;

    /// The session id written in every record.
    fn session(&self) -> &str;

    /// The `seq` of the last record written (0: none yet); `None` where the journal does not
    /// keep count.
    fn last_seq(&self) -> Option<u64> {
        None
    }

    /// Where arguments too large to journal inline go ([`Stored`]); `None`: this journal
    /// keeps every argument inline (a journal in memory).
    fn blobs(&self) -> Option<&BlobStore> {
        None
    }

    /// Appends `record` for the main agent; returns its `seq`.
    fn append(&self, record: &Record<'_>) -> Result<u64, JournalError> {
        self.write(&Body::new(record)?, false)
    }

    /// Appends `record` for the agent `agent` (`None`: main); returns its `seq`.
    fn append_as(&self, agent: Option<&str>, record: &Record<'_>) -> Result<u64, JournalError> {
        self.write(&Body::build(agent, record)?, false)
    }

    /// Appends a closing record (`stop`, `session_end`; see [`Journal::write`]).
    fn append_closing(&self, record: &Record<'_>) -> Result<u64, JournalError> {
        self.write(&Body::new(record)?, true)
    }
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
        body: &Body,
    ) -> Result<(String, String, u64), JournalError> {
        let inner = body.inner()?;
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
        line.push(',');
        line.push_str(inner);
        line.push_str(r#","prev":""#);
        line.push_str(&self.prev);
        line.push_str("\"}");
        let hash = hex(&Sha256::digest(line.as_bytes()));
        line.push('\n');
        Ok((line, hash, seq))
    }

    /// The last committed record's `seq` (0: none).
    pub(crate) fn seq(&self) -> u64 {
        self.seq
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

/// The SHA-256 of `bytes` in lowercase hex: how the journal names a line (`prev`) and a
/// content (a `checkpoint`'s pre-image).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The SHA-256 (hex) of `value` written canonically ([`canonical_json`]): a digest of what
/// a JSON value says that no map order changes — an approval recorded by one build of dsh
/// holds in another, whatever order its JSON maps keep.
pub fn json_digest(value: &serde_json::Value) -> String {
    sha256_hex(canonical_json(value).as_bytes())
}

/// `value` as compact JSON with every object's keys sorted (byte order), at any depth.
pub fn canonical_json(value: &serde_json::Value) -> String {
    fn write(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String(k.clone()).to_string());
                    out.push(':');
                    write(&map[k], out);
                }
                out.push('}');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
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
    fn write(&self, body: &Body, _closing: bool) -> Result<u64, JournalError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| JournalError::Broken("memory".to_owned()))?;
        let (mut line, hash, seq) = state.0.line(&self.session, body)?;
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

    fn last_seq(&self) -> Option<u64> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Some(state.0.seq())
    }
}
