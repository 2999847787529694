//! The Anthropic Messages provider against scripted servers on 127.0.0.1 (real HTTP, real SSE).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dsh_model::{
    AnthropicProvider, ChatRequest, Completion, FinishReason, Message, ModelError, Provider,
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

fn provider(server: &ServerHandle) -> AnthropicProvider {
    AnthropicProvider::new(ProviderConfig {
        api_key: Some("sk-ant-test".into()),
        api_key_env: Some("ANTHROPIC_API_KEY".into()),
        options: fast(),
        ..ProviderConfig::new("anthropic", &server.url, "claude-test")
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
    p: &dyn Provider,
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
async fn a_text_answer_with_usage() {
    let server =
        ScriptedServer::start_anthropic(vec![Turn::text("Hello from Claude.").usage(30, 6).into()]);
    let p = provider(&server);
    let (result, events) = run(&p, &request()).await;
    let c = result.unwrap();
    assert_eq!(c.message.content, "Hello from Claude.");
    assert_eq!(c.finish_reason, FinishReason::Stop);
    assert_eq!(
        c.usage,
        Some(Usage {
            prompt_tokens: 30,
            completion_tokens: 6,
            ..Usage::default()
        })
    );
    assert_eq!(texts(&events), "Hello from Claude.");
    assert_eq!(p.name(), "anthropic");
}

#[tokio::test]
async fn tool_calls_thinking_and_awkward_splits() {
    let args_a = r#"{"path": "ünïcode/日本.rs"}"#;
    let server = ScriptedServer::start_anthropic(vec![
        Turn::tool_call("toolu_1", "read_file", args_a)
            .call("toolu_2", "list_dir", r#"{"path": "."}"#)
            .call("toolu_3", "grep", "{\"pattern\": ")
            .with_text("Looking 👀")
            .reasoning("I should read — carefully.")
            .deltas(2)
            .split_awkwardly()
            .usage(11, 22)
            .into(),
    ]);
    let p = provider(&server);
    let (result, events) = run(&p, &request()).await;
    let c = result.unwrap();
    assert_eq!(c.finish_reason, FinishReason::ToolCalls);
    assert_eq!(c.message.content, "Looking 👀");
    assert_eq!(
        c.message.reasoning.as_deref(),
        Some("I should read — carefully.")
    );
    assert_eq!(
        c.message.tool_calls,
        vec![
            ToolCallRequest {
                id: "toolu_1".into(),
                name: "read_file".into(),
                arguments: args_a.into()
            },
            ToolCallRequest {
                id: "toolu_2".into(),
                name: "list_dir".into(),
                arguments: r#"{"path": "."}"#.into()
            },
            // Truncated JSON passes through raw.
            ToolCallRequest {
                id: "toolu_3".into(),
                name: "grep".into(),
                arguments: "{\"pattern\": ".into()
            },
        ]
    );
    assert!(events.contains(&StreamEvent::ToolCall {
        id: "toolu_2".into(),
        name: "list_dir".into()
    }));
    assert_eq!(
        c.usage,
        Some(Usage {
            prompt_tokens: 11,
            completion_tokens: 22,
            ..Usage::default()
        })
    );
}

#[tokio::test]
async fn the_request_has_the_messages_shape() {
    let server = ScriptedServer::start_anthropic(vec![Turn::text("ok").into()]);
    let p = provider(&server);
    let mut req = request();
    let mut assistant = Message::assistant(
        "checking",
        vec![ToolCallRequest {
            id: "toolu_1".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"a"}"#.into(),
        }],
    );
    assistant.reasoning = Some("private thoughts".into());
    req.messages.push(assistant);
    req.messages.push(Message::tool("toolu_1", "contents"));
    run(&p, &req).await.0.unwrap();

    let r = &server.recorded()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.headers["x-api-key"], "sk-ant-test");
    assert_eq!(r.headers["anthropic-version"], "2023-06-01");
    assert!(!r.headers.contains_key("authorization"));
    assert_eq!(r.body["model"], "claude-test");
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["max_tokens"], 8192);
    // Cache breakpoints on the stable head (system, tools) and on the latest message.
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(
        r.body["system"],
        json!([{"type": "text", "text": "be brief", "cache_control": ephemeral}])
    );
    assert_eq!(
        r.body["tools"],
        json!([{"name": "read_file", "description": "Read a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
                "cache_control": ephemeral}])
    );
    assert_eq!(
        r.body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "checking"},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "contents",
                 "cache_control": ephemeral}
            ]}
        ])
    );
    assert!(!r.body.to_string().contains("private thoughts"));
}

#[tokio::test]
async fn overloaded_then_success() {
    let server = ScriptedServer::start_anthropic(vec![
        Reply::status_body(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Turn::text("back").into(),
    ]);
    let (result, events) = run(&provider(&server), &request()).await;
    assert_eq!(result.unwrap().message.content, "back");
    match &events[0] {
        StreamEvent::Retrying { attempt: 2, reason } => {
            assert!(reason.contains("Overloaded"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_error_event_before_content_is_retried_after_content_it_fails() {
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            .to_string();
    let server = ScriptedServer::start_anthropic(vec![
        Turn::raw(vec![overloaded.clone()]).without_done().into(),
        Turn::raw(vec![
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}).to_string(),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "par"}}).to_string(),
            overloaded,
        ])
        .without_done()
        .into(),
        Turn::text("not used").into(),
    ]);
    let (result, events) = run(&provider(&server), &request()).await;
    let e = result.unwrap_err();
    assert!(
        matches!(e, ModelError::Reported { ref message, .. } if message.contains("Overloaded")),
        "{e:?}"
    );
    assert_eq!(texts(&events), "par");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn unauthorized_names_the_key_variable() {
    let server = ScriptedServer::start_anthropic(vec![Reply::status_body(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    )]);
    let e = run(&provider(&server), &request()).await.0.unwrap_err();
    match e {
        ModelError::Http {
            status: 401,
            message,
            hint,
        } => {
            assert_eq!(message, "invalid x-api-key");
            assert!(hint.unwrap().contains("ANTHROPIC_API_KEY"));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_cut_stream_is_a_stream_error() {
    let server = ScriptedServer::start_anthropic(vec![
        Turn::text("a fairly long answer that will not arrive whole")
            .cut_midway()
            .into(),
        Turn::text("not used").into(),
    ]);
    let (result, events) = run(&provider(&server), &request()).await;
    assert!(matches!(result, Err(ModelError::Stream(_))), "{result:?}");
    assert!(!texts(&events).is_empty());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_missing_message_stop_after_the_stop_reason_is_tolerated() {
    let server =
        ScriptedServer::start_anthropic(vec![Turn::text("complete").without_done().into()]);
    let c = run(&provider(&server), &request()).await.0.unwrap();
    assert_eq!(c.message.content, "complete");
    assert_eq!(c.finish_reason, FinishReason::Stop);
}
