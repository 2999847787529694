//! Plugins as plain data: each `plugins/NAME/plugin.toml` beside the user config file and
//! each `.dsh/plugins/NAME/plugin.toml` of a trusted project, read into [`Plugin`]s. A file
//! that cannot be used is a [`Refused`] plugin whose error names file:line:key; the session
//! offers the others. Nothing here runs anything (dsh-tools runs a plugin's command).
//!
//! ```toml
//! description = "Word counts"          # optional
//!
//! [[tools]]
//! name = "word_count"                  # [a-z][a-z0-9_]{0,63}, as the model and rules see it
//! description = "Counts the words of a file"
//! command = "python3 \"$DSH_PLUGIN_DIR/wc.py\""   # bash -c, in the workspace
//! read_only = true                     # a claim: it never lets a call run without a person
//! parallel_safe = true
//! paths_from = ["path"]                # arguments that are paths: confined, judged by rules
//! timeout_s = 30                       # optional, else [shell] timeout_s
//! input_schema = { type = "object", properties = { path = { type = "string" } }, required = ["path"] }
//! output_schema = { type = "object", properties = { words = { type = "integer" } }, required = ["words"] }
//! ```
//!
//! A schema may also be a string holding JSON. The output schema is required (SPEC P9).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use toml_edit::Document;

use crate::error::{ConfigError, ErrorKind, line_of, tidy_serde_message};
use crate::locate::{Seg, dotted, path_at, span_of};

/// The file a plugin folder holds.
pub const PLUGIN_TOML: &str = "plugin.toml";
/// A trusted project's plugin directory, relative to the workspace.
pub const PROJECT_PLUGINS: &str = ".dsh/plugins";
/// The most tools one plugin may declare.
const MAX_TOOLS: usize = 64;

/// Where a plugin was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginSource {
    /// `plugins/` beside the user config file: the user's own, no approval needed.
    User,
    /// `.dsh/plugins/` of a trusted project: runs only once a person approved it.
    Project,
}

impl PluginSource {
    pub fn as_str(self) -> &'static str {
        match self {
            PluginSource::User => "user",
            PluginSource::Project => "project",
        }
    }
}

/// One plugin folder, read.
#[derive(Clone, Debug, PartialEq)]
pub struct Plugin {
    /// The folder's name.
    pub name: String,
    /// The folder (canonical).
    pub dir: PathBuf,
    pub source: PluginSource,
    pub description: String,
    pub tools: Vec<PluginTool>,
}

impl Plugin {
    /// Its `plugin.toml`.
    pub fn file(&self) -> PathBuf {
        self.dir.join(PLUGIN_TOML)
    }
}

/// One tool a plugin declares.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginTool {
    pub name: String,
    pub description: String,
    /// Run with `bash -c` in the workspace, the arguments as JSON on stdin.
    pub command: String,
    pub input_schema: Value,
    pub output_schema: Value,
    /// The plugin's claim that the tool only reads (never proof).
    pub read_only: bool,
    pub parallel_safe: bool,
    /// The arguments that name paths (a string or a list of strings each).
    pub paths_from: Vec<String>,
    pub timeout_s: Option<u64>,
    /// The line of its `[[tools]]` entry, for messages.
    pub line: Option<usize>,
}

/// A plugin folder that could not be used, and why (one line naming file:line:key).
#[derive(Clone, Debug, PartialEq)]
pub struct Refused {
    pub name: String,
    pub dir: PathBuf,
    pub source: PluginSource,
    pub error: ConfigError,
}

/// What [`find`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Found {
    pub plugins: Vec<Plugin>,
    pub refused: Vec<Refused>,
    /// One-line notices (an untrusted project's plugins ignored).
    pub notices: Vec<String>,
}

