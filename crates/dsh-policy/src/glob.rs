//! Gitignore-style path patterns, matched against workspace-relative canonical paths.

use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};

/// Why a pattern could not be compiled.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{pattern}` is not a valid path pattern: {reason}")]
pub struct PatternError {
    pub pattern: String,
    pub reason: String,
}

/// A gitignore-style pattern:
/// - a pattern with no `/` except a trailing one matches at any depth (`.env` matches
///   `config/.env`); otherwise it is anchored at the workspace root (a leading `/` is
///   optional);
/// - `*` does not cross `/`, `**` does;
/// - a match also covers everything below it (`secrets` covers `secrets/key.pem`).
#[derive(Clone, Debug)]
pub struct PathPattern {
    text: String,
    exact: GlobMatcher,
    below: GlobMatcher,
}

impl PathPattern {
    pub fn new(pattern: &str) -> Result<Self, PatternError> {
        let err = |reason: &str| PatternError {
            pattern: pattern.to_owned(),
            reason: reason.to_owned(),
        };
        let trimmed = pattern.trim_end_matches('/');
        if trimmed.is_empty() || trimmed == "/" {
            return Err(err("it is empty"));
        }
        let anchored = trimmed.contains('/');
        let body = trimmed.trim_start_matches('/');
        if body.split('/').any(|part| part == "..") {
            return Err(err("`..` is not allowed in a pattern"));
        }
        let base = if anchored || body.starts_with("**") {
            body.to_owned()
        } else {
            format!("**/{body}")
        };
        let compile = |g: &str| {
            GlobBuilder::new(g)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| err(&e.kind().to_string()))
        };
        Ok(PathPattern {
            text: pattern.to_owned(),
            exact: compile(&base)?,
            below: compile(&format!("{base}/**"))?,
        })
    }

    /// Whether the workspace-relative path (or an ancestor of it) matches.
    pub fn matches(&self, rel: &Path) -> bool {
        self.exact.is_match(rel) || self.below.is_match(rel)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, path: &str) -> bool {
        PathPattern::new(p).unwrap().matches(Path::new(path))
    }

    #[test]
    fn unanchored_names_match_at_any_depth() {
        assert!(m(".env", ".env"));
        assert!(m(".env", "config/.env"));
        assert!(!m(".env", ".envrc"));
        assert!(m("*.pem", "keys/server.pem"));
    }

    #[test]
    fn anchored_patterns_match_from_the_root() {
        assert!(m("src/**", "src/a/b.rs"));
        assert!(!m("src/**", "lib/src/a.rs"));
        assert!(m("/Cargo.toml", "Cargo.toml"));
        assert!(!m("/Cargo.toml", "sub/Cargo.toml"));
        assert!(m("src/*.rs", "src/main.rs"));
        assert!(!m("src/*.rs", "src/bin/main.rs"));
    }

    #[test]
    fn a_match_covers_everything_below() {
        assert!(m(".git", ".git/hooks/pre-commit"));
        assert!(m("secrets/", "secrets/key.pem"));
        assert!(m(".dsh/**", ".dsh/config.toml"));
    }

    #[test]
    fn bad_patterns_are_errors() {
        assert!(PathPattern::new("").is_err());
        assert!(PathPattern::new("../x").is_err());
        assert!(PathPattern::new("a/[b").is_err());
    }
}
