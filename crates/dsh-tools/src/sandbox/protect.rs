//! The hardened workspace-write profile's mount namespace (`auto`, DESIGN §5): Landlock
//! grants whole hierarchies and cannot exempt `.git/` or `AGENTS.md` inside a writable
//! workspace, nor keep a file's mode and owner outside the writable trees (it does not
//! confine `chmod`/`chown` up to ABI 6). So the command's child moves into a private mount
//! namespace (inside a user namespace when it is not root) — bubblewrap's approach — where:
//!
//! 1. every mount is read-only and `nosuid` (one recursive `mount_setattr`): outside the
//!    writable trees no file's content, mode, owner or times can change, whatever Landlock
//!    and the capabilities say;
//! 2. the writable trees (the workspace, the session's TMPDIR) are bind-mounted onto
//!    themselves and made writable again, still `nosuid` and `nodev`;
//! 3. each protected path that exists is bind-mounted onto itself read-only (a mount point
//!    cannot be removed or renamed over either);
//! 4. each hidden path (what the file tools' deny/ask rules keep from reading) is covered:
//!    a file by `/dev/null` on a `nodev` mount (opening it fails), a directory by an empty
//!    read-only tmpfs.
//!
//! Runs in the single-threaded child before Landlock (which forbids changing the mount
//! topology afterwards) and before seccomp (which forbids the mount family). Needs
//! `mount_setattr` (Linux 5.12): without it the probe says `mounts=no` and `auto` asks.
//!
//! A protected path that does not exist yet cannot be mounted over: `run_shell` moves one
//! the command created out of the workspace afterwards.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// `mount_setattr`'s attribute bits (linux/mount.h).
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// `struct mount_attr` (linux/mount.h), version 0.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// What the hardened profile's mount namespace does (see the module docs).
pub(super) struct Mounts<'a> {
    pub writable: &'a [PathBuf],
    pub read_only: &'a [PathBuf],
    pub hidden: &'a [PathBuf],
}

/// Enters a private mount namespace and arranges it as the module docs say. A protected or
/// hidden path that does not exist (any more) is skipped.
#[allow(unsafe_code)]
pub(super) fn hardened_mounts(m: &Mounts<'_>) -> Result<(), String> {
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
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE)
        .map_err(|e| format!("making the mounts private: {e}"))?;
    // Their own mounts first, so that they can be made writable again below.
    for tree in m.writable {
        bind(tree, tree).map_err(|e| format!("bind-mounting {}: {e}", tree.display()))?;
    }
    set_attr(
        Path::new("/"),
        true,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
        0,
    )
    .map_err(|e| format!("making every mount read-only (mount_setattr, Linux 5.12): {e}"))?;
    for tree in m.writable {
        set_attr(
            tree,
            true,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            MOUNT_ATTR_RDONLY,
        )
        .map_err(|e| format!("making {} writable: {e}", tree.display()))?;
    }
    for path in m.read_only {
        if std::fs::symlink_metadata(path).is_err() {
            continue;
        }
        bind(path, path)
            .and_then(|()| set_attr(path, true, MOUNT_ATTR_RDONLY, 0))
            .map_err(|e| format!("making {} read-only: {e}", path.display()))?;
    }
    for path in m.hidden {
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        let covered = if meta.is_dir() {
            mount(
                Some(Path::new("tmpfs")),
                path,
                Some("tmpfs"),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            )
        } else {
            bind(Path::new("/dev/null"), path).and_then(|()| {
                set_attr(
                    path,
                    false,
                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                    0,
                )
            })
        };
        covered.map_err(|e| format!("hiding {}: {e}", path.display()))?;
    }
    // The working directory still points into the mounts as they were (the read-only root
    // mount, for a workspace): enter it again through the new ones.
    if let Ok(cwd) = std::env::current_dir() {
        std::env::set_current_dir(&cwd)
            .map_err(|e| format!("re-entering {}: {e}", cwd.display()))?;
    }
    Ok(())
}

fn bind(source: &Path, target: &Path) -> Result<(), std::io::Error> {
    mount(Some(source), target, None, libc::MS_BIND | libc::MS_REC)
}

fn c_path(p: &Path) -> Result<CString, std::io::Error> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| std::io::ErrorKind::InvalidInput.into())
}

#[allow(unsafe_code)]
fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
) -> Result<(), std::io::Error> {
    let target = c_path(target)?;
    let source = source.map(c_path).transpose()?;
    let fstype = fstype
        .map(|t| CString::new(t).map_err(|_| std::io::ErrorKind::InvalidInput))
        .transpose()?;
    // SAFETY: every pointer is a valid NUL-terminated string or null, as mount(2) accepts.
    let rc = unsafe {
        libc::mount(
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
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

/// `mount_setattr` on the mount at `target` (and, `recursive`, every mount below it).
#[allow(unsafe_code)]
fn set_attr(target: &Path, recursive: bool, set: u64, clear: u64) -> Result<(), std::io::Error> {
    let target = c_path(target)?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: the path is a valid NUL-terminated string and `attr` a live struct whose size
    // is passed with it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
