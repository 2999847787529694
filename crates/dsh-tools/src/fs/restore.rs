//! `restore_file{path, to, expect}`: puts a file back as a checkpoint had it — the person's
//! `/undo`, never offered to a model (the session withholds it from every agent's tool set).
//!
//! `to` is the digest of the pre-image the file seam kept before a change (`null`: the change
//! created the file, so restoring removes it); `expect` is the digest of the content that
//! change left. Only a file whose content is still `expect` is restored: one changed since by
//! anything else is left alone (`stale_version`), so an undo never throws away work it did
//! not make; so is a path that now leads elsewhere (a symlink put in its way), so an undo
//! never acts on a file the change did not touch. The restore goes through the seam like any change: confined to the workspace,
//! its own pre-image kept, and its path judged by every policy as a write.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    Access, ExecContext, Parallel, Tool, ToolError, ToolErrorKind, ToolOutput, ToolSpec, Workspace,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::confine::{Want, path_error};
use crate::fs::seam::FileSeam;
use crate::{blocking, parse_args, path_access};

/// The name the session withholds from models.
pub const RESTORE_FILE: &str = "restore_file";

/// The `restore_file` tool.
#[derive(Debug)]
pub struct RestoreFile {
    ws: Arc<Workspace>,
    seam: Arc<FileSeam>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    to: Option<String>,
    expect: String,
}

impl RestoreFile {
    pub fn new(ws: Arc<Workspace>, seam: Arc<FileSeam>) -> Self {
        RestoreFile { ws, seam }
    }
}

#[async_trait]
impl Tool for RestoreFile {
    fn spec(&self) -> ToolSpec {
        let digest = json!({"type": "string", "pattern": "^[0-9a-f]{64}$"});
        ToolSpec::new(
            RESTORE_FILE,
            "Put a file back as a checkpoint had it (the person's /undo): `to` is the kept \
             content's digest (null: remove the file), `expect` the digest the file must have \
             now; a file changed since is left alone.",
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Relative to the workspace root."},
                "to": {"anyOf": [digest.clone(), {"type": "null"}]},
                "expect": digest
            },
            "required": ["path", "to", "expect"],
            "additionalProperties": false
        }))
        .parallel(Parallel::Never)
        .output_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "removed": {"type": "boolean"}
            },
            "required": ["path", "removed"],
            "additionalProperties": false
        }))
    }

    fn accesses(&self, args: &Value) -> Vec<Access> {
        path_access(args, None, true)
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(RESTORE_FILE, args)?;
        let ws = self.ws.clone();
        let seam = self.seam.clone();
        blocking(&cx.cancel, move |cancel| {
            let resolved = ws
                .resolve(&args.path)
                .map_err(|e| path_error(e, Want::File))?;
            // Only the very file the change was made to: a path that now resolves elsewhere
            // (a symlink swapped in for the file or a directory on its way) is left alone, or
            // the restore would act on a file the change never touched.
            if resolved.rel != std::path::Path::new(&args.path) {
                return Err(ToolError::new(
                    ToolErrorKind::StaleVersion,
                    format!(
                        "`{}` now leads to `{}` (a symlink was put in its way) since that change; it is left alone",
                        args.path,
                        resolved.rel.display()
                    ),
                ));
            }
            let content = args.to.as_deref().map(|d| seam.pre_image(d)).transpose()?;
            let change = seam.restore(&ws, &resolved, content.as_deref(), &args.expect, &cancel)?;
            let rel = change.path.clone();
            let removed = content.is_none();
            let said = if removed {
                format!("removed {rel} (the change being undone created it)")
            } else {
                format!("restored {rel}")
            };
            Ok(ToolOutput::new(said, json!({"path": rel, "removed": removed})).with_change(change))
        })
        .await
    }
}
