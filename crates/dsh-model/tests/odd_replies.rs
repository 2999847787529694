//! Model servers as they really behave (issue 14, items 2–5), against scripted servers on
//! 127.0.0.1 speaking real HTTP: a JSON reply to a streaming request, errors sent inside a
//! 200 stream, error bodies with two parts, and a server that accepts and never answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dsh_model::{
    AnthropicProvider, ChatRequest, Completion, FinishReason, Message, ModelError, OpenAiProvider,
    Provider, ProviderConfig, ProviderOptions, StreamEvent, Usage,
};
use dsh_testkit::model_server::{Reply, ScriptedServer, ServerHandle, Turn};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn options() -> ProviderOptions {
    ProviderOptions {
        max_attempts: 3,
        idle_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(20),
        retry_after_cap: Duration::from_secs(1),
    }
}

fn openai(server: &ServerHandle, options: ProviderOptions) -> OpenAiProvider {
    OpenAiProvider::new(ProviderConfig {
        api_key: Some("sk-test".into()),
        api_key_env: Some("OPENAI_API_KEY".into()),
        options,
        ..ProviderConfig::new("openai", &server.url, "gpt-test")
    })
    .unwrap()
}

fn anthropic(server: &ServerHandle) -> AnthropicProvider {
    AnthropicProvider::new(ProviderConfig {
        api_key: Some("sk-ant".into()),
        api_key_env: Some("ANTHROPIC_API_KEY".into()),
        options: options(),
        ..ProviderConfig::new("anthropic", &server.url, "claude-test")
    })
    .unwrap()
}

async fn run(p: &dyn Provider) -> (Result<Completion, ModelError>, Vec<StreamEvent>) {
    let request = ChatRequest {
        model: String::new(),
        messages: vec![Message::user("hi")],
        tools: Vec::new(),
        max_tokens: None,
    };
    let mut events = Vec::new();
    let result = p
        .complete(&request, &mut |e| events.push(e), &CancellationToken::new())
        .await;
    (result, events)
}

fn json_reply(body: serde_json::Value) -> Reply {
    Reply::status_body(200, &body.to_string())
}

fn retries(events: &[StreamEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Retrying { .. }))
        .count()
}

// ---- item 2: JSON where an event stream was asked for ----

#[tokio::test]
async fn a_complete_chat_completion_as_json_is_taken_as_if_streamed() {
    let server = ScriptedServer::start(vec![json_reply(json!({
        "id": "x", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "let me look",
            "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5}
    }))]);
    let (result, events) = run(&openai(&server, options())).await;
    let c = result.unwrap();
    assert_eq!(c.message.content, "let me look");
    assert_eq!(c.message.tool_calls[0].name, "read_file");
    assert_eq!(c.message.tool_calls[0].arguments, r#"{"path":"a"}"#);
    assert_eq!(c.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        c.usage,
        Some(Usage {
            prompt_tokens: 12,
            completion_tokens: 5,
            ..Usage::default()
        })
    );
    assert!(events.contains(&StreamEvent::Text("let me look".into())));
}

#[tokio::test]
async fn a_complete_anthropic_message_as_json_is_taken_as_if_streamed() {
    let server = ScriptedServer::start_anthropic(vec![json_reply(json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "static mock"},
                    {"type": "tool_use", "id": "t1", "name": "grep", "input": {"pattern": "x"}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 9, "output_tokens": 3}
    }))]);
    let (result, events) = run(&anthropic(&server)).await;
    let c = result.unwrap();
    assert_eq!(c.message.content, "static mock");
    assert_eq!(c.message.tool_calls[0].id, "t1");
    assert_eq!(c.message.tool_calls[0].arguments, r#"{"pattern":"x"}"#);
    assert_eq!(c.finish_reason, FinishReason::ToolCalls);
    assert_eq!(c.usage.unwrap().prompt_tokens, 9);
    assert!(events.contains(&StreamEvent::Text("static mock".into())));
}

#[tokio::test]
async fn json_that_is_not_a_message_is_said_and_never_retried() {
    let server = ScriptedServer::start(vec![
        json_reply(json!({"status": "ok", "message": "proxy is healthy"})),
        Reply::text("never asked for"),
    ]);
    let (result, events) = run(&openai(&server, options())).await;
    let e = result.unwrap_err().to_string();
    assert!(
        e.contains("answered JSON instead of an event stream") && e.contains("proxy is healthy"),
        "{e}"
    );
    assert_eq!(server.requests().len(), 1);
    assert_eq!(retries(&events), 0);
}

