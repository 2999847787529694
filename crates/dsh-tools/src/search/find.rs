//! `find_files{pattern, path?}`: files whose name or path matches a glob.
//!
//! Glob semantics are [`PathGlob`]'s: a pattern without `/` (`*.rs`) matches file names at
//! any depth; one with `/` (`src/**/*.rs`) matches paths relative to `path` or to the
//! workspace root. The walk and its skipping rules are grep's. Symlinks are listed as
//! `path@ -> target` and never followed; directories are not listed (use list_dir). Results
//! are sorted by path and cut at [`ReadCaps::max_results`], with the exact total said.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use dsh_core::{
    Access, CancellationToken, ExecContext, Parallel, Tool, ToolError, ToolOutput, ToolSpec,
    Workspace,
};
use ignore::{ParallelVisitor, ParallelVisitorBuilder, WalkState};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{PathGlob, Shortfall, TopK, lock, walker};
use crate::confine::{LOSSY_NOTE, display, resolve_dir};
use crate::{ReadCaps, blocking, cancelled, parse_args, path_access};

/// The `find_files` tool.
#[derive(Clone, Debug)]
pub struct FindFiles {
    ws: Arc<Workspace>,
    max_results: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    pattern: String,
    path: Option<String>,
}

impl FindFiles {
    pub fn new(ws: Arc<Workspace>, limits: &ReadCaps) -> Self {
        FindFiles {
            ws,
            max_results: limits.max_results.max(1),
        }
    }
}

#[async_trait]
impl Tool for FindFiles {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "find_files",
            format!(
                "Find files by glob under `path` (default: the workspace root). A pattern \
                 without `/` matches names at any depth (`*.rs`); with `/`, paths relative to \
                 `path` (`src/**/*.rs`). Skips what grep skips. Sorted, at most {}.",
                self.max_results
            ),
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1},
                "path": {"type": "string", "minLength": 1}
            },
            "required": ["pattern"],
            "additionalProperties": false
        }))
        .output_schema(json!({
            "type": "object",
            "properties": {
                "paths": {"type": "array", "items": {"type": "string"}},
                "truncated": {"type": "boolean"}
            },
            "required": ["paths", "truncated"],
            "additionalProperties": false
        }))
        .read_only(true)
        .parallel(Parallel::Always)
        .idempotent(true)
    }

    fn accesses(&self, args: &Value) -> Vec<Access> {
        path_access(args, Some("."), false)
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args("find_files", args)?;
        let this = self.clone();
        blocking(&cx.cancel, move |cancel| this.find(&args, &cancel)).await
    }
}

/// Paths found, per thread and then merged. The flag marks a symlink.
#[derive(Debug)]
struct Found {
    top: TopK<(PathBuf, bool)>,
    total: u64,
}

impl Found {
    fn merge(&mut self, other: Found) {
        self.top.merge(other.top);
        self.total += other.total;
    }
}

impl FindFiles {
    fn find(&self, args: &Args, cancel: &CancellationToken) -> Result<ToolOutput, ToolError> {
        let glob = PathGlob::new(&args.pattern, "pattern")?;
        let given = args.path.as_deref().unwrap_or(".");
        let resolved = resolve_dir(&self.ws, given)?;
        let shared = Mutex::new(Found {
            top: TopK::new(self.max_results),
            total: 0,
        });
        let shortfall = Shortfall::default();
        let mut builder = VisitorBuilder {
            root: self.ws.root(),
            dir: &resolved.abs,
            glob: &glob,
            cancel,
            cap: self.max_results,
            shared: &shared,
            shortfall: &shortfall,
        };
        walker(&self.ws, &resolved.abs, 0).visit(&mut builder);
        if cancel.is_cancelled() {
            return Err(cancelled());
        }
        shortfall.check("find_files", given)?;
        let found = shared.into_inner().unwrap_or_else(|p| p.into_inner());

        let total = found.total;
        let mut content = String::new();
        let mut paths = Vec::new();
        let mut any_lossy = false;
        for (rel, is_link) in found.top.into_sorted_vec() {
            let (shown, lossy) = display(&rel);
            any_lossy |= lossy;
            content.push_str(&shown);
            if is_link {
                let target = std::fs::read_link(self.ws.root().join(&rel))
                    .map(|t| display(&t).0)
                    .unwrap_or_else(|_| "?".to_owned());
                content.push_str("@ -> ");
                content.push_str(&target);
            }
            if lossy {
                content.push_str(" (not UTF-8)");
            }
            content.push('\n');
            paths.push(shown);
        }
        let truncated = total > paths.len() as u64;
        if paths.is_empty() {
            content.push_str(&format!(
                "No files match `{}` in `{given}`.\n",
                args.pattern
            ));
        }
        if truncated {
            content.push_str(&format!(
                "[showing the first {} of {total} files; narrow the pattern or path]\n",
                paths.len()
            ));
        }
        if any_lossy {
            content.push_str(&format!("[{LOSSY_NOTE}]\n"));
        }
        content.pop();
        Ok(ToolOutput::new(
            content,
            json!({"paths": paths, "truncated": truncated}),
        ))
    }
}

struct VisitorBuilder<'a> {
    root: &'a Path,
    dir: &'a Path,
    glob: &'a PathGlob,
    cancel: &'a CancellationToken,
    cap: usize,
    shared: &'a Mutex<Found>,
    shortfall: &'a Shortfall,
}

impl<'s> ParallelVisitorBuilder<'s> for VisitorBuilder<'s> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Visitor {
            root: self.root,
            dir: self.dir,
            glob: self.glob,
            cancel: self.cancel,
            local: Found {
                top: TopK::new(self.cap),
                total: 0,
            },
            shared: self.shared,
            shortfall: self.shortfall,
        })
    }
}

struct Visitor<'a> {
    root: &'a Path,
    dir: &'a Path,
    glob: &'a PathGlob,
    cancel: &'a CancellationToken,
    local: Found,
    shared: &'a Mutex<Found>,
    shortfall: &'a Shortfall,
}

impl ParallelVisitor for Visitor<'_> {
    fn visit(&mut self, entry: Result<ignore::DirEntry, ignore::Error>) -> WalkState {
        if self.cancel.is_cancelled() {
            return WalkState::Quit;
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                self.shortfall.note_walk(&e);
                return WalkState::Continue;
            }
        };
        let Some(kind) = entry.file_type() else {
            return WalkState::Continue;
        };
        if entry.depth() == 0 || !(kind.is_file() || kind.is_symlink()) {
            return WalkState::Continue;
        }
        let path = entry.path();
        let rel = path.strip_prefix(self.root).unwrap_or(path);
        let rel_dir = path.strip_prefix(self.dir).unwrap_or(path);
        if self.glob.is_match(entry.file_name(), rel_dir, rel) {
            self.local.total += 1;
            self.local.top.push((rel.to_path_buf(), kind.is_symlink()));
        }
        WalkState::Continue
    }
}

impl Drop for Visitor<'_> {
    fn drop(&mut self) {
        let local = std::mem::replace(
            &mut self.local,
            Found {
                top: TopK::new(0),
                total: 0,
            },
        );
        lock(self.shared).merge(local);
    }
}
