//! How a provider is configured: its endpoint, key and model ([`ProviderConfig`]) and how it
//! retries and waits ([`ProviderOptions`]).

use std::time::Duration;

use super::{Endpoint, client};
use crate::types::ModelError;

/// How a provider retries and waits. The defaults suit hosted APIs and a local Ollama alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderOptions {
    /// Attempts per turn, the first included (default 4). Only failures before any content
    /// was streamed are retried: connection errors, 429, 5xx, a stream that broke off early.
    pub max_attempts: u32,
    /// The longest silence tolerated while waiting for the response head or between two
    /// pieces of the stream (default 120 s).
    pub idle_timeout: Duration,
    /// TCP (and TLS) connect timeout (default 10 s).
    pub connect_timeout: Duration,
    /// First backoff delay; it doubles per attempt (default 500 ms).
    pub backoff_base: Duration,
    /// Largest backoff delay (default 20 s).
    pub backoff_max: Duration,
    /// Largest wait a `Retry-After` header can impose (default 60 s).
    pub retry_after_cap: Duration,
}

impl Default for ProviderOptions {
    fn default() -> Self {
        ProviderOptions {
            max_attempts: 4,
            idle_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(20),
            retry_after_cap: Duration::from_secs(60),
        }
    }
}

/// What a provider needs to reach its endpoint. The API key is passed in: providers never read
/// the process environment.
#[derive(Clone)]
pub struct ProviderConfig {
    /// `openai`, `anthropic`, `deepseek` or `ollama` (named in messages; `openai` also picks
    /// the token-cap field).
    pub name: String,
    /// The endpoint: `https://api.openai.com/v1` (chat completions are posted to
    /// `{base_url}/chat/completions`) or `https://api.anthropic.com` (`{base_url}/v1/messages`).
    pub base_url: String,
    /// The model asked for when a request names none.
    pub model: String,
    /// The API key; `None` sends none.
    pub api_key: Option<String>,
    /// The environment variable the key comes from, named in hints (401: "check the API key in
    /// OPENAI_API_KEY").
    pub api_key_env: Option<String>,
    /// Appended to "cannot reach the model" errors.
    pub unreachable_hint: Option<String>,
    pub options: ProviderOptions,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("unreachable_hint", &self.unreachable_hint)
            .field("options", &self.options)
            .finish()
    }
}

impl ProviderConfig {
    /// A config with default options, no key and no hint.
    pub fn new(name: &str, base_url: &str, model: &str) -> Self {
        ProviderConfig {
            name: name.to_string(),
            base_url: base_url.to_string(),
            model: model.to_string(),
            api_key: None,
            api_key_env: None,
            unreachable_hint: None,
            options: ProviderOptions::default(),
        }
    }

    /// The endpoint at `{base_url}{path}`; `key_headers` turns the key into headers
    /// (name, value, sensitive).
    pub(crate) fn endpoint(
        self,
        path: &str,
        key_headers: impl FnOnce(&str) -> Vec<(&'static str, String, bool)>,
    ) -> Result<Endpoint, ModelError> {
        let base_url = self.base_url.trim_end_matches('/').to_string();
        let client = client(&base_url, &self.options)?;
        let api_key = self
            .api_key
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty());
        let mut headers = Vec::new();
        if let Some(key) = &api_key {
            for (name, value, sensitive) in key_headers(key) {
                let mut value = reqwest::header::HeaderValue::from_str(&value).map_err(|_| {
                    ModelError::Config(format!(
                        "the API key{} contains characters that cannot be sent in a header",
                        self.api_key_env
                            .as_deref()
                            .map(|e| format!(" in {e}"))
                            .unwrap_or_default()
                    ))
                })?;
                value.set_sensitive(sensitive);
                headers.push((reqwest::header::HeaderName::from_static(name), value));
            }
        }
        Ok(Endpoint {
            provider: self.name,
            model: self.model,
            url: format!("{base_url}{path}"),
            base_url,
            headers,
            key_env: self.api_key_env,
            has_key: api_key.is_some(),
            unreachable_hint: self.unreachable_hint,
            options: self.options,
            client,
        })
    }
}
