//! What the hardened profile (`auto`) keeps from a command inside the workspace, before and
//! after it runs.
//!
//! Before: [`Keep::survey`] lists what to mount read-only (the protected paths that exist —
//! `.git`, `.dsh`, the prompt files —, every workspace file the repository's configuration
//! names, and what the configured patterns match) and what to hide (what the file tools'
//! deny/ask rules keep from reading). The sandbox helper mounts them (`sandbox/protect.rs`).
//!
//! After: [`Survey::settle`] undoes what no mount could prevent, once the command's whole
//! tree is gone (nothing of it runs while this looks): a protected path the command
//! *created* (nothing existed to mount over) is moved out of the workspace into
//! `DSH_HOME/quarantine/<session>/` — never deleted, since `mv src .dsh` would lose `src`
//! —, and a protected path that was a symlink (`CLAUDE.md -> AGENTS.md`) and was replaced is
//! moved there too and the symlink put back. When that fails, the call fails and says what
//! is left.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How many workspace entries a survey walks before it gives up (and `auto` does not run
/// the command): a survey must finish before the command starts.
const WALK_LIMIT: usize = 300_000;

/// How the hardened profile covers a workspace path a [`Judge`] picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cover {
    /// Read-only (protected; a write rule denies or asks), and moved away when created.
    ReadOnly,
    /// Unreadable (a read rule denies or asks).
    Unreadable,
}

/// What a [`Judge`] calls: a workspace-relative path in, its cover (if any) out.
pub type JudgeFn = dyn Fn(&Path) -> Option<Cover> + Send + Sync;

/// Picks workspace paths (relative, as a walk of the workspace meets them) to cover.
#[derive(Clone)]
pub struct Judge(pub Arc<JudgeFn>);

/// The same judge (one `Arc`), as settings compare.
impl PartialEq for Judge {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Judge {}

impl std::fmt::Debug for Judge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Judge(..)")
    }
}

/// What the hardened profile keeps from `auto` commands inside the workspace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// Workspace-relative paths kept read-only by name: the protected patterns' fixed
    /// prefixes (`.git`, `.dsh`) and the prompt files.
    pub fixed: Vec<PathBuf>,
    /// Judges the other paths, found by walking the workspace before and after each
    /// command (protected patterns that start with a glob, the file tools' deny/ask rules);
    /// `None` when every pattern is a fixed path.
    pub judge: Option<Judge>,
}

/// The kept paths as they were before one command.
#[derive(Debug, Default)]
pub(super) struct Survey {
    /// Absolute, existing: mounted read-only.
    pub read_only: Vec<PathBuf>,
    /// Absolute, existing: hidden.
    pub hidden: Vec<PathBuf>,
    /// Fixed paths that did not exist.
    missing: Vec<PathBuf>,
    /// Fixed paths that were symlinks, and what they pointed to.
    links: Vec<(PathBuf, PathBuf)>,
    /// What the judge covered read-only.
    matched: HashSet<PathBuf>,
}

impl Keep {
    /// The kept paths of the workspace at `root` now; `home` expands `~/` in git's
    /// configuration.
    pub(super) fn survey(&self, root: &Path, home: Option<&Path>) -> Result<Survey, String> {
        let mut s = Survey::default();
        let named = named_by_git(root, home);
        for rel in self.fixed.iter().chain(&named) {
            let path = root.join(rel);
            match first_entry(root, rel) {
                None => s.missing.push(path),
                Some(_) => {
                    if path
                        .symlink_metadata()
                        .is_ok_and(|m| m.file_type().is_symlink())
                        && let Ok(target) = std::fs::read_link(&path)
                    {
                        s.links.push((path.clone(), target));
                        // Where it leads, inside the workspace, is kept by name too, so that
                        // the directories above it are pinned (`AGENTS.md -> docs/agents.md`
                        // must not lose `docs` to a rename).
                        if let Ok(real) = path.canonicalize()
                            && real.starts_with(root)
                            && real != root
                        {
                            s.read_only.push(real);
                        }
                    }
                    s.read_only.push(path);
                }
            }
        }
        if let Some(judge) = &self.judge {
            for (path, cover) in walk(root, &s.read_only, judge)? {
                match cover {
                    Cover::ReadOnly => {
                        s.matched.insert(path.clone());
                        s.read_only.push(path);
                    }
                    Cover::Unreadable => s.hidden.push(path),
                }
            }
        }
        Ok(s)
    }
}

