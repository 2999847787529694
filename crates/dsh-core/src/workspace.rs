//! The workspace: the directory a session may touch, and confined resolution of the paths a
//! model names (SPEC A2).
//!
//! Resolution is done twice, because a check alone can be raced:
//!
//! 1. [`Workspace::resolve`] (what policies and guards judge): the path is taken relative to
//!    the root (absolute paths only if inside it), `.` and `..` are applied lexically, and every
//!    symlink of the part that exists is followed; the result must stay under the canonical
//!    root. A dangling symlink is refused: writing through it would create its target.
//! 2. [`Workspace::open_read`] (what tools use): opens the *resolved* path without following a
//!    final symlink and without blocking on FIFOs, then checks the opened handle itself — its
//!    real path (Linux: `/proc/self/fd`), its type and its link count — so a path swapped for
//!    a symlink between check and use, or a hard link to a file outside, is refused.
//!
//! Judgements and failures. Most refusals are judgements about the path (outside, dangling,
//! hard-linked, the wrong kind of file) and a policy denies on them. Two are not: an OS error
//! on the way ([`PathError::Io`]: `EMFILE`, a directory that cannot be opened) and a path that
//! changed while it was being resolved ([`PathError::Changed`]: a name was a symlink when
//! looked up and is something else when read, a directory is a file a moment later). Both say
//! nothing about where the path leads, so [`PathError::is_failure`] sets them apart: the call
//! must not run unjudged, but its result is a `tool_error` naming the error, never a denial
//! (DESIGN §4). A race is told from a real escape by what each step saw: a walk that
//! completes is judged on where it ends, however the tree changed under it; only a step whose
//! two looks at one name disagree is [`PathError::Changed`].
//!
//! Cost. A path longer than the platform's [`PATH_MAX`] names no file any system call would
//! accept, so it is refused ([`PathError::TooLong`]) before any file-system call; the
//! pipeline refuses such a declared path as `invalid_args` before gate 1, with the same
//! check ([`check_path_length`]). A path of at most `PATH_MAX` bytes has at most
//! `PATH_MAX / 2` components (one character and a `/` each). The resolution then walks the
//! path once, component by component, from a handle on the directory reached so far (Unix:
//! `fstatat`, `openat`, `readlinkat` relative to a directory descriptor), so each component
//! costs the same whatever its depth and the whole walk is linear in the number of components.
//! Symlinks met on the way add their targets' components, at most [`MAX_SYMLINKS`] of them
//! as the kernel allows. A walk of a 4096-byte path of one-character components takes
//! milliseconds (BENCHMARKS.md), so resolution never delays an interrupt noticeably. (Before,
//! each prefix was looked up by its whole path, longest first: quadratic, ten seconds for a
//! 256 KB path.)

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::quote::{quote_capped, quote_capped_path};

/// The longest path, in bytes, that the platform's system calls accept (Linux: 4096).
#[cfg(unix)]
pub const PATH_MAX: usize = libc::PATH_MAX as usize;
/// The longest path, in bytes, that the platform's system calls accept (Linux: 4096).
#[cfg(not(unix))]
pub const PATH_MAX: usize = 4096;

/// The most symlinks one resolution follows before it calls the path a loop (Linux's
/// `MAXSYMLINKS`, and glibc's `realpath`).
pub const MAX_SYMLINKS: usize = 40;

