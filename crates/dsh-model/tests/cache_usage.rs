//! Cached-token counts read from every provider's usage (issue 10, item 2): OpenAI's
//! `prompt_tokens_details.cached_tokens`, DeepSeek's `prompt_cache_hit_tokens`, Anthropic's
//! `cache_read_input_tokens` / `cache_creation_input_tokens`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_model::{
    AnthropicProvider, ChatRequest, Message, OpenAiProvider, Provider, ProviderConfig, Usage,
};
use dsh_testkit::model_server::{ScriptedServer, ServerHandle, Turn};
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn usage(p: &dyn Provider) -> Usage {
    let request = ChatRequest {
        model: String::new(),
        messages: vec![Message::user("hi")],
        tools: Vec::new(),
        max_tokens: None,
    };
    p.complete(&request, &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap()
        .usage
        .unwrap()
}

fn openai(server: &ServerHandle, name: &str) -> OpenAiProvider {
    OpenAiProvider::new(ProviderConfig {
        api_key: Some("k".into()),
        ..ProviderConfig::new(name, &server.url, "m")
    })
    .unwrap()
}

fn openai_stream(usage: serde_json::Value) -> Turn {
    Turn::raw(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]})
            .to_string(),
        json!({"choices": [], "usage": usage}).to_string(),
    ])
}

#[tokio::test]
async fn openai_cached_tokens() {
    let server = ScriptedServer::start(vec![
        openai_stream(json!({"prompt_tokens": 1200, "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 1024}}))
        .into(),
    ]);
    let u = usage(&openai(&server, "openai")).await;
    assert_eq!(
        (u.prompt_tokens, u.cached_tokens, u.completion_tokens),
        (1200, 1024, 7)
    );
    assert_eq!(u.cache_write_tokens, 0);
}

#[tokio::test]
async fn deepseek_cache_hits() {
    let server = ScriptedServer::start(vec![
        openai_stream(json!({"prompt_tokens": 900, "completion_tokens": 3,
            "prompt_cache_hit_tokens": 640, "prompt_cache_miss_tokens": 260}))
        .into(),
    ]);
    let u = usage(&openai(&server, "deepseek")).await;
    assert_eq!((u.prompt_tokens, u.cached_tokens), (900, 640));
}

#[tokio::test]
async fn anthropic_cache_reads_and_writes() {
    let server = ScriptedServer::start_anthropic(vec![
        Turn::raw(vec![
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 20,
                "cache_read_input_tokens": 800, "cache_creation_input_tokens": 100,
                "output_tokens": 1}}})
            .to_string(),
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": "hi"}})
            .to_string(),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 9}})
            .to_string(),
            json!({"type": "message_stop"}).to_string(),
        ])
        .into(),
    ]);
    let p = AnthropicProvider::new(ProviderConfig {
        api_key: Some("k".into()),
        ..ProviderConfig::new("anthropic", &server.url, "m")
    })
    .unwrap();
    let u = usage(&p).await;
    assert_eq!(
        (
            u.prompt_tokens,
            u.cached_tokens,
            u.cache_write_tokens,
            u.completion_tokens
        ),
        (920, 800, 100, 9)
    );
}
