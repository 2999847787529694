//! The tool call: what the model asked for, immutable once journaled (SPEC P2).

use std::sync::Arc;

use serde_json::Value;

/// Where a call came from. Code Mode sub-calls and sub-agent calls pass the same pipeline as
/// model calls; the source is recorded so replay and accounting can tell them apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallSource {
    /// Asked for directly by the model.
    Model,
    /// Made by a Code Mode program running inside the call `parent`.
    Code { parent: String },
    /// Made by the sub-agent `agent_id`.
    SubAgent { agent_id: String },
}

impl CallSource {
    /// The journal's name for the source.
    pub fn as_str(&self) -> &'static str {
        match self {
            CallSource::Model => "model",
            CallSource::Code { .. } => "code",
            CallSource::SubAgent { .. } => "sub_agent",
        }
    }

    /// The parent call id (Code Mode) or agent id (sub-agent), if any.
    pub fn parent(&self) -> Option<&str> {
        match self {
            CallSource::Model => None,
            CallSource::Code { parent } => Some(parent),
            CallSource::SubAgent { agent_id } => Some(agent_id),
        }
    }
}

/// One tool call. Cloning is cheap (shared buffers) and no method hands out a mutable view of
/// the arguments: what was journaled, what the user saw and what runs are the same value.
#[derive(Clone, Debug)]
pub struct ToolCall {
    id: Arc<str>,
    name: Arc<str>,
    args: Arc<Value>,
    source: CallSource,
    step: u32,
}

impl ToolCall {
    /// A call made by the model at step 0; see [`ToolCall::with_source`] and
    /// [`ToolCall::with_step`].
    pub fn new(id: impl Into<Arc<str>>, name: impl Into<Arc<str>>, args: Value) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            args: Arc::new(args),
            source: CallSource::Model,
            step: 0,
        }
    }

    /// Sets where the call came from.
    #[must_use]
    pub fn with_source(mut self, source: CallSource) -> Self {
        self.source = source;
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

    pub fn source(&self) -> &CallSource {
        &self.source
    }

    pub fn step(&self) -> u32 {
        self.step
    }
}
