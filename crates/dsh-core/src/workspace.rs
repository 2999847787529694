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

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a path was refused. Messages name the path as given.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    #[error("`{given}` is outside the workspace{}", resolved.as_ref().map(|r| format!(" (it resolves to {})", r.display())).unwrap_or_default())]
    Outside {
        given: String,
        resolved: Option<PathBuf>,
    },
    #[error("the path is empty")]
    Empty,
    #[error("`{0}` contains a NUL byte")]
    Nul(String),
    #[error("`{given}` is a symlink that cannot be resolved (dangling or a loop); it is refused")]
    Unresolvable { given: String },
    #[error("`{given}` does not exist")]
    NotFound { given: String },
    #[error("`{given}` is {what}, not a regular file")]
    NotRegular { given: String, what: &'static str },
    #[error(
        "`{given}` has {links} hard links; a hard link can reach a file outside the workspace, so it is refused"
    )]
    HardLinked { given: String, links: u64 },
    #[error("`{given}`: {source}")]
    Io {
        given: String,
        #[source]
        source: io::Error,
    },
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
        if given.contains('\0') {
            return Err(PathError::Nul(given.to_owned()));
        }
        let outside = |resolved: Option<PathBuf>| PathError::Outside {
            given: given.to_owned(),
            resolved,
        };
        let lexical = lexical(&self.root, Path::new(given));
        if !self.contains(&lexical) {
            return Err(outside(Some(lexical)));
        }
        // The deepest ancestor that exists in any form (a dangling symlink counts).
        let mut existing = lexical.as_path();
        let mut rest = Vec::new();
        while std::fs::symlink_metadata(existing).is_err() {
            match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_owned());
                    existing = parent;
                }
                _ => break,
            }
        }
        let mut abs = std::fs::canonicalize(existing).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => PathError::Unresolvable {
                given: given.to_owned(),
            },
            _ if e.raw_os_error() == Some(40) => PathError::Unresolvable {
                given: given.to_owned(),
            },
            _ => PathError::Io {
                given: given.to_owned(),
                source: e,
            },
        })?;
        for name in rest.iter().rev() {
            abs.push(name);
        }
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
        let file = options.open(&resolved.abs).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => PathError::NotFound {
                given: given.to_owned(),
            },
            _ if e.raw_os_error() == Some(40) => PathError::Outside {
                given: given.to_owned(),
                resolved: None,
            },
            _ => PathError::Io {
                given: given.to_owned(),
                source: e,
            },
        })?;
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
