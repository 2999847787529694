//! Scripted model servers on 127.0.0.1 speaking the real wire format over real HTTP/1.1 and
//! SSE: `Content-Type: text/event-stream`, a chunked body of `data: …\n\n` events ending with
//! `data: [DONE]` (OpenAI chat completions), or of `event: …\ndata: …\n\n` events ending with
//! `message_stop` (Anthropic Messages). The *content* is scripted — answers, tool calls, usage, errors — and so is
//! the delivery: bytes written a few at a time (splitting multi-byte UTF-8 characters), slow
//! streams, connections cut mid-way, error statuses with `Retry-After`.
//!
//! Replies are served in order, one per request; each request body is recorded. A request after
//! the script is exhausted gets a 400 whose message says so. After
//! [`ServerHandle::require_key`], a request without that key gets the provider's 401.
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

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

mod script;
mod wire;

pub use script::{Gate, Rendezvous, Reply, ScriptedCall, Turn};
use wire::{orphan, read_request, write_status, write_stream};

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
pub(crate) enum Dialect {
    /// `POST …/chat/completions`.
    OpenAi,
    /// `POST …/v1/messages`.
    Anthropic,
}

struct State {
    dialect: Dialect,
    /// What `GET …/models` lists (in the dialect's shape); such requests are not recorded.
    models: Mutex<Vec<String>>,
    /// The only key accepted (see [`ServerHandle::require_key`]); `None`: any or none.
    key: Mutex<Option<String>>,
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
            models: Mutex::new(Vec::new()),
            key: Mutex::new(None),
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
    /// The models `GET …/models` lists from now on (none until this is called).
    pub fn serve_models(&self, names: &[&str]) {
        *self.state.models.lock().unwrap() = names.iter().map(|n| (*n).to_owned()).collect();
    }

    /// From now on, refuses every request — `GET …/models` included — whose key is not `key`
    /// (`Authorization: Bearer KEY` for OpenAI, `x-api-key: KEY` for Anthropic) with a 401 and
    /// the provider's own error body (`invalid_api_key`, `authentication_error`). A refused
    /// chat request is recorded (a listing is not, as ever) and uses up no reply.
    pub fn require_key(&self, key: &str) {
        *self.state.key.lock().unwrap() = Some(key.to_owned());
    }

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
    let lists_models = request.method == "GET"
        && match state.dialect {
            Dialect::OpenAi => request.path.ends_with("/models"),
            Dialect::Anthropic => request.path == "/v1/models",
        };
    if let Some(body) = refused_key(&state, &request) {
        if !lists_models {
            state.recorded.lock().unwrap().push(request.clone());
            state.arrived.notify_all();
        }
        let _ = write_status(&mut socket, 401, &body.to_string(), None).await;
        return;
    }
    if lists_models {
        let names = state.models.lock().unwrap().clone();
        let body = match state.dialect {
            Dialect::OpenAi => json!({"object": "list", "data": names.iter()
                .map(|n| json!({"id": n, "object": "model", "owned_by": "scripted"}))
                .collect::<Vec<_>>()}),
            Dialect::Anthropic => json!({"data": names.iter()
                .map(|n| json!({"type": "model", "id": n, "display_name": n}))
                .collect::<Vec<_>>(), "has_more": false}),
        };
        let _ = write_status(&mut socket, 200, &body.to_string(), None).await;
        return;
    }
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

/// The provider's 401 body when a key is required and `request` does not carry it.
fn refused_key(state: &State, request: &Recorded) -> Option<Value> {
    let required = state.key.lock().unwrap().clone()?;
    let given = match state.dialect {
        Dialect::OpenAi => request
            .headers
            .get("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim),
        Dialect::Anthropic => request.headers.get("x-api-key").map(|v| v.trim()),
    };
    if given == Some(required.as_str()) {
        return None;
    }
    Some(match state.dialect {
        Dialect::OpenAi => json!({"error": {
            "message": "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
        Dialect::Anthropic => json!({"type": "error", "error": {
            "type": "authentication_error", "message": "invalid x-api-key"}}),
    })
}