/// Why a path was refused. Messages name the path as given, capped ([`quote_capped`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    #[error("{} is outside the workspace{}", quote_capped(given), resolved.as_ref().map(|r| format!(" (it resolves to {})", quote_capped(&r.to_string_lossy()))).unwrap_or_default())]
    Outside {
        given: String,
        resolved: Option<PathBuf>,
    },
    #[error("the path is empty")]
    Empty,
    /// Longer than [`PATH_MAX`]; `shown` is its capped quote, `len` its length in bytes.
    #[error(
        "the path {shown} is longer than any path the system accepts ({PATH_MAX} bytes, PATH_MAX), so it names no file; name a shorter path"
    )]
    TooLong { shown: String, len: usize },
    #[error("{} contains a NUL byte", quote_capped(.0))]
    Nul(String),
    #[error(
        "{} is a symlink that cannot be resolved (dangling or a loop); it is refused",
        quote_capped(given)
    )]
    Unresolvable { given: String },
    #[error("{} does not exist", quote_capped(given))]
    NotFound { given: String },
    #[error("{} is {what}, not a regular file", quote_capped(given))]
    NotRegular { given: String, what: &'static str },
    #[error(
        "{} has {links} hard links; a hard link can reach a file outside the workspace, so it is refused",
        quote_capped(given)
    )]
    HardLinked { given: String, links: u64 },
    /// An OS error on the way (`EMFILE`, a directory that cannot be opened): not a
    /// judgement about the path ([`PathError::is_failure`]).
    #[error("{}: {source}", quote_capped(given))]
    Io {
        given: String,
        #[source]
        source: io::Error,
    },
    /// A name on the way was one thing when looked up and another when read or opened (a
    /// symlink swapped for a directory, a directory for a file): not a judgement about the
    /// path ([`PathError::is_failure`]).
    #[error("{} changed while being resolved; try again", quote_capped(given))]
    Changed { given: String },
}

impl PathError {
    /// Whether resolution *failed* rather than judged: an OS error on the way
    /// ([`PathError::Io`]) or a path that changed under it ([`PathError::Changed`]). Nothing
    /// is known about where such a path leads, so a caller must not touch it — but the
    /// result is a `tool_error` naming the error, never a denial (DESIGN §4).
    pub fn is_failure(&self) -> bool {
        matches!(self, PathError::Io { .. } | PathError::Changed { .. })
    }
}

/// Refuses a path longer than [`PATH_MAX`] bytes ([`PathError::TooLong`]), touching nothing.
/// [`Workspace::resolve`] starts with it, and the pipeline applies it to every declared path
/// before gate 1, so such a path is `invalid_args` whichever tool or policy meets it.
pub fn check_path_length(path: &Path) -> Result<(), PathError> {
    let len = path.as_os_str().len();
    if len <= PATH_MAX {
        return Ok(());
    }
    Err(PathError::TooLong {
        shown: quote_capped_path(path),
        len,
    })
}

/// A path inside the workspace, as resolved for one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedPath {
    /// The path as the model gave it.
    pub given: String,
    /// The canonical absolute path (symlinks of the existing part followed).
    pub abs: PathBuf,
    /// `abs` relative to the root (empty for the root itself).
    pub rel: PathBuf,
    /// Whether the walk stopped at a name that is not a directory with names still below it
    /// (`file.txt/x`): such a path cannot exist, so `ENOTDIR` on it later is no race.
    below_file: bool,
}

impl ResolvedPath {
    /// What an OS error met while using this path (an `lstat`, an `open`) means, given what
    /// the resolution saw. `abs` has no symlink in it and every directory on it was entered,
    /// so a symlink met now (`ELOOP` under `O_NOFOLLOW`) or a directory that is no longer one
    /// (`ENOTDIR`, unless the walk already stopped below a file) means the path changed since
    /// it was resolved ([`PathError::Changed`]); `ENOENT` is [`PathError::NotFound`]; anything
    /// else is an OS error on the way ([`PathError::Io`]).
    pub fn error(&self, e: io::Error) -> PathError {
        let given = self.given.clone();
        match e.raw_os_error() {
            _ if e.kind() == io::ErrorKind::NotFound => PathError::NotFound { given },
            Some(libc_errno::ENOTDIR) if self.below_file => PathError::NotFound { given },
            Some(libc_errno::ELOOP | libc_errno::ENOTDIR) => PathError::Changed { given },
            _ => PathError::Io { given, source: e },
        }
    }

    /// [`PathError::Changed`] for this path: what `lstat` shows at `abs` is a symlink, which
    /// the resolution followed away.
    pub fn changed(&self) -> PathError {
        PathError::Changed {
            given: self.given.clone(),
        }
    }
}

