//! The OpenAI-compatible provider against scripted servers on 127.0.0.1 (real HTTP, real SSE).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use dsh_model::{
    ChatRequest, Completion, FinishReason, Message, ModelError, OpenAiProvider, Provider,
    ProviderConfig, ProviderOptions, StreamEvent, ToolCallRequest, ToolSchema, Usage,
};
use dsh_testkit::model_server::{Reply, ScriptedServer, ServerHandle, Turn};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn fast() -> ProviderOptions {
    ProviderOptions {
        max_attempts: 4,
        idle_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(50),
        retry_after_cap: Duration::from_secs(5),
    }
}

fn provider(server: &ServerHandle, options: ProviderOptions) -> OpenAiProvider {
    OpenAiProvider::new(ProviderConfig {
        api_key: Some("sk-test".into()),
        api_key_env: Some("OPENAI_API_KEY".into()),
        options,
        ..ProviderConfig::new("openai", &server.url, "gpt-test")
    })
    .unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        messages: vec![Message::system("be brief"), Message::user("hi")],
        tools: vec![ToolSchema {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        max_tokens: None,
    }
}

async fn run(
    p: &OpenAiProvider,
    req: &ChatRequest,
) -> (Result<Completion, ModelError>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let result = p
        .complete(req, &mut |e| events.push(e), &CancellationToken::new())
        .await;
    (result, events)
}

fn texts(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_text_answer_streams_in_deltas() {
    let server = ScriptedServer::start(vec![Turn::text("Hello, world!").usage(12, 4).into()]);
    let p = provider(&server, fast());
    let (result, events) = run(&p, &request()).await;
    let c = result.unwrap();
    assert_eq!(c.message.content, "Hello, world!");
    assert_eq!(c.message.role, dsh_model::Role::Assistant);
    assert!(c.message.tool_calls.is_empty());
    assert_eq!(c.finish_reason, FinishReason::Stop);
    assert_eq!(
        c.usage,
        Some(Usage {
            prompt_tokens: 12,
            completion_tokens: 4,
            ..Usage::default()
        })
    );
    assert_eq!(texts(&events), "Hello, world!");
    assert!(events.len() >= 4, "deltas arrive one by one: {events:?}");
    assert_eq!(p.name(), "openai");
    assert_eq!(p.model(), "gpt-test");
}

#[tokio::test]
async fn several_tool_calls_are_assembled_across_chunks() {
    let args_a = r#"{"path": "src/main.rs", "limit": 20}"#;
    let args_b = r#"{"path": "Cargo.toml"}"#;
    let server = ScriptedServer::start(vec![
        Turn::tool_call("call_a", "read_file", args_a)
            .call("call_b", "read_file", args_b)
            .call("call_c", "list_dir", "{not json")
            .with_text("Let me look.")
            .deltas(3)
            .into(),
    ]);
    let p = provider(&server, fast());
    let (result, events) = run(&p, &request()).await;
    let c = result.unwrap();
    assert_eq!(c.finish_reason, FinishReason::ToolCalls);
    assert_eq!(c.message.content, "Let me look.");
    assert_eq!(
        c.message.tool_calls,
        vec![
            ToolCallRequest {
                id: "call_a".into(),
                name: "read_file".into(),
                arguments: args_a.into()
            },
            ToolCallRequest {
                id: "call_b".into(),
                name: "read_file".into(),
                arguments: args_b.into()
            },
            // Not JSON: passed through raw for the loop to answer `invalid_args`.
            ToolCallRequest {
                id: "call_c".into(),
                name: "list_dir".into(),
                arguments: "{not json".into()
            },
        ]
    );
    let announced: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCall { id, name } => Some(format!("{id}:{name}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        announced,
        ["call_a:read_file", "call_b:read_file", "call_c:list_dir"]
    );
}

#[tokio::test]
async fn deltas_split_at_awkward_bytes_and_inside_utf8_characters() {
    let text = "Grüße — 日本語のテキスト 🎉🦀 ok\nline two: \"quoted\" \\ done";
    let args = r#"{"path": "naïve/файл.txt", "note": "€✓"}"#;
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "read_file", args)
            .with_text(text)
            .reasoning("thinking… 🤔")
            .usage(7, 9)
            .deltas(1)
            .split_awkwardly()
            .into(),
    ]);
    let p = provider(&server, fast());
    let (result, events) = run(&p, &request()).await;
    let c = result.unwrap();
    assert_eq!(c.message.content, text);
    assert_eq!(c.message.tool_calls[0].arguments, args);
    assert_eq!(c.message.reasoning.as_deref(), Some("thinking… 🤔"));
    assert_eq!(
        c.usage,
        Some(Usage {
            prompt_tokens: 7,
            completion_tokens: 9,
            ..Usage::default()
        })
    );
    assert_eq!(texts(&events), text);
}

