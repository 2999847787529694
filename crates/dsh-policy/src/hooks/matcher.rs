//! A hook's `matcher`, read as Claude Code reads it: absent, empty or `*` matches every tool;
//! plain names with `|` between them (`Edit|Write`) match exactly; anything else is a regular
//! expression searched in the tool's name (`mcp__github__.*`, `Notebook.*`). A name matches
//! in either spelling — Claude Code's (`Bash`) or dsh's (`run_shell`).

use regex::Regex;

/// Which tools a hook sees.
#[derive(Clone, Debug)]
pub enum Matcher {
    Every,
    Names(Vec<String>),
    Pattern(Regex),
}

impl Matcher {
    /// `Err` says why a pattern is not a regular expression.
    pub fn parse(text: Option<&str>) -> Result<Matcher, String> {
        let Some(text) = text.map(str::trim).filter(|t| !t.is_empty() && *t != "*") else {
            return Ok(Matcher::Every);
        };
        // `Edit | Write` is names too: a guard must not silently see nothing.
        if text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_|- ".contains(c))
        {
            return Ok(Matcher::Names(
                text.split('|')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned)
                    .collect(),
            ));
        }
        Regex::new(text)
            .map(Matcher::Pattern)
            .map_err(|e| format!("{text:?} is not a regular expression: {e}"))
    }

    /// Whether a call to the tool Claude Code calls `claude` and dsh calls `dsh` is seen.
    pub fn matches(&self, claude: &str, dsh: &str) -> bool {
        match self {
            Matcher::Every => true,
            Matcher::Names(names) => names.iter().any(|n| n == claude || n == dsh),
            Matcher::Pattern(re) => re.is_match(claude) || re.is_match(dsh),
        }
    }

    /// The exact names it lists (for the "no such tool" warning); none for a pattern.
    pub fn names(&self) -> &[String] {
        match self {
            Matcher::Names(n) => n,
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> Matcher {
        Matcher::parse(Some(text)).unwrap()
    }

    #[test]
    fn names_alternatives_and_patterns_match_as_claude_code_reads_them() {
        assert!(m("Bash").matches("Bash", "run_shell"));
        assert!(m("run_shell").matches("Bash", "run_shell"));
        assert!(!m("Bash").matches("Read", "read_file"));
        assert!(
            !m("Bas").matches("Bash", "run_shell"),
            "exact, not a prefix"
        );
        assert!(m("Edit|Write").matches("Write", "write_file"));
        assert!(m("mcp__git__.*").matches("mcp__git__status", "mcp__git__status"));
        assert!(!m("mcp__git__.*").matches("mcp__gh__x", "mcp__gh__x"));
        assert!(m("*").matches("Anything", "anything"));
        assert!(Matcher::parse(None).unwrap().matches("X", "x"));
        assert!(
            Matcher::parse(Some("(["))
                .unwrap_err()
                .contains("regular expression")
        );
        assert_eq!(m("Edit|Write").names(), ["Edit", "Write"]);
        assert_eq!(m("Edit | Write").names(), ["Edit", "Write"]);
    }
}