/// The root a session is confined to. Cheap to share behind an `Arc`.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// Opens the workspace at `root` (which must be an existing directory); the root is
    /// canonicalized once.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = std::fs::canonicalize(root.as_ref())?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root.display()),
            ));
        }
        Ok(Workspace { root })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether a canonical absolute path is the root or under it.
    pub fn contains(&self, abs: &Path) -> bool {
        abs.starts_with(&self.root)
    }

    /// Resolves a path named by the model; see the module docs. The path need not exist.
    pub fn resolve(&self, given: &str) -> Result<ResolvedPath, PathError> {
        if given.is_empty() {
            return Err(PathError::Empty);
        }
        check_path_length(Path::new(given))?;
        if given.contains('\0') {
            return Err(PathError::Nul(given.to_owned()));
        }
        let outside = |resolved: Option<PathBuf>| PathError::Outside {
            given: given.to_owned(),
            resolved,
        };
        let lexical = lexical(&self.root, Path::new(given));
        let Ok(below) = lexical.strip_prefix(&self.root) else {
            return Err(outside(Some(lexical)));
        };
        let (abs, below_file) = walk(&self.root, below).map_err(|e| match e {
            Walk::Unresolvable => PathError::Unresolvable {
                given: given.to_owned(),
            },
            Walk::Changed => PathError::Changed {
                given: given.to_owned(),
            },
            Walk::Io(source) => PathError::Io {
                given: given.to_owned(),
                source,
            },
        })?;
        if !self.contains(&abs) {
            return Err(outside(Some(abs)));
        }
        let rel = abs
            .strip_prefix(&self.root)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Ok(ResolvedPath {
            given: given.to_owned(),
            abs,
            rel,
            below_file,
        })
    }

    /// Opens an existing regular file for reading, confined (see the module docs).
    pub fn open_read(&self, given: &str) -> Result<(File, ResolvedPath), PathError> {
        let resolved = self.resolve(given)?;
        let mut options = OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // Never follow a symlink swapped in after `resolve`; never block on a FIFO.
            options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
        }
        // A symlink met now (`ELOOP`) was swapped in after `resolve`: the path changed. Where
        // it leads is judged by resolving afresh, which the caller's retry does.
        let file = options.open(&resolved.abs).map_err(|e| resolved.error(e))?;
        self.verify_file(&file, &resolved)?;
        Ok((file, resolved))
    }

    /// Checks an opened handle: a regular file with one link, really inside the root.
    pub fn verify_file(&self, file: &File, resolved: &ResolvedPath) -> Result<(), PathError> {
        let given = || resolved.given.clone();
        let meta = file.metadata().map_err(|source| PathError::Io {
            given: given(),
            source,
        })?;
        if !meta.file_type().is_file() {
            return Err(PathError::NotRegular {
                given: given(),
                what: describe_type(&meta),
            });
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if meta.nlink() > 1 {
                return Err(PathError::HardLinked {
                    given: given(),
                    links: meta.nlink(),
                });
            }
        }
        match handle_path(file) {
            Some(real) if !self.contains(&real) => Err(PathError::Outside {
                given: given(),
                resolved: Some(real),
            }),
            _ => Ok(()),
        }
    }
}

/// The path the kernel has for an open handle, where the platform tells.
fn handle_path(file: &File) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        None
    }
}

