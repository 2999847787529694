//! Search tools (`grep`, `find_files`) and what they share: the walk, its skipping rules, the
//! glob semantics and the bounded, deterministic selection of results.
//!
//! **Skipped while walking** (SPEC A3): hidden files and directories (a name starting with
//! `.`), directories named `node_modules`, `target` or `__pycache__`, and whatever
//! `.gitignore`/`.ignore` files exclude (also outside a git repository; see [`rules`]).
//! Hidden includes the file seam's temporary files, which are named `.NAME.dsh-PID-N.tmp`
//! for that reason ([`crate::fs::temp_name`]).
//! The directory the model names is searched even if it would be skipped itself; the rules
//! apply below it. Symlinks are never followed.
//!
//! **Determinism.** The walk is parallel, so results arrive in any order. Each thread keeps
//! the `k` smallest results by (path, line) in a bounded heap; the heaps are merged at the
//! end. What the model sees is therefore exactly the first `k` results in path order, the
//! same on every run, at the memory cost of `k` results per thread.

pub(crate) mod find;
pub(crate) mod grep;
mod rules;

use std::collections::BinaryHeap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use dsh_core::{ToolError, ToolErrorKind, Workspace};
use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, WalkBuilder, WalkParallel};

use crate::confine::{Skipped, out_of_resources};
use rules::IgnoreRules;

/// Directories skipped by name wherever they are: build output, vendored dependencies and
/// caches that drown real results.
pub(crate) const NOISE_DIRS: &[&str] = &["node_modules", "target", "__pycache__"];

/// The parallel walker over `dir` (canonical, inside the workspace), with the skipping rules.
pub(crate) fn walker(ws: &Workspace, dir: &Path, threads: usize) -> WalkParallel {
    let rules = Arc::new(IgnoreRules::new(ws.root()));
    let mut builder = WalkBuilder::new(dir);
    builder
        // The walker reads no ignore file itself (see `rules`) and follows no symlink.
        .standard_filters(false)
        .follow_links(false)
        .threads(threads)
        .filter_entry(move |entry| keep(entry, &rules));
    builder.build_parallel()
}

/// A sequential walk of the whole workspace that descends into exactly the directories the
/// search tools descend into, and yields every entry in them, hidden ones included: where
/// the sweep looks for the file seam's leftover temporary files ([`crate::fs::sweep`]).
#[cfg(target_os = "linux")]
pub(crate) fn searched_dirs_walk(ws: &Workspace) -> ignore::Walk {
    let rules = IgnoreRules::new(ws.root());
    let mut builder = WalkBuilder::new(ws.root());
    builder
        .standard_filters(false)
        .follow_links(false)
        .filter_entry(move |entry| {
            !entry.file_type().is_some_and(|t| t.is_dir()) || keep(entry, &rules)
        });
    builder.build()
}

/// Whether the walk keeps `entry` (and descends into it, for a directory).
fn keep(entry: &DirEntry, rules: &IgnoreRules) -> bool {
    let name = entry.file_name();
    if name.as_encoded_bytes().first() == Some(&b'.') {
        return false;
    }
    let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
    if is_dir && NOISE_DIRS.iter().any(|n| name == OsStr::new(n)) {
        return false;
    }
    !rules.is_ignored(entry.path(), is_dir)
}

/// A glob from the model (`find_files` pattern, `grep` include). Without a `/` it matches
/// file names at any depth (`*.rs`); with one, paths relative to the searched directory or
/// to the workspace root (`src/**/*.rs`). `*` stops at `/`, `**` crosses it.
#[derive(Clone, Debug)]
pub(crate) struct PathGlob {
    matcher: GlobMatcher,
    by_name: bool,
}

impl PathGlob {
    /// Compiles `pattern`; `arg` names the argument in the failure.
    pub(crate) fn new(pattern: &str, arg: &str) -> Result<Self, ToolError> {
        let trimmed = pattern.trim_start_matches("./");
        if trimmed.is_empty() {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArgs,
                format!("`{arg}` is empty; give a glob such as `*.rs` or `src/**/*.ts`"),
            ));
        }
        let glob = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .build()
            .map_err(|e| {
                ToolError::new(
                    ToolErrorKind::InvalidArgs,
                    format!(
                        "`{arg}` is not a valid glob: {e}; use e.g. `*.rs`, `src/**/*.ts` or `*.{{js,ts}}`"
                    ),
                )
            })?;
        Ok(PathGlob {
            matcher: glob.compile_matcher(),
            by_name: !trimmed.contains('/'),
        })
    }

    /// `rel_dir`: relative to the searched directory; `rel_root`: to the workspace root.
    pub(crate) fn is_match(&self, name: &OsStr, rel_dir: &Path, rel_root: &Path) -> bool {
        if self.by_name {
            self.matcher.is_match(name)
        } else {
            self.matcher.is_match(rel_dir) || self.matcher.is_match(rel_root)
        }
    }
}