/// The plugins of a session in `workspace`: the trusted project's first, then the user's
/// (`user_config`'s directory). A tool name declared twice refuses the later plugin.
pub fn find(workspace: &Path, trusted: bool, user_config: Option<&Path>) -> Found {
    let mut found = Found::default();
    let project = workspace.join(PROJECT_PLUGINS);
    let mut dirs = Vec::new();
    if project.is_dir() {
        if trusted {
            dirs.push((project, PluginSource::Project));
        } else {
            found.notices.push(format!(
                "{}: ignored plugins: this workspace is not trusted (run `dsh trust` to trust it)",
                project.display()
            ));
        }
    }
    if let Some(dir) = user_config.and_then(Path::parent) {
        dirs.push((dir.join("plugins"), PluginSource::User));
    }
    let mut seen_dirs = Vec::new();
    let mut names = BTreeSet::new();
    for (dir, source) in dirs {
        let Ok(real) = std::fs::canonicalize(&dir) else {
            continue;
        };
        // The same directory named twice (dsh run in the config directory) is read once.
        if seen_dirs.contains(&real) {
            continue;
        }
        seen_dirs.push(real.clone());
        let Ok(entries) = std::fs::read_dir(&real) else {
            continue;
        };
        let mut folders: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join(PLUGIN_TOML).is_file())
            .collect();
        folders.sort();
        for folder in folders {
            let name = folder
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let dir = std::fs::canonicalize(&folder).unwrap_or(folder);
            match read(&dir, &name, source) {
                Ok(plugin) => {
                    if let Some(t) = plugin.tools.iter().find(|t| names.contains(&t.name)) {
                        let error = ConfigError::new(
                            ErrorKind::InvalidValue,
                            format!(
                                "tool `{}` is already declared by another plugin; tool names must be unique",
                                t.name
                            ),
                        )
                        .in_file(&plugin.file())
                        .at_line(t.line)
                        .with_key("tools.name");
                        found.refused.push(Refused {
                            name,
                            dir,
                            source,
                            error,
                        });
                        continue;
                    }
                    names.extend(plugin.tools.iter().map(|t| t.name.clone()));
                    found.plugins.push(plugin);
                }
                Err(error) => found.refused.push(Refused {
                    name,
                    dir,
                    source,
                    error,
                }),
            }
        }
    }
    found
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlugin {
    #[serde(default)]
    description: String,
    #[serde(default)]
    tools: Vec<RawTool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: String,
    description: String,
    command: String,
    input_schema: Option<toml::Value>,
    output_schema: Option<toml::Value>,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    parallel_safe: bool,
    #[serde(default)]
    paths_from: Vec<String>,
    timeout_s: Option<u64>,
}

/// Whether `name` may name a plugin's tool: `[a-z][a-z0-9_]{0,63}`, not `mcp__…`.
pub fn plugin_tool_name_error(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64;
    if !ok {
        return Some(
            "a tool name is a lowercase letter, then up to 63 lowercase letters, digits or `_`",
        );
    }
    if name.starts_with("mcp__") {
        return Some("`mcp__` names are MCP servers' tools");
    }
    None
}

/// Reads `dir/plugin.toml`.
fn read(dir: &Path, name: &str, source: PluginSource) -> Result<Plugin, ConfigError> {
    let file = dir.join(PLUGIN_TOML);
    let text = crate::read::read_optional(&file)?
        .ok_or_else(|| ConfigError::new(ErrorKind::Io, "not found").in_file(&file))?;
    let doc = Document::parse(text.as_str()).map_err(|e| {
        ConfigError::new(
            ErrorKind::Syntax,
            format!("invalid TOML: {}", e.message().trim()),
        )
        .in_file(&file)
        .at_line(e.span().map(|s| line_of(&text, s.start)))
    })?;
    let raw: RawPlugin = toml::from_str(&text).map_err(|e| {
        let (kind, message) = tidy_serde_message(e.message());
        let (line, key) = match e.span() {
            Some(span) => (
                Some(line_of(&text, span.start)),
                dotted(&path_at(&doc, span.start)),
            ),
            None => (None, String::new()),
        };
        ConfigError::new(kind, message)
            .in_file(&file)
            .at_line(line)
            .with_key(key)
    })?;
    let err = |at: &[Seg], message: String| {
        ConfigError::new(ErrorKind::InvalidValue, message)
            .in_file(&file)
            .at_line(span_of(&doc, at).map(|s| line_of(&text, s.start)))
            .with_key(dotted(at))
    };
    let at = |i: usize, key: &str| vec![Seg::from("tools"), Seg::Index(i), Seg::from(key)];
    if raw.tools.is_empty() {
        return Err(err(
            &[],
            "declares no tools: add a [[tools]] table with name, description, command, input_schema and output_schema".to_owned(),
        ));
    }
    if raw.tools.len() > MAX_TOOLS {
        return Err(err(
            &[Seg::from("tools")],
            format!("declares {} tools; at most {MAX_TOOLS}", raw.tools.len()),
        ));
    }
    let mut tools = Vec::new();
    let mut names = BTreeSet::new();
    for (i, t) in raw.tools.into_iter().enumerate() {
        if let Some(why) = plugin_tool_name_error(&t.name) {
            return Err(err(&at(i, "name"), format!("`{}`: {why}", t.name)));
        }
        if !names.insert(t.name.clone()) {
            return Err(err(
                &at(i, "name"),
                format!("`{}` is declared twice", t.name),
            ));
        }
        if t.command.trim().is_empty() {
            return Err(err(&at(i, "command"), "is empty".to_owned()));
        }
        let schema = |key: &str, value: Option<toml::Value>| -> Result<Value, ConfigError> {
            let Some(value) = value else {
                return Err(err(
                    &[Seg::from("tools"), Seg::Index(i)],
                    format!(
                        "tool `{}` has no `{key}`: every tool declares its {} (SPEC P9)",
                        t.name,
                        if key == "output_schema" {
                            "output's JSON Schema, so what it answers is checked"
                        } else {
                            "arguments' JSON Schema"
                        }
                    ),
                ));
            };
            let json = match value {
                toml::Value::String(s) => serde_json::from_str(&s)
                    .map_err(|e| err(&at(i, key), format!("is not JSON: {e}")))?,
                other => serde_json::to_value(other)
                    .map_err(|e| err(&at(i, key), format!("cannot be read as JSON: {e}")))?,
            };
            if !json.is_object() {
                return Err(err(&at(i, key), "must be a JSON Schema object".to_owned()));
            }
            Ok(json)
        };
        let input_schema = schema("input_schema", t.input_schema)?;
        let output_schema = schema("output_schema", t.output_schema)?;
        if input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(err(
                &at(i, "input_schema"),
                "must describe an object (`type = \"object\"`): the arguments are a JSON object"
                    .to_owned(),
            ));
        }
        for (j, arg) in t.paths_from.iter().enumerate() {
            let declared = input_schema
                .get("properties")
                .and_then(|p| p.get(arg))
                .is_some();
            if !declared {
                let mut path = at(i, "paths_from");
                path.push(Seg::Index(j));
                return Err(err(
                    &path,
                    format!("`{arg}` is not a property of the input schema"),
                ));
            }
        }
        if t.timeout_s == Some(0) {
            return Err(err(&at(i, "timeout_s"), "must be at least 1".to_owned()));
        }
        tools.push(PluginTool {
            line: span_of(&doc, &[Seg::from("tools"), Seg::Index(i)])
                .map(|s| line_of(&text, s.start)),
            name: t.name,
            description: t.description,
            command: t.command,
            input_schema,
            output_schema,
            read_only: t.read_only,
            parallel_safe: t.parallel_safe,
            paths_from: t.paths_from,
            timeout_s: t.timeout_s,
        });
    }
    Ok(Plugin {
        name: name.to_owned(),
        dir: dir.to_path_buf(),
        source,
        description: raw.description,
        tools,
    })
}

