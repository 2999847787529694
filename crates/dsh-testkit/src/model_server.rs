//! Scripted model servers on 127.0.0.1 speaking the real wire format over real HTTP/1.1 and
//! SSE: `Content-Type: text/event-stream`, a chunked body of `data: …\n\n` events ending with
//! `data: [DONE]` (OpenAI chat completions), or of `event: …\ndata: …\n\n` events ending with
//! `message_stop` (Anthropic Messages). The *content* is scripted — answers, tool calls, usage, errors — and so is
//! the delivery: bytes written a few at a time (splitting multi-byte UTF-8 characters), slow
//! streams, connections cut mid-way, error statuses with `Retry-After`.
//!
//! Replies are served in order, one per request; each request body is recorded. A request after
//! the script is exhausted gets a 400 whose message says so.
//!
//! ```no_run
//! use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
//! let server = ScriptedServer::start(vec![
//!     Reply::status(429).retry_after("1"),
//!     Turn::text("hello").into(),
//! ]);
//! // point an OpenAI-compatible client at server.url ("http://127.0.0.1:PORT/v1")
//! ```
//!
//! The server runs on its own thread and runtime, so it serves sync tests (driving the `dsh`
//! binary) and async tests alike; it stops when the handle is dropped.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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
    reasoning: String,
    text: String,
    calls: Vec<ScriptedCall>,
    usage: Option<(u64, u64)>,
    finish: Option<String>,
    delta_chars: usize,
    args_chars: usize,
    write_sizes: Option<Vec<usize>>,
    delay: Duration,
    stall: Option<(usize, Duration)>,
    cut: bool,
    done: bool,
    raw: Option<Vec<String>>,
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

    fn finish_reason(&self) -> String {
        self.finish.clone().unwrap_or_else(|| {
            if self.calls.is_empty() {
                "stop".into()
            } else {
                "tool_calls".into()
            }
        })
    }

    /// The SSE events (each `[event: …\n]data: …\n\n`) of this turn in `dialect`.
    fn sse(&self, dialect: Dialect, model: &str) -> Vec<String> {
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
    fn openai_events(&self, model: &str) -> Vec<String> {
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
    fn anthropic_events(&self, model: &str) -> Vec<String> {
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

fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
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
    barrier: Arc<tokio::sync::Barrier>,
    met: Arc<std::sync::atomic::AtomicBool>,
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

    async fn wait(&self) -> bool {
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

    async fn wait(&self) {
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

/// One request as the server received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    /// The body as JSON (`Value::String` of the text when it is not JSON).
    pub body: Value,
    /// When the request's first byte was read (for latency benchmarks).
    pub received: std::time::Instant,
}

/// Which wire format a server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dialect {
    /// `POST …/chat/completions`.
    OpenAi,
    /// `POST …/v1/messages`.
    Anthropic,
}

struct State {
    dialect: Dialect,
    script: Mutex<VecDeque<Reply>>,
    recorded: Mutex<Vec<Recorded>>,
    /// Signalled at each recorded request.
    arrived: std::sync::Condvar,
}

/// Starts scripted servers.
#[derive(Debug)]
pub struct ScriptedServer;

impl ScriptedServer {
    /// An OpenAI-compatible server (`POST …/chat/completions`) answering `script` in order;
    /// its `url` is `http://127.0.0.1:PORT/v1`.
    pub fn start(script: Vec<Reply>) -> ServerHandle {
        Self::spawn(Dialect::OpenAi, script)
    }

    /// An Anthropic Messages server (`POST /v1/messages`) answering `script` in order; its
    /// `url` is `http://127.0.0.1:PORT` (the API's base URL has no `/v1`).
    pub fn start_anthropic(script: Vec<Reply>) -> ServerHandle {
        Self::spawn(Dialect::Anthropic, script)
    }

    fn spawn(dialect: Dialect, script: Vec<Reply>) -> ServerHandle {
        let state = Arc::new(State {
            dialect,
            script: Mutex::new(script.into()),
            recorded: Mutex::new(Vec::new()),
            arrived: std::sync::Condvar::new(),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let served = state.clone();
        let thread = std::thread::Builder::new()
            .name("scripted-model-server".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async move {
                    let listener = TcpListener::from_std(listener).expect("listener");
                    let accept = async {
                        loop {
                            let Ok((socket, _)) = listener.accept().await else {
                                continue;
                            };
                            tokio::spawn(serve(socket, served.clone()));
                        }
                    };
                    tokio::select! {
                        _ = accept => {}
                        _ = stop_rx => {}
                    }
                });
                rt.shutdown_background();
            })
            .expect("spawn server thread");
        ServerHandle {
            url: match dialect {
                Dialect::OpenAi => format!("http://{addr}/v1"),
                Dialect::Anthropic => format!("http://{addr}"),
            },
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

/// A running scripted server; stops when dropped.
pub struct ServerHandle {
    /// The base URL: `http://127.0.0.1:PORT/v1` (OpenAI) or `http://127.0.0.1:PORT` (Anthropic).
    pub url: String,
    state: Arc<State>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("url", &self.url)
            .finish()
    }
}

impl ServerHandle {
    /// The recorded request bodies, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.recorded().into_iter().map(|r| r.body).collect()
    }

    /// The recorded requests, in arrival order.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.state.recorded.lock().unwrap().clone()
    }

    /// Waits until at least `n` requests have arrived; `false` when `timeout` passed first.
    pub fn wait_for_requests(&self, n: usize, timeout: std::time::Duration) -> bool {
        let recorded = self.state.recorded.lock().unwrap();
        let (recorded, _) = self
            .state
            .arrived
            .wait_timeout_while(recorded, timeout, |r| r.len() < n)
            .unwrap();
        recorded.len() >= n
    }

    /// Replies not served yet.
    pub fn remaining(&self) -> usize {
        self.state.script.lock().unwrap().len()
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves one connection: one request, one reply, then close.
async fn serve(mut socket: TcpStream, state: Arc<State>) {
    let _ = socket.set_nodelay(true);
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    let model = request
        .body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted")
        .to_string();
    let known_path = match state.dialect {
        Dialect::OpenAi => request.path.ends_with("/chat/completions"),
        Dialect::Anthropic => request.path == "/v1/messages",
    };
    state.recorded.lock().unwrap().push(request.clone());
    state.arrived.notify_all();
    if request.method != "POST" || !known_path {
        let body = json!({"error": {"message": format!("scripted server: no route for {} {}", request.method, request.path)}});
        let _ = write_status(&mut socket, 404, &body.to_string(), None).await;
        return;
    }
    // Refused as the real APIs refuse it: a tool result without its call, or a call without
    // its result (the scripted reply is not used up).
    if let Some(message) = orphan(state.dialect, &request.body) {
        let body = json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
        let _ = write_status(&mut socket, 400, &body.to_string(), None).await;
        return;
    }
    let reply = state.script.lock().unwrap().pop_front();
    let Some(reply) = reply else {
        let n = state.recorded.lock().unwrap().len();
        let body = json!({"error": {"message": format!("scripted server: the script is exhausted (request {n})")}});
        let _ = write_status(&mut socket, 400, &body.to_string(), None).await;
        return;
    };
    let reply = match reply {
        Reply::Held(gate, inner) => {
            gate.wait().await;
            *inner
        }
        Reply::Together(rendezvous, inner) => {
            if rendezvous.wait().await {
                *inner
            } else {
                Reply::text(
                    "RENDEZVOUS MISSED: the other requests never arrived while this one waited",
                )
            }
        }
        other => other,
    };
    let _ = match reply {
        Reply::Held(..) | Reply::Together(..) => Ok(()),
        Reply::Status {
            code,
            body,
            retry_after,
        } => write_status(&mut socket, code, &body, retry_after.as_deref()).await,
        Reply::Hangup => Ok(()),
        Reply::Silent => {
            let mut sink = [0u8; 1024];
            while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
            Ok(())
        }
        Reply::Stream(turn) => {
            let events = turn.sse(state.dialect, &model);
            write_stream(&mut socket, &turn, events).await
        }
    };
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut received = None;
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        received.get_or_insert_with(std::time::Instant::now);
        buf.extend_from_slice(&chunk[..n]);
        if !buf[0].is_ascii_uppercase() {
            return None; // not HTTP (a TLS handshake, say): hang up
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Some(Recorded {
        method,
        path,
        headers,
        body,
        received: received?,
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Scripted",
    }
}

async fn write_status(
    socket: &mut TcpStream,
    code: u16,
    body: &str,
    retry_after: Option<&str>,
) -> std::io::Result<()> {
    let content_type = if body.trim_start().starts_with('{') {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    let mut head = format!(
        "HTTP/1.1 {code} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n",
        reason(code),
        body.len()
    );
    if let Some(r) = retry_after {
        head.push_str(&format!("retry-after: {r}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    socket.flush().await?;
    socket.shutdown().await
}

/// Writes one HTTP chunk.
async fn write_chunk(socket: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let mut frame = format!("{:x}\r\n", bytes.len()).into_bytes();
    frame.extend_from_slice(bytes);
    frame.extend_from_slice(b"\r\n");
    socket.write_all(&frame).await?;
    socket.flush().await
}

async fn write_stream(
    socket: &mut TcpStream,
    turn: &Turn,
    mut events: Vec<String>,
) -> std::io::Result<()> {
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
              transfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )
        .await?;
    socket.flush().await?;

    if turn.cut {
        let keep = (events.len() / 2).max(1);
        events.truncate(keep);
    }

    match &turn.write_sizes {
        None => {
            for (i, event) in events.iter().enumerate() {
                if i > 0 && !turn.delay.is_zero() {
                    tokio::time::sleep(turn.delay).await;
                }
                if let Some((after, pause)) = turn.stall
                    && i == after
                {
                    tokio::time::sleep(pause).await;
                }
                write_chunk(socket, event.as_bytes()).await?;
            }
        }
        Some(sizes) => {
            // One continuous body, so the splits also straddle event boundaries.
            let body = events.concat().into_bytes();
            let mut at = 0;
            let mut k = 0;
            while at < body.len() {
                let n = sizes[k % sizes.len()].min(body.len() - at);
                write_chunk(socket, &body[at..at + n]).await?;
                // Let each piece leave as its own segment.
                tokio::task::yield_now().await;
                at += n;
                k += 1;
            }
        }
    }
    if turn.cut {
        // Close without the terminating chunk: the body is incomplete.
        return Ok(());
    }
    socket.write_all(b"0\r\n\r\n").await?;
    socket.flush().await?;
    socket.shutdown().await
}

/// The first tool result without its call, or call without its result, in a request body,
/// said in the words of the API whose dialect the server speaks.
fn orphan(dialect: Dialect, body: &Value) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    let ids = |v: Option<&Value>, key: &str| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.get(key).and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    match dialect {
        Dialect::OpenAi => {
            let mut pending: Vec<String> = Vec::new();
            let mut answerable: Vec<String> = Vec::new();
            for m in messages {
                let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
                if role == "tool" {
                    let id = m
                        .get("tool_call_id")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if !answerable.iter().any(|a| a == id) {
                        return Some("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".to_owned());
                    }
                    pending.retain(|p| p != id);
                    continue;
                }
                if !pending.is_empty() {
                    return Some(format!(
                        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                        pending.join(", ")
                    ));
                }
                answerable = if role == "assistant" {
                    ids(m.get("tool_calls"), "id")
                } else {
                    Vec::new()
                };
                pending.clone_from(&answerable);
            }
            None
        }
        Dialect::Anthropic => {
            let blocks = |m: &Value, kind: &str, key: &str| -> Vec<String> {
                m.get("content")
                    .and_then(Value::as_array)
                    .map(|c| {
                        c.iter()
                            .filter(|b| b.get("type").and_then(Value::as_str) == Some(kind))
                            .filter_map(|b| b.get(key).and_then(Value::as_str).map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for (i, m) in messages.iter().enumerate() {
                let uses = blocks(m, "tool_use", "id");
                if !uses.is_empty() && i + 1 < messages.len() {
                    let answered = blocks(&messages[i + 1], "tool_result", "tool_use_id");
                    let missing: Vec<&String> =
                        uses.iter().filter(|u| !answered.contains(u)).collect();
                    if let Some(id) = missing.first() {
                        return Some(format!(
                            "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {id}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                        ));
                    }
                }
                let results = blocks(m, "tool_result", "tool_use_id");
                if !results.is_empty() {
                    let called = if i > 0 {
                        blocks(&messages[i - 1], "tool_use", "id")
                    } else {
                        Vec::new()
                    };
                    if let Some(id) = results.iter().find(|r| !called.contains(r)) {
                        return Some(format!(
                            "messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                }
            }
            None
        }
    }
}
