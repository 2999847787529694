//! What every HTTP provider shares: the client (rustls with ring, webpki roots, HTTP/1.1), the
//! retry loop (backoff with jitter, `Retry-After`), the idle timeout, error bodies turned into
//! the server's own words plus what to check, and an SSE event loop that hands events to a
//! wire-format [`Decoder`].

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::{EventStream, EventStreamError};
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::types::{Completion, ModelError, StreamEvent};

#[doc(hidden)]
pub mod fuzzing;
mod models;
mod options;
mod wire;

pub use options::{ProviderConfig, ProviderOptions};
pub(crate) use wire::{Decoder, Wire};

/// Where and how to reach one model endpoint.
pub(crate) struct Endpoint {
    /// Provider name, for messages.
    pub provider: String,
    pub model: String,
    pub base_url: String,
    /// The full URL posted to.
    pub url: String,
    /// Extra headers (API key, version headers).
    pub headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    /// The environment variable the key came from (for hints), if any.
    pub key_env: Option<String>,
    /// Whether a key is sent.
    pub has_key: bool,
    /// Added to [`ModelError::Unreachable`] (e.g. how to point dsh at a model).
    pub unreachable_hint: Option<String>,
    pub options: ProviderOptions,
    pub client: reqwest::Client,
}

/// Builds the HTTP client: rustls with the ring provider and the webpki roots, HTTP/1.1, no
/// redirects (dsh talks to the configured endpoint only), no proxy for loopback endpoints.
pub(crate) fn client(
    base_url: &str,
    options: &ProviderOptions,
) -> Result<reqwest::Client, ModelError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ModelError::Config(format!("cannot set up TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        // Shorter than the idle timeout, so an attempt that outlives it was connected.
        .connect_timeout(options.connect_timeout.min(options.idle_timeout / 2))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("dsh/", env!("CARGO_PKG_VERSION")));
    if is_loopback(base_url) {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|e| ModelError::Config(format!("cannot set up the HTTP client: {}", chain(&e))))
}