#[tokio::test]
async fn reasoning_is_kept_apart_and_never_sent_back() {
    let server = ScriptedServer::start(vec![
        Turn::text("42")
            .reasoning("Let me think step by step.")
            .into(),
        Turn::text("ok").into(),
    ]);
    let p = provider(&server, fast());
    let (result, events) = run(&p, &request()).await;
    let c = result.unwrap();
    assert_eq!(c.message.content, "42");
    assert_eq!(
        c.message.reasoning.as_deref(),
        Some("Let me think step by step.")
    );
    assert!(events.contains(&StreamEvent::Reasoning("Let ".into())));
    assert_eq!(texts(&events), "42");

    // The next request carries the turn without its reasoning.
    let mut next = request();
    next.messages.push(c.message);
    next.messages.push(Message::user("and?"));
    run(&p, &next).await.0.unwrap();
    let sent = server.requests()[1].to_string();
    assert!(!sent.contains("step by step"), "{sent}");
    assert_eq!(
        server.requests()[1]["messages"][2],
        json!({"role": "assistant", "content": "42"})
    );
}

#[tokio::test]
async fn the_request_has_the_chat_completions_shape() {
    let server = ScriptedServer::start(vec![Turn::text("done").into()]);
    let p = provider(&server, fast());
    let mut req = request();
    req.max_tokens = Some(256);
    let mut assistant = Message::assistant(
        "",
        vec![
            ToolCallRequest {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a"}"#.into(),
            },
            ToolCallRequest {
                id: "c2".into(),
                name: "read_file".into(),
                arguments: "{oops".into(),
            },
        ],
    );
    assistant.reasoning = Some("private".into());
    req.messages.push(assistant);
    req.messages.push(Message::tool("c1", "contents of a"));
    req.messages
        .push(Message::tool("c2", "invalid_args: not JSON"));
    run(&p, &req).await.0.unwrap();

    let recorded = server.recorded();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].method, "POST");
    assert_eq!(recorded[0].path, "/v1/chat/completions");
    assert_eq!(recorded[0].headers["authorization"], "Bearer sk-test");
    assert_eq!(recorded[0].headers["content-type"], "application/json");
    let body = &recorded[0].body;
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_completion_tokens"], 256);
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "read_file", "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{oops"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "contents of a"},
            {"role": "tool", "tool_call_id": "c2", "content": "invalid_args: not JSON"}
        ])
    );
}

#[tokio::test]
async fn no_tools_no_tools_field_and_compatible_servers_get_max_tokens() {
    let server = ScriptedServer::start(vec![Turn::text("x").into()]);
    let p = OpenAiProvider::new(ProviderConfig {
        options: fast(),
        ..ProviderConfig::new("ollama", &format!("{}/", server.url), "llama")
    })
    .unwrap();
    let mut req = request();
    req.tools.clear();
    req.max_tokens = Some(9);
    run(&p, &req).await.0.unwrap();
    let r = &server.recorded()[0];
    assert!(r.body.get("tools").is_none());
    assert_eq!(r.body["max_tokens"], 9);
    assert!(
        !r.headers.contains_key("authorization"),
        "no key for ollama"
    );
    assert_eq!(
        r.path, "/v1/chat/completions",
        "a trailing slash in the base URL is fine"
    );
}