fn describe_type(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// `root.join(path)` with `.` and `..` applied lexically (`..` at `/` stays at `/`).
fn lexical(root: &Path, path: &Path) -> PathBuf {
    let mut out = if path.is_absolute() {
        PathBuf::new()
    } else {
        root.to_path_buf()
    };
    for c in path.components() {
        match c {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Why [`walk`] stopped without a path.
enum Walk {
    /// A symlink on the way is dangling, or symlinks loop (more than [`MAX_SYMLINKS`]).
    Unresolvable,
    /// A name changed between two looks at it ([`PathError::Changed`]).
    Changed,
    Io(io::Error),
}

impl From<io::Error> for Walk {
    fn from(e: io::Error) -> Self {
        Walk::Io(e)
    }
}

/// One step of a walk: a name to look up, `..`, or a restart at a root.
enum Step {
    Name(OsString),
    Up,
    Root(PathBuf),
}

/// The canonical form of `root/below`, where `root` is canonical and `below` has only plain
/// names: each name is looked up once, from a handle on the directory reached so far.
///
/// This is what `canonicalize` of the deepest existing ancestor, plus the names below it,
/// gives: a name of `below` that does not exist (in any form) ends the walk and it and every
/// name after it are kept as they are, since nothing can exist below them. A symlink is
/// followed at once: its target's steps are walked next (`..` physically, from the directory
/// reached), and every one of them must exist — a target that does not is dangling.
///
/// Also says whether the walk stopped at a non-directory with names still below it.
fn walk(root: &Path, below: &Path) -> Result<(PathBuf, bool), Walk> {
    // The steps still to take, the next one last. A symlink's target goes on top, so every
    // step of a target is above every name of `below`.
    let mut steps: Vec<(Step, bool)> = below
        .components()
        .rev()
        .map(|c| (Step::Name(c.as_os_str().to_owned()), false))
        .collect();
    let mut at = Cursor::open(root.to_path_buf())?;
    let mut links = 0;
    while let Some((step, from_link)) = steps.pop() {
        let name = match step {
            Step::Name(name) => name,
            Step::Up => {
                at.up()?;
                continue;
            }
            Step::Root(root) => {
                at = Cursor::open(root)?;
                continue;
            }
        };
        let kind = match at.step(&name) {
            Ok(kind) => kind,
            Err(Lookup::Missing(e)) if from_link => {
                return Err(match e.raw_os_error() {
                    Some(libc_errno::ENOENT | libc_errno::ELOOP) => Walk::Unresolvable,
                    _ => Walk::Io(e),
                });
            }
            // Nothing exists below a name that does not: keep it and the rest as given.
            Err(Lookup::Missing(_)) => return Ok((at.rest(name, steps), false)),
            Err(Lookup::Changed) => return Err(Walk::Changed),
            Err(Lookup::Failed(e)) => return Err(Walk::Io(e)),
        };
        match kind {
            Kind::Entered => {}
            Kind::Symlink => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(Walk::Unresolvable);
                }
                let target = at.read_link(&name).map_err(|e| match e.raw_os_error() {
                    // Looked up as a symlink, gone or no longer a symlink when read.
                    Some(libc_errno::EINVAL | libc_errno::ENOENT) => Walk::Changed,
                    _ => Walk::Io(e),
                })?;
                steps.extend(target_steps(&target)?.into_iter().rev().map(|s| (s, true)));
            }
            Kind::Other => {
                // A file (or FIFO, device, socket): nothing can be below it.
                return match steps.last() {
                    None => Ok((at.rest(name, steps), false)),
                    Some((_, false)) => Ok((at.rest(name, steps), true)),
                    Some((_, true)) => Err(Walk::Io(io::Error::new(
                        io::ErrorKind::NotADirectory,
                        "a symlink's target goes through a file that is not a directory",
                    ))),
                };
            }
        }
    }
    Ok((at.path, false))
}

/// The steps of a symlink's target, in order.
fn target_steps(target: &Path) -> Result<Vec<Step>, Walk> {
    if target.as_os_str().is_empty() {
        return Err(Walk::Unresolvable);
    }
    let mut steps = Vec::new();
    let mut start = PathBuf::new();
    for c in target.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => start.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => steps.push(Step::Up),
            Component::Normal(n) => steps.push(Step::Name(n.to_owned())),
        }
    }
    if !start.as_os_str().is_empty() {
        steps.insert(0, Step::Root(start));
    }
    Ok(steps)
}

/// What a name is, once looked up.
enum Kind {
    /// A directory, and the cursor is now in it.
    Entered,
    Symlink,
    Other,
}

