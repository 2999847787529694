//! Large arguments (DESIGN §6): an argument over [`INLINE_MAX`] bytes is not written into its
//! record. Its bytes go to a file named by their SHA-256 in a directory beside the journal —
//! `<journal-stem>.blobs/sha256-<hex>` — written and fsynced (file, then directory) before the
//! record that names it, and the record holds `{"$blob":"sha256:<hex>","bytes":N}` in the
//! argument's place. A crash therefore never leaves a record naming a blob that is not on
//! disk (SPEC P1: the call is on record before it runs, argument and all).
//!
//! Two fields may be stored this way, each typed [`Stored`]:
//!
//! * `assistant_message`'s `tool_calls[].arguments` — the model's raw text; the blob holds
//!   those bytes.
//! * `tool_call`'s `args` — the parsed arguments; the blob holds JSON text whose value they are.
//!
//! A model's call is journaled twice (its raw text, then the parsed arguments), and one blob
//! serves both: the blob of the raw text is also named by the `tool_call` whose arguments
//! parse from it ([`BlobStore`] remembers which JSON texts parse to what, by digest), so a
//! 10 MB argument costs one 10 MB file.
//!
//! An argument at or under [`INLINE_MAX`] stays inline, exactly as before. `arguments` is a
//! string inline and an object when stored, so it cannot be misread; `args` is any JSON
//! value, so an inline `args` that *looks like* a reference (an object of exactly `$blob`
//! and `bytes`) is stored as a blob whatever its size — a reader may then take every such
//! object for a reference.
//!
//! Readers get references back ([`read_journal`](super::read_journal) reads the file alone);
//! [`resolve_blobs`] reads the blobs into the records (resume, replay), and [`check_blobs`]
//! checks each exists and hashes to its name without keeping it (`dsh sessions verify`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Journal, JournalError, ReadError, Record, Transcript, hex};

/// The largest argument kept inline in its record, in bytes (1 MiB); a larger one is stored
/// in a blob.
pub const INLINE_MAX: usize = 1 << 20;

/// A record's name for a stored argument: its content's SHA-256 and its length.
/// Serialized as `{"$blob":"sha256:<hex>","bytes":N}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BlobRef {
    /// 64 lowercase hex digits.
    digest: String,
    bytes: u64,
}

impl BlobRef {
    /// The reference `value` is: an object of exactly the keys `$blob` (`sha256:` and 64
    /// lowercase hex digits) and `bytes` (an unsigned integer); `None` for anything else.
    pub fn from_value(value: &Value) -> Option<BlobRef> {
        let map = value.as_object()?;
        if map.len() != 2 {
            return None;
        }
        let digest = map.get("$blob")?.as_str()?.strip_prefix("sha256:")?;
        let bytes = map.get("bytes")?.as_u64()?;
        let hex_ok = digest.len() == 64
            && digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        hex_ok.then(|| BlobRef {
            digest: digest.to_owned(),
            bytes,
        })
    }

    /// The SHA-256 of the content, in lowercase hex.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The content's length in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The blob's file name: `sha256-<hex>`.
    pub fn file_name(&self) -> String {
        format!("sha256-{}", self.digest)
    }
}

impl fmt::Display for BlobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "blob sha256:{} ({} bytes)", self.digest, self.bytes)
    }
}

impl Serialize for BlobRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("$blob", &format!("sha256:{}", self.digest))?;
        map.serialize_entry("bytes", &self.bytes)?;
        map.end()
    }
}

/// An argument as a record holds it: inline, or named by a [`BlobRef`] (see the module docs).
pub enum Stored<'a, T: ?Sized + ToOwned> {
    Inline(Cow<'a, T>),
    Blob(BlobRef),
}

impl<T: ?Sized + ToOwned> Stored<'_, T> {
    /// The argument, when the record holds it (always, once [`resolve_blobs`] ran).
    pub fn inline(&self) -> Option<&T> {
        match self {
            Stored::Inline(v) => Some(v),
            Stored::Blob(_) => None,
        }
    }

    /// The blob the record names instead of the argument.
    pub fn blob(&self) -> Option<&BlobRef> {
        match self {
            Stored::Inline(_) => None,
            Stored::Blob(r) => Some(r),
        }
    }
}

