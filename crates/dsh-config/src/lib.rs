//! dsh configuration as plain data: layered TOML loading, workspace trust, and errors
//! that name the file, line and key.
//!
//! # One declaration per key
//!
//! Every key is declared once, in the key table ([`keys::KEYS`]): its name, type and
//! bounds, built-in default, what an untrusted project and the managed file may do with it,
//! and its doc. Reading a file's value, the errors, the layering below, the defaults
//! ([`Config::default`]) and the reference ([`keys::reference`]) all follow from that
//! entry; lists and tables are declared there too and parsed by their own code.
//!
//! Naming: [`Config`] is what the files, the environment and the flags say, merged;
//! `Settings` (in dsh-agent) is what one session runs with, built from a `Config`.
//!
//! # Layers (lowest to highest)
//!
//! 1. built-in defaults ([`Config::default`]);
//! 2. the managed file (`/etc/dsh/managed.toml`, [`LoadOptions::managed`]);
//! 3. the user file ([`LoadOptions::user_config`] = `--config FILE`, else
//!    `$DSH_CONFIG_HOME/config.toml`, else `<platform config dir>/dsh/config.toml`);
//! 4. the project file `<workspace>/.dsh/config.toml`;
//! 5. the environment ([`LoadOptions::env`]; only `[model]`: `DSH_PROVIDER`, `DSH_MODEL`
//!    and the provider's `*_BASE_URL`, see [`Provider::base_url_env`]);
//! 6. flags ([`Overrides`]).
//!
//! A missing file is fine (except an explicit `--config FILE`); an unreadable or broken
//! one is an error. Scalars override; lists (permission rules, protected paths, hooks,
//! shell lists) accumulate, each entry tagged with its [`Origin`]; MCP servers are keyed
//! by name. Unknown keys are errors.
//!
//! # The managed file
//!
//! Its deny/ask rules and protected paths accumulate like everyone's, and no layer can
//! remove an entry, so they survive everything. `sandbox.mode = "required"` and
//! `sandbox.allow_network = false` there are locks: a higher layer asking for less is
//! ignored with a notice. Every `[limits]` value it sets is a ceiling: a higher layer's
//! larger value is clamped, with a notice. Its other settings are ordinary lowest-layer
//! defaults.
//!
//! # Per-workspace rules
//!
//! The user file (and the managed file) may hold
//! `[workspaces."<canonical workspace path>".permissions]` with `allow`, `ask` and `deny`
//! lists in the `[permissions]` grammar. A section applies only when the loaded
//! workspace's canonical path is exactly its key (not a subdirectory), as rules of that
//! file's layer, after the file's own `[permissions]`; each rule's [`Origin`] names its
//! key, e.g. `workspaces."/repo".permissions.allow[0]`. Keys must be absolute paths.
//! `[workspaces]` in a project file is an error, like `[trust]`. [`record_rule`] writes
//! such rules (the approval prompt's "always allow"); [`Loaded::rule_target`] says where.
//!
//! # Trust (a cloned repository is not trusted)
//!
//! A workspace is trusted iff its canonical path (symlinks resolved) is listed in the
//! **user** file's `[trust] workspaces` (exact directories, not their subdirectories).
//! `[trust]` anywhere else — the project file, the managed file — is an error, so a
//! repository can never trust itself; [`record_trust`] writes the entry (`dsh trust`).
//!
//! An untrusted project file may only tighten. Applied: `permissions.ask`/`deny`,
//! `guards.protected`, lower `[limits]` / `shell.timeout_s` / `shell.max_output_chars`,
//! a stricter `sandbox.mode`, `sandbox.allow_network = false`, and `shell.confirm`
//! entries that move a command out of `shell.safe`. Ignored, with one notice per kind
//! naming the file and `dsh trust`: `permissions.allow`, `shell.safe` additions,
//! `shell.confirm` additions of refused commands, `shell.pass_env`, `hooks`,
//! `mcp.servers`, `[agents.*]`, `[verify]`, `tools.mode`,
//! all of `[model]` including `context_window` and `price` (a repository must not
//! redirect the endpoint, choose the model, or choose which key variable is sent),
//! `[journal]`, limit increases (a larger `context.max_fraction`, a looser
//! `limits.max_cost_usd`, where 0 is off), looser `sandbox.mode`,
//! `sandbox.allow_network = true`. `context.keep_turns` applies from it.
//!
//! No layer may define `[agents.search]`, `[agents.code]`, `[agents.shell]` or
//! `[agents.general]`: the built-in profiles ([`AgentProfile::BUILT_IN`]); doing so is an
//! error naming the file, line and key. Entries kept from an untrusted project carry
//! [`Layer::UntrustedProject`]: a policy must only let them tighten a verdict (an `ask`
//! rule must not turn a refused shell command into an ask). A trusted project file
//! applies fully (still below environment and flags, still unable to loosen the
//! managed file).
//!
//! The only I/O is reading the config files (regular files up to 1 MiB) and, in
//! [`record_trust`] and [`record_rule`], writing a config file.