impl Keep {
    /// Whether the hardened profile keeps `rel` (workspace-relative) or a directory above it
    /// read-only or hidden: what `auto` must not let a file tool write either.
    pub(super) fn covers(&self, root: &Path, home: Option<&Path>, rel: &Path) -> bool {
        let named = named_by_git(root, home);
        let by_name = self
            .fixed
            .iter()
            .chain(&named)
            .any(|kept| rel.starts_with(kept));
        by_name
            || self.judge.as_ref().is_some_and(|judge| {
                rel.ancestors()
                    .filter(|a| !a.as_os_str().is_empty())
                    .any(|a| (judge.0)(a).is_some())
            })
    }
}

impl Survey {
    /// Undoes what the command did to kept paths that no mount could prevent (see the module
    /// docs), moving what it made into `quarantine`. `Ok`: one note per thing undone. `Err`:
    /// what could not be undone.
    pub(super) fn settle(
        &self,
        keep: &Keep,
        root: &Path,
        quarantine: &Path,
    ) -> Result<Vec<String>, String> {
        let mut notes = Vec::new();
        let mut failed = Vec::new();
        let mut away = |path: &Path, what: &str| {
            match move_away(path, quarantine) {
            Ok(to) => notes.push(format!(
                "[auto: the command {what} {}, a protected path auto may not write; it was moved to {} — run the command in ask mode if it was meant]",
                path.display(),
                to.display()
            )),
            Err(e) => failed.push(format!("{} ({e})", path.display())),
        }
        };
        let mut relink = Vec::new();
        for (link, target) in &self.links {
            if std::fs::read_link(link).ok().as_ref() == Some(target) {
                continue;
            }
            match link
                .strip_prefix(root)
                .ok()
                .and_then(|rel| first_entry(root, rel))
            {
                Some(entry) if entry == *link => away(link, "replaced the symlink"),
                // A directory above it became a symlink: that is what the command made.
                Some(entry) => away(&entry, "made a symlink of a directory above"),
                None => {}
            }
            relink.push((link, target));
        }
        for path in &self.missing {
            // What exists of it now, without following a symlink the command may have put
            // in its way (a symlinked parent must never lead the move outside).
            if let Some(entry) = path
                .strip_prefix(root)
                .ok()
                .and_then(|rel| first_entry(root, rel))
            {
                let what = if entry == *path {
                    "created"
                } else {
                    "made a symlink of a directory above"
                };
                away(&entry, what);
            }
        }
        if let Some(judge) = &keep.judge {
            let now = walk(root, &self.read_only, judge).map_err(|e| {
                format!("checking the protected paths after the command failed: {e}")
            })?;
            for (path, cover) in now {
                if cover == Cover::ReadOnly && !self.matched.contains(&path) {
                    away(&path, "created");
                }
            }
        }
        for (link, target) in relink {
            let parent_is_real = link
                .parent()
                .and_then(|p| p.strip_prefix(root).ok())
                .is_none_or(|rel| {
                    rel.as_os_str().is_empty()
                        || first_entry(root, rel).as_deref() == Some(&root.join(rel))
                            && root.join(rel).symlink_metadata().is_ok_and(|m| m.is_dir())
                });
            if !parent_is_real {
                failed.push(format!(
                    "{} (the symlink to {} was not put back: a directory above it is no longer a directory)",
                    link.display(),
                    target.display()
                ));
                continue;
            }
            match symlink(target, link) {
                Ok(()) => notes.push(format!(
                    "[auto: the symlink {} -> {} was put back]",
                    link.display(),
                    target.display()
                )),
                Err(e) => failed.push(format!(
                    "{} (the symlink to {} could not be put back: {e})",
                    link.display(),
                    target.display()
                )),
            }
        }
        if failed.is_empty() {
            Ok(notes)
        } else {
            Err(format!(
                "the command changed protected paths auto may not write, and they could not be undone: {}. Undo them by hand before anything reads them",
                failed.join("; ")
            ))
        }
    }
}

