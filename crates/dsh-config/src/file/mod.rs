//! Reading one config file: syntax, schema (unknown keys), value validation. The result
//! is a [`Part`]: one layer's settings, validated, each list entry tagged with its origin.
//!
//! This file walks the file's tables and reads each key the key table declares; the keys
//! whose value is a list or table of entries with shapes of their own (rules, hooks, MCP
//! servers, agent profiles) are read in `entries.rs`.

mod entries;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml_edit::Document;

use crate::config::{HookEvent, Layer, Origin, Price, Sourced};
use crate::error::{ConfigError, ErrorKind, line_of, tidy_serde_message};
use crate::keys;
use crate::locate::{Seg, dotted, path_at, span_of};
use crate::merge::Part;
pub(crate) use entries::mcp_server_name_error;
use entries::{agents, hooks, mcp, permissions, workspaces};

/// `model.price` as written (the scalars are read by the key table).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrice {
    input: f64,
    cached_input: Option<f64>,
    output: f64,
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
            "skills" => {
                return Err(src.invalid(
                    &at,
                    "skills are not configured in tables: a skill is a folder with a SKILL.md, under .dsh/skills/ or .claude/skills/ of a trusted project or skills/ beside your user config",
                ));
            }
            "plugins" => {
                return Err(src.invalid(
                    &at,
                    "plugins are not configured in tables: a plugin is a folder with a plugin.toml, under plugins/ beside your user config or .dsh/plugins/ of a trusted project",
                ));
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
    if full == "hooks.pre_tool_use" {
        return Err(src.invalid(
            &at,
            "`[[hooks.pre_tool_use]]` is the old spelling: write `[[hooks.PreToolUse]]` (hook events are spelled as Claude Code spells them)",
        ));
    }
    let Some(key) = keys::key(&full) else {
        return Err(unknown(src, &at, &keys::keys_in(section)));
    };
    if key.is_scalar() {
        let v = key.read(&value).map_err(|e| src.invalid(&at, e))?;
        part.note_line(key.name, src.line(&at));
        part.set(key, v);
        return Ok(());
    }
    if section == "hooks"
        && let Ok(event) = name.parse::<HookEvent>()
    {
        return hooks(src, part, &at, event, value);
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
        "mcp.servers" => mcp(src, part, &at, value)?,
        "trust.approved" => {
            for (i, d) in words(value)?.into_iter().enumerate() {
                if d.len() != 64 || !d.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(src.err(
                        ErrorKind::Trust,
                        &p([k(section), k(name), Seg::Index(i)]),
                        format!("{d:?} is not an approval digest (`dsh mcp approve` writes them)"),
                    ));
                }
                part.approved.push(d);
            }
        }
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
