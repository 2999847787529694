//! The journal reader (dsh-core's `read_journal`) and `dsh sessions verify` (dsh-agent's
//! `sessions::verify`) on a journal file: they never panic, and agree — a file the reader
//! accepts is verified with as many records, one it refuses has a problem.
//!
//! The first byte's bit 0 picks the mode: the rest of the input is the file as it is, or (1)
//! its lines are records whose envelope is set right — `seq`, the `prev` hash chain, the
//! session — so the fuzzer reaches the records' own fields instead of the chain check; then
//! the reader must find no chain fault.
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

use dsh_core::journal::{ReadError, read_journal, sha256_hex};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const SESSION: &str = "20261201T144500Z-39929f0a";

fn file() -> &'static (PathBuf, tempfile::TempDir) {
    static FILE: OnceLock<(PathBuf, tempfile::TempDir)> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        (dir.path().join(format!("{SESSION}.jsonl")), dir)
    })
}

/// The lines with their envelopes set right; `None` when a line is not a JSON object.
fn chained(text: &str) -> Option<String> {
    let (complete, torn) = match text.rfind('\n') {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => ("", text),
    };
    let mut out = String::new();
    let mut prev = "0".repeat(64);
    if !complete.is_empty() {
        for (i, line) in complete.split('\n').enumerate() {
            let Ok(Value::Object(mut record)) = serde_json::from_str::<Value>(line) else {
                return None;
            };
            record.insert("seq".to_owned(), Value::from(i + 1));
            record.insert("session".to_owned(), Value::from(SESSION));
            record.insert("prev".to_owned(), Value::from(prev.as_str()));
            let line = Value::Object(record).to_string();
            prev = sha256_hex(line.as_bytes());
            out.push_str(&line);
            out.push('\n');
        }
    }
    out.push_str(torn);
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (path, _) = file();
    let chain = mode & 1 == 1;
    let bytes = if chain {
        let Some(text) = chained(&String::from_utf8_lossy(rest)) else {
            return;
        };
        text.into_bytes()
    } else {
        rest.to_vec()
    };
    std::fs::write(path, &bytes).expect("the journal written");
    let read = read_journal(path);
    let checks = dsh_agent::sessions::verify(path);
    let check = checks.first().expect("verify checks the file it is given");
    match &read {
        Ok(t) if check.artefact.is_none() => assert_eq!(
            check.records,
            t.records.len(),
            "verify counts other records than the reader: {check:?}"
        ),
        Ok(_) => {}
        Err(e) => {
            assert!(
                check.problem.is_some() || check.artefact.is_some(),
                "the reader refuses the file ({e}), verify finds no problem: {check:?}"
            );
            if chain {
                assert!(
                    !matches!(
                        e,
                        ReadError::BadSeq { .. }
                            | ReadError::BrokenChain { .. }
                            | ReadError::BadGenesis { .. }
                    ),
                    "a chain written right is refused: {e}"
                );
            }
        }
    }
});
