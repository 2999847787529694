//! From configuration to session settings: the only reader of `dsh_config::Loaded`
//! (configuration in two stages, STYLE 9: dsh-config parses plain data, this fills the
//! assembly's settings; `assemble.rs` then compiles matchers and builds the pipeline).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dsh_config::{Fsync, Loaded, ModelConfig, Provider, SandboxMode};
use dsh_model::{Endpoint, ModelError, ModelSettings, ProviderKind};
use dsh_tools::{NetworkGrant, ShellSettings};

use crate::{Approval, LoopConfig, SessionSettings};

/// Why configuration could not be turned into settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// `DSH_HOME` is empty, or unset with no home directory to fall back to.
    #[error(transparent)]
    Home(#[from] dsh_config::ConfigError),
}

/// Session settings from configuration, with one-line notices for the user.
#[derive(Debug)]
pub struct Configured {
    pub settings: SessionSettings,
    /// E.g. a `shell.pass_env` name that is never passed.
    pub notices: Vec<String>,
}

impl SessionSettings {
    /// The settings for a loaded configuration. `env` is the process environment (for
    /// `DSH_HOME`); `yolo` mounts the approver that approves every `ask` (`--yolo`).
    pub fn from_loaded(
        loaded: &Loaded,
        env: &BTreeMap<String, String>,
        yolo: bool,
    ) -> Result<Configured, SettingsError> {
        let home = dsh_config::dsh_home(env)?;
        let c = &loaded.config;
        let mut notices = Vec::new();
        let mut s = SessionSettings::new(&loaded.workspace, home);
        s.rule_target = loaded.rule_target();
        let p = &c.permissions;
        s.rules = [&p.allow, &p.ask, &p.deny]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        s.protected = c.guards.protected.iter().map(|p| p.value.clone()).collect();
        s.limits.max_read_bytes = to_usize(c.limits.max_read_bytes);
        s.limits.max_results = to_usize(c.limits.max_results);
        s.max_parallel = to_usize(c.limits.max_parallel);
        s.spill_chars = to_usize(c.limits.spill_chars);
        s.fsync_every_record = c.journal.fsync == Fsync::Record;
        s.config_digest.clone_from(&loaded.digest);
        s.shell = shell_settings(c, &mut notices);
        // dsh-config has already applied the lists' layers (an untrusted project can only move
        // a command from safe to confirm).
        s.shell_lists = dsh_policy::ShellLists {
            safe: c.shell.safe.clone(),
            confirm: c.shell.confirm.clone(),
            unlisted: c.shell.unlisted,
            origin: "[shell] safe/confirm lists".to_owned(),
        };
        s.agents = c
            .agents
            .iter()
            .map(|(name, p)| crate::subagent::ProfileSpec {
                name: name.clone(),
                description: p.value.description.clone(),
                tools: p.value.tools.as_ref().map(|tools| {
                    tools
                        .iter()
                        .map(|t| (t.value.clone(), t.origin.location()))
                        .collect()
                }),
                system: p.value.system.clone(),
                model: p.value.model.clone(),
                max_steps: p
                    .value
                    .max_steps
                    .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                at: p.origin.location(),
            })
            .collect();
        (s.mcp, s.mcp_skipped) = mcp_servers(loaded, env);
        s.hooks = crate::hooks::hook_settings(loaded, &mut notices);
        s.skills = Arc::new(crate::skills::catalog(loaded, env, &mut notices));
        (s.plugins, s.plugin_status) = crate::plugins::plugins(loaded, &mut notices);
        s.max_continuations = u32::try_from(c.hooks.max_continuations).unwrap_or(u32::MAX);
        s.credential_vars = credential_vars(loaded, env);
        s.tools_mode = c.tools.mode;
        s.code.wall = std::time::Duration::from_secs(c.tools.code_timeout_s);
        s.mode = if yolo {
            dsh_config::PermissionMode::Yolo
        } else {
            c.permissions.mode
        };
        if s.mode == dsh_config::PermissionMode::Yolo {
            s.approval = Approval::Yolo;
        }
        Ok(Configured {
            settings: s,
            notices,
        })
    }
}

