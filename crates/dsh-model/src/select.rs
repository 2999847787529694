//! Which provider a session talks to.
//!
//! Explicit configuration (any layer set `model.provider` or `model.base_url`: a config file,
//! `DSH_PROVIDER`, a `*_BASE_URL` variable, `--provider`, `--base-url`) wins. With nothing
//! configured, dsh picks the first provider whose key is set — `OPENAI_API_KEY`,
//! `ANTHROPIC_API_KEY`, `DEEPSEEK_API_KEY` — else a local Ollama; when that does not answer,
//! the error says exactly how to point dsh at a model ([`how_to_configure`]). [`route`] says
//! which of the three a session takes, for front ends to tell the person.

use std::fmt;
use std::sync::Arc;

use crate::anthropic::AnthropicProvider;
use crate::http::{ProviderConfig, ProviderOptions};
use crate::openai::OpenAiProvider;
use crate::types::{ModelError, Provider};

use ProviderKind as Kind;

/// A provider dsh can talk to: which wire format and which preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// OpenAI chat completions.
    Openai,
    /// Anthropic messages.
    Anthropic,
    /// DeepSeek (OpenAI-compatible wire format).
    Deepseek,
    /// A local Ollama server (OpenAI-compatible wire format, no key).
    Ollama,
}

impl ProviderKind {
    /// `openai`, `anthropic`, `deepseek`, `ollama`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Deepseek => "deepseek",
            ProviderKind::Ollama => "ollama",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One provider endpoint as plain values: every environment lookup already done by the caller
/// (the provider crate reads no configuration and no environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub kind: ProviderKind,
    /// The URL to talk to.
    pub base_url: String,
    /// The provider's own endpoint: a `base_url` equal to it is the hosted service, which
    /// needs its key.
    pub default_base_url: String,
    /// The variable that overrides the URL (named in hints and errors).
    pub base_url_env: String,
    /// The variable holding the key (`None`: no key is sent).
    pub api_key_env: Option<String>,
    /// That variable's value, trimmed, when set and not blank.
    pub api_key: Option<String>,
}

/// What the session asks of the provider crate (see [`select_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSettings {
    /// Some layer named the provider or the endpoint: use `configured` as it stands.
    pub explicit: bool,
    /// The configured endpoint.
    pub configured: Endpoint,
    /// With nothing configured: the hosted providers in order of preference; the first with
    /// a key is used.
    pub candidates: Vec<Endpoint>,
    /// With nothing configured and no key: the local server.
    pub local: Endpoint,
    /// The model name (`None`: [`default_model`]).
    pub model: Option<String>,
    /// The user configuration file in effect (`DSH_CONFIG_HOME`, `--config` or the platform's
    /// directory), named by the advice; `None` when there is none.
    pub user_config: Option<String>,
}

/// How [`select_with`] chooses a provider for some settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Some layer named the provider or the endpoint.
    Configured,
    /// Nothing is configured; the first hosted provider whose key is set, in `var`.
    Key { var: String },
    /// Nothing is configured and no key is set: a local Ollama, if one answers.
    Local { base_url: String },
}

/// The route `settings` take (see [`select_with`]).
pub fn route(settings: &ModelSettings) -> Route {
    if settings.explicit {
        return Route::Configured;
    }
    match keyed(settings) {
        Some((e, _)) => Route::Key {
            var: e.api_key_env.clone().unwrap_or_default(),
        },
        None => Route::Local {
            base_url: settings.local.base_url.clone(),
        },
    }
}

/// With nothing configured: the first hosted provider whose key is set, and the key.
fn keyed(settings: &ModelSettings) -> Option<(&Endpoint, &str)> {
    settings
        .candidates
        .iter()
        .find_map(|e| Some((e, e.api_key.as_deref().filter(|_| e.api_key_env.is_some())?)))
}

/// The ways to point dsh at a model, one per line; `user_config` is the user configuration
/// file in effect.
pub fn how_to_configure(user_config: Option<&str>) -> String {
    let file = match user_config {
        Some(path) => format!("the user config file, {path}"),
        None => "a user config file (--config FILE)".to_owned(),
    };
    format!(
        "point dsh at a model in one of these ways:
  - set OPENAI_API_KEY, ANTHROPIC_API_KEY or DEEPSEEK_API_KEY (with nothing else configured, dsh uses the first one set);
  - pass --provider openai|anthropic|deepseek|ollama, with --base-url URL and --model NAME as needed (or set DSH_PROVIDER, DSH_MODEL, OPENAI_BASE_URL, ANTHROPIC_BASE_URL, DEEPSEEK_BASE_URL, OLLAMA_BASE_URL);
  - set provider, base_url, model and api_key_env under [model] in {file};
  - or run Ollama locally (`ollama serve`, then `ollama pull qwen2.5-coder`): dsh uses it at http://localhost:11434/v1 when nothing else is configured."
    )
}

