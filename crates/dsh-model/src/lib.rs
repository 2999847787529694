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
//! - [`select`]: picks and builds the provider that [`ModelSettings`] (plain values the
//!   agent fills from configuration and the environment) ask for. This crate reads no
//!   configuration and no environment.

mod anthropic;
mod http;
mod openai;
mod reported;
mod select;
mod types;

pub use anthropic::AnthropicProvider;
/// For the fuzz targets only (`fuzz/`): not an API.
#[doc(hidden)]
pub use http::fuzzing;
pub use http::{ProviderConfig, ProviderOptions, is_loopback};
pub use openai::OpenAiProvider;
pub use select::{
    Endpoint, ModelSettings, ProviderKind, Route, default_model, how_to_configure, route, select,
    select_with,
};
pub use types::{
    ChatRequest, Completion, FinishReason, Message, ModelError, Provider, Role, StreamEvent,
    ToolCallRequest, ToolSchema, Usage,
};
