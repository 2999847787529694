//! Protected paths: writes to them are refused (default `.git/**` and `.dsh/**`, except the
//! memory file `.dsh/memory.md`, whose writes are asked instead: see `memory.rs`).
//!
//! A protected path is matched the way the file system will resolve it, not as spelled: a
//! workspace may sit on a case-folding, normalization-insensitive mount (macOS, Windows, a
//! shared volume on Linux), where `.Git/hooks/x`, `.git./config` or an NFD spelling of a name
//! opens the protected file. [`protected_match`] is that comparison, for the file tools (this
//! policy) and for shell redirections (the shell policy) alike. It errs towards refusing: on a
//! case-sensitive Linux file system `.Git` is a directory of its own, and is refused all the
//! same. Permission rules keep comparing names exactly.

use std::path::Path;
use std::sync::Arc;

use dsh_core::{
    Access, CallSource, Denial, Guard, PolicyContext, PrePolicy, Tier, ToolCall, Vote, Workspace,
    async_trait, quote_capped_path,
};

use crate::glob::{PathPattern, PatternError, fold_path};

/// The first of `patterns` that protects `rel`, a resolved workspace-relative path (as
/// [`dsh_core::ResolvedPath::rel`]), or `None`.
///
/// A pattern protects a path when it matches it exactly ([`PathPattern::matches`]) or when
/// both, folded name by name, match: each name lowercased (Unicode-aware), NFC-normalized (so
/// NFC and NFD spellings are one name) and stripped of trailing dots and spaces, except a name
/// made only of dots (`.`, `..`). So `.git/**` protects `.Git/hooks/x`, `.GIT/config`,
/// `.git./config` and `.git /config`, and `café/**` protects `cafe\u{301}/x`; `src/git.rs`,
/// `.github/x` and `gitignore` stay unprotected.
pub fn protected_match<'a>(patterns: &'a [PathPattern], rel: &Path) -> Option<&'a PathPattern> {
    if let Some(hit) = patterns.iter().find(|p| p.matches(rel)) {
        return Some(hit);
    }
    let folded = fold_path(rel);
    patterns.iter().find(|p| p.matches_folded(&folded))
}

/// Refuses any call that declares a write to a protected path, matched on the resolved,
/// workspace-relative path (so `src/../.git/config` and a symlink to `.git` are caught) and
/// folded as the file system folds it ([`protected_match`]: `.Git/config` is caught too). A
/// gate-1 `Rule` deny *and* a guard. Paths that do not resolve are left to [`crate::Confinement`].
#[derive(Clone, Debug)]
pub struct ProtectedPaths {
    workspace: Arc<Workspace>,
    patterns: Vec<PathPattern>,
    /// The patterns that still protect the memory file once it is let out of the built-in
    /// `.dsh/**` (all but that one).
    memory_others: Vec<PathPattern>,
    /// The memory file is let out for every call, not only for those a person typed.
    memory_exempt: bool,
}

impl ProtectedPaths {
    pub fn new<S: AsRef<str>>(
        workspace: Arc<Workspace>,
        patterns: &[S],
    ) -> Result<Self, PatternError> {
        let patterns = patterns
            .iter()
            .map(|p| PathPattern::new(p.as_ref()))
            .collect::<Result<Vec<PathPattern>, _>>()?;
        let memory_others = patterns
            .iter()
            .filter(|p| p.as_str() != crate::memory::BUILT_IN_DSH)
            .cloned()
            .collect();
        Ok(ProtectedPaths {
            workspace,
            patterns,
            memory_others,
            memory_exempt: false,
        })
    }

    /// Lets the memory file out of the built-in `.dsh/**` (its writes are then asked by
    /// [`crate::MemoryPolicy`]). Only for sessions where a person answers asks: with no
    /// approver, or `--yolo`'s, the file stays protected like the rest of `.dsh/` — except
    /// for a call a person typed (`/memory add`), which is that person's answer.
    #[must_use]
    pub fn with_memory_exemption(mut self, exempt: bool) -> Self {
        self.memory_exempt = exempt;
        self
    }

    fn refusal(&self, call: &ToolCall, accesses: &[Access]) -> Option<String> {
        let exempt = self.memory_exempt || call.source() == CallSource::User;
        accesses.iter().find_map(|a| {
            let Access::Write { path } = a else {
                return None;
            };
            let resolved = self.workspace.resolve(path.to_str()?).ok()?;
            // The memory file is let out of the built-in `.dsh/**` only (its writes are asked
            // by `MemoryPolicy`); any other pattern that covers it still protects it.
            let patterns = if exempt && crate::memory::is_memory_file(&resolved.rel) {
                &self.memory_others
            } else {
                &self.patterns
            };
            let hit = protected_match(patterns, &resolved.rel)?;
            Some(format!(
                "{} is protected (`{}`); it cannot be written by the agent",
                quote_capped_path(path),
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
    async fn vote(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        match self.refusal(call, cx.accesses) {
            Some(reason) => Vote::deny(Tier::Rule, reason),
            None => Vote::abstain(),
        }
    }
}

impl Guard for ProtectedPaths {
    fn name(&self) -> &str {
        "protected_paths"
    }
    fn refuses(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Option<Denial> {
        self.refusal(call, cx.accesses).map(Denial::new)
    }
}
