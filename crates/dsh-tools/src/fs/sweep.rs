//! Removing the temporary files of changes that never finished.
//!
//! A change writes `.NAME.dsh-PID-N.tmp` and renames it over its target
//! ([`crate::fs::seam`]); a process killed in between leaves the temporary file behind. It is
//! hidden, so the search tools never show it, but `git status` does. When a session starts,
//! [`sweep_stale_temp_files`] removes such a file only when all of these hold:
//!
//! * its name is exactly the seam's grammar ([`crate::fs::temp_name`]), not merely alike;
//! * the PID in it is not a live process (`/proc/PID` is absent; this process counts as live);
//! * it was last modified more than ten minutes ago. A PID names a process only in its own
//!   PID namespace: a dsh in a container that shares the workspace may be writing that file
//!   right now under a PID that is dead here. A real change writes its temporary file for
//!   milliseconds, so an old one is never a change in progress;
//! * it is a regular file, looked at and removed through a handle on its directory that was
//!   opened without following a symlink and whose real path (`/proc/self/fd`) is the directory
//!   the walk listed, inside the workspace. A directory swapped for a symlink after the walk
//!   listed it therefore leads nowhere, and `unlinkat(2)` removes a name, never what a
//!   symlink points to: nothing outside the workspace can be removed.
//!
//! **Where it looks.** In the directories grep and find_files descend into
//! ([`crate::search::searched_dirs_walk`]): not hidden ones, not `node_modules`, `target`,
//! `__pycache__`, nothing `.gitignore`d. A leftover elsewhere stays, as hidden as ever and in
//! a directory nobody searches.
//!
//! **Cost.** One walk of those directories, which lists them and opens no file (a candidate
//! is opened only if its name parses, which in a clean tree never happens): on a tree of
//! 20 000 files it took about 19 ms warm (`cargo bench -p dsh-tools --bench sweep`,
//! BENCHMARKS.md). A huge tree is cut off after 200 000 entries or 500 ms, whichever
//! comes first, so a session never waits long for housekeeping; a leftover beyond that
//! point stays, hidden as ever. Keeping a record of the directories the seam wrote
//! in (under `DSH_HOME`) would make the sweep independent of the tree's size, but costs a
//! write per change and a record that must itself be kept consistent across processes; at
//! these figures the walk is the simpler choice.
//!
//! **Only on Linux**, where liveness and a handle's real path come from `/proc` (and only if
//! `/proc` is mounted); elsewhere nothing is removed.

use dsh_core::Workspace;

/// Removes the file seam's temporary files that dead processes left in `ws` (see the module
/// documentation for exactly which). Returns how many were removed. Never fails: what cannot
/// be looked at or removed is left.
pub fn sweep_stale_temp_files(ws: &Workspace) -> usize {
    #[cfg(target_os = "linux")]
    {
        linux::sweep(ws)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = ws;
        0
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::OsStr;
    use std::fs::File;
    use std::os::fd::AsRawFd;
    use std::path::Path;
    use std::time::{Duration, Instant, SystemTime};

    use dsh_core::Workspace;
    use rustix::fs::{AtFlags, Mode, OFlags};

    use crate::fs::temp_name;
    use crate::search::searched_dirs_walk;

    /// A leftover younger than this is left alone, whatever its PID says.
    const MIN_AGE: Duration = Duration::from_secs(10 * 60);
    /// The most entries one sweep looks at.
    const MAX_ENTRIES: usize = 200_000;
    /// The longest one sweep walks.
    const MAX_TIME: Duration = Duration::from_millis(500);

    pub(super) fn sweep(ws: &Workspace) -> usize {
        if !Path::new("/proc/self").is_dir() {
            return 0;
        }
        let started = Instant::now();
        let mut removed = 0;
        for (seen, entry) in searched_dirs_walk(ws).enumerate() {
            if seen >= MAX_ENTRIES || (seen % 1024 == 0 && started.elapsed() > MAX_TIME) {
                break;
            }
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Some(pid) = temp_name::parse(entry.file_name()) else {
                continue;
            };
            if alive(pid) {
                continue;
            }
            if let Some(dir) = entry.path().parent()
                && remove_if_stale(ws, dir, entry.file_name())
            {
                removed += 1;
            }
        }
        removed
    }

    /// Whether `pid` may be a live process: anything but a clear "no such entry" says yes.
    fn alive(pid: u32) -> bool {
        if pid == std::process::id() {
            return true;
        }
        !matches!(
            std::fs::symlink_metadata(format!("/proc/{pid}")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound
        )
    }

    /// Removes `dir/name` if, seen through a checked handle on `dir`, it is an old regular file.
    fn remove_if_stale(ws: &Workspace, dir: &Path, name: &OsStr) -> bool {
        let Ok(fd) = rustix::fs::open(
            dir,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return false;
        };
        match std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
            Ok(real) if real == dir && ws.contains(&real) => {}
            _ => return false,
        }
        // O_PATH with O_NOFOLLOW: a handle on the entry itself, a symlink included, that opens
        // nothing.
        let Ok(entry) = rustix::fs::openat(
            &fd,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return false;
        };
        let Ok(meta) = File::from(entry).metadata() else {
            return false;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .is_some_and(|age| age >= MIN_AGE);
        meta.file_type().is_file()
            && old
            && rustix::fs::unlinkat(&fd, name, AtFlags::empty()).is_ok()
    }
}
