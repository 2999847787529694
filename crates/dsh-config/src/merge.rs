//! Layering: applying each layer's [`Part`] on top of the built-in defaults, with the
//! managed file's locks and an untrusted project's tighten-only treatment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{AgentProfile, Config, Hook, Layer, McpServer, Price, Provider, Rule, Sourced};
use crate::keys::{Fixed, Group, KEYS, Key, Managed, Scalar, Trust};

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
    pub mode: Option<Scalar>,
    pub allow: Vec<Rule>,
    pub ask: Vec<Rule>,
    pub deny: Vec<Rule>,
}

/// One layer's validated settings.
#[derive(Debug)]
pub(crate) struct Part {
    pub layer: Layer,
    pub site: Site,
    /// The scalar keys this layer sets, by name ([`KEYS`]).
    pub scalars: BTreeMap<&'static str, Scalar>,
    pub price: Option<Price>,
    pub allow: Vec<Rule>,
    pub ask: Vec<Rule>,
    pub deny: Vec<Rule>,
    pub safe: Vec<String>,
    pub confirm: Vec<String>,
    pub pass_env: Vec<String>,
    pub protected: Vec<Sourced<String>>,
    pub hooks: Vec<Sourced<Hook>>,
    pub mcp: Vec<(String, Sourced<McpServer>)>,
    pub trust: Vec<PathBuf>,
    /// `[trust] approved`: digests of approved project commands.
    pub approved: Vec<String>,
    /// `[workspaces."<path>".permissions]` sections, for [`Part::select_workspace`].
    pub workspaces: Vec<WorkspacePart>,
    pub agents: Vec<(String, Sourced<AgentProfile>)>,
}

impl Part {
    pub(crate) fn new(layer: Layer, label: String) -> Self {
        Part {
            layer,
            site: Site {
                label,
                ..Site::default()
            },
            scalars: BTreeMap::new(),
            price: None,
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
            safe: Vec::new(),
            confirm: Vec::new(),
            pass_env: Vec::new(),
            protected: Vec::new(),
            hooks: Vec::new(),
            mcp: Vec::new(),
            trust: Vec::new(),
            approved: Vec::new(),
            workspaces: Vec::new(),
            agents: Vec::new(),
        }
    }

    /// Sets the scalar key `key` (a name in [`KEYS`]) to `value`.
    pub(crate) fn set(&mut self, key: &'static Key, value: Scalar) {
        self.scalars.insert(key.name, value);
    }

