//! The keys whose value is a list or table of entries, each read by its own code (not the
//! key table's) and tagged with where it was written: permission rules (and the user file's
//! per-workspace sections of them), hooks, MCP servers and agent profiles.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dsh_core::Decision;
use serde::Deserialize;

use super::{Src, as_table, de, k, p, unknown};
use crate::config::{
    AgentProfile, Hook, HookEvent, Layer, McpLaunch, McpServer, OnError, Rule, Sourced,
};
use crate::error::{ConfigError, ErrorKind};
use crate::keys;
use crate::locate::Seg;
use crate::merge::{Part, WorkspacePart};

// ---- the entries' shapes as written ----

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
    env: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMcpServer {
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    cwd: Option<String>,
    url: Option<String>,
    headers_env: Option<BTreeMap<String, String>>,
    startup_timeout_s: Option<u64>,
    timeout_s: Option<u64>,
}

/// Why `name` cannot name an MCP server: its tools are `mcp__NAME__TOOL`, and rules name
/// them all as `mcp__NAME__*`, so a name must be plain and must not hold `__`.
pub(crate) fn mcp_server_name_error(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > 32 {
        return Some("a server name is 1 to 32 characters".to_owned());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Some(format!(
            "a server name may only hold letters, digits, '_' and '-' (found {c:?}): its tools are called mcp__NAME__TOOL"
        ));
    }
    // `mcp__x___t` starts `mcp__x__`: a server `x_` would have its tools named by every
    // rule and sub-agent list written `mcp__x__*` for server `x`.
    if name.ends_with('_') {
        return Some(
            "a server name must not end with '_': `mcp__NAME__*` of a server whose name is one '_' shorter would name its tools".to_owned(),
        );
    }
    if name.contains("__") {
        return Some(
            "a server name must not hold \"__\", which separates it from its tools' names"
                .to_owned(),
        );
    }
    None
}

/// A `[permissions]` table under `prefix` (empty for the file's own): its mode and rules.
pub(super) type PermissionsTable = (
    Option<(&'static keys::Key, keys::Scalar)>,
    Vec<Rule>,
    Vec<Rule>,
    Vec<Rule>,
);

pub(super) fn permissions(
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

pub(super) fn workspaces(
    src: &Src<'_>,
    part: &mut Part,
    table: toml::Table,
) -> Result<(), ConfigError> {
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

pub(super) fn hooks(
    src: &Src<'_>,
    part: &mut Part,
    at: &[Seg],
    event: HookEvent,
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
        let env = h.env.unwrap_or_default();
        for name in env.keys() {
            keys::check_env_name(name).map_err(|e| src.invalid(&field("env"), e))?;
        }
        part.hooks.push(Sourced {
            value: Hook {
                event,
                matcher: h.matcher,
                command: h.command,
                timeout_ms: h.timeout_ms.unwrap_or(crate::defaults::HOOK_TIMEOUT_MS),
                on_error: h.on_error.unwrap_or(OnError::Deny),
                env,
            },
            origin: src.origin(&here),
        });
    }
    Ok(())
}

pub(super) fn mcp(
    src: &Src<'_>,
    part: &mut Part,
    at: &[Seg],
    value: toml::Value,
) -> Result<(), ConfigError> {
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
        if let Some(why) = mcp_server_name_error(&name) {
            return Err(src.invalid(&here, why));
        }
        let launch = match (s.command, s.url) {
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(src.invalid(&field("command"), "must not be empty"));
                }
                if s.headers_env.is_some() {
                    return Err(src.invalid(
                        &field("headers_env"),
                        "a command server takes no headers (headers_env is for url servers)",
                    ));
                }
                McpLaunch::Stdio {
                    command,
                    args: s.args.unwrap_or_default(),
                    env: s.env.unwrap_or_default(),
                    cwd: s.cwd,
                }
            }
            (None, Some(url)) => {
                if s.args.is_some() || s.env.is_some() || s.cwd.is_some() {
                    return Err(src.invalid(
                        &field("url"),
                        "a url server takes no args, env or cwd (those are for command servers)",
                    ));
                }
                keys::check_url(&url).map_err(|e| src.invalid(&field("url"), e))?;
                let headers_env = s.headers_env.unwrap_or_default();
                for (header, var) in &headers_env {
                    let ok = !header.is_empty()
                        && header
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
                    if !ok {
                        return Err(src.invalid(
                            &field("headers_env"),
                            format!("{header:?} is not an HTTP header name"),
                        ));
                    }
                    keys::check_env_name(var).map_err(|e| {
                        src.invalid(&field("headers_env"), format!("{header}: {e}"))
                    })?;
                }
                McpLaunch::Http {
                    url,
                    headers_env,
                    headers: BTreeMap::new(),
                }
            }
            (Some(_), Some(_)) => {
                return Err(src.invalid(&here, "set either command or url, not both"));
            }
            (None, None) => return Err(src.invalid(&here, "needs a command or a url")),
        };
        let seconds = |key: &str, given: Option<u64>, default: u64| match given {
            Some(0) => Err(src.invalid(&field(key), "must be at least 1 (seconds)")),
            Some(n) => Ok(n),
            None => Ok(default),
        };
        let server = McpServer {
            launch,
            startup_timeout_s: seconds(
                "startup_timeout_s",
                s.startup_timeout_s,
                crate::defaults::MCP_STARTUP_TIMEOUT_S,
            )?,
            timeout_s: seconds("timeout_s", s.timeout_s, crate::defaults::MCP_TIMEOUT_S)?,
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

pub(super) fn agents(
    src: &Src<'_>,
    part: &mut Part,
    table: toml::Table,
) -> Result<(), ConfigError> {
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
