//! Confined access for the tools: opening what the model names, opening what a walk meets,
//! and the model-facing text of every refusal.
//!
//! [`Workspace`] does the resolution and the handle checks; this file decides what a refusal
//! is called (`denied` for what could reach outside, `not_found`, `invalid_args` for the wrong
//! kind of file, or a path longer than any system call accepts, `tool_error` for an OS error on
//! the way or a path that changed while being resolved) and what the model is told to do
//! instead. Paths are quoted capped ([`quote_capped`]). A path is checked with `lstat`
//! before it is opened, so a FIFO or a device is refused without ever being opened.

use std::borrow::Cow;
use std::fs::{File, Metadata, OpenOptions, ReadDir};
use std::io;
use std::path::{Path, PathBuf};

use dsh_core::{PathError, ResolvedPath, ToolError, ToolErrorKind, Workspace, quote_capped};

/// What the tool expected the path to be; chooses the advice when it is something else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    File,
    Dir,
}

/// The model-facing failure for a refused path.
pub(crate) fn path_error(e: PathError, want: Want) -> ToolError {
    use ToolErrorKind::{Denied, Failed, InvalidArgs, NotFound};
    match e {
        PathError::Outside { .. } => ToolError::new(
            Denied,
            format!("{e}; use a path inside the workspace (relative to its root)"),
        ),
        PathError::Unresolvable { .. } | PathError::HardLinked { .. } => {
            ToolError::new(Denied, e.to_string())
        }
        PathError::NotFound { .. } => ToolError::new(
            NotFound,
            format!("{e}; check the name with list_dir or find_files"),
        ),
        PathError::NotRegular { given, what } => wrong_kind(&given, what, want),
        PathError::Empty => ToolError::new(
            InvalidArgs,
            "the path is empty; use `.` for the workspace root",
        ),
        PathError::Nul(_) | PathError::TooLong { .. } => ToolError::new(InvalidArgs, e.to_string()),
        // An OS error on the way, or a path that changed under the call: never a denial.
        PathError::Io { .. } | PathError::Changed { .. } => ToolError::new(Failed, e.to_string()),
        other => ToolError::new(Failed, other.to_string()),
    }
}

/// `given` is a `what` where the tool wanted `want`.
pub(crate) fn wrong_kind(given: &str, what: &str, want: Want) -> ToolError {
    let advice = match (want, what) {
        (Want::File, "a directory") => {
            "use list_dir to see its entries, or find_files to search it"
        }
        (Want::File, _) => "only regular files can be read",
        (Want::Dir, "a regular file") => "use read_file to read it",
        (Want::Dir, _) => "only directories can be listed or searched",
    };
    ToolError::new(
        ToolErrorKind::InvalidArgs,
        format!(
            "{} is {what}, not a {}; {advice}",
            quote_capped(given),
            want.noun()
        ),
    )
}

impl Want {
    fn noun(self) -> &'static str {
        match self {
            Want::File => "regular file",
            Want::Dir => "directory",
        }
    }
}