#[tokio::test]
async fn an_error_object_in_a_200_json_reply_is_classified() {
    let server = ScriptedServer::start(vec![
        json_reply(
            json!({"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}),
        ),
        Reply::text("never asked for"),
    ]);
    let (result, _) = run(&openai(&server, options())).await;
    let e = result.unwrap_err().to_string();
    assert!(e.contains("Incorrect API key provided"), "{e}");
    assert!(e.contains("check the API key in OPENAI_API_KEY"), "{e}");
    assert_eq!(server.requests().len(), 1);
}

// ---- item 3: errors inside a 200 stream ----

#[tokio::test]
async fn an_authentication_error_in_the_stream_is_final_with_the_http_hint() {
    let server = ScriptedServer::start(vec![
        Turn::raw(vec![
            json!({"error": {"message": "Incorrect API key", "type": "invalid_request_error", "code": "invalid_api_key"}}).to_string(),
        ])
        .into(),
        Reply::text("never asked for"),
    ]);
    let (result, events) = run(&openai(&server, options())).await;
    let e = result.unwrap_err();
    assert!(
        matches!(&e, ModelError::Reported { kind: Some(k), .. } if k == "invalid_api_key"),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("Incorrect API key") && text.contains("check the API key"),
        "{text}"
    );
    assert!(!text.contains("broke off"), "{text}");
    assert_eq!(server.requests().len(), 1);
    assert_eq!(retries(&events), 0);
}

#[tokio::test]
async fn an_unknown_model_in_the_stream_names_the_model_to_check() {
    let server = ScriptedServer::start(vec![
        Turn::raw(vec![
            json!({"error": {"message": "The model `gpt-test` does not exist", "code": "model_not_found"}}).to_string(),
        ])
        .into(),
    ]);
    let (result, _) = run(&openai(&server, options())).await;
    let e = result.unwrap_err().to_string();
    assert!(e.contains("check the model name (gpt-test)"), "{e}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn anthropic_rate_limit_and_overload_events_are_retried() {
    let error = |kind: &str| {
        Turn::raw(vec![
            json!({"type": "error", "error": {"type": kind, "message": format!("scripted {kind}")}})
                .to_string(),
        ])
        .without_done()
        .into()
    };
    let server = ScriptedServer::start_anthropic(vec![
        error("rate_limit_error"),
        error("overloaded_error"),
        Turn::text("third time lucky").into(),
    ]);
    let (result, events) = run(&anthropic(&server)).await;
    assert_eq!(result.unwrap().message.content, "third time lucky");
    assert_eq!(retries(&events), 2);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn another_reported_error_is_the_servers_own_message_and_final() {
    let server = ScriptedServer::start_anthropic(vec![
        Turn::raw(vec![
            json!({"type": "error", "error": {"type": "peculiar_error", "message": "Internal hiccup 42"}})
                .to_string(),
        ])
        .without_done()
        .into(),
        Reply::text("never asked for"),
    ]);
    let (result, _) = run(&anthropic(&server)).await;
    let e = result.unwrap_err().to_string();
    assert!(
        e.contains("Internal hiccup 42") && e.contains("peculiar_error"),
        "{e}"
    );
    assert_eq!(server.requests().len(), 1);
}

// ---- item 4: both parts of a server's message ----

#[tokio::test]
async fn an_error_body_with_error_and_message_shows_both() {
    let body =
        json!({"error": "TypeError", "message": "Cannot read properties of null", "status": 500});
    let server = ScriptedServer::start(vec![Reply::status_body(500, &body.to_string())]);
    let one_try = ProviderOptions {
        max_attempts: 1,
        ..options()
    };
    let (result, _) = run(&openai(&server, one_try)).await;
    let e = result.unwrap_err().to_string();
    assert!(
        e.contains("answered 500: TypeError: Cannot read properties of null"),
        "{e}"
    );
}

// ---- item 5: connected, then silence ----

#[tokio::test]
async fn a_server_that_never_answers_is_said_as_such_with_each_retry_reported() {
    let server = ScriptedServer::start(vec![Reply::Silent, Reply::Silent]);
    let short = ProviderOptions {
        max_attempts: 2,
        idle_timeout: Duration::from_millis(300),
        connect_timeout: Duration::from_millis(200),
        ..options()
    };
    let (result, events) = run(&openai(&server, short)).await;
    let e = result.unwrap_err();
    assert!(matches!(e, ModelError::Silent { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("connected, but no response within 0.3 s (tried 2 times)"),
        "{text}"
    );
    assert!(!text.contains("cannot reach"), "{text}");
    assert_eq!(retries(&events), 1);
    assert_eq!(server.requests().len(), 2);
}

/// The scripted server refuses an orphan tool result as the real APIs do (what compaction
/// relies on the tests to catch).
#[tokio::test]
async fn the_scripted_server_refuses_orphan_tool_results_in_both_formats() {
    let request = ChatRequest {
        model: String::new(),
        messages: vec![Message::user("hi"), Message::tool("ghost", "result")],
        tools: Vec::new(),
        max_tokens: None,
    };
    let server = ScriptedServer::start(vec![Reply::text("never")]);
    let e = openai(&server, options())
        .complete(&request, &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("must be a response to a preceeding message"),
        "{e}"
    );
    let server = ScriptedServer::start_anthropic(vec![Reply::text("never")]);
    let e = anthropic(&server)
        .complete(&request, &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("unexpected `tool_use_id`"), "{e}");
    assert_eq!(server.remaining(), 1);
}

/// A server error reported in the stream is retried like an HTTP 5xx.
#[tokio::test]
async fn a_server_error_in_the_stream_is_retried_like_a_5xx() {
    let server = ScriptedServer::start_anthropic(vec![
        Turn::raw(vec![
            json!({"type": "error", "error": {"type": "api_error", "message": "Internal"}})
                .to_string(),
        ])
        .without_done()
        .into(),
        Turn::text("recovered").into(),
    ]);
    let (result, events) = run(&anthropic(&server)).await;
    assert_eq!(result.unwrap().message.content, "recovered");
    assert_eq!(retries(&events), 1);
}
