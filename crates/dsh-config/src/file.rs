//! Reading one config file: syntax, schema (unknown keys), value validation. The result
//! is a [`Part`]: one layer's settings, validated, each list entry tagged with its origin.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml_edit::Document;

use crate::config::{
    AgentProfile, Fsync, Hook, Layer, Limits, McpServer, OnError, Origin, PermissionMode, Price,
    Provider, Rule, SandboxMode, Sourced, ToolsMode, Unlisted,
};
use crate::error::{ConfigError, ErrorKind, line_of, tidy_serde_message};
use crate::locate::{Seg, dotted, path_at, span_of};
use crate::merge::{Part, WorkspacePart};

/// Config files larger than this are refused (a repository could point
/// `.dsh/config.toml` at something huge).
const MAX_FILE_BYTES: u64 = 1 << 20;

// ---- the file schema: every key optional, unknown keys are errors ----

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    model: Option<RawModel>,
    permissions: Option<RawPermissions>,
    shell: Option<RawShell>,
    guards: Option<RawGuards>,
    hooks: Option<RawHooks>,
    mcp: Option<RawMcp>,
    limits: Option<RawLimits>,
    journal: Option<RawJournal>,
    sandbox: Option<RawSandbox>,
    trust: Option<RawTrust>,
    workspaces: Option<BTreeMap<String, RawWorkspace>>,
    context: Option<RawContext>,
    tools: Option<RawTools>,
    verify: Option<RawVerify>,
    agents: Option<BTreeMap<String, RawAgent>>,
    plugins: Option<BTreeMap<String, toml::Table>>,
    skills: Option<BTreeMap<String, toml::Table>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrice {
    input: f64,
    cached_input: Option<f64>,
    output: f64,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawContext {
    keep_turns: Option<u64>,
    max_fraction: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTools {
    mode: Option<ToolsMode>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawVerify {
    command: Option<String>,
    max_rounds: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    description: Option<String>,
    tools: Option<Vec<String>>,
    system: Option<String>,
    model: Option<String>,
    max_steps: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawModel {
    provider: Option<Provider>,
    base_url: Option<String>,
    model: Option<String>,
    api_key_env: Option<String>,
    context_window: Option<u64>,
    price: Option<RawPrice>,
    idle_timeout_s: Option<u64>,
    max_retries: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPermissions {
    mode: Option<PermissionMode>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    ask: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawShell {
    #[serde(default)]
    safe: Vec<String>,
    #[serde(default)]
    confirm: Vec<String>,
    unlisted: Option<Unlisted>,
    timeout_s: Option<u64>,
    max_output_chars: Option<u64>,
    #[serde(default)]
    pass_env: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawGuards {
    #[serde(default)]
    protected: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawHooks {
    #[serde(default)]
    pre_tool_use: Vec<RawHook>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHook {
    matcher: Option<String>,
    command: String,
    timeout_ms: Option<u64>,
    on_error: Option<OnError>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMcp {
    #[serde(default)]
    servers: BTreeMap<String, RawMcpServer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMcpServer {
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    url: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_steps: Option<u64>,
    max_tokens: Option<u64>,
    max_parallel: Option<u64>,
    max_read_bytes: Option<u64>,
    max_results: Option<u64>,
    spill_chars: Option<u64>,
    max_cost_usd: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawJournal {
    fsync: Option<Fsync>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    mode: Option<SandboxMode>,
    allow_network: Option<bool>,
}

/// `[workspaces."<canonical path>"]`: settings for one workspace, from the user file.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawWorkspace {
    permissions: Option<RawPermissions>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTrust {
    #[serde(default)]
    workspaces: Vec<String>,
}

// ---- reading ----

/// Reads a config file. `Ok(None)` when it does not exist; an error when it exists
/// but is not a regular file, is too large, unreadable or not UTF-8.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, ConfigError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ConfigError::io(path, "cannot open", &e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| ConfigError::io(path, "cannot read", &e))?;
    if !meta.is_file() {
        return Err(ConfigError::new(ErrorKind::Io, "not a regular file").in_file(path));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ConfigError::io(path, "cannot read", &e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(
            ConfigError::new(ErrorKind::Io, format!("larger than {MAX_FILE_BYTES} bytes"))
                .in_file(path),
        );
    }
    String::from_utf8(bytes).map(Some).map_err(|e| {
        let line = line_of(
            &String::from_utf8_lossy(e.as_bytes()),
            e.utf8_error().valid_up_to(),
        );
        ConfigError::new(ErrorKind::Io, "not valid UTF-8")
            .in_file(path)
            .at_line(Some(line))
    })
}

/// The parsed text of one file, for locating keys.
struct Src<'a> {
    path: &'a Path,
    text: &'a str,
    doc: Document<&'a str>,
    layer: Layer,
}

impl Src<'_> {
    fn line(&self, path: &[Seg]) -> Option<usize> {
        span_of(&self.doc, path).map(|s| line_of(self.text, s.start))
    }

    fn err(&self, kind: ErrorKind, path: &[Seg], message: impl Into<String>) -> ConfigError {
        ConfigError::new(kind, message)
            .in_file(self.path)
            .at_line(self.line(path))
            .with_key(dotted(path))
    }

    fn invalid(&self, path: &[Seg], message: impl Into<String>) -> ConfigError {
        self.err(ErrorKind::InvalidValue, path, message)
    }

    fn origin(&self, path: &[Seg]) -> Origin {
        Origin {
            layer: self.layer,
            path: Some(self.path.to_path_buf()),
            line: self.line(path),
            key: Some(dotted(path)),
        }
    }
}

fn p<const N: usize>(segs: [Seg; N]) -> Vec<Seg> {
    segs.to_vec()
}

fn k(s: &str) -> Seg {
    Seg::Key(s.to_string())
}

/// Parses and validates one file's text as `layer`.
pub(crate) fn parse_part(path: &Path, text: &str, layer: Layer) -> Result<Part, ConfigError> {
    let doc = Document::parse(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        ConfigError::new(
            ErrorKind::Syntax,
            format!("invalid TOML: {}", e.message().trim()),
        )
        .in_file(path)
        .at_line(line)
    })?;
    let src = Src {
        path,
        text,
        doc,
        layer,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let (kind, message) = tidy_serde_message(e.message());
        let (line, key) = match e.span() {
            Some(span) => (
                Some(line_of(text, span.start)),
                dotted(&path_at(&src.doc, span.start)),
            ),
            None => (None, String::new()),
        };
        ConfigError::new(kind, message)
            .in_file(path)
            .at_line(line)
            .with_key(key)
    })?;
    convert(&src, raw)
}

fn convert(src: &Src<'_>, raw: RawFile) -> Result<Part, ConfigError> {
    let mut part = Part::new(src.layer, src.path.display().to_string());
    part.site.path = Some(src.path.to_path_buf());

    if let Some(m) = raw.model {
        if let Some(url) = &m.base_url {
            check_url(url).map_err(|e| src.invalid(&p([k("model"), k("base_url")]), e))?;
        }
        if let Some(name) = &m.api_key_env {
            check_env_name(name).map_err(|e| src.invalid(&p([k("model"), k("api_key_env")]), e))?;
        }
        if let Some(name) = &m.model
            && name.trim().is_empty()
        {
            return Err(src.invalid(&p([k("model"), k("model")]), "must not be empty"));
        }
        if let Some(w) = m.context_window {
            positive(w).map_err(|e| src.invalid(&p([k("model"), k("context_window")]), e))?;
        }
        if let Some(s) = m.idle_timeout_s {
            positive(s).map_err(|e| src.invalid(&p([k("model"), k("idle_timeout_s")]), e))?;
        }
        if let Some(n) = m.max_retries
            && n > 100
        {
            return Err(src.invalid(&p([k("model"), k("max_retries")]), "must be at most 100"));
        }
        if let Some(price) = &m.price {
            for (name, v) in [
                ("input", Some(price.input)),
                ("cached_input", price.cached_input),
                ("output", Some(price.output)),
            ] {
                if let Some(v) = v {
                    non_negative(v)
                        .map_err(|e| src.invalid(&p([k("model"), k("price"), k(name)]), e))?;
                }
            }
        }
        part.model.provider = m.provider;
        part.model.base_url = m.base_url;
        part.model.model = m.model;
        part.model.api_key_env = m.api_key_env;
        part.model.context_window = m.context_window;
        part.model.idle_timeout_s = m.idle_timeout_s;
        part.model.max_retries = m.max_retries;
        part.model.price = m.price.map(|p| Price {
            input: p.input,
            cached_input: p.cached_input,
            output: p.output,
        });
    }

    if let Some(perms) = raw.permissions {
        if perms.mode.is_some() {
            part.note_line(
                "permissions.mode",
                src.line(&p([k("permissions"), k("mode")])),
            );
        }
        part.mode = perms.mode;
        let (allow, ask, deny) = parse_rules(src, &[], perms)?;
        part.allow = allow;
        part.ask = ask;
        part.deny = deny;
    }

    if let Some(shell) = raw.shell {
        for (list, words) in [("safe", &shell.safe), ("confirm", &shell.confirm)] {
            for (i, w) in words.iter().enumerate() {
                if w.is_empty() || w.chars().any(char::is_whitespace) {
                    return Err(src.invalid(
                        &p([k("shell"), k(list), Seg::Index(i)]),
                        format!("{w:?} is not a command name (one word, no spaces)"),
                    ));
                }
            }
        }
        for (i, name) in shell.pass_env.iter().enumerate() {
            check_env_name(name)
                .map_err(|e| src.invalid(&p([k("shell"), k("pass_env"), Seg::Index(i)]), e))?;
        }
        for (name, value) in [
            ("timeout_s", shell.timeout_s),
            ("max_output_chars", shell.max_output_chars),
        ] {
            let at = p([k("shell"), k(name)]);
            if let Some(v) = value {
                positive(v).map_err(|e| src.invalid(&at, e))?;
                part.note_line(&format!("shell.{name}"), src.line(&at));
            }
        }
        if shell.unlisted.is_some() {
            part.note_line("shell.unlisted", src.line(&p([k("shell"), k("unlisted")])));
        }
        part.unlisted = shell.unlisted;
        part.safe = shell.safe;
        part.confirm = shell.confirm;
        part.pass_env = shell.pass_env;
        part.timeout_s = shell.timeout_s;
        part.max_output_chars = shell.max_output_chars;
    }

    if let Some(guards) = raw.guards {
        for (i, pattern) in guards.protected.into_iter().enumerate() {
            let at = p([k("guards"), k("protected"), Seg::Index(i)]);
            if pattern.trim().is_empty() {
                return Err(src.invalid(&at, "must not be empty"));
            }
            part.protected.push(Sourced {
                value: pattern,
                origin: src.origin(&at),
            });
        }
    }

    if let Some(hooks) = raw.hooks {
        for (i, h) in hooks.pre_tool_use.into_iter().enumerate() {
            let at = |key: &str| p([k("hooks"), k("pre_tool_use"), Seg::Index(i), k(key)]);
            if h.command.trim().is_empty() {
                return Err(src.invalid(&at("command"), "must not be empty"));
            }
            if let Some(m) = &h.matcher
                && m.trim().is_empty()
            {
                return Err(src.invalid(
                    &at("matcher"),
                    "must not be empty (leave it out to match every tool)",
                ));
            }
            if let Some(t) = h.timeout_ms {
                positive(t).map_err(|e| src.invalid(&at("timeout_ms"), e))?;
            }
            part.hooks.push(Sourced {
                value: Hook {
                    matcher: h.matcher,
                    command: h.command,
                    timeout_ms: h.timeout_ms.unwrap_or(crate::defaults::HOOK_TIMEOUT_MS),
                    on_error: h.on_error.unwrap_or(OnError::Deny),
                },
                origin: src.origin(&p([k("hooks"), k("pre_tool_use"), Seg::Index(i)])),
            });
        }
    }

    if let Some(mcp) = raw.mcp {
        for (name, s) in mcp.servers {
            let at = p([k("mcp"), k("servers"), k(&name)]);
            let server = match (s.command, s.url) {
                (Some(command), None) => {
                    if command.trim().is_empty() {
                        let mut c = at.clone();
                        c.push(k("command"));
                        return Err(src.invalid(&c, "must not be empty"));
                    }
                    McpServer::Stdio {
                        command,
                        args: s.args.unwrap_or_default(),
                        env: s.env.unwrap_or_default(),
                    }
                }
                (None, Some(url)) => {
                    let mut u = at.clone();
                    u.push(k("url"));
                    if s.args.is_some() || s.env.is_some() {
                        return Err(src.invalid(
                            &u,
                            "a url server takes no args or env (those are for command servers)",
                        ));
                    }
                    check_url(&url).map_err(|e| src.invalid(&u, e))?;
                    McpServer::Http { url }
                }
                (Some(_), Some(_)) => {
                    return Err(src.invalid(&at, "set either command or url, not both"));
                }
                (None, None) => return Err(src.invalid(&at, "needs a command or a url")),
            };
            part.mcp.push((
                name,
                Sourced {
                    value: server,
                    origin: src.origin(&at),
                },
            ));
        }
    }

    if let Some(l) = raw.limits {
        let values = [
            l.max_steps,
            l.max_tokens,
            l.max_parallel,
            l.max_read_bytes,
            l.max_results,
            l.spill_chars,
        ];
        for (i, (name, value)) in Limits::NAMES.iter().zip(values).enumerate() {
            if let Some(v) = value {
                let at = p([k("limits"), k(name)]);
                // `max_tokens = 0` turns the token budget off.
                if !Limits::zero_is_off(i) {
                    positive(v).map_err(|e| src.invalid(&at, e))?;
                }
                if let Some(bound) = Limits::upper_bound(i)
                    && v > bound
                {
                    return Err(src.invalid(
                        &at,
                        format!(
                            "{v} is more than {bound}, the most calls dsh runs at once (each running call holds open files); set {bound} or less"
                        ),
                    ));
                }
                part.note_line(&format!("limits.{name}"), src.line(&at));
                part.limits[i] = Some(v);
            }
        }
        if let Some(v) = l.max_cost_usd {
            let at = p([k("limits"), k("max_cost_usd")]);
            non_negative(v).map_err(|e| src.invalid(&at, e))?;
            part.note_line("limits.max_cost_usd", src.line(&at));
            part.max_cost_usd = Some(v);
        }
    }

    if let Some(c) = raw.context {
        if let Some(f) = c.max_fraction {
            let at = p([k("context"), k("max_fraction")]);
            if !(f > 0.0 && f <= 1.0) {
                return Err(src.invalid(&at, format!("{f} is not a fraction in (0, 1]")));
            }
            part.note_line("context.max_fraction", src.line(&at));
        }
        part.keep_turns = c.keep_turns;
        part.max_fraction = c.max_fraction;
    }

    if let Some(t) = raw.tools {
        part.tools_mode = t.mode;
    }

    if let Some(v) = raw.verify {
        if let Some(c) = &v.command
            && c.trim().is_empty()
        {
            return Err(src.invalid(&p([k("verify"), k("command")]), "must not be empty"));
        }
        if let Some(n) = v.max_rounds {
            positive(n).map_err(|e| src.invalid(&p([k("verify"), k("max_rounds")]), e))?;
        }
        part.verify_command = v.command;
        part.verify_max_rounds = v.max_rounds;
    }

    for (name, a) in raw.agents.unwrap_or_default() {
        let at = p([k("agents"), k(&name)]);
        if AgentProfile::BUILT_IN.contains(&name.as_str()) {
            return Err(src.invalid(
                &at,
                format!(
                    "{name:?} is a built-in agent profile and cannot be redefined (the built-in \
                     profiles are {}; choose another name)",
                    AgentProfile::BUILT_IN.join(", ")
                ),
            ));
        }
        let sub = |key: &str| p([k("agents"), k(&name), k(key)]);
        for (key, value) in [
            ("description", &a.description),
            ("system", &a.system),
            ("model", &a.model),
        ] {
            if let Some(v) = value
                && v.trim().is_empty()
            {
                return Err(src.invalid(&sub(key), "must not be empty"));
            }
        }
        let mut tools = a.tools.as_ref().map(|t| Vec::with_capacity(t.len()));
        for (i, tool) in a.tools.iter().flatten().enumerate() {
            let at = p([k("agents"), k(&name), k("tools"), Seg::Index(i)]);
            if tool.trim().is_empty() {
                return Err(src.invalid(&at, "must not be empty"));
            }
            if let Some(tools) = tools.as_mut() {
                tools.push(Sourced {
                    value: tool.clone(),
                    origin: src.origin(&at),
                });
            }
        }
        if let Some(n) = a.max_steps {
            positive(n).map_err(|e| src.invalid(&sub("max_steps"), e))?;
        }
        let profile = AgentProfile {
            description: a.description,
            tools,
            system: a.system,
            model: a.model,
            max_steps: a.max_steps,
        };
        part.agents.push((
            name,
            Sourced {
                value: profile,
                origin: src.origin(&at),
            },
        ));
    }

    for (table, entries, out) in [
        ("plugins", raw.plugins, &mut part.plugins),
        ("skills", raw.skills, &mut part.skills),
    ] {
        for (name, value) in entries.unwrap_or_default() {
            let origin = src.origin(&p([k(table), k(&name)]));
            out.push((name, Sourced { value, origin }));
        }
    }

    if let Some(j) = raw.journal {
        part.fsync = j.fsync;
    }

    if let Some(s) = raw.sandbox {
        for name in ["mode", "allow_network"] {
            part.note_line(
                &format!("sandbox.{name}"),
                src.line(&p([k("sandbox"), k(name)])),
            );
        }
        part.sandbox_mode = s.mode;
        part.allow_network = s.allow_network;
    }

    if let Some(trust) = raw.trust {
        if src.layer != Layer::User {
            return Err(src.err(
                ErrorKind::Trust,
                &p([k("trust")]),
                format!(
                    "only the user config can trust workspaces, not {} \
                     (run `dsh trust` in the workspace instead)",
                    if src.layer == Layer::Managed {
                        "the managed file"
                    } else {
                        "a project file"
                    }
                ),
            ));
        }
        for (i, w) in trust.workspaces.into_iter().enumerate() {
            if !Path::new(&w).is_absolute() {
                return Err(src.err(
                    ErrorKind::Trust,
                    &p([k("trust"), k("workspaces"), Seg::Index(i)]),
                    format!("{w:?} is not an absolute path"),
                ));
            }
            part.trust.push(PathBuf::from(w));
        }
    }

    if let Some(workspaces) = raw.workspaces {
        if src.layer != Layer::User && src.layer != Layer::Managed {
            return Err(src.err(
                ErrorKind::Trust,
                &p([k("workspaces")]),
                "only the user config can hold per-workspace settings, not a project file \
                 (put the rules in this file's [permissions] instead)",
            ));
        }
        for (name, ws) in workspaces {
            let at = p([k("workspaces"), k(&name)]);
            if !Path::new(&name).is_absolute() {
                return Err(src.err(
                    ErrorKind::Trust,
                    &at,
                    format!("{name:?} is not an absolute path"),
                ));
            }
            let Some(perms) = ws.permissions else {
                continue;
            };
            let mode = perms.mode;
            let (allow, ask, deny) = parse_rules(src, &at, perms)?;
            part.workspaces.push(WorkspacePart {
                path: PathBuf::from(name),
                mode,
                allow,
                ask,
                deny,
            });
        }
    }

    Ok(part)
}

/// `allow`, `ask`, `deny`.
type RuleLists = (Vec<Rule>, Vec<Rule>, Vec<Rule>);

/// The rules of a `permissions` table under `prefix` (empty for the top-level one), each
/// tagged with its origin (`workspaces."/w".permissions.allow[0]`).
fn parse_rules(
    src: &Src<'_>,
    prefix: &[Seg],
    perms: RawPermissions,
) -> Result<RuleLists, ConfigError> {
    let mut lists = (Vec::new(), Vec::new(), Vec::new());
    for (list, texts, out) in [
        ("allow", perms.allow, &mut lists.0),
        ("ask", perms.ask, &mut lists.1),
        ("deny", perms.deny, &mut lists.2),
    ] {
        for (i, text) in texts.iter().enumerate() {
            let mut at = prefix.to_vec();
            at.extend([k("permissions"), k(list), Seg::Index(i)]);
            let rule = Rule::parse(text, src.origin(&at))
                .map_err(|why| src.invalid(&at, format!("{text:?} is not a rule: {why}")))?;
            out.push(rule);
        }
    }
    Ok(lists)
}

pub(crate) fn positive(v: u64) -> Result<(), String> {
    if v == 0 {
        Err("must be a positive integer, not 0".to_string())
    } else {
        Ok(())
    }
}

pub(crate) fn non_negative(v: f64) -> Result<(), String> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(format!("{v} is not a number of 0 or more"))
    }
}

pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(host)
            if !host.is_empty() && !host.starts_with('/') && !url.contains(char::is_whitespace) =>
        {
            Ok(())
        }
        _ => Err(format!("{url:?} is not an http:// or https:// URL")),
    }
}

pub(crate) fn check_env_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!("{name:?} is not an environment variable name"))
    }
}
