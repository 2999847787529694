//! Layering: applying each layer's [`Part`] on top of the built-in defaults, with the
//! managed file's locks and an untrusted project's tighten-only treatment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{
    AgentProfile, Config, Fsync, Hook, Layer, Limits, McpServer, ModelConfig, PermissionMode,
    Price, Provider, Rule, SandboxMode, Sourced, ToolsMode, Unlisted,
};

/// `[model]` settings of one layer (each optional).
#[derive(Debug, Default, Clone)]
pub(crate) struct ModelPart {
    pub provider: Option<Provider>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub context_window: Option<u64>,
    pub price: Option<Price>,
    pub idle_timeout_s: Option<u64>,
    pub max_retries: Option<u64>,
}

impl ModelPart {
    fn keys(&self) -> Vec<&'static str> {
        let mut keys = Vec::new();
        for (set, key) in [
            (self.provider.is_some(), "model.provider"),
            (self.base_url.is_some(), "model.base_url"),
            (self.model.is_some(), "model.model"),
            (self.api_key_env.is_some(), "model.api_key_env"),
            (self.context_window.is_some(), "model.context_window"),
            (self.price.is_some(), "model.price"),
            (self.idle_timeout_s.is_some(), "model.idle_timeout_s"),
            (self.max_retries.is_some(), "model.max_retries"),
        ] {
            if set {
                keys.push(key);
            }
        }
        keys
    }
}

/// Where a layer's settings come from, for notices.
#[derive(Debug, Default)]
pub(crate) struct Site {
    /// How notices name this source when no better name is known.
    pub label: String,
    pub path: Option<PathBuf>,
    /// Dotted key → line, for notices about scalar settings.
    pub lines: BTreeMap<String, usize>,
    /// Dotted key → how to name it instead (`--max-steps`).
    pub names: BTreeMap<String, String>,
}

impl Site {
    /// `"/x/config.toml:7: limits.max_steps"`, `"--max-steps"`.
    fn at(&self, key: &str) -> String {
        if let Some(name) = self.names.get(key) {
            return name.clone();
        }
        match (&self.path, self.lines.get(key)) {
            (Some(p), Some(line)) => format!("{}:{line}: {key}", p.display()),
            (Some(p), None) => format!("{}: {key}", p.display()),
            (None, _) => format!("{}: {key}", self.label),
        }
    }
}

/// The permission rules of one `[workspaces."<path>"]` section.
#[derive(Debug)]
pub(crate) struct WorkspacePart {
    /// The section's key: an absolute path.
    pub path: PathBuf,
    /// `[workspaces."<path>".permissions] mode`: this workspace's mode, over the file's own.
    pub mode: Option<PermissionMode>,
    pub allow: Vec<Rule>,
    pub ask: Vec<Rule>,
    pub deny: Vec<Rule>,
}

/// One layer's validated settings.
#[derive(Debug)]
pub(crate) struct Part {
    pub layer: Layer,
    pub site: Site,
    pub model: ModelPart,
    pub mode: Option<PermissionMode>,
    pub allow: Vec<Rule>,
    pub ask: Vec<Rule>,
    pub deny: Vec<Rule>,
    pub safe: Vec<String>,
    pub confirm: Vec<String>,
    pub unlisted: Option<Unlisted>,
    pub pass_env: Vec<String>,
    pub timeout_s: Option<u64>,
    pub max_output_chars: Option<u64>,
    pub protected: Vec<Sourced<String>>,
    pub hooks: Vec<Sourced<Hook>>,
    pub mcp: Vec<(String, Sourced<McpServer>)>,
    pub limits: [Option<u64>; 6],
    pub fsync: Option<Fsync>,
    pub sandbox_mode: Option<SandboxMode>,
    pub allow_network: Option<bool>,
    pub trust: Vec<PathBuf>,
    /// `[workspaces."<path>".permissions]` sections, for [`Part::select_workspace`].
    pub workspaces: Vec<WorkspacePart>,
    pub max_cost_usd: Option<f64>,
    pub keep_turns: Option<u64>,
    pub max_fraction: Option<f64>,
    pub tools_mode: Option<ToolsMode>,
    pub verify_command: Option<String>,
    pub verify_max_rounds: Option<u64>,
    pub agents: Vec<(String, Sourced<AgentProfile>)>,
    pub plugins: Vec<(String, Sourced<toml::Table>)>,
    pub skills: Vec<(String, Sourced<toml::Table>)>,
}

