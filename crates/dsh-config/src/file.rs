//! Reading one config file: syntax, schema (unknown keys), value validation. The result
//! is a [`Part`]: one layer's settings, validated, each list entry tagged with its origin.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dsh_core::Decision;
use serde::Deserialize;
use toml_edit::Document;

use crate::config::{AgentProfile, Hook, Layer, McpServer, OnError, Origin, Price, Rule, Sourced};
use crate::error::{ConfigError, ErrorKind, line_of, tidy_serde_message};
use crate::keys;
use crate::locate::{Seg, dotted, path_at, span_of};
use crate::merge::{Part, WorkspacePart};

// ---- the shapes of the structured keys (scalars are read by the key table) ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrice {
    input: f64,
    cached_input: Option<f64>,
    output: f64,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHook {
    matcher: Option<String>,
    command: String,
    timeout_ms: Option<u64>,
    on_error: Option<OnError>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMcpServer {
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    url: Option<String>,
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
    let table: toml::Table = toml::from_str(text).map_err(|e| {
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
    convert(&src, table)
}

/// Reads a file's tables: each key is looked up in the key table ([`keys::KEYS`]) — a
/// scalar is read and checked there, a list or table by its own code below — and a key
/// the table does not know is an error naming what the table holds there.
fn convert(src: &Src<'_>, table: toml::Table) -> Result<Part, ConfigError> {
    let mut part = Part::new(src.layer, src.path.display().to_string());
    part.site.path = Some(src.path.to_path_buf());
    for (section, value) in table {
        let at = p([k(&section)]);
        if !keys::sections().contains(&section.as_str()) {
            return Err(unknown(src, &at, &keys::sections()));
        }
        let value = as_table(src, &at, value)?;
        match section.as_str() {
            "agents" => agents(src, &mut part, value)?,
            "plugins" | "skills" => {
                for (name, v) in value {
                    let at = p([k(&section), k(&name)]);
                    let table = as_table(src, &at, v)?;
                    let origin = src.origin(&at);
                    let entry = (
                        name,
                        Sourced {
                            value: table,
                            origin,
                        },
                    );
                    if section == "plugins" {
                        part.plugins.push(entry);
                    } else {
                        part.skills.push(entry);
                    }
                }
            }
            "workspaces" => workspaces(src, &mut part, value)?,
            "trust" if src.layer != Layer::User => {
                return Err(src.err(
                    ErrorKind::Trust,
                    &at,
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
            "permissions" => {
                let (mode, allow, ask, deny) = permissions(src, &[], value)?;
                if let Some((key, v)) = mode {
                    part.note_line(key.name, src.line(&p([k("permissions"), k("mode")])));
                    part.set(key, v);
                }
                part.allow = allow;
                part.ask = ask;
                part.deny = deny;
            }
            _ => {
                for (name, v) in value {
                    key(src, &mut part, &section, &name, v)?;
                }
            }
        }
    }
    Ok(part)
}

/// One key of table `section` (not `[permissions]`, `[workspaces]`, `[agents]`, …).
fn key(
    src: &Src<'_>,
    part: &mut Part,
    section: &str,
    name: &str,
    value: toml::Value,
) -> Result<(), ConfigError> {
    let at = p([k(section), k(name)]);
    let full = format!("{section}.{name}");
    let Some(key) = keys::key(&full) else {
        return Err(unknown(src, &at, &keys::keys_in(section)));
    };
    if key.is_scalar() {
        let v = key.read(&value).map_err(|e| src.invalid(&at, e))?;
        part.note_line(key.name, src.line(&at));
        part.set(key, v);
        return Ok(());
    }
    let words = |value: toml::Value| -> Result<Vec<String>, ConfigError> { de(src, &at, value) };
    match full.as_str() {
        "model.price" => {
            let price: RawPrice = de(src, &at, value)?;
            for (field, v) in [
                ("input", Some(price.input)),
                ("cached_input", price.cached_input),
                ("output", Some(price.output)),
            ] {
                if let Some(v) = v
                    && !(v.is_finite() && v >= 0.0)
                {
                    return Err(src.invalid(
                        &p([k(section), k(name), k(field)]),
                        format!("{v} is not a number of 0 or more"),
                    ));
                }
            }
            part.price = Some(Price {
                input: price.input,
                cached_input: price.cached_input,
                output: price.output,
            });
        }
        "shell.safe" | "shell.confirm" => {
            let list = words(value)?;
            for (i, w) in list.iter().enumerate() {
                if w.is_empty() || w.chars().any(char::is_whitespace) {
                    return Err(src.invalid(
                        &p([k(section), k(name), Seg::Index(i)]),
                        format!("{w:?} is not a command name (one word, no spaces)"),
                    ));
                }
            }
            if name == "safe" {
                part.safe = list;
            } else {
                part.confirm = list;
            }
        }
        "shell.pass_env" => {
            let list = words(value)?;
            for (i, v) in list.iter().enumerate() {
                keys::check_env_name(v)
                    .map_err(|e| src.invalid(&p([k(section), k(name), Seg::Index(i)]), e))?;
            }
            part.pass_env = list;
        }
        "guards.protected" => {
            for (i, pattern) in words(value)?.into_iter().enumerate() {
                let at = p([k(section), k(name), Seg::Index(i)]);
                if pattern.trim().is_empty() {
                    return Err(src.invalid(&at, "must not be empty"));
                }
                part.protected.push(Sourced {
                    value: pattern,
                    origin: src.origin(&at),
                });
            }
        }
        "hooks.pre_tool_use" => hooks(src, part, &at, value)?,
        "mcp.servers" => mcp(src, part, &at, value)?,
        "trust.workspaces" => {
            for (i, w) in words(value)?.into_iter().enumerate() {
                if !Path::new(&w).is_absolute() {
                    return Err(src.err(
                        ErrorKind::Trust,
                        &p([k(section), k(name), Seg::Index(i)]),
                        format!("{w:?} is not an absolute path"),
                    ));
                }
                part.trust.push(PathBuf::from(w));
            }
        }
        _ => return Err(unknown(src, &at, &keys::keys_in(section))),
    }
    Ok(())
}

/// A `[permissions]` table under `prefix` (empty for the file's own): its mode and rules.
type PermissionsTable = (
    Option<(&'static keys::Key, keys::Scalar)>,
    Vec<Rule>,
    Vec<Rule>,
    Vec<Rule>,
);

fn permissions(
    src: &Src<'_>,
    prefix: &[Seg],
    table: toml::Table,
) -> Result<PermissionsTable, ConfigError> {
    let mut out: PermissionsTable = (None, Vec::new(), Vec::new(), Vec::new());
    let mode_key = keys::key("permissions.mode");
    for (name, value) in table {
        let mut at = prefix.to_vec();
        at.extend([k("permissions"), k(&name)]);
        match (name.as_str(), mode_key) {
            ("mode", Some(key)) => {
                let v = key.read(&value).map_err(|e| src.invalid(&at, e))?;
                out.0 = Some((key, v));
            }
            ("allow" | "ask" | "deny", _) => {
                let decision = match name.as_str() {
                    "allow" => Decision::Allow,
                    "ask" => Decision::Ask,
                    _ => Decision::Deny,
                };
                let texts: Vec<String> = de(src, &at, value)?;
                let mut rules = Vec::with_capacity(texts.len());
                for (i, text) in texts.iter().enumerate() {
                    let mut at = at.clone();
                    at.push(Seg::Index(i));
                    let rule = Rule::parse(decision, text, src.origin(&at)).map_err(|why| {
                        src.invalid(&at, format!("{text:?} is not a rule: {why}"))
                    })?;
                    rules.push(rule);
                }
                match name.as_str() {
                    "allow" => out.1 = rules,
                    "ask" => out.2 = rules,
                    _ => out.3 = rules,
                }
            }
            _ => return Err(unknown(src, &at, &keys::keys_in("permissions"))),
        }
    }
    Ok(out)
}

fn workspaces(src: &Src<'_>, part: &mut Part, table: toml::Table) -> Result<(), ConfigError> {
    if src.layer != Layer::User && src.layer != Layer::Managed {
        return Err(src.err(
            ErrorKind::Trust,
            &p([k("workspaces")]),
            "only the user config can hold per-workspace settings, not a project file \
             (put the rules in this file's [permissions] instead)",
        ));
    }
    for (name, value) in table {
        let at = p([k("workspaces"), k(&name)]);
        if !Path::new(&name).is_absolute() {
            return Err(src.err(
                ErrorKind::Trust,
                &at,
                format!("{name:?} is not an absolute path"),
            ));
        }
        let mut section = as_table(src, &at, value)?;
        let perms = section.remove("permissions");
        if let Some((other, _)) = section.into_iter().next() {
            let mut at = at.clone();
            at.push(k(&other));
            return Err(unknown(src, &at, &["permissions"]));
        }
        let Some(perms) = perms else { continue };
        let mut perms_at = at.clone();
        perms_at.push(k("permissions"));
        let perms = as_table(src, &perms_at, perms)?;
        let (mode, allow, ask, deny) = permissions(src, &at, perms)?;
        part.workspaces.push(WorkspacePart {
            path: PathBuf::from(name),
            mode: mode.map(|m| m.1),
            allow,
            ask,
            deny,
        });
    }
    Ok(())
}

fn hooks(
    src: &Src<'_>,
    part: &mut Part,
    at: &[Seg],
    value: toml::Value,
) -> Result<(), ConfigError> {
    let entries: Vec<toml::Value> = de(src, at, value)?;
    for (i, entry) in entries.into_iter().enumerate() {
        let mut here = at.to_vec();
        here.push(Seg::Index(i));
        let h: RawHook = de(src, &here, entry)?;
        let field = |key: &str| {
            let mut f = here.clone();
            f.push(k(key));
            f
        };
        if h.command.trim().is_empty() {
            return Err(src.invalid(&field("command"), "must not be empty"));
        }
        if let Some(m) = &h.matcher
            && m.trim().is_empty()
        {
            return Err(src.invalid(
                &field("matcher"),
                "must not be empty (leave it out to match every tool)",
            ));
        }
        if h.timeout_ms == Some(0) {
            return Err(src.invalid(&field("timeout_ms"), "must be a positive integer, not 0"));
        }
        part.hooks.push(Sourced {
            value: Hook {
                matcher: h.matcher,
                command: h.command,
                timeout_ms: h.timeout_ms.unwrap_or(crate::defaults::HOOK_TIMEOUT_MS),
                on_error: h.on_error.unwrap_or(OnError::Deny),
            },
            origin: src.origin(&here),
        });
    }
    Ok(())
}

fn mcp(src: &Src<'_>, part: &mut Part, at: &[Seg], value: toml::Value) -> Result<(), ConfigError> {
    let servers = as_table(src, at, value)?;
    for (name, value) in servers {
        let mut here = at.to_vec();
        here.push(k(&name));
        let s: RawMcpServer = de(src, &here, value)?;
        let field = |key: &str| {
            let mut f = here.clone();
            f.push(k(key));
            f
        };
        let server = match (s.command, s.url) {
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(src.invalid(&field("command"), "must not be empty"));
                }
                McpServer::Stdio {
                    command,
                    args: s.args.unwrap_or_default(),
                    env: s.env.unwrap_or_default(),
                }
            }
            (None, Some(url)) => {
                if s.args.is_some() || s.env.is_some() {
                    return Err(src.invalid(
                        &field("url"),
                        "a url server takes no args or env (those are for command servers)",
                    ));
                }
                keys::check_url(&url).map_err(|e| src.invalid(&field("url"), e))?;
                McpServer::Http { url }
            }
            (Some(_), Some(_)) => {
                return Err(src.invalid(&here, "set either command or url, not both"));
            }
            (None, None) => return Err(src.invalid(&here, "needs a command or a url")),
        };
        part.mcp.push((
            name,
            Sourced {
                value: server,
                origin: src.origin(&here),
            },
        ));
    }
    Ok(())
}

fn agents(src: &Src<'_>, part: &mut Part, table: toml::Table) -> Result<(), ConfigError> {
    for (name, value) in table {
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
        let a: RawAgent = de(src, &at, value)?;
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
        if a.max_steps == Some(0) {
            return Err(src.invalid(&sub("max_steps"), "must be a positive integer, not 0"));
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
    Ok(())
}

/// `value` as a table, or an error at `at`.
fn as_table(src: &Src<'_>, at: &[Seg], value: toml::Value) -> Result<toml::Table, ConfigError> {
    match value {
        toml::Value::Table(t) => Ok(t),
        other => Err(src.invalid(
            at,
            format!("invalid type: {}, expected a table", other.type_str()),
        )),
    }
}

/// The error for a key that the table `at` names does not hold, listing what it holds.
fn unknown(src: &Src<'_>, at: &[Seg], expected: &[&str]) -> ConfigError {
    let text = if expected.is_empty() {
        "unknown key (this table takes no keys)".to_owned()
    } else {
        format!("unknown key (expected one of: {})", expected.join(", "))
    };
    src.err(ErrorKind::UnknownKey, at, text)
}

/// Deserializes a structured key's value, reporting a problem at `at` — or at the field
/// the problem names (`hooks.pre_tool_use[1].when`).
fn de<T: serde::de::DeserializeOwned>(
    src: &Src<'_>,
    at: &[Seg],
    value: toml::Value,
) -> Result<T, ConfigError> {
    T::deserialize(value).map_err(|e| {
        let raw = e.message().to_owned();
        let (kind, message) = tidy_serde_message(&raw);
        let mut here = at.to_vec();
        if let Some(field) = raw
            .strip_prefix("unknown field `")
            .and_then(|r| r.split('`').next())
        {
            here.push(k(field));
        }
        src.err(kind, &here, message)
    })
}
