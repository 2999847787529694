//! What `auto`'s hardened sandbox keeps from commands inside the workspace
//! ([`dsh_tools::shell::Keep`]), from the session's protected paths and file rules.
//!
//! - A protected pattern that names one path at the workspace root, or everything below one
//!   (`.git/**`, `.dsh/**`), and the prompt files are kept read-only by name.
//! - Every other protected pattern (`**/secret.txt`, `*.pem`, `secrets` — unanchored, so at
//!   any depth) and every deny or ask rule with a path on a file tool that writes
//!   (`write_file(migrations/**)`) keep what they match read-only; a deny or ask rule with a
//!   path on a tool that reads (`read_file(.env)`) hides what it matches. Those need a walk
//!   of the workspace before and after each `auto` command, so they are judged only when
//!   there are some.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_core::Rule;
use dsh_policy::{Decision, PROMPT_FILES, PathPattern, protected_match};
use dsh_tools::shell::{Cover, Judge, Keep};

/// The hardened profile's [`Keep`] for `protected` patterns and `rules`, where `readers` are
/// the tools that only read.
pub(crate) fn keep(
    protected: &[String],
    rules: &[Rule],
    readers: &[String],
) -> Result<Keep, dsh_policy::PatternError> {
    let mut fixed: Vec<PathBuf> = PROMPT_FILES.iter().map(PathBuf::from).collect();
    let mut read_only = Vec::new();
    for p in protected {
        match fixed_path(p) {
            Some(path) => fixed.push(path),
            None => read_only.push(PathPattern::new(p)?),
        }
    }
    let mut hidden = Vec::new();
    let mut kept_by_rules = Vec::new();
    for r in rules.iter().filter(|r| r.decision != Decision::Allow) {
        let Some(spec) = r.specifier.as_deref() else {
            continue;
        };
        // A rule on another tool (`run_shell(…)`, an agent) names no path.
        let Some(file_tool) = FILE_TOOLS.iter().find(|t| **t == r.tool) else {
            continue;
        };
        let pattern = PathPattern::new(spec)?;
        if readers.iter().any(|t| t == file_tool) {
            hidden.push(pattern);
        } else {
            kept_by_rules.push(pattern);
        }
    }
    if read_only.is_empty() && hidden.is_empty() && kept_by_rules.is_empty() {
        return Ok(Keep { fixed, judge: None });
    }
    let judge = move |rel: &Path| {
        if hidden.iter().any(|p| p.matches(rel)) {
            Some(Cover::Unreadable)
        } else if protected_match(&read_only, rel).is_some()
            || kept_by_rules.iter().any(|p| p.matches(rel))
        {
            Some(Cover::ReadOnly)
        } else {
            None
        }
    };
    Ok(Keep {
        fixed,
        judge: Some(Judge(Arc::new(judge))),
    })
}

/// The built-in tools whose rules name workspace paths.
const FILE_TOOLS: &[&str] = &[
    "read_file",
    "list_dir",
    "grep",
    "find_files",
    "write_file",
    "edit_file",
];

/// The one path a pattern keeps when it is anchored at the workspace root and names a path
/// or everything below one, without a glob: `.git/**` → `.git`, `/secrets` → `secrets`.
fn fixed_path(pattern: &str) -> Option<PathBuf> {
    let trimmed = pattern.trim_end_matches('/');
    let body = trimmed.strip_suffix("/**").unwrap_or(trimmed);
    let anchored = pattern.trim_end_matches('/').contains('/');
    let body = body.trim_start_matches('/');
    (anchored && !body.is_empty() && !body.contains(['*', '?', '[', '{', '\\']))
        .then(|| PathBuf::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(kind: Decision, tool: &str, spec: &str) -> Rule {
        Rule {
            decision: kind,
            tool: tool.to_owned(),
            specifier: Some(spec.to_owned()),
            origin: dsh_core::Origin::builtin(),
        }
    }

    #[test]
    fn fixed_paths_are_kept_by_name_and_the_rest_judged() {
        assert_eq!(fixed_path(".git/**"), Some(PathBuf::from(".git")));
        assert_eq!(fixed_path("/secrets"), Some(PathBuf::from("secrets")));
        assert_eq!(fixed_path("secrets"), None, "unanchored: at any depth");
        assert_eq!(fixed_path("**/secret.txt"), None);
        assert_eq!(fixed_path("conf/*.key"), None);
        let defaults = [".git/**".to_owned(), ".dsh/**".to_owned()];
        let k = keep(&defaults, &[], &[]).unwrap();
        assert!(k.judge.is_none(), "the defaults need no walk");
        assert!(k.fixed.contains(&PathBuf::from(".git")));
        assert!(k.fixed.contains(&PathBuf::from("AGENTS.md")));

        let rules = [
            rule(Decision::Deny, "read_file", ".env"),
            rule(Decision::Ask, "write_file", "migrations/**"),
            rule(Decision::Allow, "write_file", "src/**"),
            rule(Decision::Deny, "run_shell", "rm *"),
        ];
        let readers = ["read_file".to_owned()];
        let k = keep(&["*.pem".to_owned()], &rules, &readers).unwrap();
        let judge = k.judge.unwrap();
        let j = |p: &str| (judge.0)(Path::new(p));
        assert_eq!(j("a/b/k.pem"), Some(Cover::ReadOnly));
        assert_eq!(j("sub/.env"), Some(Cover::Unreadable));
        assert_eq!(j("migrations/001.sql"), Some(Cover::ReadOnly));
        assert_eq!(j("src/main.rs"), None);
        assert_eq!(j("rm"), None);
    }
}