impl Part {
    pub(crate) fn new(layer: Layer, label: String) -> Self {
        Part {
            layer,
            site: Site {
                label,
                ..Site::default()
            },
            model: ModelPart::default(),
            mode: None,
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
            safe: Vec::new(),
            confirm: Vec::new(),
            unlisted: None,
            pass_env: Vec::new(),
            timeout_s: None,
            max_output_chars: None,
            protected: Vec::new(),
            hooks: Vec::new(),
            mcp: Vec::new(),
            limits: [None; 6],
            fsync: None,
            sandbox_mode: None,
            allow_network: None,
            trust: Vec::new(),
            workspaces: Vec::new(),
            max_cost_usd: None,
            keep_turns: None,
            max_fraction: None,
            tools_mode: None,
            verify_command: None,
            verify_max_rounds: None,
            agents: Vec::new(),
            plugins: Vec::new(),
            skills: Vec::new(),
        }
    }

    /// Appends the rules of every `[workspaces."<path>"]` section naming `workspace`
    /// (canonical; matched exactly, like trust) after this file's own `[permissions]`,
    /// and drops the other sections.
    pub(crate) fn select_workspace(&mut self, workspace: &Path) {
        for ws in std::mem::take(&mut self.workspaces) {
            if crate::trust::names_workspace(&ws.path, workspace) {
                if ws.mode.is_some() {
                    self.mode = ws.mode;
                }
                self.allow.extend(ws.allow);
                self.ask.extend(ws.ask);
                self.deny.extend(ws.deny);
            }
        }
    }

    pub(crate) fn note_line(&mut self, key: &str, line: Option<usize>) {
        if let Some(line) = line {
            self.site.lines.insert(key.to_string(), line);
        }
    }

    pub(crate) fn name(&mut self, key: &str, name: String) {
        self.site.names.insert(key.to_string(), name);
    }
}

/// Accumulates layers in order.
#[derive(Debug)]
pub(crate) struct Builder {
    config: Config,
    provider: Provider,
    base_url: Option<String>,
    model_name: Option<String>,
    api_key_env: Option<String>,
    context_window: Option<u64>,
    price: Option<Price>,
    idle_timeout_s: Option<u64>,
    max_retries: Option<u64>,
    /// Managed ceilings per limit: (value, where the managed file set it).
    ceilings: [Option<(u64, String)>; 6],
    /// Set when the managed file requires the sandbox.
    sandbox_lock: Option<String>,
    /// Set when the managed file forbids the network.
    network_lock: Option<String>,
    notices: Vec<String>,
    /// Some layer above the defaults named the provider or the endpoint.
    model_explicit: bool,
}

impl Builder {
    pub(crate) fn new() -> Self {
        Builder {
            config: Config::default(),
            provider: Provider::Openai,
            base_url: None,
            model_name: None,
            api_key_env: None,
            context_window: None,
            price: None,
            idle_timeout_s: None,
            max_retries: None,
            ceilings: Default::default(),
            sandbox_lock: None,
            network_lock: None,
            notices: Vec::new(),
            model_explicit: false,
        }
    }

    /// The provider as the layers applied so far leave it.
    pub(crate) fn provider(&self) -> Provider {
        self.provider
    }

    /// Whether a layer above the defaults named `model.provider` or `model.base_url`.
    pub(crate) fn model_explicit(&self) -> bool {
        self.model_explicit
    }