/// What kind of file `meta` (from `lstat`) describes, as a phrase.
pub(crate) fn describe(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_file() {
        return "a regular file";
    }
    if t.is_dir() {
        return "a directory";
    }
    if t.is_symlink() {
        return "a symlink";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device file";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// `lstat` of a resolved path, as the model-facing failure when it does not exist or changed
/// since it was resolved ([`ResolvedPath::error`]). The resolution followed every symlink, so
/// a symlink found here now was swapped in since: the path changed.
pub(crate) fn lstat(resolved: &ResolvedPath, want: Want) -> Result<Metadata, ToolError> {
    let meta = std::fs::symlink_metadata(&resolved.abs)
        .map_err(|e| path_error(resolved.error(e), want))?;
    if meta.file_type().is_symlink() {
        return Err(path_error(resolved.changed(), want));
    }
    Ok(meta)
}

/// Resolves and opens a regular file the model named. Nothing else is opened: the type is
/// checked with `lstat` first, then [`Workspace::open_read`] checks the handle again.
pub(crate) fn open_file(ws: &Workspace, given: &str) -> Result<(File, ResolvedPath), ToolError> {
    let resolved = ws.resolve(given).map_err(|e| path_error(e, Want::File))?;
    let meta = lstat(&resolved, Want::File)?;
    if !meta.file_type().is_file() {
        return Err(wrong_kind(given, describe(&meta), Want::File));
    }
    ws.open_read(given).map_err(|e| path_error(e, Want::File))
}

/// Resolves a path the model named and checks that it is a directory.
pub(crate) fn resolve_dir(ws: &Workspace, given: &str) -> Result<ResolvedPath, ToolError> {
    let resolved = ws.resolve(given).map_err(|e| path_error(e, Want::Dir))?;
    let meta = lstat(&resolved, Want::Dir)?;
    if !meta.file_type().is_dir() {
        return Err(wrong_kind(given, describe(&meta), Want::Dir));
    }
    Ok(resolved)
}

/// An opened directory, checked to be inside the workspace. On Linux its entries are read
/// through the handle (`/proc/self/fd/N`), so a directory swapped for a symlink after the
/// check is not what gets listed.
pub(crate) struct OpenDir {
    /// Keeps the descriptor that `path` names alive.
    _handle: Option<File>,
    path: PathBuf,
}

impl OpenDir {
    pub(crate) fn open(ws: &Workspace, resolved: &ResolvedPath) -> Result<OpenDir, ToolError> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            use std::os::unix::fs::OpenOptionsExt;
            let handle = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(&resolved.abs)
                .map_err(|e| swapped(resolved, e))?;
            let path = PathBuf::from(format!("/proc/self/fd/{}", handle.as_raw_fd()));
            check_inside(ws, resolved, std::fs::read_link(&path).ok())?;
            Ok(OpenDir {
                _handle: Some(handle),
                path,
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = ws;
            Ok(OpenDir {
                _handle: None,
                path: resolved.abs.clone(),
            })
        }
    }

    pub(crate) fn read_dir(&self) -> io::Result<ReadDir> {
        std::fs::read_dir(&self.path)
    }

    /// A path that names the opened directory (its entries are `path().join(name)`).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// An open that failed after `resolve` accepted the path: gone (`not_found`), changed under
/// us (now a symlink or not a directory: `tool_error`, "changed while being resolved"), or an
/// OS error on the way.
#[cfg(target_os = "linux")]
fn swapped(resolved: &ResolvedPath, e: io::Error) -> ToolError {
    match e.raw_os_error() {
        // `O_DIRECTORY` on what `lstat` just called a directory: it changed since.
        Some(libc::ENOTDIR) => path_error(resolved.changed(), Want::Dir),
        _ => path_error(resolved.error(e), Want::Dir),
    }
}

#[cfg(target_os = "linux")]
fn check_inside(
    ws: &Workspace,
    resolved: &ResolvedPath,
    real: Option<PathBuf>,
) -> Result<(), ToolError> {
    match real {
        Some(real) if !ws.contains(&real) => Err(path_error(
            PathError::Outside {
                given: resolved.given.clone(),
                resolved: Some(real),
            },
            Want::Dir,
        )),
        _ => Ok(()),
    }
}

/// Why a file met during a walk was not searched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Skipped {
    /// Vanished, or became a symlink, a FIFO, a device: not a regular file any more.
    NotRegular,
    /// Has more than one hard link: it may be a file outside the workspace.
    HardLinked,
    /// Reaching it now crosses a symlink or leaves the workspace (a directory was swapped
    /// for a symlink mid-walk).
    Outside,
    /// It could not be opened for want of a resource (`EMFILE`, `ENFILE`, `ENOMEM`): not
    /// something about the file, so a search that met it cannot claim to be complete.
    Failed(io::ErrorKind, Option<i32>),
}

/// Whether `e` is the system running out of something (descriptors, memory) rather than
/// something about the file: a search that meets it has not seen everything it says it has.
pub(crate) fn out_of_resources(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        matches!(
            e.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::ENOBUFS)
        )
    }
    #[cfg(not(unix))]
    {
        e.kind() == io::ErrorKind::OutOfMemory
    }
}

impl Skipped {
    /// [`Skipped::Failed`] when `e` is [`out_of_resources`], else `otherwise`.
    fn from_io(e: &io::Error, otherwise: Skipped) -> Skipped {
        if out_of_resources(e) {
            Skipped::Failed(e.kind(), e.raw_os_error())
        } else {
            otherwise
        }
    }

    /// The OS error a [`Skipped::Failed`] stands for.
    pub(crate) fn error(self) -> Option<io::Error> {
        match self {
            Skipped::Failed(_, Some(code)) => Some(io::Error::from_raw_os_error(code)),
            Skipped::Failed(kind, None) => Some(io::Error::from(kind)),
            _ => None,
        }
    }
}

