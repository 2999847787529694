//! The spill store: full outputs too large to hand the model, kept on disk so the model can page
//! them back (SPEC P6). A disposition decides *when* to spill; this decides *where* and *how*.
//!
//! Each spill is one file `<dir>/<id>.txt`, mode 0600, where `dir` is per session (e.g.
//! `DSH_HOME/spill/<session-id>`). Ids are generated here and checked strictly when read back,
//! so an id the model sends can never name another path.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why a spill could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpillError {
    #[error("`{0}` is not an output id (ids look like `out-call-3`)")]
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
}

impl SpillStore {
    /// A store in `dir` (created on first save).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        SpillStore { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Saves `content` and returns its id: `out-` and the call id (characters outside
    /// `A-Za-z0-9_-` replaced, at most 48 kept), with `-2`, `-3`, … if the call spills twice.
    /// Ids are predictable on purpose, so a scripted batch can page an output back; the store
    /// is per session, so an id names nothing of another session.
    pub fn save(&self, call_id: &str, content: &str) -> Result<String, SpillError> {
        let io = |source| SpillError::Io {
            path: self.dir.display().to_string(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let stem: String = call_id
            .chars()
            .take(48)
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let stem = if stem.is_empty() {
            "call".to_owned()
        } else {
            stem
        };
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        for n in 1..=1000 {
            let id = if n == 1 {
                format!("out-{stem}")
            } else {
                format!("out-{stem}-{n}")
            };
            match options.open(self.dir.join(format!("{id}.txt"))) {
                Ok(mut file) => {
                    file.write_all(content.as_bytes()).map_err(io)?;
                    return Ok(id);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(e)),
            }
        }
        Err(io(std::io::Error::other("too many spills for one call")))
    }

    /// Reads `limit` characters from character `offset` of the output `id`.
    pub fn read(&self, id: &str, offset: usize, limit: usize) -> Result<SpillPage, SpillError> {
        let valid = id.strip_prefix("out-").is_some_and(|rest| {
            !rest.is_empty()
                && rest.len() <= 56
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
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
            "out-a/b",
            "",
            "out-",
            "x-1",
        ] {
            assert!(
                matches!(store.read(bad, 0, 10), Err(SpillError::BadId(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            store.read("out-never-saved", 0, 10),
            Err(SpillError::Unknown(_))
        ));
    }

    #[test]
    fn ids_follow_the_call_and_stay_distinct() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::new(dir.path());
        assert_eq!(store.save("call-3", "x").unwrap(), "out-call-3");
        assert_eq!(store.save("call-3", "y").unwrap(), "out-call-3-2");
        assert_eq!(store.save("../etc", "z").unwrap(), "out-___etc");
        assert_eq!(store.read("out-call-3-2", 0, 5).unwrap().text, "y");
    }
}
