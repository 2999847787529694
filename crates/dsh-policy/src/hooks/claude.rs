//! What a hook sees of a call: Claude Code's tool name and field names, so a hook written for
//! Claude Code reads what it expects (a guard on `Edit|Write` reading `tool_input.file_path`
//! must see the path, not nothing). dsh's own name and arguments go beside them
//! (`dsh_tool_name`, `dsh_tool_input`).
//!
//! | dsh | Claude Code | fields |
//! |-----|-------------|--------|
//! | `run_shell` | `Bash` | `command`, `timeout` (ms) |
//! | `read_file` | `Read` | `file_path`, `offset`, `limit` |
//! | `write_file` | `Write` | `file_path`, `content` |
//! | `edit_file` | `Edit` | `file_path`, `old_string`, `new_string`, `replace_all` |
//! | `grep` | `Grep` | `pattern`, `path`, `glob` |
//! | `find_files` | `Glob` | `pattern`, `path` |
//! | `list_dir` | `LS` | `path` |
//!
//! Paths are absolute, as Claude Code gives them: a relative argument is joined to the
//! workspace and its `.` and `..` folded (the string a guard compares; confinement still
//! judges the real path). Any other tool (`mcp__…`, `call_sub_agent`, `read_output`, …)
//! keeps its own name and arguments.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value, json};

/// Claude Code's name for dsh's tool `name`, if it has one.
pub fn claude_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "run_shell" => "Bash",
        "read_file" => "Read",
        "write_file" => "Write",
        "edit_file" => "Edit",
        "grep" => "Grep",
        "find_files" => "Glob",
        "list_dir" => "LS",
        _ => return None,
    })
}

/// Whether `name` is a tool name some Claude Code hook could mean by it: one of the names
/// above (either spelling).
pub fn known_name(name: &str) -> bool {
    claude_name(name).is_some()
        || ["Bash", "Read", "Write", "Edit", "Grep", "Glob", "LS"].contains(&name)
}

/// The call as a hook sees it: `(tool_name, tool_input)`.
pub fn claude_call(name: &str, args: &Value, workspace: &Path) -> (String, Value) {
    let Some(claude) = claude_name(name) else {
        return (name.to_owned(), args.clone());
    };
    let get = |key: &str| args.get(key).cloned();
    let abs = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .map(|p| Value::String(absolute(workspace, p).display().to_string()))
    };
    let mut out = Map::new();
    let mut put = |key: &str, v: Option<Value>| {
        if let Some(v) = v {
            out.insert(key.to_owned(), v);
        }
    };
    match name {
        "run_shell" => {
            put("command", get("command"));
            put(
                "timeout",
                args.get("timeout_s")
                    .and_then(Value::as_u64)
                    .map(|s| json!(s * 1000)),
            );
        }
        "read_file" => {
            put("file_path", abs("path"));
            put("offset", get("offset"));
            put("limit", get("limit"));
        }
        "write_file" => {
            put("file_path", abs("path"));
            put("content", get("content"));
        }
        "edit_file" => {
            put("file_path", abs("path"));
            put("old_string", get("old_string"));
            put("new_string", get("new_string"));
            put("replace_all", get("replace_all"));
        }
        "grep" => {
            put("pattern", get("pattern"));
            put("path", abs("path"));
            put("glob", get("include"));
        }
        "find_files" => {
            put("pattern", get("pattern"));
            put("path", abs("path"));
        }
        "list_dir" => put("path", abs("path")),
        _ => {}
    }
    (claude.to_owned(), Value::Object(out))
}

/// `path` joined to `workspace`, `.` and `..` folded without touching the file system.
fn absolute(workspace: &Path, path: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in workspace.join(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claude_guard_sees_the_fields_it_reads() {
        let ws = Path::new("/ws");
        let (name, input) = claude_call(
            "edit_file",
            &json!({"path": "src/../.env", "old_string": "a", "new_string": "b"}),
            ws,
        );
        assert_eq!(name, "Edit");
        assert_eq!(
            input,
            json!({"file_path": "/ws/.env", "old_string": "a", "new_string": "b"})
        );
        let (name, input) = claude_call("run_shell", &json!({"command": "ls", "timeout_s": 3}), ws);
        assert_eq!(
            (name.as_str(), input),
            ("Bash", json!({"command": "ls", "timeout": 3000}))
        );
        let (name, input) = claude_call("mcp__git__status", &json!({"x": 1}), ws);
        assert_eq!(
            (name.as_str(), input),
            ("mcp__git__status", json!({"x": 1}))
        );
        assert!(known_name("Bash") && known_name("read_file") && !known_name("WebFetch"));
    }
}
