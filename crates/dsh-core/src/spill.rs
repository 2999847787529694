//! The spill store: full outputs too large to hand the model, kept on disk so the model can page
//! them back (SPEC P6). A disposition decides *when* to spill; this decides *where* and *how*.
//!
//! Each spill is one file `<dir>/<id>.txt`, mode 0600, where `dir` is per session (e.g.
//! `DSH_HOME/spill/<session-id>`). Ids are generated here and checked strictly when read back,
//! so an id the model sends can never name another path.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// Why a spill could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpillError {
    #[error("`{0}` is not an output id (ids look like `out-1a2b3c4d5e6f7a8b`)")]
    BadId(String),
    #[error("there is no saved output `{0}` in this session")]
    Unknown(String),
    #[error("the spill store {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// One page of a spilled output, in characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpillPage {
    pub text: String,
    /// The character offset of `text`.
    pub offset: usize,
    /// Characters in the whole output.
    pub total_chars: usize,
}

impl SpillPage {
    /// Whether more follows this page.
    pub fn has_more(&self) -> bool {
        self.offset + self.text.chars().count() < self.total_chars
    }
}

/// The spill directory of one session.
#[derive(Debug)]
pub struct SpillStore {
    dir: PathBuf,
    salt: String,
    counter: AtomicU64,
}

impl SpillStore {
    /// A store in `dir` (created on first save).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        SpillStore {
            salt: format!("{}:{:?}", dir.display(), std::time::SystemTime::now()),
            dir,
            counter: AtomicU64::new(0),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Saves `content` and returns its id.
    pub fn save(&self, call_id: &str, content: &str) -> Result<String, SpillError> {
        let io = |source| SpillError::Io {
            path: self.dir.display().to_string(),
            source,
        };
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let digest = Sha256::digest(format!("{}:{n}:{call_id}", self.salt).as_bytes());
        let id = format!("out-{}", crate::journal::hex(&digest[..8]));
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options
            .open(self.dir.join(format!("{id}.txt")))
            .map_err(io)?;
        file.write_all(content.as_bytes()).map_err(io)?;
        Ok(id)
    }

    /// Reads `limit` characters from character `offset` of the output `id`.
    pub fn read(&self, id: &str, offset: usize, limit: usize) -> Result<SpillPage, SpillError> {
        let valid = id.len() == 20
            && id.starts_with("out-")
            && id[4..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
        if !valid {
            return Err(SpillError::BadId(id.to_owned()));
        }
        let path = self.dir.join(format!("{id}.txt"));
        let text = std::fs::read_to_string(&path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => SpillError::Unknown(id.to_owned()),
            _ => SpillError::Io {
                path: path.display().to_string(),
                source,
            },
        })?;
        let total_chars = text.chars().count();
        let page: String = text.chars().skip(offset).take(limit).collect();
        Ok(SpillPage {
            text: page,
            offset: offset.min(total_chars),
            total_chars,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_output_pages_back_by_characters() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::new(dir.path().join("s1"));
        let text = "héllo wörld ".repeat(100);
        let id = store.save("call-1", &text).unwrap();
        let first = store.read(&id, 0, 10).unwrap();
        assert_eq!(first.text, "héllo wörl");
        assert_eq!(first.total_chars, 1200);
        assert!(first.has_more());
        let last = store.read(&id, 1194, 100).unwrap();
        assert_eq!(last.text, "wörld ");
        assert!(!last.has_more());
        let all: String = (0..12)
            .map(|i| store.read(&id, i * 100, 100).unwrap().text)
            .collect();
        assert_eq!(all, text);
    }

    #[test]
    fn ids_cannot_name_other_paths() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::new(dir.path());
        for bad in [
            "../../etc/passwd",
            "out-../../x",
            "out-ABCDEF0123456789",
            "",
            "out-1",
        ] {
            assert!(
                matches!(store.read(bad, 0, 10), Err(SpillError::BadId(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            store.read("out-0123456789abcdef", 0, 10),
            Err(SpillError::Unknown(_))
        ));
    }

    #[test]
    fn ids_are_distinct() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::new(dir.path());
        let a = store.save("c", "x").unwrap();
        let b = store.save("c", "x").unwrap();
        assert_ne!(a, b);
    }
}
