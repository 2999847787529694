//! Provider selection end to end: keys and base URLs from the environment map, requests to a
//! scripted server, and the "how to point dsh at a model" error when nothing answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use dsh_agent::provider_from_config as from_config;
use dsh_config::{ModelConfig, Provider as Kind};
use dsh_model::{ChatRequest, Message, ModelError, how_to_configure};
use dsh_testkit::model_server::{ScriptedServer, Turn};
use tokio_util::sync::CancellationToken;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

fn hello() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        messages: vec![Message::user("hello")],
        tools: Vec::new(),
        max_tokens: None,
    }
}

#[tokio::test]
async fn deepseek_key_and_base_url_from_the_environment() {
    let server = ScriptedServer::start(vec![Turn::text("hi").reasoning("hmm").into()]);
    let p = from_config(
        &ModelConfig::default(),
        &env(&[
            ("DEEPSEEK_API_KEY", "sk-ds"),
            ("DEEPSEEK_BASE_URL", &server.url),
        ]),
        false,
    )
    .unwrap();
    assert_eq!((p.name(), p.model()), ("deepseek", "deepseek-chat"));
    let c = p
        .complete(&hello(), &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(c.message.content, "hi");
    assert_eq!(c.message.reasoning.as_deref(), Some("hmm"));
    let r = &server.recorded()[0];
    assert_eq!(r.headers["authorization"], "Bearer sk-ds");
    assert_eq!(r.body["model"], "deepseek-chat");
}

#[tokio::test]
async fn anthropic_key_selects_the_messages_api() {
    let server = ScriptedServer::start_anthropic(vec![Turn::text("hi").into()]);
    let p = from_config(
        &ModelConfig::default(),
        &env(&[
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("ANTHROPIC_BASE_URL", &server.url),
        ]),
        false,
    )
    .unwrap();
    let c = p
        .complete(&hello(), &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(c.message.content, "hi");
    assert_eq!(server.recorded()[0].headers["x-api-key"], "sk-ant");
}

#[tokio::test]
async fn explicit_configuration_is_used_as_it_stands() {
    let server = ScriptedServer::start(vec![Turn::text("local").into()]);
    let model = ModelConfig {
        provider: Kind::Openai,
        base_url: server.url.clone(),
        model: Some("my-model".into()),
        api_key_env: Some("MY_KEY".into()),
        ..ModelConfig::default()
    };
    let p = from_config(
        &model,
        &env(&[("MY_KEY", "secret"), ("DEEPSEEK_API_KEY", "ignored")]),
        true,
    )
    .unwrap();
    assert_eq!((p.name(), p.model()), ("openai", "my-model"));
    p.complete(&hello(), &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        server.recorded()[0].headers["authorization"],
        "Bearer secret"
    );
}

#[tokio::test]
async fn with_nothing_configured_and_no_ollama_the_error_says_how_to_configure() {
    // A port nothing listens on.
    let dead = {
        let server = ScriptedServer::start(vec![]);
        server.url.clone()
    };
    let p = from_config(
        &ModelConfig::default(),
        &env(&[("OLLAMA_BASE_URL", &dead)]),
        false,
    )
    .unwrap();
    assert_eq!(p.name(), "ollama");
    let e = p
        .complete(&hello(), &mut |_| {}, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(e, ModelError::Unreachable { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains(&how_to_configure(None)), "{text}");
    for needle in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "DEEPSEEK_API_KEY",
        "--provider",
        "--base-url",
        "--model",
        "[model]",
        "ollama serve",
    ] {
        assert!(text.contains(needle), "missing {needle}: {text}");
    }
}
