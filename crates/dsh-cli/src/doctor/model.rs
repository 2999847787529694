//! The model checks: which endpoint and model a session would use and with which key
//! (`model`), whether the endpoint answers and takes the key (`endpoint`: its model list,
//! within [`NETWORK_TIMEOUT`]), and whether it lists the model (`model name`).
//!
//! A model the endpoint does not list is a failure — a request for it would be refused — unless
//! a listed name is the model with a tag or date (`qwen2.5-coder:latest`,
//! `claude-sonnet-4-5-20250929`: aliases the APIs accept), or the list may be cut (500 names,
//! the most read), or the endpoint lists nothing or cannot list: those are warnings.

use std::collections::BTreeMap;

use dsh_config::Loaded;
use dsh_model::{Endpoint, ModelError, ProviderKind, Route};

use super::{Check, NETWORK_TIMEOUT};

/// The most names a listing keeps (dsh-model's bound): a list this long may be cut.
const LIST_MAX_NAMES: usize = 500;

pub(super) async fn check(loaded: &Loaded, env: &BTreeMap<String, String>) -> Vec<Check> {
    let user_config = loaded.user_config.as_deref();
    let settings = dsh_agent::model_settings(
        &loaded.config.model,
        env,
        loaded.model_explicit,
        user_config,
    );
    let route = dsh_model::route(&settings);
    let endpoint = match &route {
        Route::Configured => &settings.configured,
        Route::Key { var } => settings
            .candidates
            .iter()
            .find(|e| e.api_key_env.as_deref() == Some(var.as_str()))
            .unwrap_or(&settings.configured),
        Route::Local { .. } => &settings.local,
    };
    let kind = endpoint.kind;
    let model = settings
        .model
        .clone()
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| dsh_model::default_model(kind).to_owned());
    let url = endpoint.base_url.clone();
    let file = user_config.map_or_else(
        || "a user config file (--config FILE)".to_owned(),
        |p| p.display().to_string(),
    );
    let why = match &route {
        Route::Configured => "as configured".to_owned(),
        Route::Key { var } => format!("chosen because {var} is set"),
        Route::Local { .. } => "no model is configured and no API key is set".to_owned(),
    };
    let what = format!("{kind}/{model} at {url} ({why})");
    let var = endpoint.api_key_env.clone().filter(|v| !v.is_empty());
    let hosted = url.trim_end_matches('/') == endpoint.default_base_url;
    let mut out = Vec::new();
    match (&var, &endpoint.api_key) {
        (Some(var), None) if hosted => {
            out.push(Check::fail(
                "model",
                format!("{what}: no key, {var} is not set"),
                format!(
                    "export {var}=<your key>, or set [model] api_key_env to the variable that holds it"
                ),
            ));
            return out;
        }
        (Some(var), None) => out.push(Check::warn(
            "model",
            format!("{what}: {var} is not set, so no key is sent"),
            format!("export {var}=<your key> if the endpoint needs one"),
        )),
        (Some(var), Some(_)) => out.push(Check::ok("model", format!("{what}, key from {var}"))),
        (None, _) => out.push(Check::ok("model", format!("{what}, no key"))),
    }
    let provider = match dsh_agent::provider_from_loaded(loaded, env) {
        Ok(p) => p,
        Err(e) => {
            let first = e.to_string().lines().next().unwrap_or_default().to_owned();
            out.push(Check::fail(
                "model",
                first,
                format!("set [model] in {file}, or pass --provider/--base-url/--model"),
            ));
            return out;
        }
    };
    let unreachable_fix = match &route {
        Route::Local { .. } => format!(
            "start Ollama (`ollama serve`), or set OPENAI_API_KEY (or ANTHROPIC_API_KEY, DEEPSEEK_API_KEY), or put [model] in {file}"
        ),
        Route::Key { .. } => format!("check the network, or {}", endpoint.base_url_env),
        Route::Configured => format!(
            "start the server, or correct the URL (--base-url, {} or [model] base_url)",
            endpoint.base_url_env
        ),
    };
    let listed = tokio::time::timeout(NETWORK_TIMEOUT, provider.list_models()).await;
    let names = match listed {
        Ok(Ok(names)) => {
            let key = if endpoint.api_key.is_some() {
                " and accepts the key"
            } else {
                ""
            };
            out.push(Check::ok(
                "endpoint",
                format!(
                    "{url} answers{key}; it lists {}",
                    crate::words::plural(names.len(), "model")
                ),
            ));
            names
        }
        Err(_) => {
            out.push(Check::fail(
                "endpoint",
                format!(
                    "{url} did not answer within {} s",
                    NETWORK_TIMEOUT.as_secs()
                ),
                unreachable_fix,
            ));
            return out;
        }
        Ok(Err(e)) => {
            out.push(endpoint_failure(
                e,
                endpoint,
                &url,
                var.as_deref(),
                unreachable_fix,
            ));
            return out;
        }
    };
    out.push(model_listed(&model, &names, kind, &url));
    out
}

