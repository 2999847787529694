//! The system prompt: workspace facts, how to work with the gates, and the project memory
//! file. Tool schemas go in the request's tool list, not here.

use dsh_core::Workspace;

/// The project memory files, in the order they go into the prompt: dsh's own (written only
/// through the pipeline, each change approved: see `dsh_policy::MemoryPolicy`), then the
/// files other agents read.
pub const MEMORY_FILES: [&str; 4] = [
    dsh_policy::MEMORY_FILE,
    dsh_policy::PROMPT_FILES[0],
    dsh_policy::PROMPT_FILES[1],
    dsh_policy::PROMPT_FILES[2],
];
/// The most of one memory file put into the prompt.
const MAX_MEMORY_BYTES: usize = 32 * 1024;

/// The system prompt for a session in `workspace`. It is built once per agent, so requests
/// keep one stable prefix; a memory file changed during the session counts from the next.
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
    push_memory(&mut p, workspace);
    p
}

/// The Code Mode part of an agent's system prompt, when its model is offered `run_code` (the
/// `code` and `both` tools modes, or a profile naming it): how a program calls tools, and the
/// TypeScript declarations of the tools its programs may call, from their input and output
/// schemas.
pub fn code_mode(session: &crate::Session, tools: &dsh_core::ToolSet) -> Option<String> {
    if !tools.offered().contains(dsh_code::RUN_CODE) {
        return None;
    }
    let specs = session.pipeline.specs(tools);
    let callable = specs.iter().filter(|s| !s.reserved).map(|s| &**s);
    Some(format!(
        "\n\nCode Mode: call run_code with a JavaScript program (the body of an async \
         function) to make many tool calls in one step: `const r = await tools.NAME(args)` \
         gives the tool's output value, calls made together (`Promise.all`) run together \
         where the tools allow, a refused or failed call throws a ToolCallError (kind, gate, \
         policy, reason), `console.log` output comes back with the result, and `return` gives \
         the result's value. Every call still passes the policies, and a refusal stands \
         whatever the program does next. The program has no files, network or timers of its \
         own. The tools a program may call:\n```ts\n{}```",
        dsh_code::declarations(callable)
    ))
}

/// The skills part of an agent's system prompt, when its model is offered `skill`: each
/// skill's name and description (the body is loaded on demand).
pub fn skills(session: &crate::Session, tools: &dsh_core::ToolSet) -> Option<String> {
    if !tools.offered().contains(dsh_tools::SKILL) {
        return None;
    }
    let skills = session.skills();
    if skills.is_empty() {
        return None;
    }
    let mut p = String::from(
        "\n\nSkills: instructions for particular tasks, loaded on demand. When a task matches a \
         skill's description, call skill{\"name\": …} first and follow what it says.",
    );
    for s in skills {
        p.push_str(&format!("\n- {}: {}", s.name, s.description));
    }
    Some(p)
}

/// What a sub-agent's system prompt says after its profile's own text: the workspace, how
/// the gates answer, where its answer goes, and the project notes.
pub fn sub_agent_facts(workspace: &Workspace) -> String {
    let mut p = format!(
        "You work in the workspace {root} on {os}; tool paths are relative to it and cannot \
         leave it. Every call passes a pipeline of policies; a refused call says which gate \
         refused it and why: adapt instead of retrying it unchanged. Another agent gave you \
         this task and sees only your final answer (a reply with no tool call): make it \
         complete.",
        root = workspace.root().display(),
        os = std::env::consts::OS,
    );
    push_memory(&mut p, workspace);
    p
}

/// Appends the project notes to a system prompt.
fn push_memory(p: &mut String, workspace: &Workspace) {
    for m in memory(workspace) {
        p.push_str(&format!("\n\nProject notes from {}:\n{}", m.name, m.text));
        if m.truncated {
            p.push_str(&format!(
                "\n[{} is longer than {} KiB; only its beginning is shown]",
                m.name,
                MAX_MEMORY_BYTES / 1024
            ));
        }
    }
}

/// One memory file as it goes into the prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Memory {
    pub name: &'static str,
    pub text: String,
    /// The file was longer than the cap.
    pub truncated: bool,
}

/// The project memory files that exist, read through the workspace's confinement (a symlink
/// out of the workspace is not followed), each capped at 32 KiB.
pub fn memory(workspace: &Workspace) -> Vec<Memory> {
    use std::io::Read;
    MEMORY_FILES
        .iter()
        .filter_map(|name| {
            let (file, _) = workspace.open_read(name).ok()?;
            let mut bytes = Vec::new();
            file.take(MAX_MEMORY_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
                .ok()?;
            let truncated = bytes.len() > MAX_MEMORY_BYTES;
            bytes.truncate(MAX_MEMORY_BYTES);
            Some(Memory {
                name,
                text: String::from_utf8_lossy(&bytes).into_owned(),
                truncated,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_memory_file_is_loaded_in_order_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        assert!(!system_prompt(&ws).contains("Project notes"));
        std::fs::write(dir.path().join("AGENTS.md"), "use tabs").unwrap();
        assert!(system_prompt(&ws).contains("Project notes from AGENTS.md:\nuse tabs"));
        std::fs::write(dir.path().join("AGENT.md"), "run make check").unwrap();
        std::fs::write(dir.path().join("CLAUDE.md"), "x".repeat(40_000)).unwrap();
        std::fs::create_dir(dir.path().join(".dsh")).unwrap();
        std::fs::write(dir.path().join(".dsh/memory.md"), "the build is slow").unwrap();
        let p = system_prompt(&ws);
        let at = |s: &str| p.find(s).unwrap_or_else(|| panic!("no {s} in {p}"));
        assert!(at("from .dsh/memory.md:\nthe build is slow") < at("from AGENTS.md"));
        assert!(at("from AGENTS.md") < at("from AGENT.md:\nrun make check"));
        assert!(at("from AGENT.md") < at("from CLAUDE.md"));
        assert!(p.contains("[CLAUDE.md is longer than 32 KiB; only its beginning is shown]"));
        assert!(!p.contains(&"x".repeat(32 * 1024 + 1)));
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
