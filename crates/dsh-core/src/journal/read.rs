//! Reading a journal back and verifying its chain (`dsh sessions verify`, resume, tests).

use std::path::Path;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{GENESIS, hex};

/// A journal as read: its complete records, and the torn last line if the writer died
/// mid-write (reported, then ignored).
#[derive(Debug)]
pub struct Transcript {
    pub records: Vec<Map<String, Value>>,
    /// The bytes after the last newline, if any: a torn write from a crash.
    pub torn_tail: Option<String>,
}

impl Transcript {
    /// The records of one kind, in order.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Map<String, Value>> {
        self.records
            .iter()
            .filter(move |r| r.get("kind").and_then(Value::as_str) == Some(kind))
    }

    /// Every record's kind, in order.
    pub fn kinds(&self) -> Vec<&str> {
        self.records
            .iter()
            .map(|r| r.get("kind").and_then(Value::as_str).unwrap_or(""))
            .collect()
    }
}

/// Why a journal does not verify. Line numbers count from 1.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("line {line} is not a JSON object: {reason}")]
    NotJson { line: usize, reason: String },
    #[error("line {line} has seq {found:?}, expected {expected}")]
    BadSeq {
        line: usize,
        expected: u64,
        found: Option<u64>,
    },
    #[error("line {line}: `prev` does not match the hash of line {}: the chain is broken", line - 1)]
    BrokenChain { line: usize },
    #[error("line {line}: the first record's `prev` must be 64 zeros")]
    BadGenesis { line: usize },
}

/// Reads the journal at `path`, checking that it is well-formed and that `seq` and the `prev`
/// chain are intact.
pub fn read_journal(path: impl AsRef<Path>) -> Result<Transcript, ReadError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| ReadError::Io {
        path: path.display().to_string(),
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
                line: n,
                reason: e.to_string(),
            })?;
            let Value::Object(map) = value else {
                return Err(ReadError::NotJson {
                    line: n,
                    reason: "not an object".to_owned(),
                });
            };
            let seq = map.get("seq").and_then(Value::as_u64);
            if seq != Some(n as u64) {
                return Err(ReadError::BadSeq {
                    line: n,
                    expected: n as u64,
                    found: seq,
                });
            }
            let prev = map.get("prev").and_then(Value::as_str).unwrap_or("");
            if prev != prev_hash {
                return Err(if n == 1 {
                    ReadError::BadGenesis { line: n }
                } else {
                    ReadError::BrokenChain { line: n }
                });
            }
            prev_hash = hex(&Sha256::digest(line.as_bytes()));
            records.push(map);
        }
    }
    Ok(Transcript { records, torn_tail })
}
