//! What a scripted server answers: turns of text, reasoning and tool calls, errors, cut or
//! slow deliveries, and the gates and rendezvous that hold a reply back.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Dialect;

/// One scripted tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptedCall {
    pub id: String,
    pub name: String,
    /// The raw argument text (need not be valid JSON).
    pub arguments: String,
}

/// A streamed assistant turn and how it is delivered.
#[derive(Clone, Debug)]
pub struct Turn {
    pub(super) reasoning: String,
    pub(super) text: String,
    pub(super) calls: Vec<ScriptedCall>,
    pub(super) usage: Option<(u64, u64)>,
    pub(super) finish: Option<String>,
    pub(super) delta_chars: usize,
    pub(super) args_chars: usize,
    pub(super) write_sizes: Option<Vec<usize>>,
    pub(super) delay: Duration,
    pub(super) stall: Option<(usize, Duration)>,
    pub(super) hold: Option<(usize, Gate)>,
    pub(super) cut: bool,
    pub(super) done: bool,
    pub(super) raw: Option<Vec<String>>,
}

impl Default for Turn {
    fn default() -> Self {
        Turn {
            reasoning: String::new(),
            text: String::new(),
            calls: Vec::new(),
            usage: None,
            finish: None,
            delta_chars: 4,
            args_chars: 5,
            write_sizes: None,
            delay: Duration::ZERO,
            stall: None,
            hold: None,
            cut: false,
            done: true,
            raw: None,
        }
    }
}

impl Turn {
    /// A final answer, streamed in deltas of 4 characters.
    pub fn text(text: impl Into<String>) -> Self {
        Turn {
            text: text.into(),
            ..Turn::default()
        }
    }

    /// A turn that calls one tool (add more with [`Turn::call`]).
    pub fn tool_call(id: &str, name: &str, arguments: &str) -> Self {
        Turn::default().call(id, name, arguments)
    }

    /// Adds a tool call; its arguments stream in fragments of 5 characters.
    pub fn call(mut self, id: &str, name: &str, arguments: &str) -> Self {
        self.calls.push(ScriptedCall {
            id: id.to_string(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        });
        self
    }

    /// Answer text streamed alongside (before the tool calls).
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }

    /// Reasoning text (DeepSeek `reasoning_content`), streamed before the answer.
    pub fn reasoning(mut self, text: impl Into<String>) -> Self {
        self.reasoning = text.into();
        self
    }

