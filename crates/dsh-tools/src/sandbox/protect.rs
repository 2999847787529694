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
//!    cannot be removed or renamed over either), after each directory between a writable
//!    tree and it is bind-mounted onto itself too, writable: a mount point cannot be renamed
//!    or removed, so `mv docs docs.old` cannot move a protected `docs/agents.md` aside and
//!    put another in its place; mounts inside a writable tree that were read-only stay so;
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
    // Mounts that are read-only already (inside a writable tree they must stay so).
    let read_only_before = read_only_mount_points();
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
        for inner in read_only_before
            .iter()
            .filter(|p| p.starts_with(tree) && *p != tree)
        {
            set_attr(inner, true, MOUNT_ATTR_RDONLY, 0)
                .map_err(|e| format!("keeping {} read-only: {e}", inner.display()))?;
        }
    }
    for dir in ancestors_to_pin(m) {
        bind(&dir, &dir).map_err(|e| format!("pinning {}: {e}", dir.display()))?;
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

/// The directories between a writable tree and each protected or hidden path inside it
/// (not the tree, not the path), shallowest first; symlinks and what does not exist are
/// left out (a symlinked directory cannot be mounted over, and what does not exist has
/// nothing to pin).
fn ancestors_to_pin(m: &Mounts<'_>) -> Vec<PathBuf> {
    let mut out = std::collections::BTreeSet::new();
    for path in m.read_only.iter().chain(m.hidden) {
        for tree in m.writable {
            let Ok(rel) = path.strip_prefix(tree) else {
                continue;
            };
            let mut dir = tree.clone();
            for part in rel.parent().into_iter().flat_map(Path::components) {
                dir.push(part);
                if std::fs::symlink_metadata(&dir).is_ok_and(|d| d.is_dir()) {
                    out.insert(dir.clone());
                } else {
                    break;
                }
            }
        }
    }
    out.into_iter().collect()
}

/// The mount points that are read-only now (`/proc/self/mountinfo`).
fn read_only_mount_points() -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let point = fields.get(4)?;
            let options = fields.get(5)?;
            options
                .split(',')
                .any(|o| o == "ro")
                .then(|| PathBuf::from(unescape(point)))
        })
        .collect()
}

/// A mountinfo path: spaces, tabs, newlines and backslashes are written as octal escapes.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(code) = field
                .get(i + 1..i + 4)
                .and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
