//! The spill store: full outputs too large to hand the model, kept on disk so the model can page
//! them back (SPEC P6). A disposition decides *when* to spill; this decides *where* and *how*.
//!
//! Each spill is one file `<dir>/<id>.txt`, mode 0600, where `dir` is per session (e.g.
//! `DSH_HOME/spill/<session-id>`). Ids are generated here and checked strictly when read back,
//! so an id the model sends can never name another path.
//!
//! A resumed session's history still names the outputs its earlier sessions spilled, so a store
//! may also read (never write) the spill directories of the chain it continues. New ids skip
//! every id an earlier directory holds, so an id names one output across the whole chain.
//!
//! A store may be given a [`Scrub`] (the session's redactor): every text it saves passes it
//! first, so a file under `DSH_HOME` never holds what the model and the journal may not see —
//! including what a tool spills on its own before gate 5 (`run_shell`).

use std::borrow::Cow;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a spill could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpillError {
    #[error("`{0}` is not an output id (ids look like `out-call-3`)")]
    BadId(String),
    #[error("there is no saved output `{0}` in this session or the sessions it resumes")]
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

/// A rewrite every text passes before a store keeps it (a redactor replacing secrets with
/// markers): `None` when it leaves the text as it is. A panic in it propagates to whoever
/// saves, which fails closed: a disposition's panic withholds the result, a tool's is
/// `crashed`.
pub type Scrub = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The spill directory of one session, and those of the sessions it resumes.
pub struct SpillStore {
    dir: PathBuf,
    /// The spill directories of the resumed chain, newest first: read, never written.
    earlier: Vec<PathBuf>,
    scrub: Option<Scrub>,
}

impl std::fmt::Debug for SpillStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillStore")
            .field("dir", &self.dir)
            .field("earlier", &self.earlier)
            .field("scrub", &self.scrub.is_some())
            .finish()
    }
}

impl SpillStore {
    /// A store in `dir` (created on first save).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        SpillStore {
            dir,
            earlier: Vec::new(),
            scrub: None,
        }
    }

    /// Every text saved passes `scrub` first.
    #[must_use]
    pub fn with_scrub(mut self, scrub: Scrub) -> Self {
        self.scrub = Some(scrub);
        self
    }

    /// `text` as this store would keep it. A tool that shows part of an output and spills
    /// the whole (`run_shell`) scrubs the whole first, so that what it shows, counts and
    /// saves agree, and no cut can split a secret into halves that no longer look like one.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.scrub.as_ref().and_then(|s| s(text)) {
            Some(scrubbed) => Cow::Owned(scrubbed),
            None => Cow::Borrowed(text),
        }
    }

    /// Also reads the outputs saved in `dirs` (the spill directories of the sessions this
    /// one resumes, newest first).
    #[must_use]
    pub fn with_earlier(mut self, dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        self.earlier = dirs.into_iter().collect();
        self
    }

    /// Every directory an id is looked up in, this session's first.
    fn dirs(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.dir.as_path()).chain(self.earlier.iter().map(PathBuf::as_path))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Saves `content` and returns its id: `out-` and the call id (characters outside
    /// `A-Za-z0-9_-` replaced, at most 48 kept), with `-2`, `-3`, … if the call spills twice.
    /// Ids are predictable on purpose, so a scripted batch can page an output back; the store
    /// is per session, so an id names nothing of another session. The content passes the
    /// store's [`Scrub`] first, if it has one.
    pub fn save(&self, call_id: &str, content: &str) -> Result<String, SpillError> {
        let content = self.scrub(content);
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
            let name = format!("{id}.txt");
            if self.earlier.iter().any(|d| d.join(&name).exists()) {
                continue;
            }
            match options.open(self.dir.join(&name)) {
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
        let name = format!("{id}.txt");
        let mut found = None;
        for dir in self.dirs() {
            let path = dir.join(&name);
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    found = Some(text);
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(SpillError::Io {
                        path: path.display().to_string(),
                        source,
                    });
                }
            }
        }
        let text = found.ok_or_else(|| SpillError::Unknown(id.to_owned()))?;
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
    fn a_resumed_session_reads_its_chains_outputs_and_never_reuses_their_ids() {
        let dir = tempfile::tempdir().unwrap();
        let oldest = SpillStore::new(dir.path().join("s1"));
        assert_eq!(oldest.save("c1", "first").unwrap(), "out-c1");
        let older = SpillStore::new(dir.path().join("s2"));
        assert_eq!(older.save("c2", "second").unwrap(), "out-c2");
        let store = SpillStore::new(dir.path().join("s3"))
            .with_earlier([dir.path().join("s2"), dir.path().join("s1")]);
        assert_eq!(store.read("out-c1", 0, 10).unwrap().text, "first");
        assert_eq!(store.read("out-c2", 0, 10).unwrap().text, "second");
        // A call id the chain already spilled gets an id of its own.
        assert_eq!(store.save("c1", "third").unwrap(), "out-c1-2");
        assert_eq!(store.read("out-c1", 0, 10).unwrap().text, "first");
        assert_eq!(store.read("out-c1-2", 0, 10).unwrap().text, "third");
        assert!(!dir.path().join("s1/out-c1-2.txt").exists());
        assert!(matches!(
            store.read("out-c9", 0, 10),
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

    #[test]
    fn a_scrubbed_store_keeps_only_the_scrubbed_text() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::new(dir.path()).with_scrub(Arc::new(|t: &str| {
            t.contains("hunter2")
                .then(|| t.replace("hunter2", "[redacted]"))
        }));
        assert!(matches!(store.scrub("plain"), Cow::Borrowed("plain")));
        assert_eq!(store.scrub("pw=hunter2"), "pw=[redacted]");
        let id = store.save("c1", "pw=hunter2 ok").unwrap();
        assert_eq!(store.read(&id, 0, 100).unwrap().text, "pw=[redacted] ok");
        let on_disk = std::fs::read_to_string(dir.path().join(format!("{id}.txt"))).unwrap();
        assert!(!on_disk.contains("hunter2"), "{on_disk}");
    }
}
