//! Anthropic Messages over SSE (`POST {base_url}/v1/messages`, `stream: true`).
//!
//! Mapping: system messages become the top-level `system`; assistant tool calls become
//! `tool_use` blocks (their `input` parsed from the raw argument text); tool results become
//! `tool_result` blocks of the next user message (consecutive ones merged). Streaming:
//! `message_start` (input usage), `content_block_start`/`_delta`/`_stop` for text, thinking and
//! tool use (`input_json_delta` fragments assembled per block), `message_delta` (stop reason,
//! output usage), `message_stop`, `ping`, `error`.

use std::collections::BTreeMap;

use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{Decoder, Endpoint, ProviderConfig, Wire, truncate};
use crate::types::{
    ChatRequest, Completion, FinishReason, Message, ModelError, Role, StreamEvent, ToolCallRequest,
    Usage,
};

/// The `anthropic-version` header sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` is required by the Messages API; used when a request sets no cap.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// An Anthropic Messages provider.
pub struct AnthropicProvider {
    endpoint: Endpoint,
}

impl std::fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("model", &self.endpoint.model)
            .field("url", &self.endpoint.url)
            .finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    /// A provider for `config.base_url` (e.g. `https://api.anthropic.com`); requests go to
    /// `{base_url}/v1/messages`, the key as `x-api-key`.
    pub fn new(config: ProviderConfig) -> Result<Self, ModelError> {
        let endpoint = config
            .endpoint("/v1/messages", |key| {
                vec![("x-api-key", key.to_string(), true)]
            })?
            .with_header("anthropic-version", ANTHROPIC_VERSION);
        Ok(AnthropicProvider { endpoint })
    }

    /// The endpoint's base URL (without a trailing slash).
    pub fn base_url(&self) -> &str {
        &self.endpoint.base_url
    }

    /// The request body for `request` (what is posted, before serialization).
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let model = if request.model.is_empty() {
            &self.endpoint.model
        } else {
            &request.model
        };
        let system: Vec<&str> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System && !m.content.is_empty())
            .map(|m| m.content.as_str())
            .collect();
        let mut body = json!({
            "model": model,
            "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": wire_messages(&request.messages),
            "stream": true,
        });
        // Prompt-cache breakpoints (the API allows four): the tools and the system prompt —
        // the stable head of every request — and the latest message, so the next request,
        // which only appends, is served from the cache up to it.
        let ephemeral = json!({"type": "ephemeral"});
        if !system.is_empty() {
            body["system"] = json!([{"type": "text", "text": system.join("\n\n"),
                                     "cache_control": ephemeral}]);
        }
        if !request.tools.is_empty() {
            let mut tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description,
                           "input_schema": t.parameters})
                })
                .collect();
            if let Some(last) = tools.last_mut() {
                last["cache_control"] = ephemeral.clone();
            }
            body["tools"] = Value::Array(tools);
        }
        if let Some(block) = body["messages"]
            .as_array_mut()
            .and_then(|m| m.last_mut())
            .and_then(|m| m["content"].as_array_mut())
            .and_then(|c| c.last_mut())
        {
            block["cache_control"] = ephemeral;
        }
        body
    }
}

/// The conversation as Messages API turns: user and assistant alternate, content as blocks.
/// Reasoning is never sent back.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User => ("user", text_block(&m.content)),
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.as_deref().unwrap_or_default(),
                    "content": m.content,
                })],
            ),
            Role::Assistant => {
                let mut blocks = text_block(&m.content);
                blocks.extend(m.tool_calls.iter().map(|c| {
                    json!({"type": "tool_use", "id": c.id, "name": c.name,
                           "input": tool_input(&c.arguments)})
                }));
                ("assistant", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// Anthropic rejects empty text blocks.
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

/// A `tool_use` input must be an object: the raw text parsed, `{}` for nothing, and text that
/// is not a JSON object kept visible under `_raw_arguments` (the loop already answered it with
/// an `invalid_args` result).
fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"_raw_arguments": arguments}),
    }
}

impl Wire for AnthropicProvider {
    type Decoder = MessageDecoder;

    const MODELS_PATH: &'static str = "/v1/models";

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn request_body(&self, request: &ChatRequest) -> Value {
        AnthropicProvider::request_body(self, request)
    }
}

// ---- the stream ----

#[derive(Deserialize)]
struct WireEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    message: Option<StartMessage>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    content_block: Option<Value>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

