//! `write_file{path, content}`: create a file, or replace one the session has read.
//!
//! A replaced file keeps its encoding: content for a file in UTF-16 or Windows-1252 is written
//! in that encoding, and refused if it has a character the encoding has not. Converting a file
//! to UTF-8 behind the user's back would break whatever else reads it (a legacy build, an
//! editor set to the file's code page), and the model was told the encoding when it read the
//! file. A new file is UTF-8.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{Access, ExecContext, Parallel, Tool, ToolError, ToolOutput, ToolSpec, Workspace};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::confine::{Want, path_error};
use crate::fs::edit::MAX_EDIT_BYTES;
use crate::fs::encoding::Encoding;
use crate::fs::preview;
use crate::fs::seam::{FileSeam, Intent};
use crate::{blocking, parse_args, path_access};

/// The `write_file` tool.
#[derive(Debug)]
pub struct WriteFile {
    ws: Arc<Workspace>,
    seam: Arc<FileSeam>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    content: String,
}

impl WriteFile {
    pub fn new(ws: Arc<Workspace>, seam: Arc<FileSeam>) -> Self {
        WriteFile { ws, seam }
    }
}

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "write_file",
            "Create a file, or replace a whole file you have read with read_file in this session. \
             Missing directories are created. A replaced file read_file decoded from another \
             encoding is written in that encoding (text it cannot hold is refused); new files \
             are UTF-8. Prefer edit_file for changes to part of a file.",
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Relative to the workspace root."},
                "content": {"type": "string", "description": "The complete new content."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        }))
        .parallel(Parallel::Never)
        .output_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "bytes": {"type": "integer", "minimum": 0},
                "created": {"type": "boolean"},
                "encoding": {"enum": ["utf-8", "utf-16le", "utf-16be", "windows-1252"]}
            },
            "required": ["path", "bytes", "created", "encoding"],
            "additionalProperties": false
        }))
    }

    fn accesses(&self, args: &Value) -> Vec<Access> {
        path_access(args, None, true)
    }

    /// The diff from the file as it is now to `content`; from `/dev/null` for a new file.
    /// `None` when nothing would change or it cannot be shown: the file larger than an edit
    /// may be (no diff is computed over it), not text, or kept in an encoding that cannot
    /// hold `content` (the write is then refused).
    fn preview(&self, args: &Value) -> Option<String> {
        let args: Args = serde_json::from_value(args.clone()).ok()?;
        let current = preview::current(&self.ws, &args.path, MAX_EDIT_BYTES)?;
        let rel = &current.rel;
        match current.text {
            None => Some(preview::unified(
                "/dev/null",
                &format!("b/{rel}"),
                "",
                &args.content,
            )),
            Some((before, _)) if before == args.content => None,
            Some((before, encoding)) => {
                let shown = preview::unified(
                    &format!("a/{rel}"),
                    &format!("b/{rel}"),
                    &before,
                    &args.content,
                );
                preview::encodable(encoding, args.content).then_some(shown)
            }
        }
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args("write_file", args)?;
        let ws = self.ws.clone();
        let seam = self.seam.clone();
        blocking(&cx.cancel, move |cancel| {
            let resolved = ws
                .resolve(&args.path)
                .map_err(|e| path_error(e, Want::File))?;
            let ((), changed) =
                seam.change(&ws, &resolved, Intent::Write, u64::MAX, &cancel, |_| {
                    Ok((args.content, ()))
                })?;
            let rel = resolved.rel.display().to_string();
            let verb = if changed.created { "created" } else { "replaced" };
            let (bytes, encoding) = (changed.bytes, changed.encoding);
            let created = changed.created;
            let written = match encoding {
                Encoding::Utf8 => String::new(),
                other => format!(", written in {other}"),
            };
            Ok(ToolOutput::new(
                format!("{verb} {rel} ({bytes} bytes{written})"),
                json!({"path": rel, "bytes": bytes, "created": created, "encoding": encoding.name()}),
            )
            .with_change(changed.change))
        })
        .await
    }
}
