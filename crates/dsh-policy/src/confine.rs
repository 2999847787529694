//! Confinement: every path a call declares must resolve inside the workspace (SPEC A2).

use std::sync::Arc;

use dsh_core::{
    Access, Denial, Guard, PolicyContext, PrePolicy, Tier, ToolCall, Vote, Workspace, async_trait,
    quote_capped_path,
};

/// Refuses any call that declares a path resolving outside the workspace (`..`, absolute
/// paths, symlinks out, dangling symlinks). A gate-1 `Rule` deny *and* a guard.
#[derive(Clone, Debug)]
pub struct Confinement {
    workspace: Arc<Workspace>,
}

impl Confinement {
    pub fn new(workspace: Arc<Workspace>) -> Self {
        Confinement { workspace }
    }

    fn refusal(&self, accesses: &[Access]) -> Option<String> {
        accesses.iter().find_map(|a| {
            let path = match a {
                Access::Read { path } | Access::Write { path } => path,
                _ => return None,
            };
            let Some(given) = path.to_str() else {
                return Some(format!("{} is not valid UTF-8", quote_capped_path(path)));
            };
            self.workspace.resolve(given).err().map(|e| {
                format!(
                    "{e}; only paths inside {} can be used",
                    self.workspace.root().display()
                )
            })
        })
    }
}

#[async_trait]
impl PrePolicy for Confinement {
    fn name(&self) -> &str {
        "confinement"
    }
    async fn vote(&self, _: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        match self.refusal(cx.accesses) {
            Some(reason) => Vote::deny(Tier::Rule, reason),
            None => Vote::abstain(),
        }
    }
}

impl Guard for Confinement {
    fn name(&self) -> &str {
        "confinement"
    }
    fn check(&self, _: &ToolCall, cx: &PolicyContext<'_>) -> Option<Denial> {
        self.refusal(cx.accesses).map(Denial::new)
    }
}
