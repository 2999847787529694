//! What the agent test files share.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;

use dsh_model::{OpenAiProvider, Provider, ProviderConfig};
use dsh_testkit::model_server::ServerHandle;

/// An OpenAI-compatible provider talking to the scripted `server`, model `scripted`.
pub fn provider(server: &ServerHandle) -> Arc<dyn Provider> {
    Arc::new(
        OpenAiProvider::new(ProviderConfig {
            api_key: Some("sk-test".into()),
            ..ProviderConfig::new("openai", &server.url, "scripted")
        })
        .unwrap(),
    )
}