impl<'a> Stored<'a, str> {
    /// `text` (a model's raw argument text) as `assistant_message` records it: inline up to
    /// [`INLINE_MAX`] bytes, else in a blob of `journal`'s store, durable before this returns.
    /// A journal without a store (in memory) keeps it inline.
    pub fn text(journal: &dyn Journal, text: &'a str) -> Result<Self, JournalError> {
        let Some(store) = journal.blobs().filter(|_| text.len() > INLINE_MAX) else {
            return Ok(Stored::Inline(Cow::Borrowed(text)));
        };
        let blob = store.put(text.as_bytes())?;
        // The `tool_call` that follows records the parsed arguments: let it name this blob.
        if let Ok(parsed) = serde_json::from_str::<Value>(text)
            && let Ok(compact) = serde_json::to_string(&parsed)
        {
            store.alias(sha256(compact.as_bytes()), &blob);
        }
        Ok(Stored::Blob(blob))
    }
}

impl<'a> Stored<'a, Value> {
    /// `value` (a call's arguments) as `tool_call` records it: inline when its JSON text is
    /// at most [`INLINE_MAX`] bytes and it does not look like a reference, else in a blob of
    /// `journal`'s store (the model's raw text, when an `assistant_message` stored that and
    /// it parses to `value`), durable before this returns. A journal without a store keeps
    /// it inline.
    pub fn value(journal: &dyn Journal, value: &'a Value) -> Result<Self, JournalError> {
        let Some(store) = journal.blobs() else {
            return Ok(Stored::Inline(Cow::Borrowed(value)));
        };
        if json_len_at_most(value, INLINE_MAX) && BlobRef::from_value(value).is_none() {
            return Ok(Stored::Inline(Cow::Borrowed(value)));
        }
        let compact =
            serde_json::to_string(value).map_err(|e| JournalError::Other(e.to_string()))?;
        let digest = sha256(compact.as_bytes());
        if let Some(raw) = store.aliased(&digest) {
            return Ok(Stored::Blob(raw));
        }
        Ok(Stored::Blob(store.put_hashed(compact.as_bytes(), digest)?))
    }
}

/// Whether `value`'s compact JSON text is at most `max` bytes (counted, not built).
fn json_len_at_most(value: &Value, max: usize) -> bool {
    struct Count {
        n: usize,
        max: usize,
    }
    impl Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n += buf.len();
            if self.n > self.max {
                return Err(std::io::Error::other("over"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Count { n: 0, max }, value).is_ok()
}

impl<T: ?Sized + ToOwned + fmt::Debug> fmt::Debug for Stored<'_, T>
where
    T::Owned: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stored::Inline(v) => f.debug_tuple("Inline").field(v).finish(),
            Stored::Blob(r) => f.debug_tuple("Blob").field(r).finish(),
        }
    }
}

impl<T: ?Sized + ToOwned> Clone for Stored<'_, T> {
    fn clone(&self) -> Self {
        match self {
            Stored::Inline(v) => Stored::Inline(v.clone()),
            Stored::Blob(r) => Stored::Blob(r.clone()),
        }
    }
}

impl<T: ?Sized + ToOwned + PartialEq> PartialEq for Stored<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Stored::Inline(a), Stored::Inline(b)) => a == b,
            (Stored::Blob(a), Stored::Blob(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Stored<'_, str> {}

impl<'a, T: ?Sized + ToOwned> From<&'a T> for Stored<'a, T> {
    fn from(v: &'a T) -> Self {
        Stored::Inline(Cow::Borrowed(v))
    }
}

impl From<String> for Stored<'_, str> {
    fn from(v: String) -> Self {
        Stored::Inline(Cow::Owned(v))
    }
}

impl From<Value> for Stored<'_, Value> {
    fn from(v: Value) -> Self {
        Stored::Inline(Cow::Owned(v))
    }
}

impl<T: ?Sized + ToOwned + Serialize> Serialize for Stored<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Stored::Inline(v) => v.serialize(s),
            Stored::Blob(r) => r.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Stored<'_, str> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(Stored::Inline(Cow::Owned(s))),
            other => BlobRef::from_value(&other)
                .map(Stored::Blob)
                .ok_or_else(|| {
                    D::Error::custom(
                        "expected the arguments' text, or {\"$blob\":\"sha256:<hex>\",\"bytes\":N}",
                    )
                }),
        }
    }
}

impl<'de> Deserialize<'de> for Stored<'_, Value> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Ok(match BlobRef::from_value(&value) {
            Some(r) => Stored::Blob(r),
            None => Stored::Inline(Cow::Owned(value)),
        })
    }
}

/// What a stored argument turns back into from its blob's bytes.
pub trait FromBlob: ToOwned {
    fn from_blob(bytes: Vec<u8>) -> Result<Self::Owned, String>;
}

impl FromBlob for str {
    fn from_blob(bytes: Vec<u8>) -> Result<String, String> {
        String::from_utf8(bytes).map_err(|e| format!("it is not UTF-8 text: {e}"))
    }
}

