//! OpenAI-compatible chat completions over SSE (`POST {base_url}/chat/completions`, `stream:
//! true`). Used for the `openai`, `deepseek` and `ollama` presets.
//!
//! Streaming: text deltas, `reasoning_content` deltas (DeepSeek; Ollama says `reasoning`),
//! tool-call deltas assembled by `index` (id and name first, argument fragments later),
//! `finish_reason`, the usage chunk of `stream_options.include_usage`, `[DONE]`.

use std::collections::BTreeMap;

use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{Decoder, Endpoint, ProviderConfig, Wire, truncate};
use crate::types::{
    ChatRequest, Completion, FinishReason, Message, ModelError, Role, StreamEvent, ToolCallRequest,
    Usage,
};

/// An OpenAI-compatible chat-completions provider.
pub struct OpenAiProvider {
    endpoint: Endpoint,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("name", &self.endpoint.provider)
            .field("model", &self.endpoint.model)
            .field("url", &self.endpoint.url)
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// A provider for `config.base_url` (e.g. `https://api.openai.com/v1`); requests go to
    /// `{base_url}/chat/completions`, the key as `Authorization: Bearer`.
    pub fn new(config: ProviderConfig) -> Result<Self, ModelError> {
        let endpoint = config.endpoint("/chat/completions", |key| {
            vec![("authorization", format!("Bearer {key}"), true)]
        })?;
        Ok(OpenAiProvider { endpoint })
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
        let mut body = json!({
            "model": model,
            "messages": request.messages.iter().map(wire_message).collect::<Vec<_>>(),
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    }})
                })
                .collect();
        }
        if let Some(max) = request.max_tokens {
            // OpenAI's newer models refuse `max_tokens`; compatible servers know only it.
            let field = if self.endpoint.provider == "openai" {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body[field] = json!(max);
        }
        body
    }
}

/// One message in the chat-completions format. Reasoning is never sent back.
fn wire_message(m: &Message) -> Value {
    match m.role {
        Role::System => json!({"role": "system", "content": m.content}),
        Role::User => json!({"role": "user", "content": m.content}),
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.as_deref().unwrap_or_default(),
            "content": m.content,
        }),
        Role::Assistant => {
            if m.tool_calls.is_empty() {
                return json!({"role": "assistant", "content": m.content});
            }
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    // The raw text goes back as the model wrote it (the loop answered invalid
                    // JSON with an `invalid_args` result); only "nothing" becomes `{}`.
                    let arguments = if c.arguments.trim().is_empty() {
                        "{}"
                    } else {
                        c.arguments.as_str()
                    };
                    json!({"id": c.id, "type": "function",
                           "function": {"name": c.name, "arguments": arguments}})
                })
                .collect();
            let content = if m.content.is_empty() {
                Value::Null
            } else {
                Value::String(m.content.clone())
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
    }
}

impl Wire for OpenAiProvider {
    type Decoder = ChunkDecoder;

    /// `GET /v1/models`, which Ollama serves too.
    const MODELS_PATH: &'static str = "/models";

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn request_body(&self, request: &ChatRequest) -> Value {
        OpenAiProvider::request_body(self, request)
    }
}

// ---- the stream ----

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    /// Ollama's name for the reasoning text.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolDelta>>,
}

#[derive(Deserialize)]
struct ToolDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    /// OpenAI: `{"cached_tokens": N}`.
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    /// DeepSeek: the cache's hits (its misses are the rest of `prompt_tokens`).
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

/// Assembles one streamed chat completion.
#[derive(Default)]
pub(crate) struct ChunkDecoder {
    text: String,
    reasoning: String,
    calls: Vec<PartialCall>,
    /// Wire `index` → position in `calls`.
    slots: BTreeMap<u64, usize>,
    finish: Option<String>,
    usage: Option<Usage>,
}