/// The `endpoint` line when listing the models failed.
fn endpoint_failure(
    e: ModelError,
    endpoint: &Endpoint,
    url: &str,
    var: Option<&str>,
    unreachable_fix: String,
) -> Check {
    let var_or_config = var.map_or_else(
        || "[model] api_key_env (the variable holding the key)".to_owned(),
        str::to_owned,
    );
    match e {
        ModelError::Unreachable { reason, .. } => Check::fail(
            "endpoint",
            format!("cannot reach {url}: {reason}"),
            unreachable_fix,
        ),
        ModelError::Http {
            status: status @ (401 | 403),
            message,
            ..
        } => {
            let said = crate::words::one_line(&server_words(&message), 160);
            if let (Some(var), Some(_)) = (var, &endpoint.api_key) {
                Check::fail(
                    "endpoint",
                    format!("{url} answered {status}: the key in {var} was refused ({said})"),
                    format!("set {var_or_config} to a valid {} key", endpoint.kind),
                )
            } else {
                Check::fail(
                    "endpoint",
                    format!("{url} answered {status}: it wants a key and none is sent ({said})"),
                    format!("set {var_or_config}"),
                )
            }
        }
        other => Check::warn(
            "endpoint",
            format!(
                "{url} cannot list its models ({}): the key and the model are not checked",
                crate::words::one_line(&other.to_string(), 160)
            ),
            "check the base URL (an OpenAI-compatible one usually ends in /v1)",
        ),
    }
}

/// The message of an error body (`{"error": {"message": …}}`, OpenAI's and Anthropic's
/// shape), else the body as it is.
fn server_words(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.to_owned())
}

/// The `model name` line: whether the endpoint lists the model.
fn model_listed(model: &str, names: &[String], kind: ProviderKind, url: &str) -> Check {
    let ollama = kind == ProviderKind::Ollama;
    if names.is_empty() {
        return Check::warn(
            "model name",
            format!("{url} lists no models: whether it serves {model} is not checked"),
            if ollama {
                format!("`ollama pull {model}`")
            } else {
                format!("make sure the server serves {model}")
            },
        );
    }
    if names.iter().any(|n| n == model) {
        return Check::ok("model name", format!("{model} is listed"));
    }
    let alias = names.iter().find(|n| {
        n.strip_prefix(model)
            .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('-'))
    });
    if let Some(n) = alias {
        return Check::ok("model name", format!("{model} is listed as {n}"));
    }
    let some: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
    let more = if names.len() > some.len() {
        ", …"
    } else {
        ""
    };
    let verdict = format!(
        "{model} is not among the {} {url} lists ({}{more})",
        crate::words::plural(names.len(), "model"),
        some.join(", ")
    );
    let choose = "--model NAME or [model] model = \"NAME\" with one it lists".to_owned();
    let fix = if ollama {
        format!("`ollama pull {model}`, or {choose}")
    } else {
        choose
    };
    if names.len() >= LIST_MAX_NAMES {
        Check::warn("model name", format!("{verdict}; the list may be cut"), fix)
    } else {
        Check::fail("model name", verdict, fix)
    }
}
