//! The rule that would allow a call: what "always allow" offers (`always.rs`) and what an
//! `unavailable` result's hint names (`assemble.rs`).

use dsh_core::{Access, ToolCall};
use dsh_policy::ShellPolicy;

/// Characters that would make a path rule match more than the one path.
const GLOB: &[char] = &['*', '?', '[', ']', '{', '}', '!', '\\'];

/// The rule "always allow" would add for a call, before any check: for a declared command
/// its program and subcommand (the shell policy's [`ShellPolicy::rule_for`]), for one
/// declared path the tool and that path, else the tool's name. The `unavailable` hint names
/// it too.
pub(crate) fn rule_for(
    shell: &ShellPolicy,
    workspace: &dsh_core::Workspace,
    call: &ToolCall,
    accesses: &[Access],
) -> Option<String> {
    let commands: Vec<&str> = accesses
        .iter()
        .filter_map(|a| match a {
            Access::Execute { command } => Some(command.as_str()),
            _ => None,
        })
        .collect();
    if !commands.is_empty() {
        let [command] = commands.as_slice() else {
            return None;
        };
        return shell.rule_for(command);
    }
    let paths: Vec<&std::path::Path> = accesses
        .iter()
        .filter_map(|a| match a {
            Access::Read { path } | Access::Write { path } => Some(path.as_path()),
            _ => None,
        })
        .collect();
    match paths.as_slice() {
        [] => Some(call.name().to_owned()),
        [path] => {
            let rel = workspace.resolve(path.to_str()?).ok()?.rel;
            let rel = rel.to_str()?;
            if rel.is_empty() || rel.contains(GLOB) || rel.contains(['(', ')']) {
                return None;
            }
            // Anchored at the workspace root: a bare name would match at any depth.
            Some(format!("{}(/{rel})", call.name()))
        }
        _ => None,
    }
}
