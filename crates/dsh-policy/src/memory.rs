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
//! asked the same way, so an injected instruction cannot plant itself there unseen. Each is
//! matched where it really leads, too (`crate::linked`): with `AGENTS.md -> docs/agents.md`,
//! a write to `docs/agents.md` asks like one to `AGENTS.md`.

use std::path::{Path, PathBuf};
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
    names(rel, Path::new(MEMORY_FILE))
}

/// The files that go into every later system prompt, workspace-relative.
fn prompt_files() -> impl Iterator<Item = &'static Path> {
    std::iter::once(MEMORY_FILE)
        .chain(PROMPT_FILES)
        .map(Path::new)
}

/// Whether `rel` is the workspace-relative `file`, as spelled or as the file system folds it.
fn names(rel: &Path, file: &Path) -> bool {
    rel == file || fold_path(rel) == fold_path(file)
}

/// Asks, at tier `Rule`, for every call that declares a write to the memory file or a prompt
/// file, named or where its symlink leads.
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
        let written: Vec<PathBuf> = cx
            .accesses
            .iter()
            .filter_map(|a| match a {
                Access::Write { path } => Some(self.workspace.resolve(path.to_str()?).ok()?.rel),
                _ => None,
            })
            .collect();
        if written.is_empty() {
            return Vote::abstain();
        }
        // Each file as named and where it leads now: the written paths are resolved, so a
        // write to `AGENTS.md -> docs/agents.md` is one to `docs/agents.md`.
        let guarded: Vec<PathBuf> = prompt_files()
            .flat_map(|f| {
                [
                    Some(f.to_path_buf()),
                    crate::linked::real_rel(&self.workspace, f),
                ]
            })
            .flatten()
            .collect();
        let writes_the_prompt = written
            .iter()
            .any(|rel| guarded.iter().any(|f| names(rel, f)));
        if writes_the_prompt {
            Vote::ask(
                Tier::Rule,
                "the file goes into the system prompt of every later session: a person must approve each change to it".to_owned(),
            )
        } else {
            Vote::abstain()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use dsh_core::{Decision, ToolSpec};

    use super::*;

    /// The memory policy's vote on a `write_file` of `path`.
    async fn vote_on_write(ws: &Arc<Workspace>, path: &str) -> Vote {
        let spec = ToolSpec::new("write_file", "writes a file");
        let accesses = [Access::Write { path: path.into() }];
        let cx = PolicyContext {
            spec: &spec,
            accesses: &accesses,
        };
        let call = ToolCall::new("1", "write_file", serde_json::json!({ "path": path }));
        MemoryPolicy::new(ws.clone()).vote(&call, &cx).await
    }

    #[tokio::test]
    async fn a_prompt_file_is_asked_for_where_its_symlink_leads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        std::fs::write(dir.path().join("docs/guide.md"), "be kind\n").unwrap();
        std::fs::write(dir.path().join("docs/other.md"), "x\n").unwrap();
        std::os::unix::fs::symlink("docs/guide.md", dir.path().join("AGENTS.md")).unwrap();
        // Dangling: writing its target creates the file `CLAUDE.md` reads.
        std::os::unix::fs::symlink("docs/claude.md", dir.path().join("CLAUDE.md")).unwrap();
        let ws = Arc::new(Workspace::new(dir.path()).unwrap());
        for path in [
            "docs/guide.md",
            "AGENTS.md",
            "./docs/../docs/guide.md",
            "docs/claude.md",
        ] {
            let vote = vote_on_write(&ws, path).await;
            assert_eq!(
                (vote.decision, vote.tier),
                (Some(Decision::Ask), Tier::Rule),
                "{path}: {}",
                vote.reason
            );
            assert!(vote.reason.contains("system prompt"), "{}", vote.reason);
        }
        for path in ["docs/other.md", "src/agents.md"] {
            let vote = vote_on_write(&ws, path).await;
            assert_eq!(vote.decision, None, "{path}: {}", vote.reason);
        }
    }

    #[tokio::test]
    async fn the_memory_file_and_prompt_files_are_asked_for_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Arc::new(Workspace::new(dir.path()).unwrap());
        for path in [MEMORY_FILE, "AGENTS.md", "AGENT.md", "claude.md"] {
            let vote = vote_on_write(&ws, path).await;
            assert_eq!(
                (vote.decision, vote.tier),
                (Some(Decision::Ask), Tier::Rule),
                "{path}"
            );
        }
        let vote = vote_on_write(&ws, "README.md").await;
        assert_eq!(vote.decision, None);
    }
}