impl FromBlob for Value {
    fn from_blob(bytes: Vec<u8>) -> Result<Value, String> {
        serde_json::from_slice(&bytes).map_err(|e| format!("it is not JSON: {e}"))
    }
}

impl<T: ?Sized + FromBlob> Stored<'_, T> {
    /// Reads the blob this names, if it names one, into the record.
    fn resolve(&mut self, store: &BlobStore) -> Result<(), String> {
        if let Stored::Blob(r) = self {
            let value = T::from_blob(store.get(r)?)?;
            *self = Stored::Inline(Cow::Owned(value));
        }
        Ok(())
    }
}

/// The blobs of one journal: the directory `<journal-stem>.blobs` beside it.
#[derive(Debug)]
pub struct BlobStore {
    dir: PathBuf,
    /// Digest of the compact JSON text a stored raw argument parses to → that raw blob.
    aliases: Mutex<HashMap<String, BlobRef>>,
}

impl BlobStore {
    /// The store of the journal at `journal`: `<journal without its extension>.blobs`.
    pub fn beside(journal: &Path) -> BlobStore {
        BlobStore {
            dir: journal.with_extension("blobs"),
            aliases: Mutex::new(HashMap::new()),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the blob `r` is.
    pub fn path_of(&self, r: &BlobRef) -> PathBuf {
        self.dir.join(r.file_name())
    }

    /// Stores `bytes` and returns their reference; the blob is durable (file and directory
    /// entry fsynced) before this returns.
    pub fn put(&self, bytes: &[u8]) -> Result<BlobRef, JournalError> {
        self.put_hashed(bytes, sha256(bytes))
    }

    /// [`BlobStore::put`] with the digest already computed.
    fn put_hashed(&self, bytes: &[u8], digest: String) -> Result<BlobRef, JournalError> {
        let r = BlobRef {
            digest,
            bytes: bytes.len() as u64,
        };
        let path = self.path_of(&r);
        let io = |source| JournalError::Io {
            path: path.display().to_string(),
            source,
        };
        // Content-addressed: a blob already there (this session stored the same bytes, and
        // synced them, before) is the same blob.
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == r.bytes) {
            return Ok(r);
        }
        if !self.dir.is_dir() {
            make_dir(&self.dir).map_err(io)?;
            if let Some(parent) = self.dir.parent() {
                sync_dir(parent).map_err(io)?;
            }
        }
        // Written whole under a temporary name, then renamed: a blob under its own name is
        // always complete.
        static TMP: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".tmp-{}-{}-{}",
            r.digest,
            std::process::id(),
            TMP.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut file = create_private(&tmp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            sync_dir(&self.dir)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(e));
        }
        Ok(r)
    }

    /// Records that the JSON text whose digest is `digest` is the value `raw`'s text parses to.
    fn alias(&self, digest: String, raw: &BlobRef) {
        if digest != raw.digest {
            self.aliases
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(digest, raw.clone());
        }
    }

    fn aliased(&self, digest: &str) -> Option<BlobRef> {
        self.aliases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(digest)
            .cloned()
    }

    /// The blob's bytes, checked against its reference.
    pub fn get(&self, r: &BlobRef) -> Result<Vec<u8>, String> {
        let path = self.path_of(r);
        let bytes = std::fs::read(&path).map_err(|e| self.unreadable(r, &path, &e))?;
        let found = sha256(&bytes);
        if found != r.digest || bytes.len() as u64 != r.bytes {
            return Err(altered(r, &path, &found, bytes.len() as u64));
        }
        Ok(bytes)
    }

    /// Whether the blob exists and hashes to its name (read in pieces, not kept).
    pub fn check(&self, r: &BlobRef) -> Result<(), String> {
        let path = self.path_of(r);
        let mut file = File::open(&path).map_err(|e| self.unreadable(r, &path, &e))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0; 1 << 16];
        let mut len = 0u64;
        loop {
            let n = file
                .read(&mut buf)
                .map_err(|e| self.unreadable(r, &path, &e))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            len += n as u64;
        }
        let found = hex(&hasher.finalize());
        if found != r.digest || len != r.bytes {
            return Err(altered(r, &path, &found, len));
        }
        Ok(())
    }

    fn unreadable(&self, r: &BlobRef, path: &Path, e: &std::io::Error) -> String {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("it names {r}, which is missing ({})", path.display())
        } else {
            format!(
                "it names {r}, which cannot be read ({}): {e}",
                path.display()
            )
        }
    }
}

