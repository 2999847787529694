//! `read_output{id, offset?, limit?}`: page back an output the spill disposition saved.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    ExecContext, Parallel, SpillError, SpillStore, Tool, ToolError, ToolErrorKind, ToolOutput,
    ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{blocking, parse_args};

/// The `read_output` tool. Pages are at most `max_chars` long, the spill limit, so a page is
/// never spilled again.
#[derive(Debug)]
pub struct ReadOutput {
    store: Arc<SpillStore>,
    max_chars: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    id: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

impl ReadOutput {
    pub fn new(store: Arc<SpillStore>, max_chars: usize) -> Self {
        ReadOutput {
            store,
            // Leave room for the footer line under the spill limit.
            max_chars: max_chars.saturating_sub(200).max(100),
        }
    }
}

#[async_trait]
impl Tool for ReadOutput {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "read_output",
            "Page through an output that was too long to show, by the id a truncated result gave. \
             offset and limit count characters.",
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1}
            },
            "required": ["id"],
            "additionalProperties": false
        }))
        .output_schema(json!({
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "offset": {"type": "integer", "minimum": 0},
                "chars": {"type": "integer", "minimum": 0},
                "total_chars": {"type": "integer", "minimum": 0},
                "has_more": {"type": "boolean"}
            },
            "required": ["id", "offset", "chars", "total_chars", "has_more"],
            "additionalProperties": false
        }))
        .read_only(true)
        .parallel(Parallel::Always)
        .idempotent(true)
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args("read_output", args)?;
        let store = self.store.clone();
        let max = self.max_chars;
        blocking(&cx.cancel, move |_| {
            let offset = args.offset.unwrap_or(0);
            let limit = args.limit.unwrap_or(max).min(max);
            let page = store.read(&args.id, offset, limit).map_err(|e| match e {
                SpillError::BadId(_) | SpillError::Unknown(_) => ToolError::new(
                    ToolErrorKind::NotFound,
                    format!("{e}; use the id a truncated result of this session named"),
                ),
                other => ToolError::failed(other.to_string()),
            })?;
            let chars = page.text.chars().count();
            let end = page.offset + chars;
            let footer = if page.has_more() {
                format!(
                    "[characters {}–{end} of {}; next page: read_output{{\"id\":\"{}\",\"offset\":{end}}}]",
                    page.offset, page.total_chars, args.id
                )
            } else {
                format!("[characters {}–{end} of {}; end of output]", page.offset, page.total_chars)
            };
            Ok(ToolOutput::new(
                format!("{}\n{footer}", page.text),
                json!({"id": args.id, "offset": page.offset, "chars": chars,
                       "total_chars": page.total_chars, "has_more": page.has_more()}),
            ))
        })
        .await
    }
}
