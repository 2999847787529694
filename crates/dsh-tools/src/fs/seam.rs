//! The file seam (SPEC P5): per-session observed versions, and the one critical section in
//! which a change is checked against them and made.
//!
//! A *version* is the stat identity of a file (device, inode, size, modification and change
//! times to the nanosecond); it is opaque to everyone but this file. `read_file` records the
//! version it read. A replacing `write_file` or an `edit_file` passes only when the file's
//! current version is the one the session last observed: never observed → `not_observed`,
//! changed since → `stale_version` (checked before any text matching). Creating a file that
//! does not exist needs no observation. Every successful change records the new version.
//!
//! A change keeps the file's encoding ([`crate::fs::encoding`]): an edit is applied to the
//! decoded text, and the new text — of an edit or of a replacing write — is encoded back as the
//! file was (UTF-16 with its byte order mark, Windows-1252). Text the encoding cannot hold is
//! refused and the file left as it was; nothing is ever transcoded silently. A new file is UTF-8.
//!
//! Changes are made atomically and confined on Unix: the parent directory is opened without
//! following a final symlink and checked to be inside the workspace on its handle; the new
//! content goes to a temporary file created *in that directory handle*, is flushed, and is
//! renamed over the target through the same handle. A directory swapped for a symlink after
//! the check therefore cannot redirect the write.
//!
//! **One critical section across processes.** Check and change hold two locks: the seam's
//! mutex (one change at a time in this session) and, on Unix, an advisory lock on the parent
//! directory's handle ([`crate::fs::dir_lock`], which says why the directory and what the lock
//! does not cover), taken before the version check and released after the rename. Two dsh
//! processes that read one file and then change it therefore cannot both succeed on the same
//! version: the second to take the lock finds the first one's version and fails
//! `stale_version`. The version is checked once more just before the rename, against a
//! program that changed the file without taking the lock (an editor, `sed -i`); such a
//! program can still slip a change between that check and the rename, and is outside this
//! promise.
//!
//! The temporary file is named `.NAME.dsh-PID-N.tmp` ([`crate::fs::temp_name`]): hidden from
//! the search tools, and removable by the next session's sweep when a kill left it behind.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use dsh_core::{CancellationToken, ResolvedPath, ToolError, ToolErrorKind, Workspace};

use dsh_core::FileChange;

use crate::fs::encoding::{Detected, Encoding, Unencodable, decode_all, detect, encode};
use crate::fs::parent_dir::ParentDir;
use crate::fs::pre_images::{self, MAX_PRE_IMAGE_BYTES, PreImages};

/// A file's identity at one moment. Opaque.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Version {
    /// The version an open file or a `stat` describes.
    pub fn of(meta: &Metadata) -> Self {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Version {
                dev: meta.dev(),
                ino: meta.ino(),
                len: meta.len(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
                ctime: (meta.ctime(), meta.ctime_nsec()),
            }
        }
        #[cfg(not(unix))]
        {
            let nanos = |t: std::io::Result<std::time::SystemTime>| {
                t.ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or((0, 0), |d| {
                        (d.as_secs() as i64, i64::from(d.subsec_nanos()))
                    })
            };
            Version {
                dev: 0,
                ino: 0,
                len: meta.len(),
                mtime: nanos(meta.modified()),
                ctime: nanos(meta.created()),
            }
        }
    }
}

/// The observed versions of one session (shared by its tools), the lock that makes
/// check-then-change one critical section, and the store where each change's pre-image is
/// kept (`/undo`).
#[derive(Debug, Default)]
pub struct FileSeam {
    observed: Mutex<HashMap<PathBuf, Version>>,
    change: Mutex<()>,
    pre_images: Option<PreImages>,
}

/// What the seam requires of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Intent {
    /// `write_file`: create if absent; replace only the observed version.
    Write,
    /// `edit_file`: the file must exist and be the observed version.
    Edit,
}

/// A file as it was found inside the critical section.
pub(crate) struct Current {
    /// Its content, for edits; `None` when it does not exist.
    pub(crate) text: Option<String>,
    /// Its permission bits, kept for the replacement.
    pub(crate) mode: Option<u32>,
    /// Its encoding, which the new content is written in (UTF-8 for a new file).
    pub(crate) encoding: Encoding,
}

/// What a change did.
#[derive(Clone, Debug)]
pub(crate) struct Changed {
    /// The file did not exist.
    pub(crate) created: bool,
    /// The encoding it was written in.
    pub(crate) encoding: Encoding,
    /// The bytes written.
    pub(crate) bytes: usize,
    /// The change, for the call's checkpoint.
    pub(crate) change: FileChange,
}

impl FileSeam {
    /// A seam that keeps no pre-images (changes are still reported with their digests).
    pub fn new() -> Self {
        FileSeam::default()
    }

