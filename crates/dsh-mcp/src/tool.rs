//! An MCP server's tool as a dsh tool: registered through the session's one registration
//! point and called through the same pipeline as a built-in one. It declares that it hands
//! the call to a service dsh does not confine ([`Access::Remote`]) and nothing else: it is
//! not read-only (so it asks unless a rule allows it), never parallel, never retried, and
//! the server's annotations are shown to the person deciding, never trusted.

use std::sync::Arc;

use dsh_core::{Access, ExecContext, Parallel, Tool, ToolError, ToolOutput, ToolSpec, async_trait};
use serde_json::Value;

use crate::content::{content_schema, render};
use crate::server::{CallError, Hints, Server, hints};

/// The longest description passed on to the model.
const MAX_DESCRIPTION: usize = 4000;

/// One tool of one server.
pub struct McpTool {
    server: Arc<Server>,
    /// Its name on the server.
    remote: String,
    spec: ToolSpec,
    hints: Hints,
    /// It declared an output schema: its value is the result's structured content.
    structured: bool,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// `tool` of `server`, named `name`.
    pub(crate) fn new(server: Arc<Server>, name: String, tool: &rmcp::model::Tool) -> Self {
        let described = tool.description.as_deref().unwrap_or("");
        let mut description = format!("(MCP server `{}`) {described}", server.name());
        if let Some((cut, _)) = description.char_indices().nth(MAX_DESCRIPTION) {
            description.truncate(cut);
        }
        let output = tool
            .output_schema
            .as_ref()
            .map(|s| Value::Object((**s).clone()));
        let structured = output.is_some();
        let spec = ToolSpec::new(name, description)
            .input_schema(Value::Object((*tool.input_schema).clone()))
            .output_schema(output.unwrap_or_else(content_schema))
            .parallel(Parallel::Never)
            .timeout(server.spec().call_timeout);
        McpTool {
            remote: tool.name.to_string(),
            hints: hints(tool),
            server,
            spec,
            structured,
        }
    }

    /// What the server says of it.
    pub fn hints(&self) -> &Hints {
        &self.hints
    }

    fn service(&self) -> String {
        format!("MCP server `{}`", self.server.name())
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn accesses(&self, _args: &Value) -> Vec<Access> {
        vec![Access::Remote {
            service: self.service(),
            claims_read_only: self.hints.read_only == Some(true),
        }]
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        if !self.server.offers(&self.remote) {
            return Err(ToolError::failed(format!(
                "{} no longer offers `{}`; its tools changed (see /mcp)",
                self.service(),
                self.remote
            )));
        }
        match self.server.call(&self.remote, args, &cx.cancel).await {
            Ok(result) => {
                let r = render(&result, self.structured);
                if r.is_error {
                    let text = if r.text.is_empty() {
                        "(it gave no reason)".to_owned()
                    } else {
                        r.text
                    };
                    return Err(ToolError::failed(format!(
                        "{} says `{}` failed: {text}",
                        self.service(),
                        self.remote
                    )));
                }
                Ok(ToolOutput::new(r.text, r.value))
            }
            Err(CallError::Failed(why)) => Err(ToolError::failed(why)),
            Err(CallError::Cancelled) => Err(ToolError::failed(format!(
                "the call to `{}` on {} was cancelled before it finished; the server was told",
                self.remote,
                self.service()
            ))),
        }
    }
}
