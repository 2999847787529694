//! Entry points for the fuzz targets (`fuzz/` at the repository root), not an API: a line an
//! ACP client sends, read as `dsh acp` reads it — the line as text (`stdio.rs`), JSON-RPC,
//! the request's parameters as the protocol crate's types — and what dsh makes of them
//! without a session: the client's MCP servers as session specs, a prompt's content as text,
//! a mode id.

use std::path::Path;

use agent_client_protocol::v1::schema::{
    AuthenticateRequest, CancelNotification, InitializeRequest, LoadSessionRequest, McpServer,
    NewSessionRequest, PromptRequest, SetSessionModeRequest,
};
use serde_json::Value;

/// What dsh made of one line.
#[derive(Debug, Default)]
pub struct ClientLine {
    /// The method the line calls, when it is a JSON-RPC request or notification.
    pub method: Option<String>,
    /// Its parameters are what the method takes.
    pub params: bool,
    /// `session/new`, `session/load`: the servers kept (name, how reached) and skipped (name).
    pub servers: Vec<(String, String)>,
    pub skipped: Vec<String>,
    /// `session/prompt`: the prompt's text, or why it is refused.
    pub prompt: Option<Result<String, String>>,
    /// `session/set_mode`: the mode, or why there is none.
    pub mode: Option<Result<String, String>>,
}

/// The message's parameters as `T`, the protocol crate's type for its method.
macro_rules! params {
    ($t:ty, $message:expr) => {
        serde_json::from_value::<$t>($message.get("params").cloned().unwrap_or(Value::Null)).ok()
    };
}

/// The client's MCP servers as a session takes them: (name, how reached), and the names of
/// those skipped.
fn kept(given: Vec<McpServer>) -> (Vec<(String, String)>, Vec<String>) {
    let (kept, skipped) = crate::mcp::servers(given);
    (
        kept.into_iter()
            .map(|s| (s.name, s.launch.describe()))
            .collect(),
        skipped.into_iter().map(|s| s.name).collect(),
    )
}

/// One line from the client, with its line ending.
pub fn client_line(bytes: &[u8], root: &Path) -> ClientLine {
    let mut out = ClientLine::default();
    let text = crate::stdio::line(bytes.to_vec());
    let Ok(message) = serde_json::from_str::<Value>(&text) else {
        return out;
    };
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return out;
    };
    out.method = Some(method.to_owned());
    match method {
        "initialize" => out.params = params!(InitializeRequest, message).is_some(),
        "authenticate" => out.params = params!(AuthenticateRequest, message).is_some(),
        "session/new" => {
            if let Some(r) = params!(NewSessionRequest, message) {
                out.params = true;
                (out.servers, out.skipped) = kept(r.mcp_servers);
            }
        }
        "session/load" => {
            if let Some(r) = params!(LoadSessionRequest, message) {
                out.params = true;
                (out.servers, out.skipped) = kept(r.mcp_servers);
            }
        }
        "session/prompt" => {
            if let Some(r) = params!(PromptRequest, message) {
                out.params = true;
                out.prompt = Some(crate::prompt::text(&r.prompt, root));
            }
        }
        "session/set_mode" => {
            if let Some(r) = params!(SetSessionModeRequest, message) {
                out.params = true;
                out.mode = Some(crate::modes::parse(&r.mode_id.0).map(|m| format!("{m:?}")));
            }
        }
        "session/cancel" => out.params = params!(CancelNotification, message).is_some(),
        _ => {}
    }
    out
}
