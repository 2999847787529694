//! The audit again at gate 3: just before a call that declares a command runs (after any approval), every
//! Python script and `-c` code the line names is audited once more, on the file's content of
//! that moment. A script that changed since gate 1 is judged on what it holds now, so the
//! hash recorded at gate 1 is in effect checked again: content that no longer passes is
//! refused. The window between this check and Python opening the file remains; the sandbox,
//! not the audit, carries the security (see the module docs of `python`).

use std::sync::Arc;

use dsh_core::{Access, Denial, Guard, PolicyContext, ToolCall, Workspace};

use super::TAG;
use crate::shell::{Decision, NetworkVote, ShellLists, ShellPolicy};

/// Gate 3: refuses a `run_shell` call whose Python no longer passes the audit. Pure: a
/// function of the call and the files it names.
#[derive(Clone, Debug)]
pub struct PythonAuditGuard {
    shell: ShellPolicy,
}

impl PythonAuditGuard {
    pub fn new(workspace: Arc<Workspace>) -> Self {
        PythonAuditGuard {
            // No rules: every command, wrapped or nested, is walked to its payload.
            shell: ShellPolicy::new(
                workspace,
                Vec::new(),
                ShellLists::default(),
                NetworkVote::Granted,
            ),
        }
    }

    /// The audit's refusals for one line (empty when every Python in it passes).
    pub fn refusals(&self, line: &str) -> Vec<String> {
        self.shell
            .decide(line)
            .parts
            .into_iter()
            .filter(|j| j.decision == Decision::Deny && j.reason.starts_with(TAG))
            .map(|j| j.reason)
            .collect()
    }
}

impl Guard for PythonAuditGuard {
    fn name(&self) -> &str {
        "python-audit"
    }

    /// Audits every command line the call declares (`Access::Execute`), whichever tool
    /// declares it.
    fn refuses(&self, _call: &ToolCall, cx: &PolicyContext<'_>) -> Option<Denial> {
        let refusals: Vec<String> = cx
            .accesses
            .iter()
            .filter_map(|a| match a {
                Access::Execute { command } => Some(self.refusals(command)),
                _ => None,
            })
            .flatten()
            .collect();
        let first = refusals.first()?;
        Some(Denial::new(format!(
            "just before running: {first}{}",
            match refusals.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            }
        )))
    }
}
