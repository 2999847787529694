//! The tool call: what the model asked for, immutable once journaled (SPEC P2).

use std::sync::Arc;

use serde_json::Value;

/// Where a call came from (DESIGN §3). Code Mode sub-calls and sub-agent calls pass the same
/// pipeline as model calls; the source is recorded so replay and accounting can tell them
/// apart. The call that submitted a nested call is its [`ToolCall::parent`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallSource {
    /// Asked for directly by the model.
    Model,
    /// Made by a Code Mode program running inside its parent call.
    Code,
    /// Made by a sub-agent's model, inside the parent `call_sub_agent` call.
    SubAgent,
    /// A person's own action, typed at the REPL (`/memory add`).
    User,
    /// A line of a `dsh batch` file or stdin: nobody at the REPL typed it, so it is judged
    /// like a model's call.
    Batch,
    /// A command the configuration names (`[verify] command`), judged like a model's call.
    Config,
    /// An MCP client's call to `dsh mcp serve` (the client is named in `session_start`):
    /// judged with no person, like a batch line.
    Mcp,
}

/// One tool call. Cloning is cheap (shared buffers) and no method hands out a mutable view of
/// the arguments: what was journaled, what the user saw and what runs are the same value.
#[derive(Clone, Debug)]
pub struct ToolCall {
    id: Arc<str>,
    name: Arc<str>,
    args: Arc<Value>,
    source: CallSource,
    /// The call that submitted this one through its dispatch handle.
    parent: Option<Arc<str>>,
    /// The agent that made it; `None` is the main agent.
    agent: Option<Arc<str>>,
    step: u32,
}

impl ToolCall {
    /// A call made by the main agent's model at step 0; see the `with_*` setters.
    pub fn new(id: impl Into<Arc<str>>, name: impl Into<Arc<str>>, args: Value) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            args: Arc::new(args),
            source: CallSource::Model,
            parent: None,
            agent: None,
            step: 0,
        }
    }

    /// Sets where the call came from.
    #[must_use]
    pub fn with_source(mut self, source: CallSource) -> Self {
        self.source = source;
        self
    }

    /// Sets the call that submitted this one (the dispatch handle sets it).
    #[must_use]
    pub fn with_parent(mut self, parent: impl Into<Arc<str>>) -> Self {
        self.parent = Some(parent.into());
        self
    }

    /// Sets the agent that made the call (`None`: the main agent).
    #[must_use]
    pub fn with_agent(mut self, agent: Option<Arc<str>>) -> Self {
        self.agent = agent;
        self
    }

    /// Sets the agent-loop step the call belongs to.
    #[must_use]
    pub fn with_step(mut self, step: u32) -> Self {
        self.step = step;
        self
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn args(&self) -> &Value {
        &self.args
    }

    pub fn source(&self) -> CallSource {
        self.source
    }

    pub fn parent(&self) -> Option<&str> {
        self.parent.as_deref()
    }

    /// The agent that made the call, `None` for the main agent.
    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref()
    }

    pub fn step(&self) -> u32 {
        self.step
    }
}