/// Opens the files a walk meets, for reading their content: never through a symlink (final
/// or intermediate), never blocking on a FIFO, and only a regular file with one link.
///
/// On Linux the file is opened with `openat2(2)` relative to the workspace root with
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`: the kernel refuses any path that leaves the root
/// or crosses a symlink, in the same call that opens it, so a directory swapped for a
/// symlink mid-walk cannot lead outside. Where `openat2` is unavailable (kernels before 5.6,
/// some seccomp profiles), each handle's real path is checked through `/proc/self/fd`
/// instead (one `readlink` per file: about a third slower on a tree of small files).
pub(crate) struct WalkOpener<'a> {
    ws: &'a Workspace,
    #[cfg(target_os = "linux")]
    root: Option<std::os::fd::OwnedFd>,
}

impl<'a> WalkOpener<'a> {
    pub(crate) fn new(ws: &'a Workspace) -> Self {
        WalkOpener {
            ws,
            #[cfg(target_os = "linux")]
            root: openat2_root(ws),
        }
    }

    /// Opens `path` (absolute, under the workspace root, as the walker found it).
    pub(crate) fn open(&self, path: &Path) -> Result<File, Skipped> {
        #[cfg(target_os = "linux")]
        let file = match (&self.root, path.strip_prefix(self.ws.root())) {
            (Some(root), Ok(rel)) => beneath(root, rel)?,
            _ => self.open_checked(path)?,
        };
        #[cfg(not(target_os = "linux"))]
        let file = self.open_checked(path)?;
        let meta = file.metadata().map_err(|_| Skipped::NotRegular)?;
        if !meta.file_type().is_file() {
            return Err(Skipped::NotRegular);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if meta.nlink() > 1 {
                return Err(Skipped::HardLinked);
            }
        }
        Ok(file)
    }

    /// The fallback: open without following a final symlink, then check the handle's path.
    fn open_checked(&self, path: &Path) -> Result<File, Skipped> {
        let mut options = OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
        }
        let file = options
            .open(path)
            .map_err(|e| Skipped::from_io(&e, Skipped::NotRegular))?;
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let link = format!("/proc/self/fd/{}", file.as_raw_fd());
            match std::fs::read_link(link) {
                Ok(real) if self.ws.contains(&real) => {}
                _ => return Err(Skipped::Outside),
            }
        }
        Ok(file)
    }
}

/// The workspace root as a directory handle for `openat2`, if the kernel has `openat2`.
#[cfg(target_os = "linux")]
fn openat2_root(ws: &Workspace) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let root = rustix::fs::open(
        ws.root(),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    // Probe: `.` beneath the root is the root itself.
    let probe = rustix::fs::openat2(
        &root,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
    );
    probe.is_ok().then_some(root)
}

#[cfg(target_os = "linux")]
fn beneath(root: &std::os::fd::OwnedFd, rel: &Path) -> Result<File, Skipped> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;
    rustix::fs::openat2(
        root,
        rel,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map(File::from)
    .map_err(|e| match e {
        Errno::LOOP | Errno::XDEV => Skipped::Outside,
        e => Skipped::from_io(&e.into(), Skipped::NotRegular),
    })
}

/// A workspace-relative path as the model sees it: `/`-separated, `.` for the root, and
/// whether it had to be shown lossily (not valid UTF-8).
pub(crate) fn display(rel: &Path) -> (String, bool) {
    if rel.as_os_str().is_empty() {
        return (".".to_owned(), false);
    }
    match rel.to_string_lossy() {
        Cow::Borrowed(s) => (s.to_owned(), false),
        Cow::Owned(s) => (s, true),
    }
}

/// The note added wherever names had to be shown lossily.
pub(crate) const LOSSY_NOTE: &str = "names marked (not UTF-8) contain bytes that are not valid UTF-8 and are shown with \u{FFFD}; tools cannot open them by that name";

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_walked_path_through_a_swapped_in_symlink_is_not_opened() {
        let ws_dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        let ws = Workspace::new(ws_dir.path()).unwrap();
        std::fs::create_dir(ws.root().join("d")).unwrap();
        std::fs::write(ws.root().join("d/ok.txt"), "fine").unwrap();
        // What the walker saw as directory `sub` is now a symlink to the outside.
        symlink(outside.path(), ws.root().join("sub")).unwrap();
        // A final symlink, even to a file inside.
        symlink(ws.root().join("d/ok.txt"), ws.root().join("alias")).unwrap();
        std::fs::hard_link(outside.path().join("secret"), ws.root().join("hard")).unwrap();
        let opener = WalkOpener::new(&ws);
        assert!(opener.open(&ws.root().join("d/ok.txt")).is_ok());
        assert_eq!(
            opener.open(&ws.root().join("sub/secret")).err(),
            Some(Skipped::Outside)
        );
        assert!(opener.open(&ws.root().join("alias")).is_err());
        assert_eq!(
            opener.open(&ws.root().join("hard")).err(),
            Some(Skipped::HardLinked)
        );
        assert!(opener.open(&ws.root().join("d")).is_err());
        // The fallback (no openat2) refuses the same escape through the handle's real path.
        assert_eq!(
            opener.open_checked(&ws.root().join("sub/secret")).err(),
            Some(Skipped::Outside)
        );
    }
}
