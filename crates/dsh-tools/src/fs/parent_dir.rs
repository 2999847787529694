//! The directory a file change goes through: the target's parent, opened without following
//! a final symlink and checked to be inside the workspace on its handle, and every operation
//! on the target made through that handle (stat, open, replace by rename, remove), so a
//! directory swapped for a symlink after the check cannot redirect a change. See `seam.rs`
//! for the critical section these run in.

use std::fs::File;
use std::io::Write;
#[cfg(not(unix))]
use std::path::PathBuf;

use dsh_core::{CancellationToken, ResolvedPath, ToolError, ToolErrorKind, Workspace};

use crate::fs::dir_lock;
use crate::fs::seam::{Intent, Version};
use crate::fs::temp_name;

pub(crate) fn denied(given: &str, why: &str) -> ToolError {
    ToolError::new(ToolErrorKind::Denied, format!("`{given}`: {why}"))
}

pub(crate) fn io_failed(given: &str, what: &str, e: std::io::Error) -> ToolError {
    ToolError::failed(format!("cannot {what} `{given}`: {e}"))
}

/// The target's parent directory, opened and checked on its handle.
pub(crate) struct ParentDir<'a> {
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
    pub(crate) fn open(
        ws: &Workspace,
        resolved: &'a ResolvedPath,
        intent: Intent,
    ) -> Result<Self, ToolError> {
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
    pub(crate) fn lock(&self, cancel: &CancellationToken) -> Result<dir_lock::Held<'_>, ToolError> {
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
    pub(crate) fn stat_target(&self) -> Result<Option<(Version, u32)>, ToolError> {
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
    pub(crate) fn open_target(&self) -> Result<(File, u32), ToolError> {
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
    pub(crate) fn replace(
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

    /// Removes the target, if it is still at `expected`.
    pub(crate) fn remove(&self, expected: Version) -> Result<(), ToolError> {
        let given = &self.resolved.given;
        self.still_at(Some(expected))?;
        #[cfg(unix)]
        {
            rustix::fs::unlinkat(
                &self.dir,
                self.name.as_os_str(),
                rustix::fs::AtFlags::empty(),
            )
            .map_err(|e| io_failed(given, "remove", e.into()))
        }
        #[cfg(not(unix))]
        {
            std::fs::remove_file(self.path.join(&self.name))
                .map_err(|e| io_failed(given, "remove", e))
        }
    }

    /// The second version check, just before the rename: under the lock no dsh process can
    /// have changed the target since the first, so a difference is another program's change.
    pub(crate) fn still_at(&self, expected: Option<Version>) -> Result<(), ToolError> {
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
