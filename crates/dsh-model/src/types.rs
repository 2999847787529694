//! Provider-neutral conversation types and the provider trait.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Who a message is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    /// A tool result, answering the assistant's tool call `tool_call_id`.
    Tool,
}

/// A tool call as the model asked for it. `arguments` is the raw text the model produced,
/// which may not be valid JSON: the loop decides what to do with that, not the provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    /// Text content (may be empty for an assistant turn that only calls tools).
    pub content: String,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRequest>,
    /// For `Role::Tool`: the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Reasoning text some providers stream (DeepSeek `reasoning_content`). Kept for the
    /// record; never sent back as answer text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
}

impl Message {
    pub fn system(text: impl Into<String>) -> Self {
        Message::plain(Role::System, text)
    }
    pub fn user(text: impl Into<String>) -> Self {
        Message::plain(Role::User, text)
    }
    pub fn assistant(text: impl Into<String>, tool_calls: Vec<ToolCallRequest>) -> Self {
        Message {
            tool_calls,
            ..Message::plain(Role::Assistant, text)
        }
    }
    pub fn tool(call_id: impl Into<String>, text: impl Into<String>) -> Self {
        Message {
            tool_call_id: Some(call_id.into()),
            ..Message::plain(Role::Tool, text)
        }
    }
    fn plain(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            content: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            reasoning: None,
        }
    }
}

/// A tool as the model is offered it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// One request: the whole conversation so far (system message first) and the tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSchema>,
    /// Cap on the completion's tokens, if any.
    pub max_tokens: Option<u32>,
}

/// Token counts as the provider reported them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Every input token, those served from or written to the prompt cache included.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of `prompt_tokens`, those the provider's prompt cache served
    /// (`prompt_tokens_details.cached_tokens`, DeepSeek's `prompt_cache_hit_tokens`,
    /// Anthropic's `cache_read_input_tokens`).
    #[serde(default)]
    pub cached_tokens: u64,
    /// Of `prompt_tokens`, those written to the cache (Anthropic's
    /// `cache_creation_input_tokens`, billed above the input price).
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A final answer.
    Stop,
    /// It asked for tools.
    ToolCalls,
    /// It hit the token cap.
    Length,
    ContentFilter,
    /// Anything else the provider said, verbatim.
    Other(String),
}

/// One assistant turn, complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The assistant message (text, tool calls, reasoning).
    pub message: Message,
    /// `None` when the provider reported none (the loop then estimates).
    pub usage: Option<Usage>,
    pub finish_reason: FinishReason,
}

/// What arrives while a turn streams, for live display.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    Text(String),
    Reasoning(String),
    /// A tool call began (its arguments arrive later, assembled into the completion).
    ToolCall {
        id: String,
        name: String,
    },
    /// A retry is about to happen after a failure (attempt counts from 2).
    Retrying {
        attempt: u32,
        reason: String,
    },
}

/// Why a turn could not be completed. Messages say what happened and what to check.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// Nothing answered at the endpoint (after retries).
    #[error("cannot reach the model at {url}: {reason}{}", hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default())]
    Unreachable {
        url: String,
        reason: String,
        hint: Option<String>,
    },
    /// The server refused the request; `message` is the server's own words.
    #[error("the model server answered {status}: {message}{}", hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default())]
    Http {
        status: u16,
        message: String,
        hint: Option<String>,
    },
    /// The server accepted the connection, then sent nothing within the idle timeout (after
    /// retries).
    #[error("the model server at {url} did not answer: {reason}{}", hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default())]
    Silent {
        url: String,
        reason: String,
        hint: Option<String>,
    },
    /// The server reported an error inside a successful (200) answer: an error event in the
    /// stream, or an error object where the message should be. `kind` is its type or code
    /// (`invalid_api_key`, `rate_limit_error`, …) as the server named it.
    #[error("the model server reported an error{}: {message}{}", kind.as_deref().map(|k| format!(" ({k})")).unwrap_or_default(), hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default())]
    Reported {
        kind: Option<String>,
        message: String,
        hint: Option<String>,
    },
    /// The stream ended or stalled before the turn was complete.
    #[error("the model's stream broke off: {0}")]
    Stream(String),
    /// The server sent something that is not the wire format.
    #[error("the model server sent something unexpected: {0}")]
    Protocol(String),
    /// The user interrupted.
    #[error("interrupted")]
    Cancelled,
    /// No provider could be configured.
    #[error("{0}")]
    Config(String),
}

impl ModelError {
    /// Nothing answered at the endpoint (after retries).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, ModelError::Unreachable { .. })
    }
}

/// A model provider.
///
/// **Lifetime:** one per session; requests are made one at a time per agent.
/// **Retries:** the provider retries connection errors, 429 and 5xx itself (with backoff,
/// honouring `Retry-After`), reporting each through [`StreamEvent::Retrying`]; it does not
/// retry once any content of a turn has been streamed to `on_event`.
#[async_trait]
pub trait Provider: Send + Sync {
    /// `openai`, `anthropic`, `deepseek`, `ollama`, or `replay`.
    fn name(&self) -> &str;

    /// The model asked for.
    fn model(&self) -> &str;

    /// The endpoint's base URL (empty where there is none).
    fn base_url(&self) -> &str {
        ""
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
        cancel: &CancellationToken,
    ) -> Result<Completion, ModelError>;

    /// The models the endpoint serves, by the names a request takes; empty where the
    /// provider cannot list them.
    async fn list_models(&self) -> Result<Vec<String>, ModelError> {
        Ok(Vec::new())
    }
}
