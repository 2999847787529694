//! What a person's approval of a command a project names covers, as a digest recorded in the
//! user config's `[trust] approved` (DESIGN §5): an MCP server's launch or a hook's command
//! line, with the content of every workspace file they name, so a repository that changes
//! what it runs (a `git pull`) asks again.

use std::path::Path;

use crate::config::{Hook, McpLaunch, McpServer};

/// What a person's approval of a project's server covers, as a digest: the workspace, the
/// name and how it is launched — program, arguments, environment (with the variables it
/// names), working directory, or URL and headers — and the content of every file of the
/// workspace the program or an argument names (`./server`, `node server.js`), so a
/// repository that changes the program it runs asks again. Code those files load in turn is
/// not covered. Timeouts are not covered.
pub fn approval_digest(workspace: &Path, name: &str, server: &McpServer) -> String {
    let mut files = serde_json::Map::new();
    if let McpLaunch::Stdio {
        command, args, cwd, ..
    } = &server.launch
    {
        let base = workspace.join(cwd.as_deref().unwrap_or(""));
        for word in std::iter::once(command).chain(args) {
            if let Some(digest) = workspace_file_digest(workspace, &base.join(word)) {
                files.insert(word.clone(), digest.into());
            }
        }
    }
    let described = serde_json::json!({
        "workspace": workspace.display().to_string(),
        "mcp_server": name,
        "launch": server.launch,
        "files": files,
    });
    dsh_core::journal::json_digest(&described)
}

/// The largest file whose content an approval covers; a bigger one is covered by its size
/// and modification time.
const MAX_COVERED_FILE: u64 = 64 * 1024 * 1024;

/// The digest of `path`'s content when it is a regular file inside `workspace` (symlinks
/// resolved).
pub(crate) fn workspace_file_digest(workspace: &Path, path: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    let root = std::fs::canonicalize(workspace).ok()?;
    if !real.starts_with(&root) {
        return None;
    }
    let meta = std::fs::metadata(&real).ok()?;
    if !meta.is_file() {
        return None;
    }
    if meta.len() > MAX_COVERED_FILE {
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        return Some(format!("size {} modified {mtime}", meta.len()));
    }
    let bytes = std::fs::read(&real).ok()?;
    Some(dsh_core::journal::sha256_hex(&bytes))
}

/// The workspace files a command line (its variables already written out, quotes removed)
/// names, with their content digests, into `files`: each word tried from the workspace and
/// from each directory a `cd` names (`cd .claude/hooks && ./check.sh`).
pub(crate) fn named_files(
    workspace: &Path,
    command: &str,
    files: &mut serde_json::Map<String, serde_json::Value>,
) {
    let words: Vec<&str> = command
        .split(|c: char| c.is_whitespace() || ";|&<>()=`".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    let mut bases = vec![workspace.to_path_buf()];
    for pair in words.windows(2) {
        if pair[0] == "cd" {
            bases.push(workspace.join(pair[1]));
        }
    }
    for word in &words {
        for base in &bases {
            if let Some(digest) = workspace_file_digest(workspace, &base.join(word)) {
                let key = if base == workspace {
                    (*word).to_owned()
                } else {
                    base.join(word).display().to_string()
                };
                files.insert(key, digest.into());
            }
        }
    }
}

/// `command` with the ways hooks spell the workspace (`$CLAUDE_PROJECT_DIR`,
/// `${CLAUDE_PROJECT_DIR}`, `${CLAUDE_PROJECT_DIR:-…}`, `$PWD`, `$(git rev-parse
/// --show-toplevel)` — a hook runs in the workspace) written as `root`, and quotes removed.
fn workspace_spelled(command: &str, root: &str) -> String {
    let mut s = command.to_owned();
    for toplevel in [
        "$(git rev-parse --show-toplevel)",
        "`git rev-parse --show-toplevel`",
    ] {
        s = s.replace(toplevel, root);
    }
    // `${NAME:-default}`, `${NAME-default}` and `${NAME}` of the two variables.
    for name in ["CLAUDE_PROJECT_DIR", "PWD"] {
        let open = format!("${{{name}");
        while let Some(at) = s.find(&open) {
            let after = &s[at + open.len()..];
            let Some(end) = after.find('}') else { break };
            let rest = &after[..end];
            if !(rest.is_empty() || rest.starts_with(":-") || rest.starts_with('-')) {
                break;
            }
            s.replace_range(at..at + open.len() + end + 1, root);
        }
        s = s.replace(&format!("${name}"), root);
    }
    s.replace(['"', '\''], "")
}

/// What a person's approval of a project's hook covers, as a digest: the workspace, the
/// event, the matcher, the command line, its environment and the content of every workspace
/// file a word of the command names (`./scripts/check.sh`, `"$CLAUDE_PROJECT_DIR"/.claude/
/// hooks/x.py`, with `$CLAUDE_PROJECT_DIR` read as the workspace), so a changed script asks
/// again. Code those files load in turn is not covered; neither are the timeout and
/// `on_error`.
pub fn hook_approval_digest(workspace: &Path, hook: &Hook) -> String {
    let mut files = serde_json::Map::new();
    let root = workspace.display().to_string();
    named_files(
        workspace,
        &workspace_spelled(&hook.command, &root),
        &mut files,
    );
    let described = serde_json::json!({
        "workspace": root,
        "hook": hook.event.as_str(),
        "matcher": hook.matcher,
        "command": hook.command,
        "env": hook.env,
        // A repository that turns a guard's errors into "abstain" weakens it: asks again.
        "on_error": hook.on_error,
        "files": files,
    });
    dsh_core::journal::json_digest(&described)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HookEvent, OnError};

    #[test]
    fn a_hook_approval_covers_the_script_its_command_names() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(ws.join(".claude/hooks")).unwrap();
        std::fs::write(ws.join(".claude/hooks/guard.sh"), "exit 0").unwrap();
        let hook = Hook {
            event: HookEvent::PreToolUse,
            matcher: Some("Bash".into()),
            command: "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/guard.sh --strict".into(),
            timeout_ms: 1000,
            on_error: OnError::Deny,
            env: Default::default(),
        };
        let before = hook_approval_digest(&ws, &hook);
        assert_eq!(before, hook_approval_digest(&ws, &hook));
        std::fs::write(ws.join(".claude/hooks/guard.sh"), "exit 2").unwrap();
        let after = hook_approval_digest(&ws, &hook);
        assert_ne!(before, after, "a changed script asks again");
        let other = Hook {
            matcher: Some("Edit".into()),
            ..hook.clone()
        };
        assert_ne!(after, hook_approval_digest(&ws, &other));
        let longer = Hook {
            timeout_ms: 9000,
            ..hook.clone()
        };
        assert_eq!(after, hook_approval_digest(&ws, &longer));
    }

    #[test]
    fn the_ways_hooks_spell_the_workspace_are_read_as_it() {
        for spelled in [
            "\"$CLAUDE_PROJECT_DIR\"/x.sh",
            "${CLAUDE_PROJECT_DIR}/x.sh",
            "${CLAUDE_PROJECT_DIR:-.}/x.sh",
            "$PWD/x.sh",
            "\"$(git rev-parse --show-toplevel)/x.sh\"",
        ] {
            assert_eq!(workspace_spelled(spelled, "/ws"), "/ws/x.sh", "{spelled}");
        }
        assert_eq!(workspace_spelled("${OTHER:-x}", "/ws"), "${OTHER:-x}");
    }
}
