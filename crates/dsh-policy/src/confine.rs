//! Confinement: every path a call declares must resolve inside the workspace (SPEC A2).

use std::sync::Arc;

use dsh_core::{
    Access, Denial, Guard, PathError, PolicyContext, PrePolicy, Tier, ToolCall, Vote, Workspace,
    async_trait, quote_capped_path,
};

/// Refuses any call that declares a path resolving outside the workspace (`..`, absolute
/// paths, symlinks out, dangling symlinks). A gate-1 `Rule` deny *and* a guard. A path whose
/// resolution failed on the way ([`dsh_core::PathError::is_failure`]) refuses the call too,
/// as a failure ([`Vote::failed`], [`Denial::failed`]): `tool_error`, not `denied`.
#[derive(Clone, Debug)]
pub struct Confinement {
    workspace: Arc<Workspace>,
}

impl Confinement {
    pub fn new(workspace: Arc<Workspace>) -> Self {
        Confinement { workspace }
    }

    /// Why the call may not run, if it may not: the first declared path that is refused.
    fn refusal(&self, accesses: &[Access]) -> Option<Refusal> {
        accesses.iter().find_map(|a| {
            let path = match a {
                Access::Read { path } | Access::Write { path } => path,
                _ => return None,
            };
            let Some(given) = path.to_str() else {
                return Some(Refusal::Denied(format!(
                    "{} is not valid UTF-8",
                    quote_capped_path(path)
                )));
            };
            self.workspace.resolve(given).err().map(|e| {
                if e.is_failure() {
                    // Not a judgement: nothing is known about where the path leads, so the call
                    // does not run — and the other path policies (rules, protected paths),
                    // which skip a path that does not resolve, are not bypassed — but it is
                    // no denial either (DESIGN §4).
                    Refusal::Failed(match e {
                        PathError::Changed { .. } => format!("{e} (the call did not run)"),
                        _ => format!(
                            "{e}; the path could not be checked, so the call did not run; try again"
                        ),
                    })
                } else {
                    Refusal::Denied(format!(
                        "{e}; only paths inside {} can be used",
                        self.workspace.root().display()
                    ))
                }
            })
        })
    }
}

/// A refused path: a judgement (`denied`), or a resolution that failed on the way — an OS
/// error such as `EMFILE`, or a path that changed while being resolved (`tool_error`).
enum Refusal {
    Denied(String),
    Failed(String),
}

#[async_trait]
impl PrePolicy for Confinement {
    fn name(&self) -> &str {
        "confinement"
    }
    async fn vote(&self, _: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        match self.refusal(cx.accesses) {
            Some(Refusal::Denied(reason)) => Vote::deny(Tier::Rule, reason),
            Some(Refusal::Failed(reason)) => Vote::failed(reason),
            None => Vote::abstain(),
        }
    }
}

impl Guard for Confinement {
    fn name(&self) -> &str {
        "confinement"
    }
    fn refuses(&self, _: &ToolCall, cx: &PolicyContext<'_>) -> Option<Denial> {
        self.refusal(cx.accesses).map(|r| match r {
            Refusal::Denied(reason) => Denial::new(reason),
            Refusal::Failed(reason) => Denial::failed(reason),
        })
    }
}
