//! Protected paths: writes to them are refused (default `.git/**` and `.dsh/**`).

use std::sync::Arc;

use dsh_core::{
    Access, Denial, Guard, PolicyContext, PrePolicy, Tier, ToolCall, Vote, Workspace, async_trait,
};

use crate::glob::{PathPattern, PatternError};

/// Refuses any call that declares a write to a protected path, matched on the resolved,
/// workspace-relative path (so `src/../.git/config` and a symlink to `.git` are caught). A
/// gate-1 `Rule` deny *and* a guard. Paths that do not resolve are left to [`crate::Confinement`].
#[derive(Clone, Debug)]
pub struct ProtectedPaths {
    workspace: Arc<Workspace>,
    patterns: Vec<PathPattern>,
}

impl ProtectedPaths {
    /// The default list: `.git/**` and `.dsh/**`.
    pub const DEFAULT: [&'static str; 2] = [".git/**", ".dsh/**"];

    pub fn new<S: AsRef<str>>(
        workspace: Arc<Workspace>,
        patterns: &[S],
    ) -> Result<Self, PatternError> {
        let patterns = patterns
            .iter()
            .map(|p| PathPattern::new(p.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(ProtectedPaths {
            workspace,
            patterns,
        })
    }

    fn refusal(&self, accesses: &[Access]) -> Option<String> {
        accesses.iter().find_map(|a| {
            let Access::Write { path } = a else {
                return None;
            };
            let resolved = self.workspace.resolve(path.to_str()?).ok()?;
            let hit = self.patterns.iter().find(|p| p.matches(&resolved.rel))?;
            Some(format!(
                "`{}` is protected (`{}`); it cannot be written by the agent",
                path.display(),
                hit.as_str()
            ))
        })
    }
}

#[async_trait]
impl PrePolicy for ProtectedPaths {
    fn name(&self) -> &str {
        "protected_paths"
    }
    async fn vote(&self, _: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        match self.refusal(cx.accesses) {
            Some(reason) => Vote::deny(Tier::Rule, reason),
            None => Vote::abstain(),
        }
    }
}

impl Guard for ProtectedPaths {
    fn name(&self) -> &str {
        "protected_paths"
    }
    fn check(&self, _: &ToolCall, cx: &PolicyContext<'_>) -> Option<Denial> {
        self.refusal(cx.accesses).map(Denial::new)
    }
}
