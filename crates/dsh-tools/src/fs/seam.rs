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
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use dsh_core::{CancellationToken, ResolvedPath, ToolError, ToolErrorKind, Workspace};

use crate::fs::dir_lock;
use crate::fs::encoding::{Detected, Encoding, Unencodable, decode_all, detect, encode};
use crate::fs::temp_name;

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

/// The observed versions of one session (shared by its tools), and the lock that makes
/// check-then-change one critical section.
#[derive(Debug, Default)]
pub struct FileSeam {
    observed: Mutex<HashMap<PathBuf, Version>>,
    change: Mutex<()>,
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
#[derive(Clone, Copy, Debug)]
pub(crate) struct Changed {
    /// The file did not exist.
    pub(crate) created: bool,
    /// The encoding it was written in.
    pub(crate) encoding: Encoding,
    /// The bytes written.
    pub(crate) bytes: usize,
}

impl FileSeam {
    pub fn new() -> Self {
        FileSeam::default()
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

    /// Checks `intent` against the session's observations, lets `change` compute the new
    /// content from what is there, encodes it as the file was encoded, and writes it atomically
    /// — all under this session's lock and the directory's lock across processes (waiting for
    /// the latter at most five seconds, or until `cancel`). Returns what `change`
    /// returned besides the content, and what was done.
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
        let current = match (&found, intent) {
            (None, Intent::Edit) => {
                return Err(ToolError::new(
                    ToolErrorKind::NotFound,
                    format!("`{given}` does not exist; create it with write_file"),
                ));
            }
            (None, Intent::Write) => Current {
                text: None,
                mode: None,
                encoding: Encoding::Utf8,
            },
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
                let (file, mode) = dir.open_target(max_bytes)?;
                let (text, encoding) = match intent {
                    Intent::Edit => {
                        let (text, encoding) = read_text(file, given, max_bytes)?;
                        (Some(text), encoding)
                    }
                    Intent::Write => (None, encoding_of(file, given)?),
                };
                Current {
                    text,
                    mode: Some(mode),
                    encoding,
                }
            }
        };
        let (content, extra) = change(&current)?;
        let bytes = encode(current.encoding, content).map_err(|e| unencodable(given, &e))?;
        let version = dir.replace(&bytes, current.mode, found.map(|(v, _)| v))?;
        self.observe(&resolved.abs, version);
        Ok((
            extra,
            Changed {
                created: found.is_none(),
                encoding: current.encoding,
                bytes: bytes.len(),
            },
        ))
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
fn encoding_of(mut file: File, given: &str) -> Result<Encoding, ToolError> {
    match detect(&mut file) {
        Ok(Detected::Text(encoding)) => Ok(encoding),
        Ok(Detected::Binary(_)) => Ok(Encoding::Utf8),
        Err(e) => Err(ToolError::failed(format!("cannot read `{given}`: {e}"))),
    }
}

/// The whole text of a file to edit, decoded exactly, and its encoding.
fn read_text(mut file: File, given: &str, max_bytes: u64) -> Result<(String, Encoding), ToolError> {
    let mut bytes = Vec::new();
    (&mut file)
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::failed(format!("cannot read `{given}`: {e}")))?;
    if bytes.len() as u64 > max_bytes {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArgs,
            format!(
                "`{given}` is larger than {max_bytes} bytes; edit_file does not change files that large"
            ),
        ));
    }
    let refuse = |why: &str| {
        ToolError::new(
            ToolErrorKind::InvalidArgs,
            format!(
                "`{given}` cannot be edited: {why}; edit_file only changes text files it can decode and write back exactly (UTF-8, UTF-16 with a byte order mark, Windows-1252)"
            ),
        )
    };
    let encoding = match detect(&mut Cursor::new(bytes.as_slice())) {
        Ok(Detected::Text(encoding)) => encoding,
        Ok(Detected::Binary(why)) => return Err(refuse(&format!("it looks binary ({why})"))),
        Err(e) => return Err(ToolError::failed(format!("cannot read `{given}`: {e}"))),
    };
    let text = decode_all(encoding, bytes).map_err(|e| refuse(&e.to_string()))?;
    Ok((text, encoding))
}

fn denied(given: &str, why: &str) -> ToolError {
    ToolError::new(ToolErrorKind::Denied, format!("`{given}`: {why}"))
}

