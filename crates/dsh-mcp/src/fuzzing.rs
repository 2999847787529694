//! Entry points for the fuzz targets (`fuzz/` at the repository root), not an API: a line an
//! MCP server sends, read as the client reads it, and what dsh makes of a tool list and a
//! call result; a line a client sends to `dsh mcp serve`.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::{
    CallToolResult, ClientJsonRpcMessage, JsonRpcMessage, ListToolsResult, ServerJsonRpcMessage,
};
use serde_json::Value;

use crate::content::render;
use crate::server::{Server, hints};
use crate::spec::{Launch, ServerSpec};
use crate::{McpTool, tool_name};

/// What dsh made of one line from a server.
#[derive(Debug, Default)]
pub struct ServerLine {
    /// The line is a JSON-RPC message the client accepts.
    pub message: bool,
    /// The result read as a tool list: each tool as dsh would register it, or why its
    /// name is refused.
    pub tools: Vec<Result<Arc<McpTool>, String>>,
    /// The result read as a call result, rendered for a tool without an output schema and
    /// one with: the text the model reads, the value, whether the server said it failed.
    pub rendered: Vec<(String, Value, bool)>,
}

fn server() -> Arc<Server> {
    static SERVER: OnceLock<Arc<Server>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            Arc::new(Server::new(
                ServerSpec {
                    name: "fuzz".to_owned(),
                    launch: Launch::Http {
                        url: "http://127.0.0.1:9/mcp".to_owned(),
                        headers: Vec::new(),
                    },
                    startup_timeout: Duration::from_secs(1),
                    call_timeout: Duration::from_secs(1),
                    max_restarts: 0,
                },
                PathBuf::from("/nonexistent/fuzz.log"),
            ))
        })
        .clone()
}

/// One line from a server (without its newline). A response's result is read as what a
/// `tools/list` and a `tools/call` would take it for.
pub fn server_line(line: &[u8]) -> ServerLine {
    let mut out = ServerLine::default();
    let Ok(message) = serde_json::from_slice::<ServerJsonRpcMessage>(line) else {
        return out;
    };
    out.message = true;
    let JsonRpcMessage::Response(response) = message else {
        return out;
    };
    let Ok(result) = serde_json::to_value(&response.result) else {
        return out;
    };
    if let Ok(list) = serde_json::from_value::<ListToolsResult>(result.clone()) {
        let server = server();
        for t in &list.tools {
            let _ = hints(t);
            out.tools.push(
                tool_name(server.name(), &t.name)
                    .map(|name| Arc::new(McpTool::new(server.clone(), name, t))),
            );
        }
    }
    if let Ok(call) = serde_json::from_value::<CallToolResult>(result)
        && let Ok(value) = serde_json::to_value(&call)
    {
        for structured in [false, true] {
            let r = render(&value, structured);
            out.rendered.push((r.text, r.value, r.is_error));
        }
    }
    out
}

/// One line from a client of `dsh mcp serve`: whether it is a message the server accepts.
pub fn client_line(line: &[u8]) -> bool {
    serde_json::from_slice::<ClientJsonRpcMessage>(line).is_ok()
}
