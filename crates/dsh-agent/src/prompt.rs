//! The system prompt: workspace facts, how to work with the gates, and the project memory
//! file. Tool schemas go in the request's tool list, not here.

use dsh_core::Workspace;

/// The project memory file names, in order of preference.
pub const MEMORY_FILES: [&str; 2] = ["AGENT.md", "AGENTS.md"];
/// The most of a memory file put into the prompt.
const MAX_MEMORY_BYTES: usize = 32 * 1024;

/// The system prompt for a session in `workspace`.
pub fn system_prompt(workspace: &Workspace) -> String {
    let mut p = format!(
        "You are dsh, a coding agent. You work in the workspace {root} on {os}; tool paths are \
         relative to it and cannot leave it.\n\
         Use the tools to look before you change: search with grep and find_files, read with \
         read_file, change with edit_file (exact text) or write_file. A file must be read in \
         this session before it can be changed, and re-read if it changed since.\n\
         Every call passes a pipeline of policies. A refused call says which gate refused it \
         and why: adapt instead of retrying it unchanged. Long outputs are saved and can be \
         paged with read_output.\n\
         When the task is done, reply with a short summary and no tool call.",
        root = workspace.root().display(),
        os = std::env::consts::OS,
    );
    if let Some((name, text)) = memory(workspace) {
        p.push_str(&format!("\n\nProject notes from {name}:\n{text}"));
    }
    p
}

/// The project memory file's text, read through the workspace's confinement.
pub fn memory(workspace: &Workspace) -> Option<(&'static str, String)> {
    use std::io::Read;
    MEMORY_FILES.iter().find_map(|name| {
        let (file, _) = workspace.open_read(name).ok()?;
        let mut bytes = Vec::new();
        file.take(MAX_MEMORY_BYTES as u64)
            .read_to_end(&mut bytes)
            .ok()?;
        Some((*name, String::from_utf8_lossy(&bytes).into_owned()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_file_is_loaded_agent_md_first() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        assert!(!system_prompt(&ws).contains("Project notes"));
        std::fs::write(dir.path().join("AGENTS.md"), "use tabs").unwrap();
        assert!(system_prompt(&ws).contains("Project notes from AGENTS.md:\nuse tabs"));
        std::fs::write(dir.path().join("AGENT.md"), "run make check").unwrap();
        let p = system_prompt(&ws);
        assert!(p.contains("from AGENT.md:\nrun make check"), "{p}");
        assert!(!p.contains("use tabs"));
    }

    #[cfg(unix)]
    #[test]
    fn a_memory_file_linking_outside_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "TOP SECRET").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("AGENT.md"))
            .unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        assert!(!system_prompt(&ws).contains("TOP SECRET"));
    }
}