/// The model used when the configuration names none.
pub fn default_model(provider: Kind) -> &'static str {
    match provider {
        Kind::Openai => "gpt-4.1-mini",
        Kind::Anthropic => "claude-sonnet-4-5",
        Kind::Deepseek => "deepseek-chat",
        Kind::Ollama => "qwen2.5-coder",
    }
}

/// The provider for `settings` with default [`ProviderOptions`]. See [`select_with`].
pub fn select(settings: &ModelSettings) -> Result<Arc<dyn Provider>, ModelError> {
    select_with(settings, ProviderOptions::default())
}

/// The provider a session talks to.
///
/// - `settings.explicit`: some layer set `model.provider` or `model.base_url` (config file,
///   `DSH_PROVIDER`, the provider's `*_BASE_URL`, `--provider`, `--base-url`). Then
///   `settings.configured` is used as it stands. Otherwise dsh picks the first of
///   `settings.candidates` with a key (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
///   `DEEPSEEK_API_KEY`; its `*_BASE_URL` variable honoured by the caller), else
///   `settings.local` (Ollama). In both cases `settings.model` (e.g. from `DSH_MODEL` or
///   `--model`) names the model when set, else [`default_model`].
///
/// Errors are [`ModelError::Config`]: a hosted provider chosen without its key, an unusable
/// URL. A local Ollama that does not answer is reported by the first request as
/// [`ModelError::Unreachable`] with [`HOW_TO_CONFIGURE`] as its hint.
pub fn select_with(
    settings: &ModelSettings,
    options: ProviderOptions,
) -> Result<Arc<dyn Provider>, ModelError> {
    let model_name = |kind: Kind| {
        settings
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| default_model(kind).to_string())
    };

    let advice = || how_to_configure(settings.user_config.as_deref());
    if settings.explicit {
        let e = &settings.configured;
        let kind = e.kind;
        let key_env = e.api_key_env.clone().filter(|k| !k.is_empty());
        let api_key = if key_env.is_some() {
            e.api_key.clone()
        } else {
            None
        };
        let hosted = e.base_url.trim_end_matches('/') == e.default_base_url;
        if let (Some(var), None, true) = (&key_env, &api_key, hosted) {
            return Err(ModelError::Config(format!(
                "the {kind} provider is configured but {var} is not set: export {var}=<your key>, or set model.api_key_env to the variable that holds it; or\n{}",
                advice()
            )));
        }
        let hint = if kind == Kind::Ollama {
            format!(
                "is Ollama running? start it with `ollama serve`, or point {} / --base-url at it",
                e.base_url_env
            )
        } else {
            format!(
                "check the base URL (model.base_url, {}, --base-url) and the network",
                e.base_url_env
            )
        };
        return build(e, model_name(kind), api_key, key_env, Some(hint), options);
    }

    if let Some((e, key)) = keyed(settings) {
        let var = e.api_key_env.as_deref().unwrap_or_default();
        let kind = e.kind;
        let hint = format!(
            "dsh chose {kind} because {var} is set; check the network, or {}",
            e.base_url_env
        );
        return build(
            e,
            model_name(kind),
            Some(key.to_owned()),
            Some(var.to_owned()),
            Some(hint),
            options,
        );
    }

    let e = &settings.local;
    let options = ProviderOptions {
        // A local server that refuses connections will not start answering in seconds.
        max_attempts: options.max_attempts.min(2),
        ..options
    };
    build(
        e,
        model_name(e.kind),
        None,
        None,
        Some(format!(
            "no model is configured, no API key is set, and no Ollama answers there; {}",
            advice()
        )),
        options,
    )
}

fn build(
    e: &Endpoint,
    model: String,
    api_key: Option<String>,
    api_key_env: Option<String>,
    unreachable_hint: Option<String>,
    options: ProviderOptions,
) -> Result<Arc<dyn Provider>, ModelError> {
    let kind = e.kind;
    let base_url = &e.base_url;
    if reqwest::Url::parse(base_url).is_err() {
        return Err(ModelError::Config(format!(
            "the {kind} base URL {base_url:?} is not a URL (set model.base_url, {} or --base-url to e.g. {})",
            e.base_url_env, e.default_base_url
        )));
    }
    let config = ProviderConfig {
        name: kind.as_str().to_string(),
        base_url: base_url.clone(),
        model,
        api_key,
        api_key_env,
        unreachable_hint,
        options,
    };
    Ok(match kind {
        Kind::Anthropic => Arc::new(AnthropicProvider::new(config)?),
        Kind::Openai | Kind::Deepseek | Kind::Ollama => Arc::new(OpenAiProvider::new(config)?),
    })
}
