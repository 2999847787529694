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
    dsh_core::journal::sha256_hex(described.to_string().as_bytes())
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

/// What a person's approval of a project's hook covers, as a digest: the workspace, the
/// event, the matcher, the command line, its environment and the content of every workspace
/// file a word of the command names (`./scripts/check.sh`, `"$CLAUDE_PROJECT_DIR"/.claude/
/// hooks/x.py`, with `$CLAUDE_PROJECT_DIR` read as the workspace), so a changed script asks
/// again. Code those files load in turn is not covered; neither are the timeout and
/// `on_error`.
pub fn hook_approval_digest(workspace: &Path, hook: &Hook) -> String {
    let mut files = serde_json::Map::new();
    let root = workspace.display().to_string();
    let command = hook
        .command
        .replace("${CLAUDE_PROJECT_DIR}", &root)
        .replace("$CLAUDE_PROJECT_DIR", &root)
        .replace(['"', '\''], "");
    for word in command.split(|c: char| c.is_whitespace() || ";|&<>()=".contains(c)) {
        if word.is_empty() {
            continue;
        }
        if let Some(digest) = workspace_file_digest(workspace, &workspace.join(word)) {
            files.insert(word.to_owned(), digest.into());
        }
    }
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
    dsh_core::journal::sha256_hex(described.to_string().as_bytes())
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
}
