//! dsh as an MCP server (`dsh mcp serve`): a client's `tools/list` and `tools/call` answered
//! by a [`ToolHost`] — dsh-cli wires it to a session, so every call passes the same pipeline
//! and this crate never depends on the runtime (DESIGN §2). The host is made once the client
//! has said who it is (`initialize`), so the session's journal can name it. Results carry
//! `structuredContent` (each tool's output schema is advertised); a failure — a denial, an
//! ask nobody can answer, a tool error — is an `isError` result whose text says why and how
//! to allow it.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

/// A tool the host offers.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Value,
    pub read_only: bool,
}

/// What one call came to.
#[derive(Clone, Debug, PartialEq)]
pub struct HostResult {
    pub ok: bool,
    /// What the client's model reads: the output, or why the call failed and what to do.
    pub content: String,
    /// The structured output (for a call that succeeded).
    pub value: Option<Value>,
}

/// Who answers the client: the tools and their calls.
#[async_trait::async_trait]
pub trait ToolHost: Send + Sync {
    fn tools(&self) -> Vec<HostTool>;
    /// Runs one call; `cancel` is cancelled when the client cancels it or goes away.
    async fn call(&self, name: &str, args: Value, cancel: CancellationToken) -> HostResult;
}

/// Makes the host once the client has introduced itself (its name, as `initialize` gave it).
pub type HostFactory =
    Box<dyn Fn(&str) -> Result<Arc<dyn ToolHost>, String> + Send + Sync + 'static>;

struct Handler {
    make: HostFactory,
    host: OnceCell<Arc<dyn ToolHost>>,
}

impl Handler {
    async fn host(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<dyn ToolHost>, ErrorData> {
        let client = context.peer.peer_info().map_or_else(
            || "unknown client".to_owned(),
            |i| i.client_info.name.clone(),
        );
        self.host
            .get_or_try_init(|| async { (self.make)(&client) })
            .await
            .cloned()
            .map_err(|e| ErrorData::internal_error(e, None))
    }
}

fn object(v: &Value) -> Arc<serde_json::Map<String, Value>> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info.name = "dsh".to_owned();
        info.server_info.version = env!("CARGO_PKG_VERSION").to_owned();
        info.instructions = Some(
            "dsh's file, search and shell tools, each call judged by the workspace's permission rules and run in its sandbox; a call that needs a person's approval is refused with how to allow it.".to_owned(),
        );
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let host = self.host(&context).await?;
        let tools = host
            .tools()
            .into_iter()
            .map(|t| {
                let mut tool = Tool::new(t.name, t.description, object(&t.input_schema));
                tool.output_schema = Some(object(&t.output_schema));
                let mut hints = ToolAnnotations::default();
                hints.read_only_hint = Some(t.read_only);
                tool.annotations = Some(hints);
                tool
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let host = self.host(&context).await?;
        let known = host.tools().iter().any(|t| t.name == request.name);
        if !known {
            return Err(ErrorData::invalid_params(
                format!("dsh has no tool named {:?}", request.name),
                None,
            ));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        let r = host.call(&request.name, args, context.ct.clone()).await;
        let mut result = if r.ok {
            CallToolResult::success(vec![ContentBlock::text(r.content)])
        } else {
            CallToolResult::error(vec![ContentBlock::text(r.content)])
        };
        if r.ok {
            result.structured_content = r.value;
        }
        Ok(result.into())
    }
}

/// Serves `make`'s host over stdin and stdout until the client goes away.
pub async fn serve_stdio(make: HostFactory) -> Result<(), String> {
    let handler = Handler {
        make,
        host: OnceCell::new(),
    };
    let running = handler
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("the MCP client did not initialize: {e}"))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| format!("the MCP server stopped: {e}"))
}