fn io_failed(given: &str, what: &str, e: std::io::Error) -> ToolError {
    ToolError::failed(format!("cannot {what} `{given}`: {e}"))
}

/// The target's parent directory, opened and checked on its handle.
struct ParentDir<'a> {
    resolved: &'a ResolvedPath,
    name: std::ffi::OsString,
    /// The directory's handle, which every operation on the target goes through (and which
    /// carries the lock across processes).
    #[cfg(unix)]
    dir: File,
    #[cfg(not(unix))]
    path: PathBuf,
}

impl<'a> ParentDir<'a> {
    fn open(ws: &Workspace, resolved: &'a ResolvedPath, intent: Intent) -> Result<Self, ToolError> {
        let given = &resolved.given;
        let root = resolved.rel.as_os_str().is_empty();
        let (Some(parent), Some(name), false) =
            (resolved.abs.parent(), resolved.abs.file_name(), root)
        else {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArgs,
                format!("`{given}` names the workspace root, not a file"),
            ));
        };
        if !ws.contains(parent) {
            return Err(denied(given, "its directory is outside the workspace"));
        }
        match intent {
            // Only a write creates missing directories; an edit of a file whose directory
            // does not exist is simply not found.
            Intent::Write => std::fs::create_dir_all(parent)
                .map_err(|e| io_failed(given, "create the directory of", e))?,
            Intent::Edit if !parent.is_dir() => {
                return Err(ToolError::new(
                    ToolErrorKind::NotFound,
                    format!("`{given}` does not exist; create it with write_file"),
                ));
            }
            Intent::Edit => {}
        }
        #[cfg(unix)]
        {
            use rustix::fs::{Mode, OFlags};
            let fd = rustix::fs::open(
                parent,
                OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| match e {
                // The directory was there a moment ago (resolved, or just created) and is now
                // a symlink or not a directory: the path changed under the call.
                rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => {
                    crate::confine::path_error(resolved.changed(), crate::confine::Want::File)
                }
                e => io_failed(given, "open the directory of", e.into()),
            })?;
            #[cfg(target_os = "linux")]
            {
                use std::os::fd::AsRawFd;
                let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                    .map_err(|e| io_failed(given, "check the directory of", e))?;
                if !ws.contains(&real) {
                    return Err(denied(
                        given,
                        &format!(
                            "its directory now resolves to {} outside the workspace",
                            real.display()
                        ),
                    ));
                }
            }
            Ok(ParentDir {
                resolved,
                name: name.to_owned(),
                dir: File::from(fd),
            })
        }
        #[cfg(not(unix))]
        {
            Ok(ParentDir {
                resolved,
                name: name.to_owned(),
                path: parent.to_path_buf(),
            })
        }
    }

    /// Takes the lock across processes on this directory, waiting at most five seconds.
    fn lock(&self, cancel: &CancellationToken) -> Result<dir_lock::Held<'_>, ToolError> {
        #[cfg(unix)]
        {
            dir_lock::lock(&self.dir, &self.resolved.given, cancel)
        }
        #[cfg(not(unix))]
        {
            dir_lock::lock(&self.resolved.given, cancel)
        }
    }

    /// The target's version and whether it is a regular file; `None` if absent. A symlink or
    /// anything else but a regular file with one link is refused.
    fn stat_target(&self) -> Result<Option<(Version, u32)>, ToolError> {
        let given = &self.resolved.given;
        #[cfg(unix)]
        let meta = {
            use rustix::fs::{Mode, OFlags};
            // O_PATH: a handle to stat, opening nothing (a FIFO or device is not opened).
            match rustix::fs::openat(
                &self.dir,
                self.name.as_os_str(),
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => File::from(fd).metadata(),
                Err(rustix::io::Errno::NOENT) => return Ok(None),
                Err(e) => Err(e.into()),
            }
        };
        #[cfg(not(unix))]
        let meta = match std::fs::symlink_metadata(self.path.join(&self.name)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            other => other,
        };
        let meta = meta.map_err(|e| io_failed(given, "inspect", e))?;
        let t = meta.file_type();
        if t.is_symlink() {
            return Err(denied(given, "it was replaced by a symlink; it is refused"));
        }
        if !t.is_file() {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArgs,
                format!("`{given}` is not a regular file; only regular files can be written"),
            ));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if meta.nlink() > 1 {
                return Err(denied(
                    given,
                    "it has more than one hard link, which can reach outside the workspace; it is refused",
                ));
            }
            Ok(Some((Version::of(&meta), meta.mode() & 0o7777)))
        }
        #[cfg(not(unix))]
        Ok(Some((Version::of(&meta), 0o644)))
    }

    /// Opens the existing target for reading (never following a symlink, never blocking).
    fn open_target(&self, _max_bytes: u64) -> Result<(File, u32), ToolError> {
        let given = &self.resolved.given;
        #[cfg(unix)]
        {
            use rustix::fs::{Mode, OFlags};
            let fd = rustix::fs::openat(
                &self.dir,
                self.name.as_os_str(),
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| io_failed(given, "open", e.into()))?;
            let file = File::from(fd);
            let mode = {
                use std::os::unix::fs::MetadataExt;
                file.metadata().map(|m| m.mode() & 0o7777).unwrap_or(0o644)
            };
            Ok((file, mode))
        }
        #[cfg(not(unix))]
        {
            let file =
                File::open(self.path.join(&self.name)).map_err(|e| io_failed(given, "open", e))?;
            Ok((file, 0o644))
        }
    }

    /// Writes `content` to a temporary file in the directory, checks that the target is still
    /// at `expected` (still absent, for `None`), and renames the temporary file over it.
    /// Returns the new version.
    fn replace(
        &self,
        content: &[u8],
        mode: Option<u32>,
        expected: Option<Version>,
    ) -> Result<Version, ToolError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let given = &self.resolved.given;
        let tmp = temp_name::make(
            &self.name,
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
        );
        #[cfg(unix)]
        {
            use rustix::fs::{AtFlags, Mode, OFlags};
            let mode = mode.unwrap_or(0o644);
            let fd = rustix::fs::openat(
                &self.dir,
                tmp.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(mode),
            )
            .map_err(|e| io_failed(given, "create a temporary file for", e.into()))?;
            let mut file = File::from(fd);
            let written = (|| {
                file.write_all(content)?;
                // The umask may have narrowed the mode: set it exactly.
                rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
                file.sync_all()
            })();
            let unlink = || {
                let _ = rustix::fs::unlinkat(&self.dir, tmp.as_str(), AtFlags::empty());
            };
            if let Err(e) = written {
                unlink();
                return Err(io_failed(given, "write", e));
            }
            if let Err(e) = self.still_at(expected) {
                unlink();
                return Err(e);
            }
            if let Err(e) =
                rustix::fs::renameat(&self.dir, tmp.as_str(), &self.dir, self.name.as_os_str())
            {
                unlink();
                return Err(io_failed(given, "replace", e.into()));
            }
            let meta = file
                .metadata()
                .map_err(|e| io_failed(given, "inspect", e))?;
            Ok(Version::of(&meta))
        }
        #[cfg(not(unix))]
        {
            let _ = mode;
            let tmp_path = self.path.join(&tmp);
            let target = self.path.join(&self.name);
            let mut file = File::create_new(&tmp_path)
                .map_err(|e| io_failed(given, "create a temporary file for", e))?;
            let written = file
                .write_all(content)
                .and_then(|()| file.sync_all())
                .map_err(|e| io_failed(given, "write", e))
                .and_then(|()| self.still_at(expected))
                .and_then(|()| {
                    std::fs::rename(&tmp_path, &target).map_err(|e| io_failed(given, "replace", e))
                });
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp_path);
                return Err(e);
            }
            let meta = std::fs::metadata(&target).map_err(|e| io_failed(given, "inspect", e))?;
            Ok(Version::of(&meta))
        }
    }

    /// The second version check, just before the rename: under the lock no dsh process can
    /// have changed the target since the first, so a difference is another program's change.
    fn still_at(&self, expected: Option<Version>) -> Result<(), ToolError> {
        let given = &self.resolved.given;
        match (expected, self.stat_target()?) {
            (None, None) => Ok(()),
            (Some(then), Some((now, _))) if then == now => Ok(()),
            (None, Some(_)) => Err(ToolError::new(
                ToolErrorKind::NotObserved,
                format!(
                    "`{given}` was created by another program while this write was being made; nothing was changed; read it with read_file, then change it"
                ),
            )),
            (Some(_), _) => Err(ToolError::new(
                ToolErrorKind::StaleVersion,
                format!(
                    "`{given}` was changed by another program while this change was being made; nothing was changed; read it again before changing it"
                ),
            )),
        }
    }
}