mod approval;
mod builtin;
mod claude_settings;
mod config;
pub mod defaults;
mod error;
mod file;
pub mod init;
pub mod keys;
mod locate;
mod mcp_edit;
mod mcp_json;
mod merge;
mod origin;
mod plugins;
mod read;
mod record;
mod trust;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use approval::{approval_digest, hook_approval_digest};
pub use claude_settings::CLAUDE_SETTINGS;
pub use config::{
    AgentProfile, Compat, Config, ContextConfig, Fsync, Guards, Hook, HookEvent, Hooks,
    JournalConfig, Layer, Limits, Mcp, McpLaunch, McpServer, ModelConfig, OnError, Origin,
    PermissionMode, Permissions, Price, Provider, Rule, SandboxConfig, SandboxMode, ShellConfig,
    Sourced, ToolsConfig, ToolsMode, Unlisted, VerifyConfig,
};
pub use error::{ConfigError, ErrorKind};
pub use mcp_edit::{NewMcpServer, add_mcp_server, record_approval, remove_mcp_server};
pub use mcp_json::{MCP_JSON, expand, variables};
pub use plugins::{
    PLUGIN_TOML, PROJECT_PLUGINS, Plugin, PluginSource, PluginTool, Refused as RefusedPlugin,
    find as find_plugins, plugin_approval_digest, plugin_tool_name_error,
};
pub use record::{RecordedRule, RuleScope, record_rule};
pub use trust::record_trust;

use file::parse_part;
use keys::{Scalar, key};
use merge::{Builder, Part};
use read::read_optional;