    pub(crate) fn apply(&mut self, mut part: Part) {
        let site = std::mem::take(&mut part.site);
        let untrusted = part.layer == Layer::UntrustedProject;
        let managed = part.layer == Layer::Managed;
        // Kinds of settings ignored from an untrusted project: one notice each.
        let mut ignored: Vec<String> = Vec::new();
        let mut raised: Vec<String> = Vec::new();

        // [model]
        let model_keys = part.model.keys();
        if untrusted {
            if !model_keys.is_empty() {
                ignored.push(format!(
                    "{} (a repository cannot choose the model endpoint, model or API key)",
                    model_keys.join(", ")
                ));
            }
        } else {
            let m = &part.model;
            if part.layer != Layer::Default && (m.provider.is_some() || m.base_url.is_some()) {
                self.model_explicit = true;
            }
            if let Some(p) = m.provider {
                if p != self.provider {
                    // A different provider starts from its own defaults.
                    self.base_url = None;
                    self.model_name = None;
                    self.api_key_env = None;
                }
                self.provider = p;
            }
            if m.base_url.is_some() {
                self.base_url.clone_from(&m.base_url);
            }
            if m.model.is_some() {
                self.model_name.clone_from(&m.model);
            }
            if m.api_key_env.is_some() {
                self.api_key_env.clone_from(&m.api_key_env);
            }
            if m.context_window.is_some() {
                self.context_window = m.context_window;
            }
            if m.price.is_some() {
                self.price = m.price;
            }
            // Transport settings, not the endpoint's: kept across a provider switch.
            if m.idle_timeout_s.is_some() {
                self.idle_timeout_s = m.idle_timeout_s;
            }
            if m.max_retries.is_some() {
                self.max_retries = m.max_retries;
            }
        }

        // [permissions] mode: from an untrusted project only `read-only` (it tightens);
        // `yolo` only from a flag or the user's own file.
        let perms = &mut self.config.permissions;
        if let Some(mode) = part.mode {
            if untrusted && mode != PermissionMode::ReadOnly {
                ignored.push(format!("permissions.mode = \"{mode}\""));
            } else if mode == PermissionMode::Yolo
                && matches!(part.layer, Layer::Project | Layer::Managed)
            {
                self.notices.push(format!(
                    "{} = \"yolo\" ignored: only a flag (--mode yolo, --yolo) or your user configuration can approve every ask",
                    site.at("permissions.mode")
                ));
            } else {
                perms.mode = mode;
            }
        }
        // [permissions]: lists accumulate; allow never from an untrusted project.
        if untrusted {
            if !part.allow.is_empty() {
                ignored.push(format!(
                    "permissions.allow ({})",
                    count(part.allow.len(), "rule")
                ));
            }
        } else {
            perms.allow.extend(part.allow);
        }
        perms.ask.extend(part.ask);
        perms.deny.extend(part.deny);

        // [shell] lists.
        let shell = &mut self.config.shell;
        if untrusted {
            let widening: Vec<String> = part
                .safe
                .into_iter()
                .filter(|c| !shell.safe.contains(c))
                .collect();
            if !widening.is_empty() {
                ignored.push(format!("shell.safe additions ({})", widening.join(", ")));
            }
            // Moving a command from safe to confirm tightens; adding one that was
            // refused (in neither list) widens.
            let mut widening = Vec::new();
            for c in part.confirm {
                if shell.safe.contains(&c) {
                    shell.safe.retain(|s| s != &c);
                    shell.confirm.push(c);
                } else if !shell.confirm.contains(&c) {
                    widening.push(c);
                }
            }
            if !widening.is_empty() {
                ignored.push(format!("shell.confirm additions ({})", widening.join(", ")));
            }
            if !part.pass_env.is_empty() {
                ignored.push(format!("shell.pass_env ({})", part.pass_env.join(", ")));
            }
        } else {
            for c in part.safe {
                shell.confirm.retain(|s| s != &c);
                if !shell.safe.contains(&c) {
                    shell.safe.push(c);
                }
            }
            for c in part.confirm {
                shell.safe.retain(|s| s != &c);
                if !shell.confirm.contains(&c) {
                    shell.confirm.push(c);
                }
            }
            for v in part.pass_env {
                if !shell.pass_env.contains(&v) {
                    shell.pass_env.push(v);
                }
            }
        }
        // `unlisted = "deny"` tightens and applies from any layer; `"ask"` loosens a "deny"
        // only from a trusted one.
        if let Some(u) = part.unlisted {
            if u == Unlisted::Deny || !untrusted || shell.unlisted == Unlisted::Ask {
                shell.unlisted = u;
            } else {
                ignored.push(format!("shell.unlisted = \"{u}\""));
            }
        }
        for (key, value, slot) in [
            ("shell.timeout_s", part.timeout_s, &mut shell.timeout_s),
            (
                "shell.max_output_chars",
                part.max_output_chars,
                &mut shell.max_output_chars,
            ),
        ] {
            let Some(v) = value else { continue };
            if untrusted && v > *slot {
                raised.push(format!("{key} = {v}"));
            } else {
                *slot = v;
            }
        }

        // [guards]: accumulate, from every layer.
        for p in part.protected {
            let known = self
                .config
                .guards
                .protected
                .iter()
                .any(|q| q.value == p.value);
            if !known {
                self.config.guards.protected.push(p);
            }
        }

        // [hooks], [mcp]: they run programs, so never from an untrusted project.
        if untrusted {
            if !part.hooks.is_empty() {
                ignored.push(format!(
                    "hooks.pre_tool_use ({})",
                    count(part.hooks.len(), "hook")
                ));
            }
            if !part.mcp.is_empty() {
                let names: Vec<&str> = part.mcp.iter().map(|(n, _)| n.as_str()).collect();
                ignored.push(format!("mcp.servers ({})", names.join(", ")));
            }
        } else {
            self.config.hooks.pre_tool_use.extend(part.hooks);
            self.config.mcp.servers.extend(part.mcp);
        }

        // [limits]: untrusted may only lower; managed values are ceilings.
        let slots = self.config.limits.slots();
        for (i, slot) in slots.into_iter().enumerate() {
            let Some(v) = part.limits[i] else { continue };
            let key = format!("limits.{}", Limits::NAMES[i]);
            let loose = |x: u64| Limits::looseness(i, x);
            if untrusted {
                if loose(v) > loose(*slot) {
                    raised.push(format!("{key} = {v}"));
                } else {
                    *slot = v;
                }
                continue;
            }
            match &self.ceilings[i] {
                Some((ceiling, from)) if loose(v) > loose(*ceiling) => {
                    self.notices.push(format!(
                        "{} = {v} exceeds the managed ceiling {ceiling} ({from}); using {ceiling}",
                        site.at(&key)
                    ));
                    *slot = *ceiling;
                }
                _ => *slot = v,
            }
            if managed {
                self.ceilings[i] = Some((v, site.at(&key)));
            }
        }
        // `max_cost_usd`: 0 is off, i.e. no budget at all, so it is the loosest value.
        if let Some(v) = part.max_cost_usd {
            let slot = &mut self.config.limits.max_cost_usd;
            let looser = |a: f64, b: f64| b != 0.0 && (a == 0.0 || a > b);
            if untrusted && looser(v, *slot) {
                raised.push(format!("limits.max_cost_usd = {v}"));
            } else {
                *slot = v;
            }
        }
        // [context]: `keep_turns` applies from every layer; a larger `max_fraction` only
        // from a trusted one.
        if let Some(n) = part.keep_turns {
            self.config.context.keep_turns = n;
        }
        if let Some(f) = part.max_fraction {
            if untrusted && f > self.config.context.max_fraction {
                raised.push(format!("context.max_fraction = {f}"));
            } else {
                self.config.context.max_fraction = f;
            }
        }
        if !raised.is_empty() {
            ignored.push(format!("limit increases ({})", raised.join(", ")));
        }

        // [tools], [verify], [agents.*], [plugins.*], [skills.*]: they choose what runs and
        // what the model is told, so never from an untrusted project.
        if untrusted {
            if let Some(mode) = part.tools_mode {
                ignored.push(format!("tools.mode = \"{mode}\""));
            }
            if part.verify_command.is_some() || part.verify_max_rounds.is_some() {
                ignored.push("[verify]".to_string());
            }
            for (table, names) in [
                (
                    "agents",
                    part.agents
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>(),
                ),
                (
                    "plugins",
                    part.plugins.iter().map(|(n, _)| n.as_str()).collect(),
                ),
                (
                    "skills",
                    part.skills.iter().map(|(n, _)| n.as_str()).collect(),
                ),
            ] {
                if !names.is_empty() {
                    ignored.push(format!("{table} ({})", names.join(", ")));
                }
            }
        } else {
            if let Some(mode) = part.tools_mode {
                self.config.tools.mode = mode;
            }
            if part.verify_command.is_some() {
                self.config.verify.command = part.verify_command;
            }
            if let Some(n) = part.verify_max_rounds {
                self.config.verify.max_rounds = n;
            }
            self.config.agents.extend(part.agents);
            self.config.plugins.extend(part.plugins);
            self.config.skills.extend(part.skills);
        }

        // [journal]
        if let Some(f) = part.fsync {
            if untrusted {
                ignored.push(format!("journal.fsync = \"{f}\""));
            } else {
                self.config.journal.fsync = f;
            }
        }

        // [sandbox]
        let sandbox = &mut self.config.sandbox;
        if let Some(mode) = part.sandbox_mode {
            if mode.strictness() >= sandbox.mode.strictness() {
                sandbox.mode = mode;
            } else if untrusted {
                ignored.push(format!("sandbox.mode = \"{mode}\""));
            } else if let Some(lock) = &self.sandbox_lock {
                self.notices.push(format!(
                    "{} = \"{mode}\" ignored: the managed config requires the sandbox ({lock})",
                    site.at("sandbox.mode")
                ));
            } else {
                sandbox.mode = mode;
            }
            if managed && mode == SandboxMode::Required {
                self.sandbox_lock = Some(site.at("sandbox.mode"));
            }
        }
        if let Some(net) = part.allow_network {
            if !net || sandbox.allow_network {
                sandbox.allow_network = net;
            } else if untrusted {
                ignored.push("sandbox.allow_network = true".to_string());
            } else if part.layer == Layer::Project {
                // Lifting the network ban is the user's own decision (issue 4): even a trusted
                // repository cannot make it for them.
                self.notices.push(format!(
                    "{} = true ignored: only your user configuration can allow the network",
                    site.at("sandbox.allow_network")
                ));
            } else if let Some(lock) = &self.network_lock {
                self.notices.push(format!(
                    "{} = true ignored: the managed config forbids the network ({lock})",
                    site.at("sandbox.allow_network")
                ));
            } else {
                sandbox.allow_network = net;
            }
            if managed && !net {
                self.network_lock = Some(site.at("sandbox.allow_network"));
            }
        }

        for what in ignored {
            self.notices.push(format!(
                "{}: ignored {what}: this workspace is not trusted (run `dsh trust` to trust it)",
                site.label
            ));
        }
    }

    pub(crate) fn finish(self) -> (Config, Vec<String>) {
        let mut config = self.config;
        config.model = ModelConfig {
            provider: self.provider,
            base_url: self
                .base_url
                .unwrap_or_else(|| self.provider.default_base_url().to_string()),
            model: self.model_name,
            api_key_env: self
                .api_key_env
                .or_else(|| self.provider.default_api_key_env().map(str::to_string)),
            context_window: self.context_window,
            price: self.price,
            idle_timeout_s: self
                .idle_timeout_s
                .unwrap_or(crate::defaults::MODEL_IDLE_TIMEOUT_S),
            max_retries: self
                .max_retries
                .unwrap_or(crate::defaults::MODEL_MAX_RETRIES),
        };
        (config, self.notices)
    }
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
