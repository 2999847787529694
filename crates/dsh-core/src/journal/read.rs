//! Reading a journal back and verifying its chain (`dsh sessions verify`, resume, tests).

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{GENESIS, Record, hex};

/// A journal as read: its complete records, typed, and the torn last line if the writer died
/// mid-write (reported, then ignored).
#[derive(Debug)]
pub struct Transcript {
    pub records: Vec<Entry>,
    /// The bytes after the last newline, if any: a torn write from a crash.
    pub torn_tail: Option<String>,
}

/// One record as read back: the envelope, the typed record, and the line as JSON.
#[derive(Debug, PartialEq)]
pub struct Entry {
    pub seq: u64,
    pub ts: String,
    pub session: String,
    /// The agent that wrote it (`sub-N`); `None` is the main agent.
    pub agent: Option<String>,
    /// The hex SHA-256 of the line's bytes: the next line's `prev`, and what a resumed
    /// session's `resumed_from.hash` names.
    pub hash: String,
    pub record: Record<'static>,
    /// The whole line, envelope included, for readers that want it untyped (`--json`
    /// comparisons, field-by-field tests).
    pub json: Map<String, Value>,
}

impl Entry {
    /// The record's kind, as written.
    pub fn kind(&self) -> &str {
        self.json.get("kind").and_then(Value::as_str).unwrap_or("")
    }
}

impl Transcript {
    /// The records of one kind, in order, as JSON.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Map<String, Value>> {
        self.records
            .iter()
            .filter(move |e| e.kind() == kind)
            .map(|e| &e.json)
    }

    /// Every record's kind, in order.
    pub fn kinds(&self) -> Vec<&str> {
        self.records.iter().map(Entry::kind).collect()
    }

    /// Every record as JSON, in order.
    pub fn json(&self) -> impl Iterator<Item = &Map<String, Value>> {
        self.records.iter().map(|e| &e.json)
    }
}

/// Why a journal cannot be read. Line numbers count from 1; every line error names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: line {line} is not a JSON object: {reason}")]
    NotJson {
        path: String,
        line: usize,
        reason: String,
    },
    /// The line is JSON but not a record: an unknown kind, a missing or mistyped field.
    #[error("{path}: line {line} is not a journal record: {reason}")]
    BadRecord {
        path: String,
        line: usize,
        reason: String,
    },
    #[error("{path}: line {line} has seq {found:?}, expected {expected}")]
    BadSeq {
        path: String,
        line: usize,
        expected: u64,
        found: Option<u64>,
    },
    #[error("{path}: line {line}: `prev` does not match the hash of line {}: the chain is broken", line - 1)]
    BrokenChain { path: String, line: usize },
    #[error("{path}: line {line}: the first record's `prev` must be 64 zeros")]
    BadGenesis { path: String, line: usize },
    /// A blob the record names is missing, unreadable or altered ([`super::Stored`]).
    #[error("{path}: line {line}: {reason}")]
    Blob {
        path: String,
        line: usize,
        reason: String,
    },
}

/// The envelope's fields, besides `kind`.
#[derive(Deserialize)]
struct Envelope {
    seq: Option<u64>,
    #[serde(default)]
    ts: String,
    #[serde(default)]
    session: String,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    prev: String,
}

/// Reads the journal at `path`, checking that it is well-formed — every line a record of a
/// known kind with its fields — and that `seq` and the `prev` chain are intact.
pub fn read_journal(path: impl AsRef<Path>) -> Result<Transcript, ReadError> {
    let path = path.as_ref();
    let display = || path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| ReadError::Io {
        path: display(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let (complete, torn) = match text.rfind('\n') {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => ("", &text[..]),
    };
    let torn_tail = (!torn.is_empty()).then(|| torn.to_owned());
    let mut records = Vec::new();
    let mut prev_hash = GENESIS.to_owned();
    if !complete.is_empty() {
        for (i, line) in complete.split('\n').enumerate() {
            let n = i + 1;
            let value: Value = serde_json::from_str(line).map_err(|e| ReadError::NotJson {
                path: display(),
                line: n,
                reason: e.to_string(),
            })?;
            let bad = |e: serde_json::Error| ReadError::BadRecord {
                path: display(),
                line: n,
                reason: e.to_string(),
            };
            let envelope = Envelope::deserialize(&value).map_err(bad)?;
            if envelope.seq != Some(n as u64) {
                return Err(ReadError::BadSeq {
                    path: display(),
                    line: n,
                    expected: n as u64,
                    found: envelope.seq,
                });
            }
            if envelope.prev != prev_hash {
                return Err(if n == 1 {
                    ReadError::BadGenesis {
                        path: display(),
                        line: n,
                    }
                } else {
                    ReadError::BrokenChain {
                        path: display(),
                        line: n,
                    }
                });
            }
            let record = Record::deserialize(&value).map_err(bad)?;
            let Value::Object(map) = value else {
                return Err(ReadError::NotJson {
                    path: display(),
                    line: n,
                    reason: "not an object".to_owned(),
                });
            };
            let hash = hex(&Sha256::digest(line.as_bytes()));
            prev_hash.clone_from(&hash);
            records.push(Entry {
                seq: n as u64,
                ts: envelope.ts,
                session: envelope.session,
                agent: envelope.agent,
                hash,
                record,
                json: map,
            });
        }
    }
    Ok(Transcript { records, torn_tail })
}