    /// A seam that keeps each change's pre-image in `store` before making it: a change whose
    /// pre-image cannot be kept is not made.
    pub fn with_pre_images(store: PreImages) -> Self {
        FileSeam {
            pre_images: Some(store),
            ..FileSeam::default()
        }
    }

    /// Records that the session has seen `abs` at `version` (by reading it).
    pub fn observe(&self, abs: &Path, version: Version) {
        if let Ok(mut map) = self.observed.lock() {
            map.insert(abs.to_path_buf(), version);
        }
    }

    fn observed(&self, abs: &Path) -> Option<Version> {
        self.observed.lock().ok()?.get(abs).copied()
    }

    fn forget(&self, abs: &Path) {
        if let Ok(mut map) = self.observed.lock() {
            map.remove(abs);
        }
    }

    /// Keeps `bytes` as a pre-image (when this seam keeps them) and returns their digest.
    fn keep(&self, given: &str, bytes: &[u8]) -> Result<String, ToolError> {
        match &self.pre_images {
            Some(store) => store
                .keep(bytes)
                .map_err(|e| ToolError::failed(format!("`{given}`: {e}; nothing was changed"))),
            None => Ok(pre_images::digest(bytes)),
        }
    }

    /// The pre-image kept under `digest`.
    pub(crate) fn pre_image(&self, digest: &str) -> Result<Vec<u8>, ToolError> {
        let store = self.pre_images.as_ref().ok_or_else(|| {
            ToolError::failed("this session keeps no checkpoints; nothing can be restored")
        })?;
        store
            .get(digest)
            .map_err(|e| ToolError::failed(e.to_string()))
    }

    /// Checks `intent` against the session's observations, lets `change` compute the new
    /// content from what is there, encodes it as the file was encoded, keeps the old content
    /// as the change's pre-image, and writes the new one atomically — all under this
    /// session's lock and the directory's lock across processes (waiting for the latter at
    /// most five seconds, or until `cancel`). Returns what `change` returned besides the
    /// content, and what was done.
    pub(crate) fn change<T>(
        &self,
        ws: &Workspace,
        resolved: &ResolvedPath,
        intent: Intent,
        max_bytes: u64,
        cancel: &CancellationToken,
        change: impl FnOnce(&Current) -> Result<(String, T), ToolError>,
    ) -> Result<(T, Changed), ToolError> {
        let _guard = self
            .change
            .lock()
            .map_err(|_| ToolError::failed("the file seam is unusable after a crash"))?;
        let dir = ParentDir::open(ws, resolved, intent)?;
        let given = &resolved.given;
        let _held = dir.lock(cancel)?;
        let found = dir.stat_target()?;
        let (current, old) = match (&found, intent) {
            (None, Intent::Edit) => {
                return Err(ToolError::new(
                    ToolErrorKind::NotFound,
                    format!("`{given}` does not exist; create it with write_file"),
                ));
            }
            (None, Intent::Write) => (
                Current {
                    text: None,
                    mode: None,
                    encoding: Encoding::Utf8,
                },
                None,
            ),
            (Some((version, _)), _) => {
                match self.observed(&resolved.abs) {
                    None => {
                        return Err(ToolError::new(
                            ToolErrorKind::NotObserved,
                            format!(
                                "`{given}` exists and this session has not read it; read it with read_file first, then change it"
                            ),
                        ));
                    }
                    Some(seen) if seen != *version => {
                        return Err(ToolError::new(
                            ToolErrorKind::StaleVersion,
                            format!(
                                "`{given}` changed since this session last read it; read it again before changing it"
                            ),
                        ));
                    }
                    Some(_) => {}
                }
                let (file, mode) = dir.open_target()?;
                let (text, encoding, old) = match intent {
                    Intent::Edit => {
                        let old = read_all(file, given, max_bytes, "edit_file does not change")?;
                        let (text, encoding) = decode_text(&old, given)?;
                        (Some(text), encoding, old)
                    }
                    Intent::Write => {
                        let old = read_all(
                            file,
                            given,
                            max_bytes.min(MAX_PRE_IMAGE_BYTES),
                            "its content could not be kept for /undo, so write_file does not replace",
                        )?;
                        (None, encoding_of(&old, given)?, old)
                    }
                };
                (
                    Current {
                        text,
                        mode: Some(mode),
                        encoding,
                    },
                    Some(old),
                )
            }
        };
        let (content, extra) = change(&current)?;
        let bytes = encode(current.encoding, content).map_err(|e| unencodable(given, &e))?;
        let before = old.map(|old| self.keep(given, &old)).transpose()?;
        let version = dir.replace(&bytes, current.mode, found.map(|(v, _)| v))?;
        self.observe(&resolved.abs, version);
        Ok((
            extra,
            Changed {
                created: found.is_none(),
                encoding: current.encoding,
                bytes: bytes.len(),
                change: FileChange {
                    path: resolved.rel.display().to_string(),
                    before,
                    after: Some(pre_images::digest(&bytes)),
                },
            },
        ))
    }