fn altered(r: &BlobRef, path: &Path, found: &str, len: u64) -> String {
    format!(
        "it names {r}, which was altered ({}: {len} bytes hashing to sha256:{found})",
        path.display()
    )
}

/// Every blob `record` names.
pub fn blobs_of<'r>(record: &'r Record<'_>) -> Vec<&'r BlobRef> {
    match record {
        Record::ToolCall { args, .. } => args.blob().into_iter().collect(),
        Record::AssistantMessage { tool_calls, .. } => tool_calls
            .iter()
            .filter_map(|c| c.arguments.blob())
            .collect(),
        _ => Vec::new(),
    }
}

/// Reads every blob `transcript`'s records name — from beside the journal at `path` — into
/// the records, so each argument is inline. The first missing or altered blob is an error
/// naming its record's line.
pub fn resolve_blobs(path: &Path, transcript: &mut Transcript) -> Result<(), ReadError> {
    let store = BlobStore::beside(path);
    for entry in &mut transcript.records {
        let resolved = match &mut entry.record {
            Record::ToolCall { args, .. } => args.resolve(&store),
            Record::AssistantMessage { tool_calls, .. } => tool_calls
                .iter_mut()
                .try_for_each(|c| c.arguments.resolve(&store)),
            _ => Ok(()),
        };
        resolved.map_err(|reason| ReadError::Blob {
            path: path.display().to_string(),
            line: entry.seq as usize,
            reason,
        })?;
    }
    Ok(())
}

/// Checks that every blob `transcript`'s records name exists beside the journal at `path`
/// and hashes to its name; the first that does not is an error naming its record's line.
pub fn check_blobs(path: &Path, transcript: &Transcript) -> Result<(), ReadError> {
    let store = BlobStore::beside(path);
    for entry in &transcript.records {
        for r in blobs_of(&entry.record) {
            store.check(r).map_err(|reason| ReadError::Blob {
                path: path.display().to_string(),
                line: entry.seq as usize,
                reason,
            })?;
        }
    }
    Ok(())
}

fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn create_private(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.create_new(true).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

fn make_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    match builder.create(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// Makes `dir`'s entries durable (a no-op where directories cannot be opened to sync).
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::CallSource;
    use crate::journal::{JsonlJournal, MemoryJournal, RequestedCall, SyncPolicy, read_journal};

    fn asked<'a>(arguments: Stored<'a, str>) -> Record<'a> {
        Record::AssistantMessage {
            step: 1,
            content: "".into(),
            tool_calls: vec![RequestedCall {
                id: "c1".into(),
                name: "write_file".into(),
                arguments,
            }],
            reasoning: None,
        }
    }

    fn call<'a>(args: Stored<'a, Value>) -> Record<'a> {
        Record::ToolCall {
            call_id: "c1".into(),
            name: "write_file".into(),
            args,
            source: CallSource::Model,
            parent: None,
            step: 1,
        }
    }

    /// A journal in a temp dir, its path and its blob directory.
    fn journal() -> (tempfile::TempDir, PathBuf, JsonlJournal) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let j = JsonlJournal::create(&path, "s", SyncPolicy::BatchEnd).unwrap();
        (dir, path, j)
    }

    fn blob_files(path: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(path.with_extension("blobs"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn small_arguments_stay_inline_as_before() {
        let (_dir, path, j) = journal();
        let raw = r#"{"path":"a.txt","content":"hi"}"#;
        let value: Value = serde_json::from_str(raw).unwrap();
        j.append(&asked(Stored::text(&j, raw).unwrap())).unwrap();
        j.append(&call(Stored::value(&j, &value).unwrap())).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].contains(r#""arguments":"{\"path\":\"a.txt\",\"content\":\"hi\"}""#),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains(r#""args":{"path":"a.txt","content":"hi"}"#),
            "{}",
            lines[1]
        );
        assert!(blob_files(&path).is_empty());
    }

    /// The model's text (not compact JSON) over 1 MiB: one blob, named by both records, and
    /// both read back whole.
    #[test]
    fn a_large_argument_is_one_blob_that_both_records_name() {
        let (_dir, path, j) = journal();
        let raw = format!(
            "{{ \"path\": \"a.txt\",\n  \"content\": \"{}\" }}",
            "x".repeat(INLINE_MAX)
        );
        let value: Value = serde_json::from_str(&raw).unwrap();
        j.append(&asked(Stored::text(&j, &raw).unwrap())).unwrap();
        j.append(&call(Stored::value(&j, &value).unwrap())).unwrap();
        let digest = sha256(raw.as_bytes());
        assert_eq!(blob_files(&path), [format!("sha256-{digest}")]);
        let reference = json!({"$blob": format!("sha256:{digest}"), "bytes": raw.len()});
        let mut t = read_journal(&path).unwrap();
        assert_eq!(t.records[0].json["tool_calls"][0]["arguments"], reference);
        assert_eq!(t.records[1].json["args"], reference);
        assert!(std::fs::metadata(&path).unwrap().len() < 2048);
        check_blobs(&path, &t).unwrap();
        resolve_blobs(&path, &mut t).unwrap();
        assert_eq!(t.records[0].record, asked(Stored::from(raw.as_str())));
        assert_eq!(t.records[1].record, call(Stored::from(&value)));
    }

    /// Arguments whose JSON text the model never sent whole (a call made by a program, say)
    /// get a blob of their own compact text.
    #[test]
    fn large_arguments_without_an_assistant_message_get_their_own_blob() {
        let (_dir, path, j) = journal();
        let value = json!({"content": "y".repeat(INLINE_MAX)});
        j.append(&call(Stored::value(&j, &value).unwrap())).unwrap();
        let compact = serde_json::to_string(&value).unwrap();
        assert_eq!(
            blob_files(&path),
            [format!("sha256-{}", sha256(compact.as_bytes()))]
        );
        let mut t = read_journal(&path).unwrap();
        resolve_blobs(&path, &mut t).unwrap();
        assert_eq!(t.records[0].record, call(Stored::from(&value)));
    }

    /// Inline arguments that look like a reference are stored, so a reader may take every
    /// reference for one.
    #[test]
    fn arguments_shaped_like_a_reference_are_stored_whatever_their_size() {
        let (_dir, path, j) = journal();
        let value = json!({"$blob": format!("sha256:{}", "a".repeat(64)), "bytes": 3});
        let stored = Stored::value(&j, &value).unwrap();
        assert!(stored.blob().is_some());
        j.append(&call(stored)).unwrap();
        let mut t = read_journal(&path).unwrap();
        resolve_blobs(&path, &mut t).unwrap();
        assert_eq!(t.records[0].record, call(Stored::from(&value)));
    }

    #[test]
    fn a_missing_or_altered_blob_is_named_with_its_record_line() {
        let (_dir, path, j) = journal();
        j.append(&Record::UserMessage { text: "go".into() })
            .unwrap();
        let raw = format!("{{\"content\":\"{}\"}}", "z".repeat(INLINE_MAX));
        j.append(&asked(Stored::text(&j, &raw).unwrap())).unwrap();
        let blob = path
            .with_extension("blobs")
            .join(format!("sha256-{}", sha256(raw.as_bytes())));
        let t = read_journal(&path).unwrap();
        let mut bytes = std::fs::read(&blob).unwrap();
        bytes[5] = b'Z';
        std::fs::write(&blob, &bytes).unwrap();
        let e = check_blobs(&path, &t).unwrap_err().to_string();
        assert!(e.contains(": line 2: it names blob sha256:"), "{e}");
        assert!(e.contains("which was altered"), "{e}");
        let e = resolve_blobs(&path, &mut read_journal(&path).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("which was altered"), "{e}");
        std::fs::remove_file(&blob).unwrap();
        let e = check_blobs(&path, &t).unwrap_err().to_string();
        assert!(e.contains(": line 2: it names blob sha256:"), "{e}");
        assert!(e.contains("which is missing"), "{e}");
    }

    #[test]
    fn a_memory_journal_keeps_every_argument_inline() {
        let j = MemoryJournal::new("m");
        let big = "w".repeat(INLINE_MAX + 1);
        assert!(Stored::text(&j, &big).unwrap().inline().is_some());
        let value = json!({ "content": big });
        assert!(Stored::value(&j, &value).unwrap().inline().is_some());
    }

    #[test]
    fn only_an_exact_reference_reads_as_one() {
        let hex = "0".repeat(64);
        assert!(
            BlobRef::from_value(&json!({"$blob": format!("sha256:{hex}"), "bytes": 1})).is_some()
        );
        for not in [
            json!({"$blob": format!("sha256:{hex}"), "bytes": 1, "more": 1}),
            json!({"$blob": format!("sha256:{}", "A".repeat(64)), "bytes": 1}),
            json!({"$blob": format!("md5:{hex}"), "bytes": 1}),
            json!({"$blob": format!("sha256:{hex}"), "bytes": -1}),
            json!({"$blob": "sha256:00", "bytes": 1}),
        ] {
            assert!(BlobRef::from_value(&not).is_none(), "{not}");
        }
    }
}
