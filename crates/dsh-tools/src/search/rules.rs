//! `.gitignore` and `.ignore` rules, read by us rather than by the walker.
//!
//! The `ignore` crate reads ignore files by path with `File::open`, following symlinks: a
//! `.gitignore` committed as a symlink to `/dev/zero` makes it read forever, one to a FIFO
//! blocks it, one to a file outside the workspace reads that file. So the walker runs with
//! every standard filter off, and its entry filter asks this cache instead, which reads an
//! ignore file only if `lstat` says it is a regular file with one link and at most
//! [`MAX_RULES_FILE`] bytes, and reads it through a handle opened without following symlinks.
//!
//! Semantics follow ripgrep with `--no-require-git`: in each directory from the workspace
//! root down, `.ignore` takes precedence over `.gitignore`, which takes precedence over
//! `.git/info/exclude` (when the directory holds a `.git` directory); a deeper directory's
//! rules take precedence over its parents'; the first rule that matches (`!pattern`
//! included) decides. The directories between the workspace root and the searched directory
//! count too, and nothing above the workspace root is read.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// Ignore files larger than this are not read (a real one is a few KiB).
pub(crate) const MAX_RULES_FILE: u64 = 1024 * 1024;

/// The rules of one directory that has some, linked to the nearest ancestor that has some.
struct DirRules {
    /// In precedence order: `.ignore`, `.gitignore`, `.git/info/exclude`.
    own: Vec<Gitignore>,
    parent: Option<Arc<DirRules>>,
}

/// Per-walk cache of the rules in force in each directory.
pub(crate) struct IgnoreRules {
    root: PathBuf,
    cache: RwLock<HashMap<PathBuf, Option<Arc<DirRules>>>>,
}

impl IgnoreRules {
    /// Rules for paths under `root` (the canonical workspace root).
    pub(crate) fn new(root: &Path) -> Self {
        IgnoreRules {
            root: root.to_path_buf(),
            cache: RwLock::new(HashMap::new()),
        }
    }

    /// Whether `path` (absolute, under the root) is ignored by the rules of its ancestors.
    pub(crate) fn is_ignored(&self, path: &Path, is_dir: bool) -> bool {
        let Some(dir) = path.parent() else {
            return false;
        };
        let mut rules = self.rules_for(dir);
        while let Some(r) = rules {
            for gi in &r.own {
                match gi.matched(path, is_dir) {
                    Match::None => {}
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                }
            }
            rules = r.parent.clone();
        }
        false
    }

    /// The rules in force for entries of `dir`: its own and its ancestors' up to the root.
    fn rules_for(&self, dir: &Path) -> Option<Arc<DirRules>> {
        if let Some(hit) = self
            .cache
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(dir)
        {
            return hit.clone();
        }
        let parent = match dir.parent() {
            Some(p) if dir != self.root && dir.starts_with(&self.root) => self.rules_for(p),
            _ => None,
        };
        let own = if dir.starts_with(&self.root) {
            load(dir)
        } else {
            Vec::new()
        };
        let rules = if own.is_empty() {
            parent
        } else {
            Some(Arc::new(DirRules { own, parent }))
        };
        self.cache
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(dir.to_path_buf())
            .or_insert(rules)
            .clone()
    }
}

/// The ignore files of one directory, in precedence order.
fn load(dir: &Path) -> Vec<Gitignore> {
    let mut own = Vec::new();
    for name in [".ignore", ".gitignore"] {
        if let Some(gi) = parse(dir, &dir.join(name)) {
            own.push(gi);
        }
    }
    let git = dir.join(".git");
    if std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir())
        && let Some(gi) = parse(dir, &git.join("info/exclude"))
    {
        own.push(gi);
    }
    own
}

/// Parses one ignore file whose patterns are relative to `dir`; `None` if it is absent,
/// unsafe to read, or holds no rule.
fn parse(dir: &Path, file: &Path) -> Option<Gitignore> {
    let text = read_small_regular(file)?;
    let mut builder = GitignoreBuilder::new(dir);
    for line in text.lines() {
        // A bad line is skipped, as git does; the other lines still count.
        let _ = builder.add_line(
            Some(file.to_path_buf()),
            line.trim_start_matches('\u{feff}'),
        );
    }
    builder.build().ok().filter(|gi| !gi.is_empty())
}

/// The content of a regular, singly linked file of at most [`MAX_RULES_FILE`] bytes, read
/// without following a symlink; `None` for anything else.
fn read_small_regular(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() || meta.len() > MAX_RULES_FILE {
        return None;
    }
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() > 1 {
            return None;
        }
    }
    let mut bytes = Vec::new();
    file.take(MAX_RULES_FILE).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deeper_rules_and_negations_take_precedence() {
        let ws = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join(".gitignore"), "*.log\n/build\n").unwrap();
        std::fs::write(root.join("a/.gitignore"), "!keep.log\n").unwrap();
        std::fs::write(root.join("a/b/.ignore"), "secret.txt\n").unwrap();
        let rules = IgnoreRules::new(&root);
        assert!(rules.is_ignored(&root.join("x.log"), false));
        assert!(rules.is_ignored(&root.join("a/b/x.log"), false));
        assert!(!rules.is_ignored(&root.join("a/keep.log"), false));
        assert!(!rules.is_ignored(&root.join("a/b/keep.log"), false));
        assert!(rules.is_ignored(&root.join("build"), true));
        assert!(!rules.is_ignored(&root.join("a/build"), true));
        assert!(rules.is_ignored(&root.join("a/b/secret.txt"), false));
        assert!(!rules.is_ignored(&root.join("a/secret.txt"), false));
    }

    #[cfg(unix)]
    #[test]
    fn an_ignore_file_that_is_a_symlink_is_not_read() {
        let ws = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join(".gitignore")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("rules"), "*.rs\n").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("rules"), root.join("d/.ignore")).unwrap();
        let rules = IgnoreRules::new(&root);
        assert!(!rules.is_ignored(&root.join("d/x.rs"), false));
    }
}