    /// Puts `path` back as a checkpoint had it: `to` its content then (`None`: it did not
    /// exist, so it is removed), only if its content now is `expect` — the content the change
    /// being undone left. A file changed since by anything else is left alone and the call
    /// fails `stale_version`. The content replaced is kept as a pre-image like any change's,
    /// and the session's observation of the file is forgotten: whoever changes it next reads
    /// it first.
    pub(crate) fn restore(
        &self,
        ws: &Workspace,
        resolved: &ResolvedPath,
        to: Option<&[u8]>,
        expect: &str,
        cancel: &CancellationToken,
    ) -> Result<FileChange, ToolError> {
        let _guard = self
            .change
            .lock()
            .map_err(|_| ToolError::failed("the file seam is unusable after a crash"))?;
        let given = &resolved.given;
        let changed_since = |what: &str| {
            ToolError::new(
                ToolErrorKind::StaleVersion,
                format!("`{given}` {what} since that change; it is left alone"),
            )
        };
        let dir = ParentDir::open(ws, resolved, Intent::Edit).map_err(|e| match e.kind {
            ToolErrorKind::NotFound => changed_since("was removed"),
            _ => e,
        })?;
        let _held = dir.lock(cancel)?;
        let Some((version, mode)) = dir.stat_target()? else {
            return Err(changed_since("was removed"));
        };
        let (file, _) = dir.open_target()?;
        let now = read_all(
            file,
            given,
            MAX_PRE_IMAGE_BYTES,
            "it is not what that change left, so /undo does not restore",
        )
        .map_err(|_| changed_since("changed"))?;
        if pre_images::digest(&now) != expect {
            return Err(changed_since("changed"));
        }
        let before = self.keep(given, &now)?;
        match to {
            Some(bytes) => {
                dir.replace(bytes, Some(mode), Some(version))?;
            }
            None => dir.remove(version)?,
        }
        self.forget(&resolved.abs);
        Ok(FileChange {
            path: resolved.rel.display().to_string(),
            before: Some(before),
            after: to.map(pre_images::digest),
        })
    }
}

fn unencodable(given: &str, e: &Unencodable) -> ToolError {
    ToolError::new(
        ToolErrorKind::InvalidArgs,
        format!(
            "`{given}` is kept in {enc}, and the new text has `{ch}` (U+{code:04X}), which {enc} cannot encode; nothing was changed. Use only characters {enc} has (or an escape the file's format understands), or convert the file to UTF-8 first (e.g. with iconv in run_shell)",
            enc = e.encoding,
            ch = e.ch.escape_debug(),
            code = u32::from(e.ch),
        ),
    )
}

/// The encoding of an existing file about to be replaced whole; a file that does not look
/// like text is replaced with UTF-8, as any new content is.
fn encoding_of(bytes: &[u8], given: &str) -> Result<Encoding, ToolError> {
    match detect(&mut Cursor::new(bytes)) {
        Ok(Detected::Text(encoding)) => Ok(encoding),
        Ok(Detected::Binary(_)) => Ok(Encoding::Utf8),
        Err(e) => Err(ToolError::failed(format!("cannot read `{given}`: {e}"))),
    }
}

/// The whole content of an existing file, of at most `max_bytes` (larger: refused, `refusal`
/// saying what is not done to files that large).
fn read_all(
    mut file: File,
    given: &str,
    max_bytes: u64,
    refusal: &str,
) -> Result<Vec<u8>, ToolError> {
    let mut bytes = Vec::new();
    (&mut file)
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::failed(format!("cannot read `{given}`: {e}")))?;
    if bytes.len() as u64 > max_bytes {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArgs,
            format!("`{given}` is larger than {max_bytes} bytes; {refusal} files that large"),
        ));
    }
    Ok(bytes)
}

/// A file's whole text to edit, decoded exactly, and its encoding.
fn decode_text(bytes: &[u8], given: &str) -> Result<(String, Encoding), ToolError> {
    let refuse = |why: &str| {
        ToolError::new(
            ToolErrorKind::InvalidArgs,
            format!(
                "`{given}` cannot be edited: {why}; edit_file only changes text files it can decode and write back exactly (UTF-8, UTF-16 with a byte order mark, Windows-1252)"
            ),
        )
    };
    let encoding = match detect(&mut Cursor::new(bytes)) {
        Ok(Detected::Text(encoding)) => encoding,
        Ok(Detected::Binary(why)) => return Err(refuse(&format!("it looks binary ({why})"))),
        Err(e) => return Err(ToolError::failed(format!("cannot read `{given}`: {e}"))),
    };
    let text = decode_all(encoding, bytes.to_vec()).map_err(|e| refuse(&e.to_string()))?;
    Ok((text, encoding))
}