impl ChunkDecoder {
    fn tool_delta(
        &mut self,
        position: usize,
        d: ToolDelta,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) {
        let index = d.index.unwrap_or(position as u64);
        let id = d.id.filter(|s| !s.is_empty());
        let slot = match self.slots.get(&index) {
            // A different id at a known index is a new call (some servers reuse index 0).
            Some(&s)
                if id
                    .as_ref()
                    .is_none_or(|id| self.calls[s].id.is_empty() || self.calls[s].id == *id) =>
            {
                s
            }
            _ => {
                self.calls.push(PartialCall::default());
                let s = self.calls.len() - 1;
                self.slots.insert(index, s);
                s
            }
        };
        let call = &mut self.calls[slot];
        if let Some(id) = id {
            call.id = id;
        }
        if let Some(f) = d.function {
            if let Some(name) = f.name.filter(|n| !n.is_empty())
                && call.name.is_empty()
            {
                call.name = name;
            }
            if let Some(args) = f.arguments {
                call.arguments.push_str(&args);
            }
        }
        if !call.announced && !call.name.is_empty() {
            call.announced = true;
            if call.id.is_empty() {
                call.id = format!("call_{slot}");
            }
            emit(StreamEvent::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
            });
        }
    }
}

impl Decoder for ChunkDecoder {
    fn event(
        &mut self,
        event: &Event,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if event.event == "error" {
            let value: Value = serde_json::from_str(data).unwrap_or(Value::String(data.into()));
            let error = value.get("error").cloned().unwrap_or(value);
            return Err(crate::reported::reported(&error, None));
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            ModelError::Protocol(format!(
                "a stream chunk is not a chat completion chunk ({e}): {}",
                truncate(data, 200)
            ))
        })?;
        self.chunk(chunk, emit)?;
        Ok(false)
    }

    fn whole(
        &mut self,
        body: &Value,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<bool, ModelError> {
        if !body.get("choices").is_some_and(Value::is_array) {
            return Ok(false);
        }
        // A chat completion: each choice's `message` is read as one delta.
        let mut chunk = body.clone();
        if let Some(choices) = chunk.get_mut("choices").and_then(Value::as_array_mut) {
            for c in choices {
                if let Some(m) = c.get("message").cloned() {
                    c["delta"] = m;
                }
            }
        }
        let chunk: Chunk = serde_json::from_value(chunk).map_err(|e| {
            ModelError::Protocol(format!("the answer is not a chat completion ({e})"))
        })?;
        self.chunk(chunk, emit)?;
        if self.finish.is_none() {
            self.finish = Some("stop".to_string());
        }
        Ok(true)
    }

    fn finished(&self) -> bool {
        self.finish.is_some()
    }

    fn finish(self) -> Result<Completion, ModelError> {
        self.assemble()
    }
}