/// Why a name could not be looked up.
enum Lookup {
    /// `lstat` fails: as far as the walk can tell, nothing has that name.
    Missing(io::Error),
    /// The name exists but the walk cannot go on (a directory that cannot be opened): the
    /// resolution fails rather than guess.
    Failed(io::Error),
    /// The two looks at the name disagree: `openat` found no directory, `fstatat` then found
    /// one.
    Changed,
}

/// The errno values the walk tells apart (`libc` is a Unix-only dependency).
mod libc_errno {
    #[cfg(unix)]
    pub(super) use libc::{EINVAL, ELOOP, ENOENT, ENOTDIR};
    #[cfg(not(unix))]
    pub(super) const ENOENT: i32 = 2;
    #[cfg(not(unix))]
    pub(super) const EINVAL: i32 = 22;
    #[cfg(not(unix))]
    pub(super) const ELOOP: i32 = -1;
    #[cfg(not(unix))]
    pub(super) const ENOTDIR: i32 = -2;
}

/// Where a walk is: a directory, by its canonical path and (on Unix) an open handle on it,
/// so that looking up a name below it costs the same at any depth.
struct Cursor {
    path: PathBuf,
    #[cfg(unix)]
    dir: std::os::fd::OwnedFd,
}

#[cfg(unix)]
impl Cursor {
    /// A handle that can only look names up: `O_PATH` where there is one.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    const FLAGS: rustix::fs::OFlags = rustix::fs::OFlags::PATH
        .union(rustix::fs::OFlags::DIRECTORY)
        .union(rustix::fs::OFlags::CLOEXEC);
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    const FLAGS: rustix::fs::OFlags = rustix::fs::OFlags::RDONLY
        .union(rustix::fs::OFlags::DIRECTORY)
        .union(rustix::fs::OFlags::CLOEXEC);

    fn open(path: PathBuf) -> io::Result<Cursor> {
        let dir = rustix::fs::open(&path, Self::FLAGS, rustix::fs::Mode::empty())?;
        Ok(Cursor { path, dir })
    }

    /// Looks `name` up, entering it if it is a directory: one `openat` that refuses
    /// anything but a directory (and does not follow a symlink), then, only if that fails, an
    /// `fstatat` to tell what the name is instead.
    fn step(&mut self, name: &OsStr) -> Result<Kind, Lookup> {
        use rustix::fs::FileType;
        use rustix::io::Errno;
        let flags = Self::FLAGS | rustix::fs::OFlags::NOFOLLOW;
        let opened = match rustix::fs::openat(&self.dir, name, flags, rustix::fs::Mode::empty()) {
            Ok(dir) => {
                self.dir = dir;
                self.path.push(name);
                return Ok(Kind::Entered);
            }
            Err(Errno::NOENT) => return Err(Lookup::Missing(Errno::NOENT.into())),
            // `ENOTDIR` (or `ELOOP` for a symlink where there is no `O_PATH`): look closer.
            Err(e) => e,
        };
        let st = rustix::fs::statat(&self.dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| Lookup::Missing(e.into()))?;
        match FileType::from_raw_mode(st.st_mode) {
            // `openat` said "not a directory" (or "a symlink"), `fstatat` says directory: the
            // name was swapped between the two calls.
            FileType::Directory if matches!(opened, Errno::NOTDIR | Errno::LOOP) => {
                Err(Lookup::Changed)
            }
            FileType::Directory => Err(Lookup::Failed(opened.into())),
            FileType::Symlink => Ok(Kind::Symlink),
            _ => Ok(Kind::Other),
        }
    }

    /// To the parent: the physical one, as the kernel goes up (`..` of `/` is `/`).
    fn up(&mut self) -> io::Result<()> {
        self.dir = rustix::fs::openat(&self.dir, "..", Self::FLAGS, rustix::fs::Mode::empty())?;
        self.path.pop();
        Ok(())
    }

    fn read_link(&self, name: &OsStr) -> io::Result<PathBuf> {
        use std::os::unix::ffi::OsStringExt;
        let target = rustix::fs::readlinkat(&self.dir, name, Vec::new())?;
        Ok(PathBuf::from(OsString::from_vec(target.into_bytes())))
    }
}

