//! Model providers for dsh. A provider turns a [`ChatRequest`] into one assistant turn,
//! streaming what arrives through a callback. Providers know the wire formats (SSE framing,
//! tool-call deltas, usage) and nothing of tools, policies or the journal.
//!
//! Shapes here are provider-neutral: the agent loop builds [`Message`]s, a provider maps them
//! to its wire format and back.
//!
//! - [`OpenAiProvider`]: OpenAI-compatible chat completions (the `openai`, `deepseek` and
//!   `ollama` presets).
//! - [`AnthropicProvider`]: Anthropic messages (the `anthropic` preset).
//! - [`from_config`]: picks and builds the provider the configuration (or, with nothing
//!   configured, the environment) asks for.

mod anthropic;
mod http;
mod openai;
mod select;
mod types;

pub use anthropic::AnthropicProvider;
pub use http::{ProviderConfig, ProviderOptions};
pub use openai::OpenAiProvider;
pub use select::{HOW_TO_CONFIGURE, default_model, from_config, from_config_with};
pub use types::{
    ChatRequest, Completion, FinishReason, Message, ModelError, Provider, Role, StreamEvent,
    ToolCallRequest, ToolSchema, Usage,
};