/// Whether `url`'s host is this machine (`localhost`, a loopback address).
pub fn is_loopback(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A wire format's view of one streamed turn.
/// The most of a JSON answer (in place of a stream) that is read.
const JSON_REPLY_MAX: usize = 16 << 20;
/// The most of an error body that is read.
const ERROR_BODY_MAX: usize = 64 << 10;

/// One failed attempt.
pub(crate) struct Failure {
    error: ModelError,
    /// `Some` when the failure may be retried; the inner value is the server's `Retry-After`.
    retry: Option<Option<Duration>>,
}

impl Failure {
    pub(crate) fn fatal(error: ModelError) -> Self {
        Failure { error, retry: None }
    }
    pub(crate) fn retryable(error: ModelError, after: Option<Duration>) -> Self {
        Failure {
            error,
            retry: Some(after),
        }
    }
}

impl Endpoint {
    /// Adds a header sent with every request (e.g. `anthropic-version`).
    pub(crate) fn with_header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((
            reqwest::header::HeaderName::from_static(name),
            reqwest::header::HeaderValue::from_static(value),
        ));
        self
    }

    /// Posts `body` and streams the answer through a fresh decoder per attempt, retrying what
    /// may be retried.
    pub(crate) async fn stream_turn<D: Decoder>(
        &self,
        body: Vec<u8>,
        new_decoder: impl Fn() -> D + Send + Sync,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
        cancel: &CancellationToken,
    ) -> Result<Completion, ModelError> {
        let max = self.options.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            if cancel.is_cancelled() {
                return Err(ModelError::Cancelled);
            }
            let mut streamed = false;
            let outcome = {
                let mut emit = |e: StreamEvent| {
                    streamed = true;
                    on_event(e);
                };
                self.attempt(&body, new_decoder(), &mut emit, cancel).await
            };
            let failure = match outcome {
                Ok(c) => return Ok(c),
                Err(f) => f,
            };
            let after = match failure.retry {
                Some(after) if !streamed && attempt < max => after,
                _ => return Err(self.final_error(failure.error, attempt)),
            };
            let delay = match after {
                Some(d) => d.min(self.options.retry_after_cap),
                None => backoff(&self.options, attempt),
            };
            attempt += 1;
            on_event(StreamEvent::Retrying {
                attempt,
                reason: format!("{} (retrying in {} ms)", failure.error, delay.as_millis()),
            });
            if cancel
                .run_until_cancelled(tokio::time::sleep(delay))
                .await
                .is_none()
            {
                return Err(ModelError::Cancelled);
            }
        }
    }

    /// Adds the "what to check" of errors that survived every retry.
    fn final_error(&self, error: ModelError, attempts: u32) -> ModelError {
        let tries = if attempts > 1 {
            format!(" (tried {attempts} times)")
        } else {
            String::new()
        };
        match error {
            ModelError::Http {
                status,
                message,
                hint: None,
            } if status == 429 || status >= 500 => {
                let hint = if status == 429 {
                    format!(
                        "rate limited{tries}: wait and retry, or check the quota of the account{}",
                        self.key_env
                            .as_deref()
                            .map(|k| format!(" whose key is in {k}"))
                            .unwrap_or_default()
                    )
                } else {
                    format!(
                        "the server kept failing{tries}: retry later, or check {} and the provider's status",
                        self.base_url
                    )
                };
                ModelError::Http {
                    status,
                    message,
                    hint: Some(hint),
                }
            }
            // The advice comes once, with the error that ends the call: never in a retry line.
            ModelError::Unreachable { url, reason, hint } => ModelError::Unreachable {
                url,
                reason: format!("{reason}{tries}"),
                hint: hint.or_else(|| self.unreachable_hint.clone()),
            },
            ModelError::Silent { url, reason, hint } => ModelError::Silent {
                url,
                reason: format!("{reason}{tries}"),
                hint,
            },
            ModelError::Reported {
                kind,
                message,
                hint: None,
            } if attempts > 1 => ModelError::Reported {
                kind,
                message,
                hint: Some(format!(
                    "the server kept reporting it{tries}: wait and retry, or check the quota and status of the account"
                )),
            },
            other => other,
        }
    }

    async fn attempt<D: Decoder>(
        &self,
        body: &[u8],
        decoder: D,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
        cancel: &CancellationToken,
    ) -> Result<Completion, Failure> {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(body.to_vec());
        for (name, value) in &self.headers {
            request = request.header(name.clone(), value.clone());
        }
        let idle = self.options.idle_timeout;
        let sent = cancel
            .run_until_cancelled(tokio::time::timeout(idle, request.send()))
            .await
            .ok_or_else(|| Failure::fatal(ModelError::Cancelled))?;
        let response = match sent {
            Err(_) => return Err(Failure::retryable(self.silent(), None)),
            Ok(Err(e)) => {
                return Err(Failure::retryable(self.unreachable(chain(&e)), None));
            }
            Ok(Ok(r)) => r,
        };
        if !response.status().is_success() {
            return Err(self.status_failure(response, cancel).await);
        }
        // JSON where a stream was asked for; any other type is read as the stream it should
        // be (some servers stream SSE as `text/plain`).
        let json = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.to_ascii_lowercase().contains("json"));
        if json {
            let body = cancel
                .run_until_cancelled(read_limited(response, idle, JSON_REPLY_MAX))
                .await
                .ok_or_else(|| Failure::fatal(ModelError::Cancelled))?;
            return self.not_a_stream(&body, decoder, emit);
        }

        self.read_events(byte_stream(response, idle), decoder, emit, cancel)
            .await
    }

    /// Reads a 200 answer's byte stream as server-sent events through `decoder` until the
    /// turn is complete, the stream ends or breaks, or the server reports an error in it.
    pub(crate) async fn read_events<D: Decoder>(
        &self,
        bytes: Bytes,
        mut decoder: D,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
        cancel: &CancellationToken,
    ) -> Result<Completion, Failure> {
        let mut events = Box::pin(EventStream::new(bytes));
        loop {
            let next = cancel
                .run_until_cancelled(events.next())
                .await
                .ok_or_else(|| Failure::fatal(ModelError::Cancelled))?;
            let broke = match next {
                Some(Ok(event)) => match decoder.event(&event, emit) {
                    Ok(true) => break,
                    Ok(false) => continue,
                    // The server said so mid-stream: classified like an HTTP status.
                    Err(e @ ModelError::Reported { .. }) => return Err(self.reported_failure(e)),
                    Err(e) => return Err(Failure::fatal(e)),
                },
                None if decoder.finished() => break,
                None => "the stream ended before the turn was complete".to_string(),
                Some(Err(_)) if decoder.finished() => break,
                Some(Err(EventStreamError::Transport(t))) => t.describe(),
                Some(Err(EventStreamError::Utf8(e))) => {
                    return Err(Failure::fatal(ModelError::Protocol(format!(
                        "the stream is not UTF-8: {e}"
                    ))));
                }
                Some(Err(EventStreamError::Parser(e))) => {
                    return Err(Failure::fatal(ModelError::Protocol(format!(
                        "the stream is not server-sent events: {e}"
                    ))));
                }
            };
            return Err(Failure::retryable(ModelError::Stream(broke), None));
        }
        decoder.finish().map_err(Failure::fatal)
    }

    /// A 200 answer that is not an event stream. A complete message of the same wire format
    /// is taken in as if streamed; an error object is classified as a reported error; anything
    /// else is said as it is, and never retried.
    fn not_a_stream<D: Decoder>(
        &self,
        body: &str,
        mut decoder: D,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion, Failure> {
        let what = "JSON";
        let said = || server_message(body).unwrap_or_else(|| "an empty body".to_string());
        let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
            return Err(Failure::fatal(ModelError::Protocol(format!(
                "answered {what} instead of an event stream: {}",
                said()
            ))));
        };
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            let message = server_message(body);
            return Err(self.reported_failure(crate::reported::reported(error, message)));
        }
        match decoder.whole(&value, emit) {
            Ok(true) => decoder.finish().map_err(Failure::fatal),
            Ok(false) => Err(Failure::fatal(ModelError::Protocol(format!(
                "answered {what} instead of an event stream, and it is not a {} message: {}",
                self.provider,
                said()
            )))),
            Err(e) => Err(Failure::fatal(e)),
        }
    }

    /// The server accepted the connection but sent nothing within the idle timeout.
    fn silent(&self) -> ModelError {
        let idle = seconds(self.options.idle_timeout);
        // The connect timeout is below the idle timeout (see `client`): the request was sent.
        let reason = format!("connected, but no response within {idle}");
        ModelError::Silent {
            url: self.url.clone(),
            reason,
            hint: Some(
                "check that the base URL is a model server and that it is not overloaded, or raise [model] idle_timeout_s".to_string(),
            ),
        }
    }

    /// Nothing answered; the hint is added by [`Self::final_error`] once retries are over.
    fn unreachable(&self, reason: String) -> ModelError {
        ModelError::Unreachable {
            url: self.url.clone(),
            reason,
            hint: None,
        }
    }

    async fn status_failure(
        &self,
        response: reqwest::Response,
        cancel: &CancellationToken,
    ) -> Failure {
        let status = response.status();
        let code = status.as_u16();
        let retry_after = retry_after(response.headers());
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = cancel
            .run_until_cancelled(read_limited(
                response,
                self.options.idle_timeout,
                ERROR_BODY_MAX,
            ))
            .await
            .unwrap_or_default();
        let message = server_message(&body)
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_string());
        let http = |hint: Option<String>| ModelError::Http {
            status: code,
            message: message.clone(),
            hint,
        };
        if code == 429 || status.is_server_error() {
            return Failure::retryable(http(None), retry_after);
        }
        Failure::fatal(http(self.hint_for(code, location)))
    }

    /// What to check after a refusal with status `code` (or its equivalent, for an error
    /// reported inside a 200 answer).
    pub(crate) fn hint_for(&self, code: u16, location: Option<String>) -> Option<String> {
        match code {
            401 | 403 => Some(match (&self.key_env, self.has_key) {
                (Some(env), true) => format!("check the API key in {env}"),
                (Some(env), false) => format!("no API key was sent: set {env}"),
                (None, _) => "the endpoint wants a key: set model.api_key_env to the environment variable that holds it".to_string(),
            }),
            404 => {
                let mut h = format!(
                    "check the model name ({}) and the base URL ({}; dsh posted to {})",
                    self.model, self.base_url, self.url
                );
                if self.provider == "ollama" {
                    h.push_str(&format!("; for Ollama, pull the model: `ollama pull {}`", self.model));
                }
                Some(h)
            }
            400 | 422 => Some(format!(
                "check the request and the model: {} may not support tool calls or streaming, or {} may not speak the {} API",
                self.model, self.base_url, self.provider
            )),
            300..=399 => Some(format!(
                "the base URL redirects{}; set the final URL as the base URL",
                location.map(|l| format!(" to {l}")).unwrap_or_default()
            )),
            _ => None,
        }
    }
}