    /// The value this layer sets for `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Scalar> {
        self.scalars.get(name)
    }

    /// Appends the rules of every `[workspaces."<path>"]` section naming `workspace`
    /// (canonical; matched exactly, like trust) after this file's own `[permissions]`,
    /// and drops the other sections.
    pub(crate) fn select_workspace(&mut self, workspace: &Path) {
        for ws in std::mem::take(&mut self.workspaces) {
            if crate::trust::names_workspace(&ws.path, workspace) {
                if let Some(mode) = ws.mode {
                    self.scalars.insert("permissions.mode", mode);
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
    /// The lists and tables so far (its scalars are stored from `values` at the end).
    config: Config,
    /// Each scalar key's value so far, by its index in [`KEYS`] (`None`: unset).
    values: Vec<Option<Scalar>>,
    price: Option<Price>,
    /// Managed ceilings, by key: the value and where the managed file set it.
    ceilings: BTreeMap<&'static str, (Scalar, String)>,
    /// Managed locks (the tightest value set there), by key: where.
    locks: BTreeMap<&'static str, String>,
    notices: Vec<String>,
    /// Some layer above the defaults named the provider or the endpoint.
    model_explicit: bool,
}

impl Builder {
    pub(crate) fn new() -> Self {
        Builder {
            config: Config::default(),
            values: KEYS.iter().map(|k| k.default.map(Fixed::scalar)).collect(),
            price: None,
            ceilings: BTreeMap::new(),
            locks: BTreeMap::new(),
            notices: Vec::new(),
            model_explicit: false,
        }
    }

    /// The provider as the layers applied so far leave it.
    pub(crate) fn provider(&self) -> Provider {
        match self.value("model.provider") {
            Some(Scalar::Choice(p)) => p.parse().unwrap_or(Provider::Openai),
            _ => Provider::Openai,
        }
    }

    /// Whether a layer above the defaults named `model.provider` or `model.base_url`.
    pub(crate) fn model_explicit(&self) -> bool {
        self.model_explicit
    }

    fn value(&self, name: &str) -> Option<&Scalar> {
        let i = KEYS.iter().position(|k| k.name == name)?;
        self.values[i].as_ref()
    }

    pub(crate) fn apply(&mut self, mut part: Part) {
        let site = std::mem::take(&mut part.site);
        let untrusted = part.layer == Layer::UntrustedProject;
        // Kinds of settings ignored from an untrusted project: one notice each.
        let mut ignored: Vec<String> = Vec::new();

        if part.layer != Layer::Default
            && (part.get("model.provider").is_some() || part.get("model.base_url").is_some())
            && !untrusted
        {
            self.model_explicit = true;
        }
        // A different provider starts from its own endpoint, model and key variable.
        if !untrusted
            && let Some(p) = part.get("model.provider")
            && self.value("model.provider") != Some(p)
        {
            for (i, k) in KEYS.iter().enumerate() {
                if matches!(
                    k.name,
                    "model.base_url" | "model.model" | "model.api_key_env"
                ) {
                    self.values[i] = None;
                }
            }
        }
        self.apply_scalars(&part, &site, &mut ignored);
        if part.price.is_some() && !untrusted {
            self.price = part.price;
        }

        // [permissions]: lists accumulate; allow never from an untrusted project.
        let perms = &mut self.config.permissions;
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

        // [hooks], [mcp], [agents.*]: they run programs or choose
        // what the model is told, so never from an untrusted project.
        if untrusted {
            if !part.hooks.is_empty() {
                ignored.push(format!("hooks ({})", count(part.hooks.len(), "hook")));
            }
            for (table, names) in [
                (
                    "mcp.servers",
                    part.mcp.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
                ),
                (
                    "agents",
                    part.agents.iter().map(|(n, _)| n.as_str()).collect(),
                ),
            ] {
                if !names.is_empty() {
                    ignored.push(format!("{table} ({})", names.join(", ")));
                }
            }
        } else {
            self.config.hooks.entries.extend(part.hooks);
            self.config.mcp.servers.extend(part.mcp);
            self.config.agents.extend(part.agents);
        }

        for what in ignored {
            self.notices.push(format!(
                "{}: ignored {what}: this workspace is not trusted (run `dsh trust` to trust it)",
                site.label
            ));
        }
    }

    /// Applies the layer's scalar keys by the table's rules (see [`Trust`], [`Managed`]),
    /// collecting an untrusted project's ignored ones into one notice per kind.
    fn apply_scalars(&mut self, part: &Part, site: &Site, ignored: &mut Vec<String>) {
        let untrusted = part.layer == Layer::UntrustedProject;
        let managed = part.layer == Layer::Managed;
        let mut model = Vec::new();
        let mut raised = Vec::new();
        let mut tables = Vec::new();
        for (i, k) in KEYS.iter().enumerate() {
            if k.name == "model.price" && untrusted && part.price.is_some() {
                model.push(k.name.to_owned());
            }
            let Some(v) = part.get(k.name) else { continue };
            let current = self.values[i].as_ref();
            if untrusted {
                let applies = match k.trust {
                    Trust::Ignored => false,
                    Trust::Applied => true,
                    Trust::Tightens => current.is_none_or(|c| !k.looser(v, c)),
                    Trust::Only(only) => *v == Scalar::Choice(only),
                };
                if applies {
                    self.values[i] = Some(v.clone());
                    continue;
                }
                match k.group {
                    Group::Model => model.push(k.name.to_owned()),
                    Group::Raise => raised.push(format!("{} = {v}", k.name)),
                    Group::Table => {
                        let table = format!("[{}]", k.name.split('.').next().unwrap_or(k.name));
                        if !tables.contains(&table) {
                            tables.push(table);
                        }
                    }
                    Group::Alone => ignored.push(format!("{} = {v}", k.name)),
                }
                continue;
            }
            let (layers, why) = k.loosest_not_from;
            if layers.contains(&part.layer) && k.is_loosest(v) && current != Some(v) {
                self.notices
                    .push(format!("{} = {v} ignored: {why}", site.at(k.name)));
                continue;
            }
            match k.managed {
                Managed::Plain => self.values[i] = Some(v.clone()),
                Managed::Ceiling => {
                    match self.ceilings.get(k.name) {
                        Some((ceiling, from)) if k.looser(v, ceiling) => {
                            self.notices.push(format!(
                                "{} = {v} exceeds the managed ceiling {ceiling} ({from}); using {ceiling}",
                                site.at(k.name)
                            ));
                            self.values[i] = Some(ceiling.clone());
                        }
                        _ => self.values[i] = Some(v.clone()),
                    }
                    if managed {
                        self.ceilings.insert(k.name, (v.clone(), site.at(k.name)));
                    }
                }
                Managed::LockAtTightest(why) => {
                    if let Some(lock) = self.locks.get(k.name)
                        && current.is_some_and(|c| k.looser(v, c))
                    {
                        self.notices
                            .push(format!("{} = {v} ignored: {why} ({lock})", site.at(k.name)));
                        continue;
                    }
                    self.values[i] = Some(v.clone());
                    if managed && k.is_tightest(v) {
                        self.locks.insert(k.name, site.at(k.name));
                    }
                }
            }
        }
        if !model.is_empty() {
            ignored.push(format!(
                "{} (a repository cannot choose the model endpoint, model or API key)",
                model.join(", ")
            ));
        }
        if !raised.is_empty() {
            ignored.push(format!("limit increases ({})", raised.join(", ")));
        }
        ignored.extend(tables);
    }

    pub(crate) fn finish(self) -> (Config, Vec<String>) {
        let mut config = self.config;
        for (k, v) in KEYS.iter().zip(&self.values) {
            k.store(&mut config, v.as_ref());
        }
        config.model.price = self.price;
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
