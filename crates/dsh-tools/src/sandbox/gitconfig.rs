//! Reading git's configuration files, as far as the sandbox needs: which files they name.
//!
//! Two uses: the read-only profile reads git's global files and what they include
//! (`reads.rs`); the hardened profile keeps read-only every workspace file the
//! repository's own configuration names ([`named_in_workspace`]) — `core.hooksPath =
//! .githooks` (husky's `.husky/_`), `include.path = ../shared.gitconfig`, a
//! `core.fsmonitor` or filter script — because git runs or reads them the next time a
//! person runs git there, outside any sandbox. `.git/` itself is protected already.

use std::path::{Component, Path, PathBuf};

use super::reads::{MAX_INCLUDE_DEPTH, expand};

/// One `key = value` of a configuration text.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Entry {
    /// The section's name, lower-cased, without its subsection (`includeif`, `core`).
    pub section: String,
    /// Lower-cased.
    pub key: String,
    /// Unquoted, without a trailing comment.
    pub value: String,
}

/// The entries of a git configuration text (a best-effort reading of git's format: one
/// entry per line, no continuation lines or escapes).
pub(super) fn entries(text: &str) -> Vec<Entry> {
    let mut section = String::new();
    let mut out = Vec::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        let mut rest = line;
        if let Some(after) = line.strip_prefix('[') {
            let Some(end) = after.find(']') else {
                continue;
            };
            let header = &after[..end];
            section = header
                .split(|c: char| c.is_whitespace() || c == '"')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            rest = after[end + 1..].trim();
            if rest.is_empty() {
                continue;
            }
        }
        let Some((key, value)) = rest.split_once('=') else {
            continue;
        };
        let value = value.split(['#', ';']).next().unwrap_or("").trim();
        let value = value.trim_matches('"');
        if !value.is_empty() {
            out.push(Entry {
                section: section.clone(),
                key: key.trim().to_ascii_lowercase(),
                value: value.to_owned(),
            });
        }
    }
    out
}

/// Workspace-relative paths that git's configuration for the repository `workspace`
/// belongs to names — the repository's own files and includes, and the `globals`
/// ([`global_configs`]). Every value (and its first
/// word) read against the work tree and against the configuration file's directory names a
/// path kept when it exists; a value of a key that names a file or a program git runs
/// (a hooks path, an include, a filter, fsmonitor, an editor or pager…) names one kept even before it exists, so that a command
/// cannot create the hook `core.hooksPath` points at. Never the workspace itself.
pub fn named_in_workspace(
    workspace: &Path,
    home: Option<&Path>,
    globals: &[PathBuf],
) -> Vec<PathBuf> {
    let Some((work_tree, mut configs)) = repository_configs(workspace) else {
        return Vec::new();
    };
    configs.extend(globals.iter().cloned());
    let mut queue: Vec<(PathBuf, usize)> = configs.into_iter().map(|c| (c, 0)).collect();
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut out: Vec<PathBuf> = Vec::new();
    let mut keep = |candidate: PathBuf, even_missing: bool| {
        let path = normalize(&candidate);
        if let Ok(rel) = path.strip_prefix(workspace)
            && !rel.as_os_str().is_empty()
            && (even_missing || path.symlink_metadata().is_ok())
            && !out.iter().any(|o| o == rel)
        {
            out.push(rel.to_path_buf());
        }
    };
    while let Some((file, depth)) = queue.pop() {
        if seen.contains(&file) {
            continue;
        }
        seen.push(file.clone());
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let dir = file.parent().unwrap_or(Path::new("/")).to_path_buf();
        for e in entries(&text) {
            let first = e.value.split_whitespace().next().unwrap_or("").to_owned();
            for word in [e.value.as_str(), first.as_str()] {
                for base in [&work_tree, &dir] {
                    if let Some(p) = expand(word, home, base) {
                        keep(p, false);
                    }
                }
            }
            if names_a_program_or_file(&e.section, &e.key) {
                // An include is read against its file's directory; anything else git runs
                // or reads from the work tree.
                let include = matches!(e.section.as_str(), "include" | "includeif");
                let (word, base) = if include {
                    (e.value.as_str(), &dir)
                } else {
                    (first.as_str(), &work_tree)
                };
                if let Some(p) = expand(word, home, base) {
                    keep(p, true);
                }
            }
            if e.key == "path"
                && matches!(e.section.as_str(), "include" | "includeif")
                && depth < MAX_INCLUDE_DEPTH
                && let Some(p) = expand(&e.value, home, &dir)
            {
                queue.push((p, depth + 1));
            }
        }
    }
    out
}

