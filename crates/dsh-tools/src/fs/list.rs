//! `list_dir{path}`: the entries of one directory, sorted by name.
//!
//! Nothing is followed: a symlink is shown as `name@ -> target` with its target as written
//! in the link. Directories end in `/`. Only the first [`ReadCaps::max_list_entries`] names in
//! sorted order are kept (a bounded heap, so a directory of a million entries costs the memory
//! of the cap, not of the directory), and the total is said.

use std::collections::BinaryHeap;
use std::ffi::OsString;
use std::fs::FileType;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    Access, CancellationToken, ExecContext, Parallel, Tool, ToolError, ToolOutput, ToolSpec,
    Workspace,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::confine::{LOSSY_NOTE, OpenDir, display, resolve_dir};
use crate::{ReadCaps, blocking, cancelled, parse_args, path_access};

/// The `list_dir` tool.
#[derive(Clone, Debug)]
pub struct ListDir {
    ws: Arc<Workspace>,
    max_entries: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
}

impl ListDir {
    pub fn new(ws: Arc<Workspace>, limits: &ReadCaps) -> Self {
        ListDir {
            ws,
            max_entries: limits.max_list_entries.max(1),
        }
    }
}

#[async_trait]
impl Tool for ListDir {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "list_dir",
            format!(
                "List a directory, sorted by name (at most {}): subdirectories end in `/`, \
                 symlinks show as `name@ -> target` (not followed). `.` is the workspace root.",
                self.max_entries
            ),
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "relative to the workspace root"}
            },
            "required": ["path"],
            "additionalProperties": false
        }))
        .output_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "entries": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "kind": {"enum": ["file", "dir", "symlink", "other"]},
                            "target": {"type": "string"},
                            "lossy": {"const": true}
                        },
                        "required": ["name", "kind"],
                        "additionalProperties": false
                    }
                },
                "truncated": {"type": "boolean"}
            },
            "required": ["path", "entries", "truncated"],
            "additionalProperties": false
        }))
        .read_only(true)
        .parallel(Parallel::Always)
        .idempotent(true)
    }

    fn accesses(&self, args: &Value) -> Vec<Access> {
        path_access(args, None, false)
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args("list_dir", args)?;
        let this = self.clone();
        blocking(&cx.cancel, move |cancel| this.list(&args.path, &cancel)).await
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    fn of(t: Option<FileType>) -> Kind {
        match t {
            Some(t) if t.is_dir() => Kind::Dir,
            Some(t) if t.is_file() => Kind::File,
            Some(t) if t.is_symlink() => Kind::Symlink,
            _ => Kind::Other,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
            Kind::Other => "other",
        }
    }
}

impl ListDir {
    fn list(&self, given: &str, cancel: &CancellationToken) -> Result<ToolOutput, ToolError> {
        let resolved = resolve_dir(&self.ws, given)?;
        let dir = OpenDir::open(&self.ws, &resolved)?;
        let io_error = |e: std::io::Error| ToolError::failed(format!("listing `{given}`: {e}"));

        // The `max_entries` smallest names: a max-heap that drops its largest.
        let mut heap: BinaryHeap<OsString> = BinaryHeap::with_capacity(self.max_entries + 1);
        let mut total = 0usize;
        for entry in dir.read_dir().map_err(io_error)? {
            if total.is_multiple_of(1024) && cancel.is_cancelled() {
                return Err(cancelled());
            }
            let entry = entry.map_err(io_error)?;
            total += 1;
            heap.push(entry.file_name());
            if heap.len() > self.max_entries {
                heap.pop();
            }
        }

        let mut content = String::new();
        let mut entries = Vec::with_capacity(heap.len());
        let mut any_lossy = false;
        for name in heap.into_sorted_vec() {
            // Types and targets are looked up for the kept names only, through the handle.
            let path = dir.path().join(&name);
            let meta = std::fs::symlink_metadata(&path).ok();
            let kind = Kind::of(meta.map(|m| m.file_type()));
            let (shown, lossy) = display(name.as_ref());
            any_lossy |= lossy;
            let mut item = json!({"name": shown, "kind": kind.as_str()});
            content.push_str(&shown);
            match kind {
                Kind::Dir => content.push('/'),
                Kind::Symlink => {
                    let target = std::fs::read_link(&path)
                        .map(|t| display(&t).0)
                        .unwrap_or_else(|_| "?".to_owned());
                    content.push_str("@ -> ");
                    content.push_str(&target);
                    item["target"] = json!(target);
                }
                Kind::Other => content.push_str(" [not a file or directory]"),
                Kind::File => {}
            }
            if lossy {
                content.push_str(" (not UTF-8)");
                item["lossy"] = json!(true);
            }
            content.push('\n');
            entries.push(item);
        }
        let truncated = total > entries.len();
        if entries.is_empty() {
            content.push_str("[the directory is empty]\n");
        }
        if truncated {
            content.push_str(&format!(
                "[showing the first {} of {total} entries by name; use find_files with a pattern to narrow]\n",
                entries.len()
            ));
        }
        if any_lossy {
            content.push_str(&format!("[{LOSSY_NOTE}]\n"));
        }
        content.pop();
        let (shown_path, _) = display(&resolved.rel);
        Ok(ToolOutput::new(
            content,
            json!({"path": shown_path, "entries": entries, "truncated": truncated}),
        ))
    }
}