/// What a person's approval of a project's plugin covers, as a digest: the workspace, the
/// plugin's name and the content of every file in its folder (`plugin.toml` and the scripts
/// beside it, at most [`MAX_FILES`] of them, a symlink by its target and the content it
/// leads to) and of every workspace file its commands name, so a repository (or an agent
/// writing the workspace) that changes what the plugin runs asks again. Code those files
/// load in turn is not covered, nor programs outside the workspace.
pub fn plugin_approval_digest(workspace: &Path, plugin: &Plugin) -> String {
    let mut files = serde_json::Map::new();
    let mut stack = vec![plugin.dir.clone()];
    let mut count = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(std::fs::DirEntry::path);
        for e in entries {
            let path = e.path();
            let rel = path
                .strip_prefix(&plugin.dir)
                .unwrap_or(&path)
                .display()
                .to_string();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            count += 1;
            if count > MAX_FILES {
                files.insert("(more)".to_owned(), "too many files".into());
                break;
            }
            let what = if meta.is_dir() {
                stack.push(path);
                "directory".to_owned()
            } else if meta.is_symlink() {
                // What the link leads to is what runs: its content is covered too.
                let target = std::fs::read_link(&path).unwrap_or_default();
                match std::fs::metadata(&path) {
                    Ok(m) if m.is_file() && m.len() <= MAX_COVERED_FILE => {
                        let content = std::fs::read(&path).map_or_else(
                            |e| format!("unreadable: {e}"),
                            |b| dsh_core::journal::sha256_hex(&b),
                        );
                        format!("symlink to {} holding {content}", target.display())
                    }
                    Ok(m) if m.is_file() => {
                        let mtime = m
                            .modified()
                            .ok()
                            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                            .map_or(0, |d| d.as_nanos());
                        format!(
                            "symlink to {} size {} modified {mtime}",
                            target.display(),
                            m.len()
                        )
                    }
                    _ => format!("symlink to {}", target.display()),
                }
            } else if meta.len() > MAX_COVERED_FILE {
                let mtime = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                format!("size {} modified {mtime}", meta.len())
            } else {
                match std::fs::read(&path) {
                    Ok(bytes) => dsh_core::journal::sha256_hex(&bytes),
                    Err(e) => format!("unreadable: {e}"),
                }
            };
            files.insert(rel, what.into());
        }
    }
    // The workspace files its commands name (`python3 scripts/tool.py`, with
    // `$DSH_PLUGIN_DIR` read as its folder), as a hook's approval covers them.
    let mut named = serde_json::Map::new();
    let dir = plugin.dir.display().to_string();
    for tool in &plugin.tools {
        let command = tool
            .command
            .replace("${DSH_PLUGIN_DIR}", &dir)
            .replace("$DSH_PLUGIN_DIR", &dir)
            .replace(['"', '\''], "");
        crate::approval::named_files(workspace, &command, &mut named);
    }
    let described = serde_json::json!({
        "workspace": workspace.display().to_string(),
        "plugin": plugin.name,
        "files": files,
        "named": named,
    });
    dsh_core::journal::json_digest(&described)
}

/// The most files of a plugin's folder an approval covers one by one.
const MAX_FILES: usize = 1000;
/// The largest file whose content an approval covers; a bigger one is covered by its size
/// and modification time.
const MAX_COVERED_FILE: u64 = 64 * 1024 * 1024;