/// The exponential backoff before attempt `attempt + 1`, with jitter: half fixed, half random.
fn backoff(options: &ProviderOptions, attempt: u32) -> Duration {
    let exp = options
        .backoff_base
        .saturating_mul(1u32 << (attempt - 1).min(16))
        .min(options.backoff_max);
    let half = exp / 2;
    let random = RandomState::new().hash_one(attempt);
    let jitter_ns = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    let jitter = if jitter_ns == 0 {
        0
    } else {
        random % (jitter_ns + 1)
    };
    half + Duration::from_nanos(jitter)
}

/// `Retry-After` (seconds) or `retry-after-ms`, as a duration.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    if let Some(ms) = get("retry-after-ms") {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(86_400.0)));
    }
    get("retry-after").map(|s| Duration::from_secs_f64(s.min(86_400.0)))
}

/// The server's own error message: `error.message` (OpenAI, Anthropic), `error` and
/// `message` both when both are strings (`TypeError: Cannot read …`), `error` as a string
/// (Ollama), `message`, `detail`, else the body text; truncated.
pub(crate) fn server_message(body: &str) -> Option<String> {
    let body = body.trim();
    if body.is_empty() {
        return None;
    }
    let from_json = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            let string = |key: &str| {
                v.get(key)
                    .and_then(|s| s.as_str())
                    .filter(|s| !s.is_empty())
            };
            if let (Some(error), Some(message)) = (string("error"), string("message")) {
                return Some(format!("{error}: {message}"));
            }
            let text = v
                .pointer("/error/message")
                .or_else(|| v.get("error").filter(|e| e.is_string()))
                .or_else(|| v.get("message"))
                .or_else(|| v.get("detail"))?;
            text.as_str().map(str::to_owned)
        });
    Some(truncate(from_json.as_deref().unwrap_or(body), 500))
}

