//! Which provider a session talks to.
//!
//! Explicit configuration (any layer set `model.provider` or `model.base_url`: a config file,
//! `DSH_PROVIDER`, a `*_BASE_URL` variable, `--provider`, `--base-url`) wins. With nothing
//! configured, dsh picks the first provider whose key is set — `OPENAI_API_KEY`,
//! `ANTHROPIC_API_KEY`, `DEEPSEEK_API_KEY` — else a local Ollama; when that does not answer,
//! the error says exactly how to point dsh at a model ([`HOW_TO_CONFIGURE`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use dsh_config::{ModelConfig, Provider as Kind};

use crate::anthropic::AnthropicProvider;
use crate::http::{ProviderConfig, ProviderOptions};
use crate::openai::OpenAiProvider;
use crate::types::{ModelError, Provider};

/// The ways to point dsh at a model, one per line.
pub const HOW_TO_CONFIGURE: &str = "\
point dsh at a model in one of these ways:
  - set OPENAI_API_KEY, ANTHROPIC_API_KEY or DEEPSEEK_API_KEY (with nothing else configured, dsh uses the first one set);
  - pass --provider openai|anthropic|deepseek|ollama, with --base-url URL and --model NAME as needed (or set DSH_PROVIDER, DSH_MODEL, OPENAI_BASE_URL, ANTHROPIC_BASE_URL, DEEPSEEK_BASE_URL, OLLAMA_BASE_URL);
  - set provider, base_url, model and api_key_env under [model] in the user config file (~/.config/dsh/config.toml or the platform's equivalent);
  - or run Ollama locally (`ollama serve`, then `ollama pull qwen2.5-coder`): dsh uses it at http://localhost:11434/v1 when nothing else is configured.";

/// The model used when the configuration names none.
pub fn default_model(provider: Kind) -> &'static str {
    match provider {
        Kind::Openai => "gpt-4.1-mini",
        Kind::Anthropic => "claude-sonnet-4-5",
        Kind::Deepseek => "deepseek-chat",
        Kind::Ollama => "qwen2.5-coder",
    }
}

/// The provider for `model` with default [`ProviderOptions`]. See [`from_config_with`].
pub fn from_config(
    model: &ModelConfig,
    env: &BTreeMap<String, String>,
    explicitly_configured: bool,
) -> Result<Arc<dyn Provider>, ModelError> {
    from_config_with(
        model,
        env,
        explicitly_configured,
        ProviderOptions::default(),
    )
}

