//! `skill{name, file?}`: the Agent Skills a session has (folders with a `SKILL.md`; see
//! [`catalog`]). The system prompt lists each skill's name and description; the model loads
//! one on demand: without `file`, its `SKILL.md` body and the files of its folder; with
//! `file`, one of those files. What it reads is confined to the skill's folder (no absolute
//! paths, no `..`, no symlink out). Read-only. A skill inside the workspace declares the file
//! it reads, so path rules judge it like any read.

pub mod catalog;
pub mod front_matter;

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    Access, ExecContext, Parallel, Tool, ToolError, ToolErrorKind, ToolOutput, ToolSpec, Workspace,
};
use serde::Deserialize;
use serde_json::{Value, json};

pub use catalog::{Catalog, Skill, SkillSource};

use crate::{blocking, parse_args};

/// The tool's name.
pub const SKILL: &str = "skill";
/// The largest file of a skill's folder it returns.
pub const MAX_FILE: u64 = 1024 * 1024;
/// How many of a folder's files it lists.
const MAX_LISTED: usize = 200;

/// The `skill` tool over a session's skills.
#[derive(Debug)]
pub struct SkillTool {
    catalog: Arc<Catalog>,
    workspace: Arc<Workspace>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    name: String,
    file: Option<String>,
}

impl SkillTool {
    pub fn new(catalog: Arc<Catalog>, workspace: Arc<Workspace>) -> Self {
        SkillTool { catalog, workspace }
    }
}

/// `file` inside `dir`, or why not.
fn inside(dir: &Path, file: &str) -> Result<PathBuf, ToolError> {
    let refused = |why: &str| {
        ToolError::new(
            ToolErrorKind::InvalidArgs,
            format!("{}: {why}", dsh_core::quote_capped(file)),
        )
    };
    let rel = Path::new(file);
    if rel.is_absolute() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(refused(
            "give a path inside the skill's folder as listed (no absolute path, no `..`)",
        ));
    }
    let real = std::fs::canonicalize(dir.join(rel)).map_err(|e| {
        ToolError::new(
            ToolErrorKind::NotFound,
            format!("{}: {e}", dsh_core::quote_capped(file)),
        )
    })?;
    if !real.starts_with(dir) {
        return Err(refused("it leads out of the skill's folder"));
    }
    Ok(real)
}

/// The files of `dir`, relative, hidden ones and `SKILL.md` left out.
fn files_of(dir: &Path) -> (Vec<String>, bool) {
    let mut out = Vec::new();
    let mut more = false;
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for e in entries {
            let name = e.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(kind) = e.file_type() else { continue };
            let path = e.path();
            if kind.is_dir() && depth < 4 {
                stack.push((path, depth + 1));
            } else if kind.is_file() {
                let rel = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                if rel != "SKILL.md" {
                    if out.len() >= MAX_LISTED {
                        more = true;
                        break;
                    }
                    out.push(rel);
                }
            }
        }
    }
    out.sort();
    (out, more)
}

#[async_trait]
impl Tool for SkillTool {
    fn spec(&self) -> ToolSpec {
        let names: Vec<&str> = self
            .catalog
            .skills()
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        ToolSpec::new(
            SKILL,
            "Load a skill by name: its instructions and the files of its folder. Give `file` to \
             read one of those files.",
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": names},
                "file": {"type": "string", "description": "a file of the skill's folder, as listed"}
            },
            "required": ["name"],
            "additionalProperties": false
        }))
        .output_schema(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "source": {"type": "string"},
                "file": {"type": ["string", "null"]},
                "files": {"type": "array", "items": {"type": "string"}},
                "chars": {"type": "integer", "minimum": 0}
            },
            "required": ["name", "source", "file", "files", "chars"],
            "additionalProperties": false
        }))
        .read_only(true)
        .parallel(Parallel::Always)
        .idempotent(true)
    }

    fn accesses(&self, args: &Value) -> Vec<Access> {
        let name = args.get("name").and_then(Value::as_str).unwrap_or("");
        let Some(skill) = self.catalog.get(name) else {
            return Vec::new();
        };
        if !skill.dir.starts_with(self.workspace.root()) {
            return Vec::new();
        }
        let file = args
            .get("file")
            .and_then(Value::as_str)
            .unwrap_or("SKILL.md");
        vec![Access::Read {
            path: skill.dir.join(file),
        }]
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(SKILL, args)?;
        let Some(skill) = self.catalog.get(&args.name).cloned() else {
            return Err(ToolError::new(
                ToolErrorKind::NotFound,
                format!(
                    "there is no skill named {}; the skills are: {}",
                    dsh_core::quote_capped(&args.name),
                    self.catalog
                        .skills()
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        blocking(&cx.cancel, move |_| {
            let (files, more) = files_of(&skill.dir);
            let value = |file: Option<&str>, chars: usize| {
                json!({"name": skill.name, "source": skill.source, "file": file,
                       "files": files, "chars": chars})
            };
            if let Some(file) = &args.file {
                let path = inside(&skill.dir, file)?;
                let meta = std::fs::metadata(&path).map_err(|e| ToolError::failed(e.to_string()))?;
                if !meta.is_file() {
                    return Err(ToolError::new(
                        ToolErrorKind::InvalidArgs,
                        format!("{} is not a file", dsh_core::quote_capped(file)),
                    ));
                }
                if meta.len() > MAX_FILE {
                    return Err(ToolError::failed(format!(
                        "{} is {} bytes, more than the {} KiB a skill's file may be",
                        dsh_core::quote_capped(file),
                        meta.len(),
                        MAX_FILE / 1024
                    )));
                }
                let bytes = std::fs::read(&path).map_err(|e| ToolError::failed(e.to_string()))?;
                let text = match String::from_utf8(bytes) {
                    Ok(t) => t,
                    Err(e) => format!(
                        "[{} is not text ({} bytes); it is not shown]",
                        file,
                        e.as_bytes().len()
                    ),
                };
                let chars = text.chars().count();
                return Ok(ToolOutput::new(text, value(Some(file), chars)));
            }
            let md = skill.dir.join("SKILL.md");
            let text = std::fs::read_to_string(&md).map_err(|e| ToolError::failed(e.to_string()))?;
            let body = front_matter::parse(&text)
                .map(|fm| text[fm.body_at..].trim().to_owned())
                .map_err(|why| ToolError::failed(format!("its SKILL.md changed: {why}")))?;
            let mut content = format!("# skill {} ({})\n\n{body}\n", skill.name, skill.source);
            if !files.is_empty() {
                content.push_str(&format!(
                    "\nFiles in its folder (read one with skill{{\"name\": \"{}\", \"file\": …}}):\n",
                    skill.name
                ));
                for f in &files {
                    content.push_str(&format!("- {f}\n"));
                }
                if more {
                    content.push_str(&format!("- … (only the first {MAX_LISTED} are listed)\n"));
                }
            }
            let chars = content.chars().count();
            Ok(ToolOutput::new(content, value(None, chars)))
        })
        .await
    }
}