/// Elsewhere, by path: each lookup costs the length of the path (still bounded by
/// [`PATH_MAX`]).
#[cfg(not(unix))]
impl Cursor {
    fn open(path: PathBuf) -> io::Result<Cursor> {
        std::fs::metadata(&path)?;
        Ok(Cursor { path })
    }

    fn step(&mut self, name: &OsStr) -> Result<Kind, Lookup> {
        let t = std::fs::symlink_metadata(self.path.join(name))
            .map_err(Lookup::Missing)?
            .file_type();
        Ok(if t.is_symlink() {
            Kind::Symlink
        } else if t.is_dir() {
            self.path.push(name);
            Kind::Entered
        } else {
            Kind::Other
        })
    }

    fn up(&mut self) -> io::Result<()> {
        self.path.pop();
        Ok(())
    }

    fn read_link(&self, name: &OsStr) -> io::Result<PathBuf> {
        std::fs::read_link(self.path.join(name))
    }
}

impl Cursor {
    /// The path reached, then `name`, then the names still to take, as they are.
    fn rest(self, name: OsString, steps: Vec<(Step, bool)>) -> PathBuf {
        let mut path = self.path;
        path.push(name);
        for (step, _) in steps.into_iter().rev() {
            if let Step::Name(n) = step {
                path.push(n);
            }
        }
        path
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Workspace) {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("src")).unwrap();
        std::fs::write(ws.path().join("src/lib.rs"), "fn main() {}").unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        let w = Workspace::new(ws.path()).unwrap();
        (ws, outside, w)
    }

    #[test]
    fn relative_paths_resolve_inside() {
        let (_ws, _o, w) = setup();
        let r = w.resolve("src/../src/./lib.rs").unwrap();
        assert_eq!(r.rel, PathBuf::from("src/lib.rs"));
        assert_eq!(w.resolve(".").unwrap().rel, PathBuf::new());
        assert_eq!(
            w.resolve("new/dir/file.txt").unwrap().rel,
            PathBuf::from("new/dir/file.txt")
        );
    }

    #[test]
    fn dotdot_escapes_are_outside() {
        let (_ws, _o, w) = setup();
        for p in [
            "..",
            "../x",
            "src/../../x",
            "src/../../../../../../etc/passwd",
        ] {
            assert!(
                matches!(w.resolve(p), Err(PathError::Outside { .. })),
                "{p}"
            );
        }
    }

    #[test]
    fn absolute_paths_only_inside() {
        let (ws, o, w) = setup();
        assert!(matches!(
            w.resolve("/etc/passwd"),
            Err(PathError::Outside { .. })
        ));
        let secret = o.path().join("secret");
        assert!(matches!(
            w.resolve(secret.to_str().unwrap()),
            Err(PathError::Outside { .. })
        ));
        let inside = ws.path().join("src/lib.rs");
        assert_eq!(
            w.resolve(inside.to_str().unwrap()).unwrap().rel,
            PathBuf::from("src/lib.rs")
        );
    }

    #[test]
    fn symlinks_pointing_outside_are_outside() {
        let (ws, o, w) = setup();
        symlink(o.path().join("secret"), ws.path().join("link")).unwrap();
        symlink(o.path(), ws.path().join("dirlink")).unwrap();
        assert!(matches!(w.resolve("link"), Err(PathError::Outside { .. })));
        assert!(matches!(
            w.resolve("dirlink/secret"),
            Err(PathError::Outside { .. })
        ));
        assert!(matches!(
            w.resolve("dirlink/new-file"),
            Err(PathError::Outside { .. })
        ));
    }

    #[test]
    fn dangling_symlinks_are_refused() {
        let (ws, o, w) = setup();
        symlink(o.path().join("not-yet"), ws.path().join("dangling")).unwrap();
        assert!(matches!(
            w.resolve("dangling"),
            Err(PathError::Unresolvable { .. })
        ));
        assert!(matches!(
            w.resolve("dangling/below"),
            Err(PathError::Unresolvable { .. })
        ));
    }

    #[test]
    fn symlinks_inside_are_followed() {
        let (ws, _o, w) = setup();
        symlink(ws.path().join("src"), ws.path().join("alias")).unwrap();
        assert_eq!(
            w.resolve("alias/lib.rs").unwrap().rel,
            PathBuf::from("src/lib.rs")
        );
    }

    #[test]
    fn symlink_chains_and_relative_targets_are_followed_physically() {
        let (ws, o, w) = setup();
        std::fs::create_dir_all(ws.path().join("a/b")).unwrap();
        // `up` -> `a/b/..`: `..` of a target is taken from where the link is, physically.
        symlink("b/..", ws.path().join("a/up")).unwrap();
        symlink("../../src", ws.path().join("a/b/src")).unwrap();
        symlink("a/b/src", ws.path().join("chain")).unwrap();
        assert_eq!(w.resolve("a/up/b").unwrap().rel, PathBuf::from("a/b"));
        assert_eq!(
            w.resolve("chain/lib.rs").unwrap().rel,
            PathBuf::from("src/lib.rs")
        );
        // A link out and back in again is inside.
        let name = ws.path().file_name().unwrap().to_str().unwrap();
        let back = format!("{}/../{name}", o.path().display());
        symlink(back, ws.path().join("round")).unwrap();
        assert_eq!(
            w.resolve("round/src/lib.rs").unwrap().rel,
            PathBuf::from("src/lib.rs")
        );
        // Names below a file, or below a link to one, are kept as given.
        symlink("src/lib.rs", ws.path().join("file-link")).unwrap();
        assert_eq!(
            w.resolve("file-link/x/y").unwrap().rel,
            PathBuf::from("src/lib.rs/x/y")
        );
        assert_eq!(
            w.resolve("src/lib.rs/x").unwrap().rel,
            PathBuf::from("src/lib.rs/x")
        );
        // A target that goes through a file cannot be resolved.
        symlink("src/lib.rs/x", ws.path().join("through-file")).unwrap();
        assert!(matches!(
            w.resolve("through-file"),
            Err(PathError::Io { .. })
        ));
    }

    #[test]
    fn symlink_loops_are_refused() {
        let (ws, _o, w) = setup();
        symlink("loop-b", ws.path().join("loop-a")).unwrap();
        symlink("loop-a", ws.path().join("loop-b")).unwrap();
        symlink(".", ws.path().join("self")).unwrap();
        assert!(matches!(
            w.resolve("loop-a/x"),
            Err(PathError::Unresolvable { .. })
        ));
        // Forty links are followed, as the kernel follows them; the forty-first is a loop.
        let forty = "self/".repeat(MAX_SYMLINKS);
        assert_eq!(w.resolve(&forty).unwrap().rel, PathBuf::new());
        assert!(matches!(
            w.resolve(&format!("{forty}self")),
            Err(PathError::Unresolvable { .. })
        ));
    }

    /// `depth` nested directories `a/a/…` under `root`, made relative to directory handles
    /// (their paths are longer than a system call accepts).
    fn deep_tree(root: &Path, depth: usize) {
        use rustix::fs::{Mode, OFlags};
        let mut dir =
            rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        for _ in 0..depth {
            rustix::fs::mkdirat(&dir, "a", Mode::RWXU).unwrap();
            dir = rustix::fs::openat(&dir, "a", OFlags::PATH | OFlags::DIRECTORY, Mode::empty())
                .unwrap();
        }
    }

    #[test]
    fn a_path_of_path_max_bytes_resolves_component_by_component() {
        let (ws, _o, w) = setup();
        // 4096 bytes on Linux: 2048 one-character components, every one a real directory.
        let path = "a/".repeat(PATH_MAX / 2);
        assert_eq!(path.len(), PATH_MAX);
        deep_tree(ws.path(), PATH_MAX / 2);
        let r = w.resolve(&path).unwrap();
        assert_eq!(r.rel.components().count(), PATH_MAX / 2);
        assert_eq!(
            r.abs,
            ws.path()
                .canonicalize()
                .unwrap()
                .join(&path[..PATH_MAX - 1])
        );
        // Deeper than the tree: the names below it are kept as given.
        let below = format!("{}x/y", "a/".repeat(PATH_MAX / 2 - 2));
        assert_eq!(
            w.resolve(&below).unwrap().rel.components().count(),
            PATH_MAX / 2
        );
        // A symlink at the bottom of the tree is still followed and confined.
        let bottom = format!("{}b", "a/".repeat(PATH_MAX / 2 - 1));
        let mut dir = rustix::fs::open(
            ws.path(),
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        for _ in 0..PATH_MAX / 2 - 1 {
            dir = rustix::fs::openat(
                &dir,
                "a",
                rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
                rustix::fs::Mode::empty(),
            )
            .unwrap();
        }
        rustix::fs::symlinkat("/etc", &dir, "b").unwrap();
        assert!(matches!(w.resolve(&bottom), Err(PathError::Outside { .. })));
    }

    #[test]
    fn a_path_longer_than_path_max_is_refused_before_any_file_system_call() {
        let ws = tempfile::tempdir().unwrap();
        let w = Workspace::new(ws.path()).unwrap();
        // With the root gone, any look-up fails: a refusal that is not `Io` touched nothing.
        drop(ws);
        assert!(matches!(w.resolve("src"), Err(PathError::Io { .. })));
        let long = format!("{}a", "a/".repeat(PATH_MAX / 2));
        assert_eq!(long.len(), PATH_MAX + 1);
        let e = w.resolve(&long).unwrap_err();
        assert!(
            matches!(e, PathError::TooLong { len, .. } if len == PATH_MAX + 1),
            "{e}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains("(4097 bytes)") && msg.contains("4096 bytes"),
            "{msg}"
        );
        assert!(msg.len() < 400, "{msg}");
        // The same check, as the pipeline applies it to declared paths.
        assert!(check_path_length(Path::new(&long)).is_err());
        assert!(check_path_length(Path::new(&long[1..])).is_ok());
    }

    #[test]
    fn open_read_refuses_hard_links_fifos_and_directories() {
        let (ws, o, w) = setup();
        std::fs::hard_link(o.path().join("secret"), ws.path().join("hard")).unwrap();
        assert!(matches!(
            w.open_read("hard"),
            Err(PathError::HardLinked { links: 2, .. })
        ));
        let fifo = ws.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        #[allow(unsafe_code)]
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(rc, 0);
        assert!(matches!(
            w.open_read("fifo"),
            Err(PathError::NotRegular { what: "a FIFO", .. })
        ));
        assert!(matches!(
            w.open_read("src"),
            Err(PathError::NotRegular {
                what: "a directory",
                ..
            })
        ));
        assert!(matches!(
            w.open_read("missing"),
            Err(PathError::NotFound { .. })
        ));
        assert!(w.open_read("src/lib.rs").is_ok());
    }

    #[test]
    fn a_symlink_swapped_in_after_resolution_is_refused_at_open() {
        let (ws, o, w) = setup();
        let resolved = w.resolve("src/lib.rs").unwrap();
        // The attacker swaps the directory for a symlink to the outside after the check.
        std::fs::rename(ws.path().join("src"), ws.path().join("src-old")).unwrap();
        std::fs::create_dir(o.path().join("src")).unwrap();
        std::fs::write(o.path().join("src/lib.rs"), "stolen").unwrap();
        symlink(o.path().join("src"), ws.path().join("src")).unwrap();
        let mut options = OpenOptions::new();
        use std::os::unix::fs::OpenOptionsExt;
        options
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        let file = options.open(&resolved.abs).unwrap();
        assert!(matches!(
            w.verify_file(&file, &resolved),
            Err(PathError::Outside { .. })
        ));
        // And open_read resolves afresh and refuses too.
        assert!(matches!(
            w.open_read("src/lib.rs"),
            Err(PathError::Outside { .. })
        ));
    }
}
