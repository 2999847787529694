//! Gitignore-style path patterns, matched against workspace-relative canonical paths.

use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use unicode_normalization::UnicodeNormalization;

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
///
/// [`PathPattern::matches`] compares names exactly. Protected paths also compare them the way a
/// folding file system resolves them ([`crate::protected_match`]): each pattern keeps a folded
/// twin for that.
#[derive(Clone, Debug)]
pub struct PathPattern {
    text: String,
    exact: Matchers,
    /// The pattern compiled from its folded text ([`fold_pattern`]); `None` in the one case
    /// folding breaks a valid pattern's syntax (a class range such as `[Z-a]` whose ends swap
    /// order when lowercased), where the exact matchers are used on the folded path instead.
    folded: Option<Matchers>,
}

/// A pattern's two globs: the path itself, and everything below it.
#[derive(Clone, Debug)]
struct Matchers {
    exact: GlobMatcher,
    below: GlobMatcher,
}

impl Matchers {
    fn is_match(&self, rel: impl AsRef<Path>) -> bool {
        let rel = rel.as_ref();
        self.exact.is_match(rel) || self.below.is_match(rel)
    }
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
        let exact = Matchers::compile(&base).map_err(|reason| err(&reason))?;
        let folded = Matchers::compile(&fold_pattern(&base)).ok();
        Ok(PathPattern {
            text: pattern.to_owned(),
            exact,
            folded,
        })
    }

    /// Whether the workspace-relative path (or an ancestor of it) matches, comparing names
    /// exactly.
    pub fn matches(&self, rel: &Path) -> bool {
        self.exact.is_match(rel)
    }

    /// Whether a path already folded by [`fold_path`] matches this pattern folded the same way.
    pub(crate) fn matches_folded(&self, folded_rel: &str) -> bool {
        self.folded
            .as_ref()
            .unwrap_or(&self.exact)
            .is_match(folded_rel)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl Matchers {
    fn compile(base: &str) -> Result<Self, String> {
        let compile = |g: &str| {
            GlobBuilder::new(g)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| e.kind().to_string())
        };
        Ok(Matchers {
            exact: compile(base)?,
            below: compile(&format!("{base}/**"))?,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Folding: names compared the way case- and normalization-insensitive file systems resolve
// them. APFS and HFS+ (macOS) and NTFS (Windows) fold case, APFS and HFS+ treat NFC and NFD
// spellings as one name, and Windows drops trailing dots and spaces from a name; a Linux
// workspace can sit on such a mount (a shared volume, a case-insensitive ext4 directory). So
// `.Git/hooks/x`, `.git./config` and `.git /config` may all open `.git`.

/// One name as such a file system compares it: lowercased (Unicode-aware), NFC-normalized,
/// and without trailing dots and spaces — unless that would leave nothing (`.`, `..`, `...`
/// are names of their own, not empty ones).
pub(crate) fn fold_name(name: &str) -> String {
    let folded: String = name.to_lowercase().nfc().collect();
    let stripped = folded.trim_end_matches(['.', ' ']);
    if stripped.is_empty() {
        folded
    } else {
        stripped.to_owned()
    }
}

/// A workspace-relative path folded name by name ([`fold_name`]), joined with `/`. A name that
/// is not UTF-8 is folded lossily (it can then only match a wildcard, as it could before).
pub(crate) fn fold_path(rel: &Path) -> String {
    let mut out = String::new();
    for part in rel.components() {
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(&fold_name(&part.as_os_str().to_string_lossy()));
    }
    out
}

/// A glob folded part by part like the names it is matched against: lowercased, NFC, and a
/// trailing `.` or space dropped, with the backslash that escaped it. Glob syntax survives
/// (metacharacters have no case), except a class range whose ends swap order.
fn fold_pattern(glob: &str) -> String {
    let parts: Vec<String> = glob.split('/').map(fold_glob_part).collect();
    parts.join("/")
}

fn fold_glob_part(part: &str) -> String {
    let mut folded: String = part.to_lowercase().nfc().collect();
    let original = folded.clone();
    while folded.ends_with(['.', ' ']) {
        folded.pop();
        let escapes = folded.chars().rev().take_while(|&c| c == '\\').count();
        if escapes % 2 == 1 {
            folded.pop();
        }
    }
    if folded.is_empty() { original } else { folded }
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
    fn names_fold_case_normalization_and_trailing_dots_and_spaces() {
        assert_eq!(fold_name(".Git"), ".git");
        assert_eq!(fold_name(".GIT. . "), ".git");
        assert_eq!(fold_name("CAFE\u{301}"), "caf\u{e9}");
        assert_eq!(fold_name("Caf\u{c9}"), "caf\u{e9}");
        // Names made only of dots stay what they are.
        assert_eq!(fold_name("."), ".");
        assert_eq!(fold_name(".."), "..");
        assert_eq!(fold_name("..."), "...");
        assert_eq!(
            fold_path(Path::new(".Git /Hooks./Pre-Commit")),
            ".git/hooks/pre-commit"
        );
    }

    #[test]
    fn patterns_fold_like_names_and_keep_their_syntax() {
        assert_eq!(fold_pattern("**/.Git/**"), "**/.git/**");
        assert_eq!(fold_pattern("a\\./B\\ "), "a/b");
        assert_eq!(fold_pattern("cafe\u{301}/*.PEM"), "caf\u{e9}/*.pem");
        assert_eq!(fold_pattern("[A-Z]*"), "[a-z]*");
        // A swapped range cannot compile folded: the exact globs are used on the folded path.
        let p = PathPattern::new("[Z-a]").unwrap();
        assert!(p.folded.is_none());
        assert!(p.matches_folded("_"));
    }

    #[test]
    fn bad_patterns_are_errors() {
        assert!(PathPattern::new("").is_err());
        assert!(PathPattern::new("../x").is_err());
        assert!(PathPattern::new("a/[b").is_err());
    }
}