#[tokio::test]
async fn rate_limited_then_success_honours_retry_after() {
    let server = ScriptedServer::start(vec![
        Reply::error(429, "slow down").retry_after("1"),
        Turn::text("finally").into(),
    ]);
    let p = provider(&server, fast());
    let started = Instant::now();
    let (result, events) = run(&p, &request()).await;
    let elapsed = started.elapsed();
    assert_eq!(result.unwrap().message.content, "finally");
    assert!(
        elapsed >= Duration::from_millis(950),
        "waited only {elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(4), "waited {elapsed:?}");
    match &events[0] {
        StreamEvent::Retrying { attempt, reason } => {
            assert_eq!(*attempt, 2);
            assert!(
                reason.contains("429") && reason.contains("slow down"),
                "{reason}"
            );
        }
        other => panic!("expected Retrying first, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn retry_after_is_capped() {
    let server = ScriptedServer::start(vec![
        Reply::status(503).retry_after("3600"),
        Turn::text("ok").into(),
    ]);
    let p = provider(
        &server,
        ProviderOptions {
            retry_after_cap: Duration::from_millis(100),
            ..fast()
        },
    );
    let started = Instant::now();
    assert_eq!(run(&p, &request()).await.0.unwrap().message.content, "ok");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_500_storm_exhausts_the_retries() {
    let server = ScriptedServer::start(vec![
        Reply::error(500, "boom 1"),
        Reply::error(502, "boom 2"),
        Reply::error(503, "boom 3"),
        Reply::error(500, "boom 4"),
        Turn::text("never reached").into(),
    ]);
    let p = provider(&server, fast());
    let (result, events) = run(&p, &request()).await;
    let e = result.unwrap_err();
    match &e {
        ModelError::Http {
            status,
            message,
            hint,
        } => {
            assert_eq!(*status, 500);
            assert_eq!(message, "boom 4");
            assert!(
                hint.as_deref().unwrap().contains("tried 4 times"),
                "{hint:?}"
            );
        }
        other => panic!("expected Http, got {other:?}"),
    }
    let attempts: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, [2, 3, 4]);
    assert_eq!(server.remaining(), 1);
}

#[tokio::test]
async fn a_stream_cut_midway_is_a_stream_error_and_not_retried() {
    let server = ScriptedServer::start(vec![
        Turn::text("This answer will be cut off somewhere in the middle.")
            .cut_midway()
            .into(),
        Turn::text("not used").into(),
    ]);
    let p = provider(&server, fast());
    let (result, events) = run(&p, &request()).await;
    let e = result.unwrap_err();
    assert!(matches!(e, ModelError::Stream(_)), "{e:?}");
    assert!(
        !texts(&events).is_empty(),
        "some content arrived before the cut"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, StreamEvent::Retrying { .. }))
    );
    assert_eq!(server.requests().len(), 1, "content was streamed: no retry");
}

#[tokio::test]
async fn a_stream_ending_without_finish_or_done_is_a_stream_error() {
    let server = ScriptedServer::start(vec![Turn::raw(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "partial"}, "finish_reason": null}]}).to_string(),
    ])
    .without_done()
    .into()]);
    let p = provider(
        &server,
        ProviderOptions {
            max_attempts: 1,
            ..fast()
        },
    );
    let e = run(&p, &request()).await.0.unwrap_err();
    assert!(matches!(e, ModelError::Stream(_)), "{e:?}");
    assert!(
        e.to_string().contains("ended before the turn was complete"),
        "{e}"
    );
}

#[tokio::test]
async fn a_stream_cut_before_any_content_is_retried() {
    let server = ScriptedServer::start(vec![Reply::Hangup, Turn::text("second time lucky").into()]);
    let p = provider(&server, fast());
    let (result, events) = run(&p, &request()).await;
    assert_eq!(result.unwrap().message.content, "second time lucky");
    assert!(matches!(
        events[0],
        StreamEvent::Retrying { attempt: 2, .. }
    ));
}

#[tokio::test]
async fn a_slow_stream_within_the_idle_timeout_completes() {
    let server = ScriptedServer::start(vec![
        Turn::text("slow but steady")
            .slow(Duration::from_millis(150))
            .into(),
    ]);
    let p = provider(
        &server,
        ProviderOptions {
            idle_timeout: Duration::from_millis(800),
            ..fast()
        },
    );
    assert_eq!(
        run(&p, &request()).await.0.unwrap().message.content,
        "slow but steady"
    );
}

