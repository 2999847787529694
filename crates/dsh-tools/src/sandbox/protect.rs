//! Read-only subpaths of a writable tree, for the hardened workspace-write profile (`auto`,
//! DESIGN §5): Landlock grants whole hierarchies and cannot exempt `.git/` or `AGENTS.md`
//! inside a writable workspace, so the command's child moves into a private mount namespace
//! (inside a user namespace when it is not root) and bind-mounts each protected path that
//! exists onto itself, read-only — bubblewrap's approach. Runs in the single-threaded child
//! before Landlock (which forbids changing the mount topology afterwards) and before seccomp
//! (which forbids `mount`).
//!
//! A protected path that does not exist yet cannot be mounted over: the caller must make
//! sure its creation is refused or undone some other way.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Enters a private mount namespace and makes every existing path of `paths` read-only in
/// it. Paths that do not exist are returned (nothing could be mounted over them).
#[allow(unsafe_code)]
pub(super) fn read_only_mounts(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let flags = if uid == 0 {
        libc::CLONE_NEWNS
    } else {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS
    };
    // SAFETY: unshare takes a flag word; this process is single-threaded (see `supervise`).
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(format!(
            "a private mount namespace is not available here (unshare: {})",
            std::io::Error::last_os_error()
        ));
    }
    if uid != 0 {
        // Map this user (and group) to itself, so files keep their owner.
        let write = |file: &str, text: String| {
            std::fs::write(file, text).map_err(|e| format!("{file}: {e}"))
        };
        write("/proc/self/setgroups", "deny".to_owned())?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    }
    mount(None, Path::new("/"), libc::MS_REC | libc::MS_PRIVATE)
        .map_err(|e| format!("making the mounts private: {e}"))?;
    let mut missing = Vec::new();
    for path in paths {
        if std::fs::symlink_metadata(path).is_err() {
            missing.push(path.clone());
            continue;
        }
        mount(Some(path), path, libc::MS_BIND | libc::MS_REC)
            .and_then(|()| {
                mount(
                    None,
                    path,
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                )
            })
            .map_err(|e| format!("making {} read-only: {e}", path.display()))?;
    }
    Ok(missing)
}

#[allow(unsafe_code)]
fn mount(source: Option<&Path>, target: &Path, flags: libc::c_ulong) -> Result<(), std::io::Error> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes()).map_err(|_| std::io::ErrorKind::InvalidInput)
    };
    let target = c(target)?;
    let source = source.map(c).transpose()?;
    // SAFETY: every pointer is a valid NUL-terminated string or null, as mount(2) accepts.
    let rc = unsafe {
        libc::mount(
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