/// What git takes from the workspace at `root`: the files its configuration names, and the
/// submodules' (workspace-relative).
fn named_by_git(root: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut named =
        crate::sandbox::named_in_workspace(root, home, &crate::sandbox::global_configs(home));
    named.extend(crate::sandbox::submodule_files(root));
    named
}

/// Every path below `root` the judge covers (not descending into a covered directory, nor
/// into `skip`), with its cover.
fn walk(root: &Path, skip: &[PathBuf], judge: &Judge) -> Result<Vec<(PathBuf, Cover)>, String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // Gone since its parent was listed.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            // What cannot be listed cannot be checked: fail closed.
            Err(e) => {
                return Err(format!(
                    "{} cannot be listed to check the protected patterns ({e})",
                    dir.display()
                ));
            }
        };
        for entry in entries {
            let entry = entry.map_err(|e| {
                format!(
                    "{} cannot be listed to check the protected patterns ({e})",
                    dir.display()
                )
            })?;
            seen += 1;
            if seen > WALK_LIMIT {
                return Err(format!(
                    "the workspace has more than {WALK_LIMIT} files and directories, too many to check the protected patterns before each command"
                ));
            }
            let path = entry.path();
            if skip.contains(&path) {
                continue;
            }
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            if let Some(cover) = (judge.0)(rel) {
                out.push((path, cover));
            } else if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            }
        }
    }
    Ok(out)
}

/// The first entry on the way from `root` to `root/rel` that exists as something other than
/// a directory to go through: `root/rel` itself when every directory above it is a real
/// one, the first symlink above it when there is one, `None` when nothing is there. Never
/// follows a symlink.
fn first_entry(root: &Path, rel: &Path) -> Option<PathBuf> {
    let mut at = root.to_path_buf();
    let mut parts = rel.components().peekable();
    while let Some(part) = parts.next() {
        at.push(part);
        let meta = at.symlink_metadata().ok()?;
        if parts.peek().is_none() || meta.file_type().is_symlink() || !meta.is_dir() {
            return Some(at);
        }
    }
    Some(at)
}

/// Moves `path` into `dir` under a name not taken there, returning where it went: a rename,
/// or — across file systems, or where the command took away the write permission a rename
/// needs — a copy then a removal.
fn move_away(path: &Path, dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "unnamed".to_owned());
    let mut to = dir.join(&name);
    let mut n = 1;
    while to.symlink_metadata().is_ok() {
        to = dir.join(format!("{name}.{n}"));
        n += 1;
    }
    if std::fs::rename(path, &to).is_ok() {
        return Ok(to);
    }
    // The command may have made what it created unwritable (a directory's `..` must be
    // writable to move it to another parent); it is the session user's own.
    open_up(path);
    match std::fs::rename(path, &to) {
        Ok(()) => Ok(to),
        Err(_) => {
            copy_tree(path, &to)?;
            remove_tree(path)?;
            Ok(to)
        }
    }
}

/// Gives the owner full rights on `path` and every directory below it (symlinks untouched).
#[cfg(unix)]
fn open_up(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = path.symlink_metadata() else {
        return;
    };
    if meta.is_dir() {
        let mode = meta.permissions().mode() | 0o700;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
        if let Ok(entries) = std::fs::read_dir(path) {
            for e in entries.flatten() {
                open_up(&e.path());
            }
        }
    } else if meta.is_file() {
        let mode = meta.permissions().mode() | 0o600;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
    }
}

#[cfg(not(unix))]
fn open_up(_: &Path) {}