    /// Reports usage in a final chunk (`stream_options.include_usage`).
    pub fn usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.usage = Some((prompt_tokens, completion_tokens));
        self
    }

    /// The `finish_reason` (default `tool_calls` when there are calls, else `stop`).
    pub fn finish(mut self, reason: &str) -> Self {
        self.finish = Some(reason.to_string());
        self
    }

    /// Text deltas of `n` characters and argument fragments of `n` characters.
    pub fn deltas(mut self, n: usize) -> Self {
        self.delta_chars = n.max(1);
        self.args_chars = n.max(1);
        self
    }

    /// Writes the body in tiny TCP writes of 1, 2, 3, 5 and 7 bytes in turn (each its own HTTP
    /// chunk), so SSE lines, JSON and multi-byte UTF-8 characters are split everywhere.
    pub fn split_awkwardly(self) -> Self {
        self.split_bytes(&[1, 2, 3, 5, 7])
    }

    /// Writes the body in writes of these sizes, cycling.
    pub fn split_bytes(mut self, sizes: &[usize]) -> Self {
        let sizes: Vec<usize> = sizes.iter().map(|s| (*s).max(1)).collect();
        self.write_sizes = if sizes.is_empty() { None } else { Some(sizes) };
        self
    }

    /// Waits `delay` before each event after the first (not combined with the split modes).
    pub fn slow(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Sends `events` events (the first is the role-only chunk), then pauses for `pause` once
    /// before the rest (not combined with the split modes).
    pub fn stall_after(mut self, events: usize, pause: Duration) -> Self {
        self.stall = Some((events, pause));
        self
    }

    /// Sends `events` events (the first is the role-only chunk), then waits for `gate` to open
    /// before the rest: a test acts while part of the answer is known to be on the way (not
    /// combined with the split modes).
    pub fn hold_after(mut self, events: usize, gate: &Gate) -> Self {
        self.hold = Some((events, gate.clone()));
        self
    }

    /// Sends the first half of the events, then closes the connection without ending the
    /// chunked body (no finish reason, no `[DONE]`).
    pub fn cut_midway(mut self) -> Self {
        self.cut = true;
        self
    }

    /// Ends the body cleanly but without `data: [DONE]` (Anthropic: without `message_stop`).
    pub fn without_done(mut self) -> Self {
        self.done = false;
        self
    }

    /// Sends these `data:` payloads verbatim instead of the generated events (still followed by
    /// `[DONE]` or `message_stop` unless [`Turn::without_done`]; Anthropic event names come
    /// from each payload's `type`).
    pub fn raw(data: Vec<String>) -> Self {
        Turn {
            raw: Some(data),
            ..Turn::default()
        }
    }

    pub(super) fn finish_reason(&self) -> String {
        self.finish.clone().unwrap_or_else(|| {
            if self.calls.is_empty() {
                "stop".into()
            } else {
                "tool_calls".into()
            }
        })
    }

    /// The SSE events (each `[event: …\n]data: …\n\n`) of this turn in `dialect`.
    pub(super) fn sse(&self, dialect: Dialect, model: &str) -> Vec<String> {
        match dialect {
            Dialect::OpenAi => {
                let mut events: Vec<String> = self
                    .openai_events(model)
                    .into_iter()
                    .map(|data| format!("data: {data}\n\n"))
                    .collect();
                if self.done {
                    events.push("data: [DONE]\n\n".to_string());
                }
                events
            }
            Dialect::Anthropic => self
                .anthropic_events(model)
                .into_iter()
                .map(|data| {
                    let kind = serde_json::from_str::<Value>(&data)
                        .ok()
                        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
                        .unwrap_or_else(|| "message".into());
                    format!("event: {kind}\ndata: {data}\n\n")
                })
                .collect(),
        }
    }

    /// The `data:` payloads of the OpenAI chat-completions stream.
    pub(super) fn openai_events(&self, model: &str) -> Vec<String> {
        if let Some(raw) = &self.raw {
            return raw.clone();
        }
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
                   "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string()
        };
        let mut events = vec![chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        )];
        for piece in pieces(&self.reasoning, self.delta_chars) {
            events.push(chunk(json!({"reasoning_content": piece}), Value::Null));
        }
        for piece in pieces(&self.text, self.delta_chars) {
            events.push(chunk(json!({"content": piece}), Value::Null));
        }
        for (i, call) in self.calls.iter().enumerate() {
            events.push(chunk(
                json!({"tool_calls": [{"index": i, "id": call.id, "type": "function",
                                      "function": {"name": call.name, "arguments": ""}}]}),
                Value::Null,
            ));
            for piece in pieces(&call.arguments, self.args_chars) {
                events.push(chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                    Value::Null,
                ));
            }
        }
        events.push(chunk(json!({}), json!(self.finish_reason())));
        if let Some((p, c)) = self.usage {
            events.push(
                json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
                       "model": model, "choices": [],
                       "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}})
                .to_string(),
            );
        }
        events
    }

    /// The `data:` payloads of the Anthropic Messages stream (`message_stop` last unless
    /// [`Turn::without_done`]).
    pub(super) fn anthropic_events(&self, model: &str) -> Vec<String> {
        if let Some(raw) = &self.raw {
            let mut events = raw.clone();
            if self.done {
                events.push(json!({"type": "message_stop"}).to_string());
            }
            return events;
        }
        let (prompt, completion) = self.usage.unwrap_or((0, 0));
        let mut events = vec![
            json!({"type": "message_start", "message": {
                "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": prompt, "output_tokens": 1}}})
            .to_string(),
            json!({"type": "ping"}).to_string(),
        ];
        let mut index = 0;
        let mut block = |events: &mut Vec<String>, start: Value, deltas: Vec<Value>| {
            events.push(
                json!({"type": "content_block_start", "index": index, "content_block": start})
                    .to_string(),
            );
            for d in deltas {
                events.push(
                    json!({"type": "content_block_delta", "index": index, "delta": d}).to_string(),
                );
            }
            events.push(json!({"type": "content_block_stop", "index": index}).to_string());
            index += 1;
        };
        if !self.reasoning.is_empty() {
            let mut deltas: Vec<Value> = pieces(&self.reasoning, self.delta_chars)
                .into_iter()
                .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                .collect();
            deltas.push(json!({"type": "signature_delta", "signature": "c2NyaXB0ZWQ="}));
            block(
                &mut events,
                json!({"type": "thinking", "thinking": ""}),
                deltas,
            );
        }
        if !self.text.is_empty() {
            let deltas = pieces(&self.text, self.delta_chars)
                .into_iter()
                .map(|p| json!({"type": "text_delta", "text": p}))
                .collect();
            block(&mut events, json!({"type": "text", "text": ""}), deltas);
        }
        for call in &self.calls {
            let deltas = pieces(&call.arguments, self.args_chars)
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect();
            block(
                &mut events,
                json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
                deltas,
            );
        }
        let stop = match self.finish_reason().as_str() {
            "stop" => "end_turn".to_string(),
            "tool_calls" => "tool_use".to_string(),
            "length" => "max_tokens".to_string(),
            other => other.to_string(),
        };
        events.push(
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop, "stop_sequence": null},
                   "usage": {"output_tokens": completion}})
            .to_string(),
        );
        if self.done {
            events.push(json!({"type": "message_stop"}).to_string());
        }
        events
    }
}