enum Block {
    Text,
    Thinking,
    Tool {
        id: String,
        name: String,
        json: String,
        /// The `input` of `content_block_start`, used when no fragment follows.
        initial: Value,
    },
    Other,
}

/// Assembles one streamed message.
#[derive(Default)]
pub(crate) struct MessageDecoder {
    text: String,
    reasoning: String,
    /// Content blocks by wire index, in order.
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    /// Of the input: read from and written to the prompt cache.
    cache_read: u64,
    cache_write: u64,
}

impl MessageDecoder {
    fn usage(&mut self, u: &WireUsage) {
        if u.input_tokens.is_some()
            || u.cache_creation_input_tokens.is_some()
            || u.cache_read_input_tokens.is_some()
        {
            self.input_tokens = Some(
                u.input_tokens.unwrap_or(0)
                    + u.cache_creation_input_tokens.unwrap_or(0)
                    + u.cache_read_input_tokens.unwrap_or(0),
            );
            self.cache_read = u.cache_read_input_tokens.unwrap_or(0);
            self.cache_write = u.cache_creation_input_tokens.unwrap_or(0);
        }
        if let Some(o) = u.output_tokens {
            self.output_tokens = Some(o);
        }
    }
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

impl Decoder for MessageDecoder {
    fn event(
        &mut self,
        event: &Event,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let wire: WireEvent = serde_json::from_str(data).map_err(|e| {
            ModelError::Protocol(format!(
                "a stream event is not a Messages API event ({e}): {}",
                truncate(data, 200)
            ))
        })?;
        match wire.kind.as_str() {
            "message_start" => {
                if let Some(u) = wire.message.and_then(|m| m.usage) {
                    self.usage(&u);
                }
            }
            "content_block_start" => {
                let index = wire.index.unwrap_or(self.blocks.len() as u64);
                let block = wire.content_block.unwrap_or_default();
                let block = match str_field(&block, "type") {
                    "text" => {
                        let t = str_field(&block, "text");
                        if !t.is_empty() {
                            self.text.push_str(t);
                            emit(StreamEvent::Text(t.to_string()));
                        }
                        Block::Text
                    }
                    "thinking" => Block::Thinking,
                    "tool_use" => {
                        let id = str_field(&block, "id").to_string();
                        let name = str_field(&block, "name").to_string();
                        emit(StreamEvent::ToolCall {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        Block::Tool {
                            id,
                            name,
                            json: String::new(),
                            initial: block.get("input").cloned().unwrap_or(json!({})),
                        }
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let delta = wire.delta.unwrap_or_default();
                let block = wire.index.and_then(|i| self.blocks.get_mut(&i));
                match (str_field(&delta, "type"), block) {
                    ("text_delta", _) => {
                        let t = str_field(&delta, "text");
                        if !t.is_empty() {
                            self.text.push_str(t);
                            emit(StreamEvent::Text(t.to_string()));
                        }
                    }
                    ("thinking_delta", _) => {
                        let t = str_field(&delta, "thinking");
                        if !t.is_empty() {
                            self.reasoning.push_str(t);
                            emit(StreamEvent::Reasoning(t.to_string()));
                        }
                    }
                    ("input_json_delta", Some(Block::Tool { json, .. })) => {
                        json.push_str(str_field(&delta, "partial_json"));
                    }
                    ("input_json_delta", _) => {
                        return Err(ModelError::Protocol(
                            "tool input arrived for a block that is not a tool call".into(),
                        ));
                    }
                    _ => {} // signature_delta, citations, …
                }
            }
            "message_delta" => {
                if let Some(r) = wire
                    .delta
                    .as_ref()
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(r.to_string());
                }
                if let Some(u) = &wire.usage {
                    self.usage(u);
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                let error = wire.error.unwrap_or(Value::Null);
                return Err(crate::reported::reported(&error, None));
            }
            _ => {} // ping, content_block_stop, future event types
        }
        Ok(false)
    }

    fn whole(
        &mut self,
        body: &Value,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<bool, ModelError> {
        let Some(content) = body.get("content").and_then(Value::as_array) else {
            return Ok(false);
        };
        if str_field(body, "type") != "message" {
            return Ok(false);
        }
        if let Some(u) = body.get("usage") {
            let u: WireUsage = serde_json::from_value(u.clone()).unwrap_or_default();
            self.usage(&u);
        }
        for (index, block) in (0u64..).zip(content) {
            let taken = match str_field(block, "type") {
                "text" => {
                    let t = str_field(block, "text");
                    if !t.is_empty() {
                        self.text.push_str(t);
                        emit(StreamEvent::Text(t.to_string()));
                    }
                    Block::Text
                }
                "thinking" => {
                    let t = str_field(block, "thinking");
                    if !t.is_empty() {
                        self.reasoning.push_str(t);
                        emit(StreamEvent::Reasoning(t.to_string()));
                    }
                    Block::Thinking
                }
                "tool_use" => {
                    let (id, name) = (str_field(block, "id"), str_field(block, "name"));
                    emit(StreamEvent::ToolCall {
                        id: id.to_string(),
                        name: name.to_string(),
                    });
                    Block::Tool {
                        id: id.to_string(),
                        name: name.to_string(),
                        json: String::new(),
                        initial: block.get("input").cloned().unwrap_or(json!({})),
                    }
                }
                _ => Block::Other,
            };
            self.blocks.insert(index, taken);
        }
        let stop = body.get("stop_reason").and_then(Value::as_str);
        self.stop_reason = Some(stop.unwrap_or("end_turn").to_string());
        Ok(true)
    }

    fn finished(&self) -> bool {
        self.stop_reason.is_some()
    }

    fn finish(self) -> Result<Completion, ModelError> {
        let mut tool_calls = Vec::new();
        for block in self.blocks.into_values() {
            if let Block::Tool {
                id,
                name,
                json,
                initial,
            } = block
            {
                let arguments = if json.is_empty() {
                    initial.to_string()
                } else {
                    json
                };
                tool_calls.push(ToolCallRequest {
                    id,
                    name,
                    arguments,
                });
            }
        }
        let finish_reason = match self.stop_reason.as_deref() {
            Some("tool_use") => FinishReason::ToolCalls,
            None | Some("end_turn" | "stop_sequence") if !tool_calls.is_empty() => {
                FinishReason::ToolCalls
            }
            None | Some("end_turn" | "stop_sequence") => FinishReason::Stop,
            Some("max_tokens") => FinishReason::Length,
            Some("refusal") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_string()),
        };
        let usage = match (self.input_tokens, self.output_tokens) {
            (None, None) => None,
            (i, o) => Some(Usage {
                prompt_tokens: i.unwrap_or(0),
                completion_tokens: o.unwrap_or(0),
                cached_tokens: self.cache_read,
                cache_write_tokens: self.cache_write,
            }),
        };
        let mut message = Message::assistant(self.text, tool_calls);
        if !self.reasoning.is_empty() {
            message.reasoning = Some(self.reasoning);
        }
        Ok(Completion {
            message,
            usage,
            finish_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tool_results_merge_into_one_user_turn_and_system_moves_out() {
        let messages = vec![
            Message::system("sys"),
            Message::user("go"),
            Message::assistant(
                "",
                vec![
                    ToolCallRequest {
                        id: "a".into(),
                        name: "f".into(),
                        arguments: r#"{"x":1}"#.into(),
                    },
                    ToolCallRequest {
                        id: "b".into(),
                        name: "f".into(),
                        arguments: "{broken".into(),
                    },
                ],
            ),
            Message::tool("a", "one"),
            Message::tool("b", "invalid_args"),
            Message::user("more"),
        ];
        let wire = wire_messages(&messages);
        assert_eq!(
            Value::Array(wire),
            json!([
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "a", "name": "f", "input": {"x": 1}},
                    {"type": "tool_use", "id": "b", "name": "f", "input": {"_raw_arguments": "{broken"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "one"},
                    {"type": "tool_result", "tool_use_id": "b", "content": "invalid_args"},
                    {"type": "text", "text": "more"}
                ]}
            ])
        );
    }

    #[test]
    fn a_tool_without_input_fragments_keeps_its_start_input() {
        let mut d = MessageDecoder::default();
        let ev = |data: Value| Event {
            event: data["type"].as_str().unwrap().into(),
            data: data.to_string(),
            id: String::new(),
            retry: None,
        };
        let mut emit = |_: StreamEvent| {};
        for e in [
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "tool_use", "id": "t", "name": "now", "input": {}}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
        ] {
            assert!(!d.event(&ev(e), &mut emit).unwrap());
        }
        let c = d.finish().unwrap();
        assert_eq!(c.message.tool_calls[0].arguments, "{}");
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            c.usage,
            Some(Usage {
                prompt_tokens: 0,
                completion_tokens: 3,
                ..Usage::default()
            })
        );
    }
}
