//! Guarded files reached through a symlink. `AGENTS.md -> docs/agents.md` is a common layout,
//! and the policies judge *resolved* paths ([`dsh_core::Workspace::resolve`] follows every
//! symlink of the part that exists): a write to `AGENTS.md` is judged as one to
//! `docs/agents.md`, and so is a write that names `docs/agents.md` itself. A policy that
//! guards a file by its name must therefore also guard where the name leads, looked up when
//! it judges (the link may change between two calls).

use std::path::{Component, Path, PathBuf};

use dsh_core::Workspace;

use crate::glob::fold_path;

/// Where the workspace file `name` (workspace-relative, as a guard spells it) really is,
/// workspace-relative: every symlink followed, a dangling last one too (the first write
/// through it creates its target). `None` when `name` does not exist, cannot be resolved, or
/// leads outside the workspace (confinement refuses every write there).
pub(crate) fn real_rel(workspace: &Workspace, name: &Path) -> Option<PathBuf> {
    let named = workspace.root().join(name);
    let real = match named.canonicalize() {
        Ok(real) => real,
        Err(_) => {
            let target = named.parent()?.join(std::fs::read_link(&named).ok()?);
            target
                .parent()?
                .canonicalize()
                .ok()?
                .join(target.file_name()?)
        }
    };
    real.strip_prefix(workspace.root())
        .ok()
        .map(Path::to_path_buf)
}

/// What follows `prefix` in `path`, both workspace-relative and resolved, their names
/// compared as spelled or as the file system may fold them (see [`crate::protected_match`]):
/// `Docs/Agents.md` is beneath `docs` on a case-folding mount.
pub(crate) fn beneath(path: &Path, prefix: &Path) -> Option<PathBuf> {
    let mut rest = path.components();
    for want in prefix.components() {
        let got = rest.next()?;
        if got != want && fold(got) != fold(want) {
            return None;
        }
    }
    Some(rest.as_path().to_path_buf())
}

fn fold(c: Component<'_>) -> String {
    fold_path(Path::new(c.as_os_str()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_name_leads_where_its_symlink_points_even_before_the_target_exists() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        std::fs::write(dir.path().join("docs/guide.md"), "x").unwrap();
        std::fs::write(dir.path().join("CLAUDE.md"), "x").unwrap();
        std::os::unix::fs::symlink("docs/guide.md", dir.path().join("AGENTS.md")).unwrap();
        // Dangling: the first write through it creates `docs/agent.md`.
        std::os::unix::fs::symlink("docs/agent.md", dir.path().join("AGENT.md")).unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let real = |name: &str| real_rel(&ws, Path::new(name));
        assert_eq!(real("CLAUDE.md"), Some(PathBuf::from("CLAUDE.md")));
        assert_eq!(real("missing.md"), None);
        assert_eq!(real("AGENTS.md"), Some(PathBuf::from("docs/guide.md")));
        assert_eq!(real("AGENT.md"), Some(PathBuf::from("docs/agent.md")));
    }

    #[test]
    fn beneath_compares_names_as_a_folding_file_system_does() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(beneath(&p("docs/a/b"), &p("docs")), Some(p("a/b")));
        assert_eq!(
            beneath(&p("Docs/Agents.md"), &p("docs/agents.md")),
            Some(p(""))
        );
        assert_eq!(beneath(&p("docsx/a"), &p("docs")), None);
        assert_eq!(beneath(&p("docs"), &p("docs/a")), None);
    }
}