impl ChunkDecoder {
    /// Takes in one chunk (or a whole completion read as one).
    fn chunk(
        &mut self,
        chunk: Chunk,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), ModelError> {
        if let Some(error) = chunk.error {
            return Err(crate::reported::reported(&error, None));
        }
        if let Some(u) = chunk.usage {
            let cached = u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(u.prompt_cache_hit_tokens)
                .unwrap_or(0);
            self.usage = Some(Usage {
                prompt_tokens: u.prompt_tokens.unwrap_or(0),
                completion_tokens: u.completion_tokens.unwrap_or(0),
                cached_tokens: cached,
                cache_write_tokens: 0,
            });
        }
        for choice in chunk.choices {
            if choice.index.is_some_and(|i| i != 0) {
                continue;
            }
            let delta = choice.delta.unwrap_or_default();
            if let Some(r) = delta
                .reasoning_content
                .or(delta.reasoning)
                .filter(|r| !r.is_empty())
            {
                self.reasoning.push_str(&r);
                emit(StreamEvent::Reasoning(r));
            }
            if let Some(t) = delta.content.filter(|t| !t.is_empty()) {
                self.text.push_str(&t);
                emit(StreamEvent::Text(t));
            }
            for (position, d) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                self.tool_delta(position, d, emit);
            }
            if let Some(f) = choice.finish_reason.filter(|f| !f.is_empty()) {
                self.finish = Some(f);
            }
        }
        Ok(())
    }

    /// The assembled completion.
    fn assemble(self) -> Result<Completion, ModelError> {
        let tool_calls: Vec<ToolCallRequest> = self
            .calls
            .into_iter()
            .enumerate()
            .filter(|(_, c)| !c.name.is_empty() || !c.arguments.is_empty())
            .map(|(i, c)| ToolCallRequest {
                id: if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        let finish_reason = match self.finish.as_deref() {
            // Some servers say "stop" after tool calls; the calls are what counts.
            None | Some("stop") if !tool_calls.is_empty() => FinishReason::ToolCalls,
            None | Some("stop") => FinishReason::Stop,
            Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
            Some("length") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_string()),
        };
        let mut message = Message::assistant(self.text, tool_calls);
        if !self.reasoning.is_empty() {
            message.reasoning = Some(self.reasoning);
        }
        Ok(Completion {
            message,
            usage: self.usage,
            finish_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn feed(chunks: &[&str]) -> (Completion, Vec<StreamEvent>) {
        let mut d = ChunkDecoder::default();
        let mut seen = Vec::new();
        let mut emit = |e: StreamEvent| seen.push(e);
        for c in chunks {
            let event = Event {
                event: "message".into(),
                data: (*c).to_string(),
                id: String::new(),
                retry: None,
            };
            if d.event(&event, &mut emit).unwrap() {
                break;
            }
        }
        (d.finish().unwrap(), seen)
    }

    #[test]
    fn a_new_id_at_a_reused_index_is_a_new_call() {
        let (c, seen) = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{\"x\":1}"}}]},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        let names: Vec<_> = c
            .message
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(names, [("a", "f", "{}"), ("b", "g", "{\"x\":1}")]);
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn missing_ids_and_indexes_are_filled_in() {
        let (c, _) = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"}"}}]},"finish_reason":"stop"}]}"#,
        ]);
        assert_eq!(c.message.tool_calls.len(), 1);
        assert_eq!(c.message.tool_calls[0].id, "call_0");
        assert_eq!(c.message.tool_calls[0].arguments, "{}");
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
    }

    #[test]
    fn ollama_reasoning_field_and_other_finish_reasons() {
        let (c, seen) = feed(&[
            r#"{"choices":[{"delta":{"reasoning":"hmm"}}]}"#,
            r#"{"choices":[{"delta":{"content":"ok"},"finish_reason":"length"}]}"#,
        ]);
        assert_eq!(c.message.reasoning.as_deref(), Some("hmm"));
        assert_eq!(c.finish_reason, FinishReason::Length);
        assert_eq!(
            seen,
            [
                StreamEvent::Reasoning("hmm".into()),
                StreamEvent::Text("ok".into())
            ]
        );
    }

    #[test]
    fn an_error_chunk_is_a_stream_error() {
        let mut d = ChunkDecoder::default();
        let event = Event {
            event: "message".into(),
            data: r#"{"error":{"message":"overloaded"}}"#.into(),
            id: String::new(),
            retry: None,
        };
        let e = d.event(&event, &mut |_| {}).err().unwrap();
        assert!(e.to_string().contains("overloaded"), "{e}");
    }

    #[test]
    fn assistant_messages_map_to_the_wire() {
        let m = Message {
            reasoning: Some("secret".into()),
            ..Message::assistant(
                "",
                vec![ToolCallRequest {
                    id: "1".into(),
                    name: "f".into(),
                    arguments: String::new(),
                }],
            )
        };
        let v = wire_message(&m);
        assert_eq!(v["content"], Value::Null);
        assert_eq!(v["tool_calls"][0]["function"]["arguments"], "{}");
        assert!(!v.to_string().contains("secret"));
    }
}