#[tokio::test]
async fn a_stream_stalling_past_the_idle_timeout_fails() {
    let server = ScriptedServer::start(vec![
        Turn::text("stalls after the first delta")
            .stall_after(2, Duration::from_secs(3))
            .into(),
        Turn::text("not used").into(),
    ]);
    let p = provider(
        &server,
        ProviderOptions {
            idle_timeout: Duration::from_millis(300),
            ..fast()
        },
    );
    let started = Instant::now();
    let (result, events) = run(&p, &request()).await;
    let e = result.unwrap_err();
    assert!(matches!(e, ModelError::Stream(_)), "{e:?}");
    assert!(e.to_string().contains("nothing arrived"), "{e}");
    assert_eq!(texts(&events), "stal");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.requests().len(), 1, "content was streamed: no retry");
}

#[tokio::test]
async fn a_stall_before_any_content_is_retried() {
    let server = ScriptedServer::start(vec![
        Turn::text("never seen")
            .stall_after(1, Duration::from_secs(3))
            .into(),
        Turn::text("the retry").into(),
    ]);
    let p = provider(
        &server,
        ProviderOptions {
            idle_timeout: Duration::from_millis(300),
            ..fast()
        },
    );
    let (result, events) = run(&p, &request()).await;
    assert_eq!(result.unwrap().message.content, "the retry");
    match &events[0] {
        StreamEvent::Retrying { attempt: 2, reason } => {
            assert!(reason.contains("nothing arrived"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn unauthorized_reports_the_server_message_and_the_key_variable() {
    let server = ScriptedServer::start(vec![
        Reply::error(401, "Incorrect API key provided: sk-test."),
        Turn::text("not used").into(),
    ]);
    let p = provider(&server, fast());
    let (result, events) = run(&p, &request()).await;
    let e = result.unwrap_err();
    match &e {
        ModelError::Http {
            status: 401,
            message,
            hint,
        } => {
            assert_eq!(message, "Incorrect API key provided: sk-test.");
            assert!(
                hint.as_deref().unwrap().contains("OPENAI_API_KEY"),
                "{hint:?}"
            );
        }
        other => panic!("expected Http 401, got {other:?}"),
    }
    assert!(events.is_empty(), "401 is not retried");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn not_found_names_the_model_and_base_url_and_plain_bodies_are_kept() {
    let server = ScriptedServer::start(vec![Reply::status_body(404, "no such model here")]);
    let p = provider(&server, fast());
    let e = run(&p, &request()).await.0.unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("404") && text.contains("no such model here"),
        "{text}"
    );
    assert!(
        text.contains("gpt-test") && text.contains(&server.url),
        "{text}"
    );
}

#[tokio::test]
async fn bad_request_says_what_to_check() {
    let server = ScriptedServer::start(vec![Reply::status_body(
        400,
        r#"{"error":"model does not support tools"}"#,
    )]);
    let p = provider(&server, fast());
    let e = run(&p, &request()).await.0.unwrap_err();
    match e {
        ModelError::Http {
            status: 400,
            message,
            hint,
        } => {
            assert_eq!(message, "model does not support tools");
            assert!(hint.unwrap().contains("tool calls"));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn garbage_in_the_stream_is_a_protocol_error() {
    let server = ScriptedServer::start(vec![Turn::raw(vec!["this is not json".into()]).into()]);
    let p = provider(&server, fast());
    let e = run(&p, &request()).await.0.unwrap_err();
    assert!(matches!(e, ModelError::Protocol(_)), "{e:?}");
}

#[tokio::test]
async fn nothing_listening_is_unreachable_after_retries() {
    let server = ScriptedServer::start(vec![]);
    let url = server.url.clone();
    drop(server);
    let p = OpenAiProvider::new(ProviderConfig {
        unreachable_hint: Some("start the server".into()),
        options: ProviderOptions {
            max_attempts: 2,
            ..fast()
        },
        ..ProviderConfig::new("ollama", &url, "m")
    })
    .unwrap();
    let (result, events) = run(&p, &request()).await;
    let e = result.unwrap_err();
    match &e {
        ModelError::Unreachable {
            url: u,
            reason,
            hint,
        } => {
            assert!(u.starts_with(&url), "{u}");
            assert!(reason.contains("tried 2 times"), "{reason}");
            assert_eq!(hint.as_deref(), Some("start the server"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(events.len(), 1, "one Retrying event: {events:?}");
}

#[tokio::test]
async fn cancellation_aborts_a_stream_promptly() {
    let server = ScriptedServer::start(vec![
        Turn::text("a long slow answer")
            .slow(Duration::from_secs(10))
            .into(),
    ]);
    let p = provider(&server, fast());
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let mut events = Vec::new();
    let req = request();
    let mut on_event = |e| events.push(e);
    let (result, ()) = tokio::join!(
        p.complete(&req, &mut on_event, &cancel),
        cancel_when_requested(&server, &cancel, 1)
    );
    assert!(matches!(result, Err(ModelError::Cancelled)), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn cancellation_aborts_a_backoff_wait() {
    let server = ScriptedServer::start(vec![
        Reply::status(429).retry_after("30"),
        Turn::text("x").into(),
    ]);
    let p = provider(
        &server,
        ProviderOptions {
            retry_after_cap: Duration::from_secs(30),
            ..fast()
        },
    );
    let cancel = CancellationToken::new();
    let started = Instant::now();
    // The 429 has been answered: the provider is in its 30 s backoff.
    let req = request();
    let mut on_event = |_| {};
    let (result, ()) = tokio::join!(
        p.complete(&req, &mut on_event, &cancel),
        cancel_when_requested(&server, &cancel, 1)
    );
    assert!(matches!(result, Err(ModelError::Cancelled)), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn the_provider_is_usable_as_a_trait_object() {
    let server = ScriptedServer::start(vec![Turn::text("via dyn").into()]);
    let p: std::sync::Arc<dyn Provider> = std::sync::Arc::new(provider(&server, fast()));
    let c = p
        .complete(&request(), &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(c.message.content, "via dyn");
}

/// The awkward splits really reach the client: some body pieces end inside a UTF-8 character.
#[tokio::test]
async fn the_scripted_server_really_splits_inside_characters() {
    let server = ScriptedServer::start(vec![
        Turn::text("日本語🎉").deltas(1).split_awkwardly().into(),
    ]);
    // `rustls-no-provider`: a bare reqwest client needs a process-wide crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut response = reqwest::Client::new()
        .post(format!("{}/chat/completions", server.url))
        .body(r#"{"model":"m"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let (mut pieces, mut split_chars, mut body) = (0, 0, Vec::new());
    while let Some(chunk) = response.chunk().await.unwrap() {
        pieces += 1;
        if let Err(e) = std::str::from_utf8(&chunk)
            && e.error_len().is_none()
        {
            split_chars += 1;
        }
        body.extend_from_slice(&chunk);
    }
    assert!(pieces > 20, "{pieces} pieces");
    assert!(split_chars > 0, "no piece ended inside a character");
    let body = String::from_utf8(body).unwrap();
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
}

/// The TLS stack (rustls with ring, no process-wide provider needed) really runs: an https URL
/// against a plain-HTTP server fails the handshake as a clean `Unreachable`, not a panic.
#[tokio::test]
async fn https_goes_through_rustls_with_ring() {
    let server = ScriptedServer::start(vec![]);
    let url = server.url.replace("http://", "https://");
    let p = OpenAiProvider::new(ProviderConfig {
        options: ProviderOptions {
            max_attempts: 1,
            ..fast()
        },
        ..ProviderConfig::new("openai", &url, "m")
    })
    .unwrap();
    let e = run(&p, &request()).await.0.unwrap_err();
    match e {
        ModelError::Unreachable { url: u, reason, .. } => {
            assert!(u.starts_with("https://127.0.0.1:"), "{u}");
            assert!(!reason.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

/// Cancels `cancel` once the server has received `n` requests (polled: a state, not a
/// guess at how long the client takes).
async fn cancel_when_requested(
    server: &dsh_testkit::model_server::ServerHandle,
    cancel: &CancellationToken,
    n: usize,
) {
    // Bounded: a client that never sends the request fails the test instead of hanging it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while server.requests().len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never received request {n}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cancel.cancel();
}