pub(super) fn pieces(text: &str, n: usize) -> Vec<String> {
    // Cut at every `n`th character boundary, without a copy of the text as `char`s (a 10 MB
    // argument would cost 40 MB of the test's memory).
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest
            .char_indices()
            .nth(n.max(1))
            .map_or(rest.len(), |(i, _)| i);
        out.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    out
}

/// What the server answers to one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// `200 text/event-stream` with a streamed turn.
    Stream(Turn),
    /// An error status.
    Status {
        code: u16,
        /// The response body (JSON or text).
        body: String,
        /// A `Retry-After` header value.
        retry_after: Option<String>,
    },
    /// Accepts the request, then closes the connection without answering.
    Hangup,
    /// Accepts the request and never answers: holds the connection open until the client
    /// closes it.
    Silent,
    /// Answers with the inner reply once the test opens the gate ([`Reply::held`]).
    Held(Gate, Box<Reply>),
    /// Answers with the inner reply once every request of a rendezvous is waiting
    /// ([`Reply::together`]).
    Together(Rendezvous, Box<Reply>),
}

/// A meeting point for `n` requests: a [`Reply::together`] reply is sent only once `n`
/// requests holding it have arrived and wait, which proves they were in flight at the same
/// time — no timing involved. Requests that would never meet (the client sent them one after
/// another) give up after a long wait and get a final answer saying so, and
/// [`Rendezvous::met`] stays `false`.
#[derive(Clone, Debug)]
pub struct Rendezvous {
    pub(super) barrier: Arc<tokio::sync::Barrier>,
    pub(super) met: Arc<std::sync::atomic::AtomicBool>,
}

impl Rendezvous {
    /// How long a request waits for the others before it gives up.
    const PATIENCE: Duration = Duration::from_secs(20);

    /// A rendezvous of `n` requests.
    pub fn new(n: usize) -> Rendezvous {
        Rendezvous {
            barrier: Arc::new(tokio::sync::Barrier::new(n)),
            met: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }

    /// Whether all `n` requests were waiting at once.
    pub fn met(&self) -> bool {
        self.met.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(super) async fn wait(&self) -> bool {
        let met = tokio::time::timeout(Self::PATIENCE, self.barrier.wait())
            .await
            .is_ok();
        if met {
            self.met.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        met
    }
}

/// A gate a test opens: a [`Reply::held`] reply waits for it, so a test can act while the
/// client is known to be waiting for the model (no timing involved).
#[derive(Clone, Debug)]
pub struct Gate(Arc<tokio::sync::Semaphore>);

impl Default for Gate {
    fn default() -> Self {
        Gate::new()
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Gate {
        Gate(Arc::new(tokio::sync::Semaphore::new(0)))
    }

    /// Opens the gate for good: every reply held by it is sent.
    pub fn open(&self) {
        self.0.close();
    }

    pub(super) async fn wait(&self) {
        // A closed semaphore fails every acquire at once: that is the open gate.
        let _ = self.0.acquire().await;
    }
}

impl From<Turn> for Reply {
    fn from(turn: Turn) -> Self {
        Reply::Stream(turn)
    }
}

impl Reply {
    /// A final answer (see [`Turn::text`]).
    pub fn text(text: impl Into<String>) -> Self {
        Reply::Stream(Turn::text(text))
    }

    /// An error status with an OpenAI-style error body naming the status.
    pub fn status(code: u16) -> Self {
        Reply::error(code, &format!("scripted status {code}"))
    }

    /// An error status whose body is `{"type": "error", "error": {"type": …, "message":
    /// MESSAGE}}` (the shape both OpenAI and Anthropic use).
    pub fn error(code: u16, message: &str) -> Self {
        Reply::Status {
            code,
            body: json!({"type": "error", "error": {"type": "scripted_error", "message": message}})
                .to_string(),
            retry_after: None,
        }
    }

    /// An error status with this exact body.
    pub fn status_body(code: u16, body: &str) -> Self {
        Reply::Status {
            code,
            body: body.to_string(),
            retry_after: None,
        }
    }

    /// This reply, sent only once `gate` is opened.
    pub fn held(self, gate: &Gate) -> Self {
        Reply::Held(gate.clone(), Box::new(self))
    }

    /// This reply, sent only once every request of `rendezvous` is waiting.
    pub fn together(self, rendezvous: &Rendezvous) -> Self {
        Reply::Together(rendezvous.clone(), Box::new(self))
    }

    /// Adds a `Retry-After` header to a [`Reply::Status`].
    pub fn retry_after(self, value: &str) -> Self {
        match self {
            Reply::Status { code, body, .. } => Reply::Status {
                code,
                body,
                retry_after: Some(value.to_string()),
            },
            other => other,
        }
    }
}