/// Copies `from` to `to`: directories and regular files, symlinks as symlinks; other kinds
/// (a FIFO, a socket) hold no data and are not copied.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = from.symlink_metadata()?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        symlink(&std::fs::read_link(from)?, to)
    } else if kind.is_dir() {
        std::fs::create_dir(to)?;
        for e in std::fs::read_dir(from)? {
            let e = e?;
            copy_tree(&e.path(), &to.join(e.file_name()))?;
        }
        Ok(())
    } else if kind.is_file() {
        std::fs::copy(from, to).map(|_| ())
    } else {
        Ok(())
    }
}

fn remove_tree(path: &Path) -> std::io::Result<()> {
    if path.symlink_metadata()?.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(_: &Path, _: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "symlinks are not restored on this OS",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(f: fn(&Path) -> Option<Cover>) -> Option<Judge> {
        Some(Judge(Arc::new(f)))
    }

    #[test]
    fn created_and_replaced_paths_are_moved_away_and_links_put_back() {
        let ws = tempfile::tempdir().unwrap();
        let q = tempfile::tempdir().unwrap();
        let root = ws.path();
        std::fs::write(root.join("AGENTS.md"), "notes").unwrap();
        std::os::unix::fs::symlink("AGENTS.md", root.join("CLAUDE.md")).unwrap();
        std::fs::write(root.join("old.pem"), "k").unwrap();
        let keep = Keep {
            fixed: [".dsh", "AGENTS.md", "CLAUDE.md"]
                .map(PathBuf::from)
                .to_vec(),
            judge: judge(|p| {
                p.extension()
                    .is_some_and(|e| e == "pem")
                    .then_some(Cover::ReadOnly)
            }),
        };
        let s = keep.survey(root, None).unwrap();
        assert!(s.read_only.contains(&root.join("old.pem")));
        // What the command does.
        std::fs::create_dir(root.join(".dsh")).unwrap();
        std::fs::write(root.join(".dsh/config.toml"), "x").unwrap();
        std::fs::remove_file(root.join("CLAUDE.md")).unwrap();
        std::fs::write(root.join("CLAUDE.md"), "EVIL").unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/new.pem"), "k2").unwrap();
        let notes = s.settle(&keep, root, q.path()).unwrap();
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert!(!root.join(".dsh").exists());
        assert!(!root.join("sub/new.pem").exists());
        assert!(root.join("old.pem").exists(), "what existed stays");
        assert_eq!(
            std::fs::read_to_string(root.join("CLAUDE.md")).unwrap(),
            "notes"
        );
        assert_eq!(
            std::fs::read_to_string(q.path().join(".dsh/config.toml")).unwrap(),
            "x"
        );
        assert_eq!(
            std::fs::read_to_string(q.path().join("CLAUDE.md")).unwrap(),
            "EVIL"
        );
    }

    #[test]
    fn a_directory_made_unwritable_is_moved_across_file_systems() {
        use std::os::unix::fs::PermissionsExt;
        let ws = tempfile::tempdir().unwrap();
        // /dev/shm is a file system of its own where it exists: the rename fails (EXDEV).
        let q = tempfile::Builder::new()
            .tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let dir = ws.path().join(".dsh");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("f"), "x").unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        let to = move_away(&dir, q.path()).unwrap();
        assert!(!dir.exists());
        assert_eq!(std::fs::read_to_string(to.join("f")).unwrap(), "x");
    }

    #[test]
    fn copying_keeps_symlinks_and_skips_fifos() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let from = src.path().join("t");
        std::fs::create_dir(&from).unwrap();
        std::fs::write(from.join("f"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", from.join("l")).unwrap();
        let to = dst.path().join("t");
        copy_tree(&from, &to).unwrap();
        remove_tree(&from).unwrap();
        assert_eq!(
            std::fs::read_link(to.join("l")).unwrap(),
            PathBuf::from("/etc/passwd")
        );
        assert_eq!(std::fs::read_to_string(to.join("f")).unwrap(), "x");
        assert!(!from.exists());
    }
}
