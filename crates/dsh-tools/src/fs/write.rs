//! `write_file{path, content}`: create a file, or replace one the session has read.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{Access, ExecContext, Tool, ToolError, ToolOutput, ToolSpec, Workspace};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::confine::{Want, path_error};
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
             Missing directories are created. Prefer edit_file for changes to part of a file.",
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
        .output_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "bytes": {"type": "integer", "minimum": 0},
                "created": {"type": "boolean"}
            },
            "required": ["path", "bytes", "created"],
            "additionalProperties": false
        }))
    }

    fn accesses(&self, args: &Value) -> Vec<Access> {
        path_access(args, None, true)
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args("write_file", args)?;
        let ws = self.ws.clone();
        let seam = self.seam.clone();
        blocking(&cx.cancel, move |_| {
            let resolved = ws
                .resolve(&args.path)
                .map_err(|e| path_error(e, Want::File))?;
            let bytes = args.content.len();
            let ((), created) = seam.change(&ws, &resolved, Intent::Write, u64::MAX, |_| {
                Ok((args.content, ()))
            })?;
            let rel = resolved.rel.display().to_string();
            let verb = if created { "created" } else { "replaced" };
            Ok(ToolOutput::new(
                format!("{verb} {rel} ({bytes} bytes)"),
                json!({"path": rel, "bytes": bytes, "created": created}),
            ))
        })
        .await
    }
}