/// The provider a session talks to.
///
/// - `model`: the resolved `[model]` configuration.
/// - `env`: the process environment (API keys are read from it; the provider itself never
///   reads the environment).
/// - `explicitly_configured`: some layer set `model.provider` or `model.base_url` (config file,
///   `DSH_PROVIDER`, the provider's `*_BASE_URL`, `--provider`, `--base-url`). Then `model` is
///   used as it stands. Otherwise dsh picks the first provider whose key variable is set
///   (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `DEEPSEEK_API_KEY`; its `*_BASE_URL` variable is
///   honoured), else Ollama (`OLLAMA_BASE_URL`, default `http://localhost:11434/v1`). In both
///   cases `model.model` (e.g. from `DSH_MODEL` or `--model`) names the model when set, else
///   [`default_model`].
///
/// Errors are [`ModelError::Config`]: a hosted provider chosen without its key, an unusable
/// URL. A local Ollama that does not answer is reported by the first request as
/// [`ModelError::Unreachable`] with [`HOW_TO_CONFIGURE`] as its hint.
pub fn from_config_with(
    model: &ModelConfig,
    env: &BTreeMap<String, String>,
    explicitly_configured: bool,
    options: ProviderOptions,
) -> Result<Arc<dyn Provider>, ModelError> {
    let get = |name: &str| {
        env.get(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let model_name = |kind: Kind| {
        model
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| default_model(kind).to_string())
    };

    if explicitly_configured {
        let kind = model.provider;
        let key_env = model.api_key_env.clone().filter(|k| !k.is_empty());
        let api_key = key_env.as_deref().and_then(get);
        let hosted = model.base_url.trim_end_matches('/') == kind.default_base_url();
        if let (Some(var), None, true) = (&key_env, &api_key, hosted) {
            return Err(ModelError::Config(format!(
                "the {kind} provider is configured but {var} is not set: export {var}=<your key>, or set model.api_key_env to the variable that holds it; or\n{HOW_TO_CONFIGURE}"
            )));
        }
        let hint = if kind == Kind::Ollama {
            format!(
                "is Ollama running? start it with `ollama serve`, or point {} / --base-url at it",
                kind.base_url_env()
            )
        } else {
            format!(
                "check the base URL (model.base_url, {}, --base-url) and the network",
                kind.base_url_env()
            )
        };
        return build(
            kind,
            &model.base_url,
            model_name(kind),
            api_key,
            key_env,
            Some(hint),
            options,
        );
    }

    for kind in [Kind::Openai, Kind::Anthropic, Kind::Deepseek] {
        let Some(var) = kind.default_api_key_env() else {
            continue;
        };
        if let Some(key) = get(var) {
            let base_url =
                get(kind.base_url_env()).unwrap_or_else(|| kind.default_base_url().into());
            let hint = format!(
                "dsh chose {kind} because {var} is set; check the network, or {}",
                kind.base_url_env()
            );
            return build(
                kind,
                &base_url,
                model_name(kind),
                Some(key),
                Some(var.to_string()),
                Some(hint),
                options,
            );
        }
    }

    let kind = Kind::Ollama;
    let base_url = get(kind.base_url_env()).unwrap_or_else(|| kind.default_base_url().into());
    let options = ProviderOptions {
        // A local server that refuses connections will not start answering in seconds.
        max_attempts: options.max_attempts.min(2),
        ..options
    };
    build(
        kind,
        &base_url,
        model_name(kind),
        None,
        None,
        Some(format!(
            "no model is configured, no API key is set, and no Ollama answers there; {HOW_TO_CONFIGURE}"
        )),
        options,
    )
}

fn build(
    kind: Kind,
    base_url: &str,
    model: String,
    api_key: Option<String>,
    api_key_env: Option<String>,
    unreachable_hint: Option<String>,
    options: ProviderOptions,
) -> Result<Arc<dyn Provider>, ModelError> {
    if reqwest::Url::parse(base_url).is_err() {
        return Err(ModelError::Config(format!(
            "the {kind} base URL {base_url:?} is not a URL (set model.base_url, {} or --base-url to e.g. {})",
            kind.base_url_env(),
            kind.default_base_url()
        )));
    }
    let config = ProviderConfig {
        name: kind.as_str().to_string(),
        base_url: base_url.to_string(),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn pick(model: &ModelConfig, pairs: &[(&str, &str)], explicit: bool) -> (String, String) {
        let p = from_config(model, &env(pairs), explicit).unwrap();
        (p.name().to_string(), p.model().to_string())
    }

    #[test]
    fn nothing_configured_prefers_the_first_key_then_ollama() {
        let m = ModelConfig::default();
        assert_eq!(
            pick(&m, &[], false),
            ("ollama".into(), "qwen2.5-coder".into())
        );
        assert_eq!(
            pick(
                &m,
                &[("DEEPSEEK_API_KEY", "k"), ("OPENAI_API_KEY", " ")],
                false
            ),
            ("deepseek".into(), "deepseek-chat".into())
        );
        assert_eq!(
            pick(
                &m,
                &[("DEEPSEEK_API_KEY", "k"), ("OPENAI_API_KEY", "k")],
                false
            )
            .0,
            "openai"
        );
        let named = ModelConfig {
            model: Some("llama3.2".into()),
            ..ModelConfig::default()
        };
        assert_eq!(pick(&named, &[], false).1, "llama3.2");
    }

    #[test]
    fn anthropic_is_picked_by_its_key() {
        assert_eq!(
            pick(
                &ModelConfig::default(),
                &[("ANTHROPIC_API_KEY", "k"), ("DEEPSEEK_API_KEY", "k")],
                false
            ),
            ("anthropic".into(), "claude-sonnet-4-5".into())
        );
    }

    #[test]
    fn explicit_configuration_wins_over_keys() {
        let m = ModelConfig {
            provider: Kind::Ollama,
            base_url: "http://127.0.0.1:9/v1".into(),
            model: None,
            api_key_env: None,
        };
        assert_eq!(pick(&m, &[("OPENAI_API_KEY", "k")], true).0, "ollama");
    }

    #[test]
    fn a_hosted_provider_without_its_key_says_how_to_fix_it() {
        let e = from_config(&ModelConfig::default(), &env(&[]), true)
            .err()
            .expect("an error");
        let text = e.to_string();
        assert!(matches!(e, ModelError::Config(_)));
        assert!(text.contains("OPENAI_API_KEY is not set"), "{text}");
        assert!(text.contains("--provider"), "{text}");
        // A custom endpoint (a local vLLM, say) may need no key.
        let local = ModelConfig {
            base_url: "http://127.0.0.1:8000/v1".into(),
            ..ModelConfig::default()
        };
        assert_eq!(pick(&local, &[], true).0, "openai");
    }

    #[test]
    fn a_bad_base_url_is_a_config_error() {
        let e = from_config(
            &ModelConfig::default(),
            &env(&[("OLLAMA_BASE_URL", "not a url")]),
            false,
        )
        .err()
        .expect("an error");
        assert!(e.to_string().contains("OLLAMA_BASE_URL"), "{e}");
    }
}