impl LoopConfig {
    /// The loop's stop lines from `[limits]`.
    pub fn from_loaded(loaded: &Loaded) -> LoopConfig {
        let limits = &loaded.config.limits;
        LoopConfig {
            max_steps: u32::try_from(limits.max_steps).unwrap_or(u32::MAX),
            max_tokens: limits.max_tokens,
            keep_turns: crate::agent::keep_turns(loaded.config.context.keep_turns),
            max_cost_usd: limits.max_cost_usd,
            price: loaded.config.model.price,
            context_window: loaded.config.model.context_window,
            max_fraction: loaded.config.context.max_fraction,
            ..LoopConfig::default()
        }
    }
}

/// The environment variables that hold credentials dsh was given, for the redaction
/// disposition: `[model] api_key_env`, every provider's key variable, every variable named
/// `*API_KEY*` (none is ever passed to commands), and every variable an MCP server's
/// configuration reads into a header (`headers_env`, `${VAR}` in `headers`). Names only: the
/// session reads their values when it is assembled.
fn credential_vars(loaded: &Loaded, env: &BTreeMap<String, String>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    names.extend(loaded.config.model.api_key_env.clone());
    names.extend(
        Provider::ALL
            .iter()
            .filter_map(|p| p.default_api_key_env())
            .map(str::to_owned),
    );
    names.extend(
        env.keys()
            .filter(|k| k.to_ascii_uppercase().contains("API_KEY"))
            .cloned(),
    );
    for server in loaded.config.mcp.servers.values() {
        if let dsh_config::McpLaunch::Http {
            headers_env,
            headers,
            ..
        } = &server.value.launch
        {
            names.extend(headers_env.values().cloned());
            names.extend(headers.values().flat_map(|t| dsh_config::variables(t)));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    names.retain(|n| !n.is_empty() && seen.insert(n.clone()));
    names
}

/// `[shell]` and `[sandbox]` (the `--sandbox` flag is already merged into `sandbox.mode`).
/// The configured MCP servers to start, and those not to. A server a project names (its
/// `.dsh/config.toml` or `.mcp.json`) runs a program the repository chose: it starts only
/// once a person approved that very command line (`dsh mcp approve`, recorded with a digest
/// in the user config; a change asks again — DESIGN §5). `${VAR}` in an environment value or
/// a header is read from dsh's environment; a server naming a variable that is not set is
/// not started.
fn mcp_servers(
    loaded: &Loaded,
    env: &BTreeMap<String, String>,
) -> (Vec<dsh_mcp::ServerSpec>, Vec<dsh_mcp::Skipped>) {
    use dsh_config::{Layer, defaults};
    let mut start = Vec::new();
    let mut skipped = Vec::new();
    for (name, server) in &loaded.config.mcp.servers {
        let described = server.value.launch.command_line();
        let mut skip = |why: String| {
            skipped.push(dsh_mcp::Skipped {
                name: name.clone(),
                launch: described.clone(),
                why,
            });
        };
        if server.origin.layer == Layer::Project {
            let digest = dsh_config::approval_digest(&loaded.workspace, name, &server.value);
            if !loaded.approved.contains(&digest) {
                skip(format!(
                    "named by the project ({}): a server a repository names starts only once you approve its command line; run `dsh mcp approve {name}` in this workspace",
                    server.origin.location()
                ));
                continue;
            }
        }
        // In a workspace nobody trusted, a server whose directory is not configured starts
        // in the session's private directory, not the workspace: launchers load code from
        // their working directory (`python3 -m`, `npx`, `uvx`), so a cloned repository could
        // plant it.
        let launch = match mcp_launch(&server.value.launch, loaded, env) {
            Ok(l) => l,
            Err(var) => {
                skip(format!(
                    "the environment variable {var} it names is not set ({})",
                    server.origin.location()
                ));
                continue;
            }
        };
        start.push(dsh_mcp::ServerSpec {
            name: name.clone(),
            launch,
            startup_timeout: std::time::Duration::from_secs(server.value.startup_timeout_s),
            call_timeout: std::time::Duration::from_secs(server.value.timeout_s),
            max_restarts: defaults::MCP_MAX_RESTARTS,
        });
    }
    (start, skipped)
}

/// How a server is launched, its variables read from `env`, its directory relative to the
/// workspace (an empty one is the session's private directory: `SessionSettings::mcp`);
/// `Err` names the first variable that is not set.
fn mcp_launch(
    launch: &dsh_config::McpLaunch,
    loaded: &Loaded,
    env: &BTreeMap<String, String>,
) -> Result<dsh_mcp::Launch, String> {
    use dsh_config::McpLaunch;
    Ok(match launch {
        McpLaunch::Stdio {
            command,
            args,
            env: own,
            cwd,
        } => {
            let mut expanded = BTreeMap::new();
            for (k, v) in own {
                expanded.insert(k.clone(), dsh_config::expand(v, env)?);
            }
            dsh_mcp::Launch::Stdio {
                program: command.clone(),
                args: args.clone(),
                env: crate::extensions::env_pairs(&expanded),
                cwd: match cwd {
                    Some(cwd) => loaded.workspace.join(cwd),
                    None if loaded.trusted => loaded.workspace.clone(),
                    None => std::path::PathBuf::new(),
                },
            }
        }
        McpLaunch::Http {
            url,
            headers_env,
            headers,
        } => {
            let mut out = Vec::new();
            for (name, var) in headers_env {
                let value = env
                    .get(var)
                    .ok_or_else(|| format!("{var} (header {name})"))?;
                out.push(dsh_mcp::Header {
                    name: name.clone(),
                    value: value.clone(),
                });
            }
            for (name, template) in headers {
                out.push(dsh_mcp::Header {
                    name: name.clone(),
                    value: dsh_config::expand(template, env)
                        .map_err(|var| format!("{var} (header {name})"))?,
                });
            }
            dsh_mcp::Launch::Http {
                url: url.clone(),
                headers: out,
            }
        }
    })
}

fn shell_settings(c: &dsh_config::Config, notices: &mut Vec<String>) -> ShellSettings {
    for name in &c.shell.pass_env {
        if let Some(why) = dsh_tools::shell::env::refusal(name) {
            notices.push(format!(
                "shell.pass_env: {name} is never passed to commands ({why})"
            ));
        }
    }
    let timeout = Duration::from_secs(c.shell.timeout_s.max(1));
    ShellSettings {
        timeout,
        max_timeout: timeout.max(Duration::from_secs(
            dsh_config::defaults::SHELL_MAX_TIMEOUT_S,
        )),
        max_output_chars: to_usize(c.shell.max_output_chars),
        pass_env: c.shell.pass_env.clone(),
        sandbox: match c.sandbox.mode {
            SandboxMode::Off => dsh_tools::sandbox::SandboxMode::Off,
            SandboxMode::Auto => dsh_tools::sandbox::SandboxMode::Auto,
            SandboxMode::Required => dsh_tools::sandbox::SandboxMode::Required,
        },
        // The helper is this very binary (`dsh sandbox-exec`).
        helper: std::env::current_exe().ok(),
        // Only configuration can lift the network ban headless: `--yolo` never does, and
        // an untrusted project's `allow_network = true` was already dropped by dsh-config.
        network: if c.sandbox.allow_network {
            NetworkGrant::UserConfig
        } else {
            NetworkGrant::Refused
        },
        // Filled by the session's assembly from the protected paths, prompt files and rules.
        keep: dsh_tools::shell::Keep::default(),
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The provider's plain settings for `[model]`: every environment lookup done here, the
/// provider defaults taken from dsh-config. `explicit` is `Loaded::model_explicit`.
pub fn model_settings(
    model: &ModelConfig,
    env: &BTreeMap<String, String>,
    explicit: bool,
    user_config: Option<&std::path::Path>,
) -> ModelSettings {
    let get = |name: &str| {
        env.get(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let endpoint = |kind: Provider, base_url: String, api_key_env: Option<String>| Endpoint {
        kind: provider_kind(kind),
        base_url,
        default_base_url: kind.default_base_url().to_string(),
        base_url_env: kind.base_url_env().to_string(),
        api_key: api_key_env
            .as_deref()
            .filter(|k| !k.is_empty())
            .and_then(get),
        api_key_env,
    };
    // With nothing configured, a provider's `*_BASE_URL` variable is honoured here.
    let preset = |kind: Provider| {
        let base_url = get(kind.base_url_env()).unwrap_or_else(|| kind.default_base_url().into());
        endpoint(
            kind,
            base_url,
            kind.default_api_key_env().map(str::to_string),
        )
    };
    ModelSettings {
        explicit,
        configured: endpoint(
            model.provider,
            model.base_url.clone(),
            model.api_key_env.clone(),
        ),
        candidates: [Provider::Openai, Provider::Anthropic, Provider::Deepseek]
            .into_iter()
            .map(preset)
            .collect(),
        local: preset(Provider::Ollama),
        model: model.model.clone(),
        user_config: user_config.map(|p| p.display().to_string()),
    }
}

/// The provider for `[model]` with default options (see [`model_settings`] and
/// [`dsh_model::select_with`]).
pub fn provider_from_config(
    model: &ModelConfig,
    env: &BTreeMap<String, String>,
    explicit: bool,
) -> Result<Arc<dyn dsh_model::Provider>, ModelError> {
    dsh_model::select_with(
        &model_settings(model, env, explicit, None),
        provider_options(model),
    )
}

/// `[model] idle_timeout_s` and `max_retries` as the provider's transport options.
pub fn provider_options(model: &ModelConfig) -> dsh_model::ProviderOptions {
    dsh_model::ProviderOptions {
        idle_timeout: std::time::Duration::from_secs(model.idle_timeout_s.max(1)),
        max_attempts: u32::try_from(model.max_retries)
            .unwrap_or(u32::MAX)
            .saturating_add(1),
        ..dsh_model::ProviderOptions::default()
    }
}

/// The provider a loaded configuration asks for (`[model]`, `Loaded::model_explicit`).
pub fn provider_from_loaded(
    loaded: &Loaded,
    env: &BTreeMap<String, String>,
) -> Result<Arc<dyn dsh_model::Provider>, ModelError> {
    let model = &loaded.config.model;
    let settings = model_settings(
        model,
        env,
        loaded.model_explicit,
        loaded.user_config.as_deref(),
    );
    dsh_model::select_with(&settings, provider_options(model))
}

/// With nothing configured and no key set, the local endpoint a session falls back to (a
/// front end says so); `None` when some layer or key chose the provider.
pub fn fallback_endpoint(loaded: &Loaded, env: &BTreeMap<String, String>) -> Option<String> {
    match dsh_model::route(&model_settings(
        &loaded.config.model,
        env,
        loaded.model_explicit,
        loaded.user_config.as_deref(),
    )) {
        dsh_model::Route::Local { base_url } => Some(base_url),
        _ => None,
    }
}

/// A model to switch to (the REPL's `/model`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelChoice {
    pub provider: Provider,
    pub model: String,
    /// `None`: the configured endpoint when the provider stays, else the provider's default
    /// (or its `*_BASE_URL` variable).
    pub base_url: Option<String>,
    /// `None`: as configured when the provider stays, else the provider's default variable.
    pub api_key_env: Option<String>,
}

/// What `/model` offers: the configured model first, then each provider's default model.
pub fn model_choices(loaded: &Loaded, current_model: &str) -> Vec<ModelChoice> {
    let configured = loaded.config.model.provider;
    let mut out = vec![ModelChoice {
        provider: configured,
        model: current_model.to_owned(),
        base_url: None,
        api_key_env: None,
    }];
    for &p in Provider::ALL {
        let model = dsh_model::default_model(provider_kind(p)).to_owned();
        if !out.iter().any(|c| c.provider == p && c.model == model) {
            out.push(ModelChoice {
                provider: p,
                model,
                base_url: None,
                api_key_env: None,
            });
        }
    }
    out
}

/// The endpoint and key variable a choice would use, filled in as [`provider_for_choice`]
/// fills them (for a front end to show as defaults).
pub fn choice_defaults(
    loaded: &Loaded,
    env: &BTreeMap<String, String>,
    c: &ModelChoice,
) -> (String, Option<String>) {
    let m = &loaded.config.model;
    if c.provider == m.provider {
        return (
            c.base_url.clone().unwrap_or_else(|| m.base_url.clone()),
            c.api_key_env.clone().or_else(|| m.api_key_env.clone()),
        );
    }
    let base = env
        .get(c.provider.base_url_env())
        .filter(|v| !v.trim().is_empty())
        .cloned()
        .unwrap_or_else(|| c.provider.default_base_url().to_owned());
    (
        c.base_url.clone().unwrap_or(base),
        c.api_key_env
            .clone()
            .or_else(|| c.provider.default_api_key_env().map(str::to_owned)),
    )
}

/// The provider a resumed chain's last `model_changed` names, through the configuration
/// loaded now (its key variable as configured for that provider); why not, as text.
///
/// A journal is text a copy can change, and the key goes wherever the endpoint is: the
/// recorded endpoint is taken up only when it is one this configuration would use for that
/// provider anyway (the configured URL, the provider's own, its `*_BASE_URL`) or is on this
/// machine; any other is refused, and `/model` can choose it again.
pub fn provider_for_switch(
    loaded: &Loaded,
    env: &BTreeMap<String, String>,
    m: &crate::resume::ModelSwitch,
) -> Result<Arc<dyn dsh_model::Provider>, String> {
    let provider: Provider = m.provider.parse()?;
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    let known = [
        Some(loaded.config.model.base_url.clone())
            .filter(|_| loaded.config.model.provider == provider),
        Some(provider.default_base_url().to_owned()),
        env.get(provider.base_url_env()).cloned(),
    ];
    let local = dsh_model::is_loopback(&m.base_url);
    if !m.base_url.is_empty() && !local && !known.iter().flatten().any(|k| same(k, &m.base_url)) {
        return Err(format!(
            "its endpoint {} is not one this configuration names for {}",
            m.base_url,
            provider.as_str()
        ));
    }
    let choice = ModelChoice {
        provider,
        model: m.model.clone(),
        base_url: Some(m.base_url.clone()).filter(|u| !u.is_empty()),
        api_key_env: None,
    };
    provider_for_choice(loaded, env, &choice).map_err(|e| e.to_string())
}

/// The provider for a switch to `choice`: `[model]` as loaded, with the provider, model,
/// endpoint and key variable replaced (see [`choice_defaults`]); its other settings (timeouts,
/// retries) kept.
pub fn provider_for_choice(
    loaded: &Loaded,
    env: &BTreeMap<String, String>,
    choice: &ModelChoice,
) -> Result<Arc<dyn dsh_model::Provider>, ModelError> {
    let (base_url, api_key_env) = choice_defaults(loaded, env, choice);
    let mut model = loaded.config.model.clone();
    model.provider = choice.provider;
    model.model = Some(choice.model.clone());
    model.base_url = base_url;
    model.api_key_env = api_key_env;
    provider_from_config(&model, env, true)
}

fn provider_kind(p: Provider) -> ProviderKind {
    match p {
        Provider::Openai => ProviderKind::Openai,
        Provider::Anthropic => ProviderKind::Anthropic,
        Provider::Deepseek => ProviderKind::Deepseek,
        Provider::Ollama => ProviderKind::Ollama,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use dsh_config::Provider as Kind;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn pick(model: &ModelConfig, pairs: &[(&str, &str)], explicit: bool) -> (String, String) {
        let p = provider_from_config(model, &env(pairs), explicit).unwrap();
        (p.name().to_string(), p.model().to_string())
    }

    /// The variables whose values are redacted: the model's, every provider's, every
    /// `*API_KEY*`, and those MCP headers read (`headers_env` and `.mcp.json`'s `${VAR}`).
    #[test]
    fn credential_variables_are_the_keys_dsh_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let cfg = dir.path().join("cfg");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(
            cfg.join("config.toml"),
            "[model]\nprovider = \"openai\"\napi_key_env = \"MY_MODEL_KEY\"\n\
             [mcp.servers.web]\nurl = \"https://mcp.example.com/mcp\"\n\
             headers_env = { Authorization = \"WEB_TOKEN\" }\n",
        )
        .unwrap();
        dsh_config::record_trust(&cfg.join("config.toml"), &ws).unwrap();
        std::fs::write(
            ws.join(".mcp.json"),
            r#"{"mcpServers": {"docs": {"type": "http", "url": "https://docs.example.com/mcp",
                "headers": {"Authorization": "Bearer ${DOCS_TOKEN}", "X-Team": "core"}}}}"#,
        )
        .unwrap();
        let mut opts = dsh_config::LoadOptions::new(&ws);
        opts.env = env(&[("DSH_CONFIG_HOME", cfg.to_str().unwrap())]);
        let loaded = dsh_config::load(&opts).unwrap();
        let process = env(&[
            ("SOME_API_KEY_2", "v"),
            ("GITHUB_TOKEN", "not a key dsh was given"),
            ("PATH", "/bin"),
        ]);
        assert_eq!(
            credential_vars(&loaded, &process),
            [
                "MY_MODEL_KEY",
                "OPENAI_API_KEY",
                "ANTHROPIC_API_KEY",
                "DEEPSEEK_API_KEY",
                "SOME_API_KEY_2",
                "DOCS_TOKEN",
                "WEB_TOKEN",
            ]
        );
    }

    /// A journaled switch is taken up only to an endpoint this configuration would use for
    /// its provider, or one on this machine: a copied journal cannot send the key elsewhere.
    #[test]
    fn a_recorded_switch_to_an_unconfigured_endpoint_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = dsh_config::LoadOptions::new(dir.path());
        opts.env = env(&[("DSH_CONFIG_HOME", dir.path().join("cfg").to_str().unwrap())]);
        let loaded = dsh_config::load(&opts).unwrap();
        let keys = env(&[("OPENAI_API_KEY", "sk-test")]);
        let switch = |url: &str| crate::resume::ModelSwitch {
            provider: "openai".into(),
            model: "m".into(),
            base_url: url.into(),
        };
        for ok in [
            "https://api.openai.com/v1",
            "http://127.0.0.1:9/v1",
            "http://localhost:11434/v1",
            "http://[::1]:8080/v1",
        ] {
            assert!(
                provider_for_switch(&loaded, &keys, &switch(ok)).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "https://evil.example/v1",
            "http://localhost.evil.example/v1",
            "http://127.0.0.1@evil.example/v1",
        ] {
            let e = provider_for_switch(&loaded, &keys, &switch(bad))
                .err()
                .unwrap();
            assert!(
                e.contains("is not one this configuration names"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn the_built_in_read_only_list_is_the_policys_and_the_configs() {
        let config: Vec<&str> = dsh_config::defaults::SHELL_SAFE
            .split_whitespace()
            .collect();
        assert_eq!(config, dsh_policy::READ_ONLY_PROGRAMS);
        let lists = dsh_policy::ShellLists::default();
        let confirm: Vec<&str> = dsh_config::defaults::SHELL_CONFIRM
            .split_whitespace()
            .collect();
        assert_eq!(confirm, lists.confirm);
        assert_eq!(config, lists.safe);
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
            ..ModelConfig::default()
        };
        assert_eq!(pick(&m, &[("OPENAI_API_KEY", "k")], true).0, "ollama");
    }

    #[test]
    fn a_hosted_provider_without_its_key_says_how_to_fix_it() {
        let e = provider_from_config(&ModelConfig::default(), &env(&[]), true)
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
        let e = provider_from_config(
            &ModelConfig::default(),
            &env(&[("OLLAMA_BASE_URL", "not a url")]),
            false,
        )
        .err()
        .expect("an error");
        assert!(e.to_string().contains("OLLAMA_BASE_URL"), "{e}");
    }
}