/// What git takes from the workspace for its submodules: `.gitmodules` and each
/// submodule's `.git` (a file naming its git directory: replaced, it would point `git status`
/// at a planted configuration), workspace-relative, whether they exist or not.
pub fn submodule_files(workspace: &Path) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from(".gitmodules")];
    if let Ok(text) = std::fs::read_to_string(workspace.join(".gitmodules")) {
        for e in entries(&text) {
            let rel = normalize(Path::new(&e.value));
            if e.section == "submodule"
                && e.key == "path"
                && rel.is_relative()
                && !rel.as_os_str().is_empty()
                && !rel.starts_with("..")
            {
                out.push(rel.join(".git"));
            }
        }
    }
    out
}

/// Git's system and global configuration files for a user whose home is `home`.
pub fn global_configs(home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("/etc/gitconfig")];
    if let Some(h) = home {
        out.push(h.join(".gitconfig"));
        out.push(h.join(".config/git/config"));
    }
    out
}

/// Whether `section.key` names a file git reads or a program git runs (lower-cased, the
/// subsection left out: `diff.<driver>.textconv` is `diff`, `textconv`).
fn names_a_program_or_file(section: &str, key: &str) -> bool {
    matches!(
        (section, key),
        (
            "core",
            "hookspath"
                | "fsmonitor"
                | "sshcommand"
                | "editor"
                | "pager"
                | "excludesfile"
                | "attributesfile"
                | "askpass"
        ) | ("include" | "includeif", "path")
            | ("gpg", "program")
            | ("sequence", "editor")
            | ("credential", "helper")
    ) || matches!(
        key,
        "textconv" | "clean" | "smudge" | "process" | "driver" | "cmd" | "command" | "external"
    )
}

/// The work tree and the configuration files of the repository `workspace` is in (the
/// nearest `.git` at or above it: a directory, or a file naming the git directory, whose
/// `commondir` holds the shared configuration).
fn repository_configs(workspace: &Path) -> Option<(PathBuf, Vec<PathBuf>)> {
    for dir in workspace.ancestors() {
        let dot_git = dir.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
            continue;
        };
        let git_dir = if meta.is_file() {
            let text = std::fs::read_to_string(&dot_git).ok()?;
            let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
            dir.join(named)
        } else {
            dot_git
        };
        let mut configs = vec![git_dir.join("config"), git_dir.join("config.worktree")];
        if let Ok(common) = std::fs::read_to_string(git_dir.join("commondir")) {
            configs.push(git_dir.join(common.trim()).join("config"));
        }
        return Some((dir.to_path_buf(), configs));
    }
    None
}

/// `path` with `.` and `..` resolved lexically (symlinks are left to the bind mount, which
/// follows them).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_configuration_names_workspace_files() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join(".githooks")).unwrap();
        std::fs::create_dir_all(ws.join("tools")).unwrap();
        std::fs::write(ws.join("tools/fsmon"), "#!/bin/sh\n").unwrap();
        std::fs::write(
            ws.join("shared.inc"),
            "[core]\nsshCommand = tools/ssh-wrap -v\n",
        )
        .unwrap();
        std::fs::write(ws.join("tools/ssh-wrap"), "#!/bin/sh\n").unwrap();
        std::fs::write(
            ws.join(".git/config"),
            "[core]\n\thooksPath = .githooks\n\tfsmonitor = tools/fsmon --flag\n\
             \tsshCommand = not-yet/there\n\
             [include]\n\tpath = ../shared.inc\n[remote \"origin\"]\n\turl = .\n\
             [branch \"main\"]\n\tmerge = refs/heads/main\n",
        )
        .unwrap();
        let mut got = named_in_workspace(&ws, None, &[]);
        got.sort();
        assert_eq!(
            got,
            // `.git` itself from `url = .` read against `.git/`: protected anyway;
            // `not-yet/there` names a program git runs: kept before it exists.
            [
                ".git",
                ".githooks",
                "not-yet/there",
                "shared.inc",
                "tools/fsmon",
                "tools/ssh-wrap"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn no_repository_names_nothing() {
        let root = tempfile::tempdir().unwrap();
        assert!(named_in_workspace(root.path(), None, &[]).is_empty());
    }
}