/// Settings from command-line flags (the highest layer). The CLI fills it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--provider`.
    pub provider: Option<Provider>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--max-steps`.
    pub max_steps: Option<u64>,
    /// `--sandbox`.
    pub sandbox: Option<SandboxMode>,
    /// `--mode` (`--yolo` is `--mode yolo`).
    pub mode: Option<PermissionMode>,
    /// `--tools-mode`.
    pub tools_mode: Option<ToolsMode>,
}

/// What [`load`] reads.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// The workspace root (`--workspace`, default `.`); must exist.
    pub workspace: PathBuf,
    /// `--config FILE`: the user file to use instead of the default one. Must exist.
    pub user_config: Option<PathBuf>,
    /// The managed file; `None` = [`default_managed_path`].
    pub managed: Option<PathBuf>,
    /// The environment, injected (never read from the process by [`load`] itself; see
    /// [`process_env`]). Tests set `DSH_CONFIG_HOME` here or pass `user_config`.
    pub env: BTreeMap<String, String>,
    /// Flags.
    pub overrides: Overrides,
}

impl LoadOptions {
    /// Options for `workspace` with no flags and an empty environment.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        LoadOptions {
            workspace: workspace.into(),
            ..LoadOptions::default()
        }
    }
}

/// The result of [`load`].
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The effective configuration.
    pub config: Config,
    /// Whether the workspace is trusted (its project file applied fully).
    pub trusted: bool,
    /// The canonical workspace path (what trust is keyed by).
    pub workspace: PathBuf,
    /// The user file in effect (whether or not it exists): where `dsh trust` records.
    pub user_config: Option<PathBuf>,
    /// One-line notices for the user: settings ignored from an untrusted project,
    /// settings the managed file overruled.
    pub notices: Vec<String>,
    /// The files actually read, in layer order.
    pub files: Vec<PathBuf>,
    /// [`Config::digest`] of `config`, for `session_start`.
    pub digest: String,
    /// The digests of the project commands a person approved (`[trust] approved`, the user
    /// file's): see [`approval_digest`].
    pub approved: Vec<String>,
    /// Some layer (a file, `DSH_PROVIDER`, a `*_BASE_URL` variable, a flag) named
    /// `model.provider` or `model.base_url`: use the model configuration as it stands instead
    /// of picking a provider from the keys that are set.
    pub model_explicit: bool,
}

impl Loaded {
    /// Where an "always allow" answer is recorded with [`record_rule`]: the project file's
    /// `[permissions]` when the workspace is trusted, else the user file's
    /// `[workspaces."<workspace>".permissions]` (never trusting the workspace as a side
    /// effect). `None` when untrusted and there is no user file location.
    pub fn rule_target(&self) -> Option<(PathBuf, RuleScope)> {
        if self.trusted {
            let project = self.workspace.join(".dsh").join("config.toml");
            return Some((project, RuleScope::Permissions));
        }
        let user = self.user_config.clone()?;
        Some((user, RuleScope::Workspace(self.workspace.clone())))
    }
}

/// Loads the layered configuration for `opts.workspace`.
pub fn load(opts: &LoadOptions) -> Result<Loaded, ConfigError> {
    let workspace = trust::canonical_workspace(&opts.workspace)?;
    let mut files = Vec::new();
    let mut builder = Builder::new();

    let managed = opts.managed.clone().unwrap_or_else(default_managed_path);
    if let Some(mut part) = read_part(&managed, Layer::Managed, &mut files)? {
        part.select_workspace(&workspace);
        builder.apply(part);
    }

    let user_config = match &opts.user_config {
        Some(path) => {
            if !path.exists() {
                return Err(
                    ConfigError::new(ErrorKind::Io, "no such file (given with --config)")
                        .in_file(path),
                );
            }
            Some(path.clone())
        }
        None => default_user_config(&opts.env)?,
    };
    let mut trusted_list = Vec::new();
    let mut approved = Vec::new();
    let mut user_notices = Vec::new();
    let mut user_claude = None;
    if let Some(path) = &user_config
        && let Some(mut part) = read_part(path, Layer::User, &mut files)?
    {
        trusted_list = std::mem::take(&mut part.trust);
        approved = std::mem::take(&mut part.approved);
        part.select_workspace(&workspace);
        let claude = part.get("compat.claude") == Some(&Scalar::Flag(true));
        builder.apply(part);
        // The user's own Claude Code hooks, as theirs (no approval), when they asked for them.
        // Run in the home directory, the project's `.claude` is the user's: read once, as theirs.
        if claude && let Some(dir) = claude_config_dir(&opts.env) {
            user_claude = std::fs::canonicalize(&dir).ok();
            let mut notices = Vec::new();
            if let Some(part) =
                claude_settings::read_in(&dir, Layer::User, &mut files, &mut notices)?
            {
                builder.apply(part);
            }
            user_notices.extend(notices);
        }
    }
    let trusted = trust::is_trusted(&workspace, &trusted_list);

    let project = workspace.join(".dsh").join("config.toml");
    let layer = if trusted {
        Layer::Project
    } else {
        Layer::UntrustedProject
    };
    // A repository's `.mcp.json`, under its `.dsh/config.toml` (which wins a name both use).
    let mut json_notices = Vec::new();
    if let Some(part) = mcp_json::read(&workspace, layer, &mut files, &mut json_notices)? {
        builder.apply(part);
    }
    // Its Claude Code hooks, under `.dsh/config.toml` too.
    let project_claude = std::fs::canonicalize(workspace.join(".claude")).ok();
    if (project_claude.is_none() || project_claude != user_claude)
        && let Some(part) = claude_settings::read(&workspace, layer, &mut files, &mut json_notices)?
    {
        builder.apply(part);
    }
    if let Some(part) = read_part(&project, layer, &mut files)? {
        builder.apply(part);
    }

    // The provider is known before the environment and the flags apply their keys: the
    // flag's, else `DSH_PROVIDER`, else the files'. Each layer's keys then resolve in order
    // for *that* provider — its `*_BASE_URL`, `DSH_MODEL` — so naming the provider on the
    // command line keeps what the environment says about it (issue 14).
    let flags = flags_part(&opts.overrides)?;
    let flag_provider = match flags.get("model.provider") {
        Some(Scalar::Choice(p)) => p.parse::<Provider>().ok(),
        _ => None,
    };
    let env = env_part(&opts.env, builder.provider(), flag_provider)?;
    builder.apply(env);
    builder.apply(flags);

    let model_explicit = builder.model_explicit();
    let (config, mut notices) = builder.finish();
    notices.extend(user_notices);
    if trusted {
        notices.extend(json_notices);
    }
    let digest = config.digest();
    Ok(Loaded {
        config,
        trusted,
        workspace,
        user_config,
        notices,
        files,
        digest,
        approved,
        model_explicit,
    })
}

fn read_part(
    path: &Path,
    layer: Layer,
    files: &mut Vec<PathBuf>,
) -> Result<Option<Part>, ConfigError> {
    let Some(text) = read_optional(path)? else {
        return Ok(None);
    };
    files.push(path.to_path_buf());
    parse_part(path, &text, layer).map(Some)
}

/// The environment's layer. `files` is the provider the files leave, `flag` the one the
/// command line names: when the final provider differs from the files', this layer switches
/// to it (so the files' endpoint, model and key variable, which were theirs, are dropped
/// here), and then sets that provider's `*_BASE_URL` and `DSH_MODEL`, which the flags' layer
/// keeps since it names the same provider.
fn env_part(
    env: &BTreeMap<String, String>,
    files: Provider,
    flag: Option<Provider>,
) -> Result<Part, ConfigError> {
    let mut part = Part::new(Layer::Env, "environment".to_string());
    let get = |name: &str| env.get(name).filter(|v| !v.trim().is_empty());
    let bad = |name: &str, message: String| {
        ConfigError::new(ErrorKind::InvalidValue, message)
            .with_key(format!("environment variable {name}"))
    };
    let mut provider = files;
    if let Some(v) = get("DSH_PROVIDER") {
        provider = v
            .trim()
            .parse::<Provider>()
            .map_err(|e| bad("DSH_PROVIDER", e))?;
        set(
            &mut part,
            "model.provider",
            Scalar::Choice(provider.as_str()),
        )
        .map_err(|e| bad("DSH_PROVIDER", e))?;
    }
    if let Some(flag) = flag {
        provider = flag;
        set(&mut part, "model.provider", Scalar::Choice(flag.as_str()))
            .map_err(|e| bad("DSH_PROVIDER", e))?;
    }
    let url_var = provider.base_url_env();
    if let Some(v) = get(url_var) {
        set(&mut part, "model.base_url", Scalar::Text(v.clone())).map_err(|e| bad(url_var, e))?;
    }
    if let Some(v) = get("DSH_MODEL") {
        set(&mut part, "model.model", Scalar::Text(v.clone())).map_err(|e| bad("DSH_MODEL", e))?;
    }
    Ok(part)
}

fn flags_part(o: &Overrides) -> Result<Part, ConfigError> {
    let mut part = Part::new(Layer::Flag, "command line".to_string());
    let bad = |flag: &str, message: String| {
        ConfigError::new(ErrorKind::InvalidValue, message).with_key(flag.to_string())
    };
    let values = [
        (
            "--provider",
            "model.provider",
            o.provider.map(|p| Scalar::Choice(p.as_str())),
        ),
        (
            "--base-url",
            "model.base_url",
            o.base_url.clone().map(Scalar::Text),
        ),
        ("--model", "model.model", o.model.clone().map(Scalar::Text)),
        (
            "--max-steps",
            "limits.max_steps",
            o.max_steps.map(Scalar::Count),
        ),
        (
            "--sandbox",
            "sandbox.mode",
            o.sandbox.map(|m| Scalar::Choice(m.as_str())),
        ),
        (
            "--mode",
            "permissions.mode",
            o.mode.map(|m| Scalar::Choice(m.as_str())),
        ),
        (
            "--tools-mode",
            "tools.mode",
            o.tools_mode.map(|m| Scalar::Choice(m.as_str())),
        ),
    ];
    for (flag, name, value) in values {
        part.name(name, flag.to_string());
        if let Some(v) = value {
            set(&mut part, name, v).map_err(|e| bad(flag, e))?;
        }
    }
    Ok(part)
}

/// Checks `value` against the key `name`'s rules and sets it in `part`.
fn set(part: &mut Part, name: &str, value: Scalar) -> Result<(), String> {
    let k = key(name).ok_or_else(|| format!("no configuration key {name}"))?;
    k.check(&value)?;
    part.set(k, value);
    Ok(())
}

/// The managed file's default location: `/etc/dsh/managed.toml`
/// (`C:\ProgramData\dsh\managed.toml` on Windows).
pub fn default_managed_path() -> PathBuf {
    if cfg!(windows) {
        PathBuf::from(r"C:\ProgramData\dsh\managed.toml")
    } else {
        PathBuf::from("/etc/dsh/managed.toml")
    }
}

/// The default user file: `$DSH_CONFIG_HOME/config.toml` when `env` sets
/// `DSH_CONFIG_HOME`, else `<platform config dir>/dsh/config.toml` (XDG on Linux and
/// macOS, `%APPDATA%` on Windows — this fallback consults the process's home
/// directory). `Ok(None)` when no home directory can be found; an error when
/// `DSH_CONFIG_HOME` is set but empty (an empty path is never "the default").
pub fn default_user_config(env: &BTreeMap<String, String>) -> Result<Option<PathBuf>, ConfigError> {
    if let Some(dir) = env_dir(env, "DSH_CONFIG_HOME")? {
        return Ok(Some(dir.join("config.toml")));
    }
    use etcetera::BaseStrategy as _;
    Ok(etcetera::choose_base_strategy()
        .ok()
        .map(|base| base.config_dir().join("dsh").join("config.toml")))
}

/// Claude Code's user directory: `CLAUDE_CONFIG_DIR` (as Claude Code reads it), else
/// `~/.claude`.
pub fn claude_config_dir(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    // A relative one would be read from wherever dsh runs — a repository's own `.claude`.
    match env.get("CLAUDE_CONFIG_DIR") {
        Some(dir) if Path::new(dir).is_absolute() => Some(PathBuf::from(dir)),
        _ => etcetera::home_dir().ok().map(|h| h.join(".claude")),
    }
}

/// A directory named by the environment variable `name`: `None` when it is unset, an
/// error when it is set but empty — a typo such as `DSH_HOME=$UNSET_VAR` must not send
/// dsh's state (or its configuration) quietly to the real default directory.
fn env_dir(env: &BTreeMap<String, String>, name: &str) -> Result<Option<PathBuf>, ConfigError> {
    match env.get(name) {
        None => Ok(None),
        Some(dir) if dir.is_empty() => Err(ConfigError::new(
            ErrorKind::InvalidValue,
            "is set but empty; give it a directory, or unset it to use the default",
        )
        .with_key(format!("environment variable {name}"))),
        Some(dir) => Ok(Some(PathBuf::from(dir))),
    }
}

/// Where dsh keeps its state (sessions, spill files, history): `DSH_HOME` when `env`
/// sets it, else `<platform data dir>/dsh`. An error when `DSH_HOME` is set but empty
/// or when no home directory can be found.
pub fn dsh_home(env: &BTreeMap<String, String>) -> Result<PathBuf, ConfigError> {
    if let Some(dir) = env_dir(env, "DSH_HOME")? {
        return Ok(dir);
    }
    use etcetera::BaseStrategy as _;
    let base = etcetera::choose_base_strategy().map_err(|_| {
        ConfigError::new(
            ErrorKind::InvalidValue,
            "is not set and no home directory was found for dsh's state; set it",
        )
        .with_key("environment variable DSH_HOME")
    })?;
    Ok(base.data_dir().join("dsh"))
}

/// The process environment as a map for [`LoadOptions::env`] (variables whose name or
/// value is not UTF-8 are left out).
pub fn process_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}