/// The `k` smallest items pushed, kept in a bounded max-heap.
#[derive(Debug)]
pub(crate) struct TopK<T: Ord> {
    heap: BinaryHeap<T>,
    k: usize,
}

impl<T: Ord> TopK<T> {
    pub(crate) fn new(k: usize) -> Self {
        TopK {
            heap: BinaryHeap::with_capacity(k.saturating_add(1).min(4096)),
            k,
        }
    }

    pub(crate) fn push(&mut self, item: T) {
        if self.heap.len() < self.k {
            self.heap.push(item);
        } else if self.heap.peek().is_some_and(|max| item < *max) {
            self.heap.pop();
            self.heap.push(item);
        }
    }

    pub(crate) fn merge(&mut self, other: TopK<T>) {
        for item in other.heap {
            self.push(item);
        }
    }

    pub(crate) fn into_sorted_vec(self) -> Vec<T> {
        self.heap.into_sorted_vec()
    }
}

/// The first resource failure a walk met (`EMFILE` opening a file or reading a directory),
/// shared by its threads: a search that meets one has not seen everything, so it fails as a
/// `tool_error` naming the error ([`Shortfall::check`]) rather than report partial results
/// as complete.
#[derive(Debug, Default)]
pub(crate) struct Shortfall(std::sync::Mutex<Option<Skipped>>);

impl Shortfall {
    /// Notes `skipped` if it is a resource failure.
    pub(crate) fn note(&self, skipped: Skipped) {
        if matches!(skipped, Skipped::Failed(..)) {
            lock(&self.0).get_or_insert(skipped);
        }
    }

    /// Notes a walk error (a directory that could not be read) if it is a resource failure.
    pub(crate) fn note_walk(&self, e: &ignore::Error) {
        if let Some(io) = e.io_error().filter(|io| out_of_resources(io)) {
            self.note(Skipped::Failed(io.kind(), io.raw_os_error()));
        }
    }

    /// Fails the search of `given` if the walk met a resource failure.
    pub(crate) fn check(self, tool: &str, given: &str) -> Result<(), ToolError> {
        let failed = self.0.into_inner().unwrap_or_else(|p| p.into_inner());
        match failed.and_then(Skipped::error) {
            None => Ok(()),
            Some(e) => Err(ToolError::failed(format!(
                "{tool} in `{given}` could not open everything it met ({e}), so its results would be incomplete and none are given; try again, with fewer calls at once"
            ))),
        }
    }
}

/// Locks a mutex whose data stays consistent even if a holder panicked (plain counters and
/// heaps merged in one step).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn top_k_keeps_the_smallest_in_order() {
        let mut a = TopK::new(3);
        for x in [9, 1, 8, 2] {
            a.push(x);
        }
        let mut b = TopK::new(3);
        for x in [7, 0, 5] {
            b.push(x);
        }
        a.merge(b);
        assert_eq!(a.into_sorted_vec(), [0, 1, 2]);
    }

    #[test]
    fn bare_globs_match_names_at_any_depth_and_path_globs_match_paths() {
        let g = PathGlob::new("*.rs", "pattern").unwrap();
        let p = PathBuf::from("src/deep/lib.rs");
        assert!(g.is_match(OsStr::new("lib.rs"), &p, &p));
        let g = PathGlob::new("src/*.rs", "pattern").unwrap();
        assert!(!g.is_match(OsStr::new("lib.rs"), &p, &p));
        assert!(g.is_match(
            OsStr::new("lib.rs"),
            Path::new("x"),
            Path::new("src/lib.rs")
        ));
        let g = PathGlob::new("./src/**/*.rs", "pattern").unwrap();
        assert!(g.is_match(OsStr::new("lib.rs"), &p, &p));
        assert!(PathGlob::new("a[", "pattern").is_err());
        assert!(PathGlob::new("./", "pattern").is_err());
    }
}
