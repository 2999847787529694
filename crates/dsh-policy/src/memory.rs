//! The project memory file, `.dsh/memory.md` (issue 10, item 4; SPEC A11): whatever it holds
//! lands in every later session's system prompt, so it can be written only through the
//! pipeline and never without a person's yes.
//!
//! In a session where a person answers asks, it is the one file let out of the built-in
//! `.dsh/**` protection — an exception written here, for exactly this path, not a pattern any
//! configuration layer can extend ([`crate::ProtectedPaths::with_memory_exemption`]) — and
//! every declared write to it is asked at tier `Rule` by [`MemoryPolicy`], which no allow rule
//! lifts (DESIGN §3: a `Rule` ask outranks a `Rule` allow). Headless or under `--yolo`
//! (nobody would really say yes) it stays protected. The shell policy still refuses shell
//! writes into `.dsh/`, memory file included: the file tools are the way in.
//!
//! The other files that reach every later system prompt (`AGENTS.md`, `AGENT.md`,
//! `CLAUDE.md` at the workspace root) are ordinary project files, but a write to them is
//! asked the same way, so an injected instruction cannot plant itself there unseen.

use std::path::Path;
use std::sync::Arc;

use dsh_core::{Access, PolicyContext, PrePolicy, Tier, ToolCall, Vote, Workspace, async_trait};

use crate::glob::fold_path;

/// The memory file, relative to the workspace.
pub const MEMORY_FILE: &str = ".dsh/memory.md";

/// The built-in protection the memory file is let out of (and only that one).
pub(crate) const BUILT_IN_DSH: &str = ".dsh/**";

/// The project files other agents read that go into the system prompt too.
pub const PROMPT_FILES: [&str; 3] = ["AGENTS.md", "AGENT.md", "CLAUDE.md"];

/// Whether `rel` (resolved, workspace-relative) is the memory file, compared as the file
/// system may fold it (so what [`crate::ProtectedPaths`] lets through and what
/// [`MemoryPolicy`] asks about are the same paths).
pub fn is_memory_file(rel: &Path) -> bool {
    names(rel, MEMORY_FILE)
}

/// Whether `rel` is one of the files that go into every later system prompt.
fn reaches_the_prompt(rel: &Path) -> bool {
    is_memory_file(rel) || PROMPT_FILES.iter().any(|f| names(rel, f))
}

/// Whether `rel` is the workspace-relative `file`, as spelled or as the file system folds it.
fn names(rel: &Path, file: &str) -> bool {
    rel == Path::new(file) || fold_path(rel) == fold_path(Path::new(file))
}

/// Asks, at tier `Rule`, for every call that declares a write to the memory file.
#[derive(Clone, Debug)]
pub struct MemoryPolicy {
    workspace: Arc<Workspace>,
}

impl MemoryPolicy {
    pub fn new(workspace: Arc<Workspace>) -> Self {
        MemoryPolicy { workspace }
    }
}

#[async_trait]
impl PrePolicy for MemoryPolicy {
    fn name(&self) -> &str {
        "memory"
    }

    async fn vote(&self, _: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        let writes_memory = cx.accesses.iter().any(|a| match a {
            Access::Write { path } => path
                .to_str()
                .and_then(|p| self.workspace.resolve(p).ok())
                .is_some_and(|r| reaches_the_prompt(&r.rel)),
            _ => false,
        });
        if writes_memory {
            Vote::ask(
                Tier::Rule,
                "the file goes into the system prompt of every later session: a person must approve each change to it".to_owned(),
            )
        } else {
            Vote::abstain()
        }
    }
}