pub(crate) fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// A timeout as people read it: `120 s`, `1.5 s`.
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s} s")
    }
}

/// Reads at most `max` bytes of a body, giving up after `idle` of silence.
async fn read_limited(mut response: reqwest::Response, idle: Duration, max: usize) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < max {
        match tokio::time::timeout(idle, response.chunk()).await {
            Ok(Ok(Some(chunk))) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(max);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Why the byte stream stopped.
#[derive(Debug)]
pub(crate) enum Transport {
    Body(reqwest::Error),
    Idle(Duration),
}

impl Transport {
    fn describe(&self) -> String {
        match self {
            Transport::Body(e) => format!("the connection failed mid-stream: {}", chain(e)),
            Transport::Idle(d) => format!("nothing arrived for {} s", d.as_secs_f64()),
        }
    }
}

pub(crate) type Bytes = Pin<Box<dyn Stream<Item = Result<Vec<u8>, Transport>> + Send>>;

/// The response body as a stream of byte chunks, failing after `idle` of silence.
fn byte_stream(response: reqwest::Response, idle: Duration) -> Bytes {
    Box::pin(futures::stream::unfold(
        Some(response),
        move |state| async move {
            let mut response = state?;
            match tokio::time::timeout(idle, response.chunk()).await {
                Ok(Ok(Some(chunk))) => Some((Ok(chunk.to_vec()), Some(response))),
                Ok(Ok(None)) => None,
                Ok(Err(e)) => Some((Err(Transport::Body(e)), None)),
                Err(_) => Some((Err(Transport::Idle(idle)), None)),
            }
        },
    ))
}

/// An error and its sources, joined, without reqwest's and hyper's generic wrappers
/// ("error sending request for url (…)", "client error (Connect)"), which say less than the
/// cause ("tcp connect error: Connection refused").
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        let part = err.to_string();
        if !parts.iter().any(|p| p.contains(&part)) {
            parts.push(part);
        }
        next = err.source();
    }
    let specific: Vec<&String> = parts
        .iter()
        .filter(|p| !p.starts_with("error sending request") && !p.starts_with("client error ("))
        .collect();
    if specific.is_empty() {
        parts.join(": ")
    } else {
        specific
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(": ")
    }
}
