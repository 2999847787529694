//! Permission rules for the non-shell tools: `allow`, `ask` and `deny` lists of `Tool` or
//! `Tool(path pattern)` (DESIGN §5). Rules for `run_shell` are parsed here but judged by the
//! shell policy, against each parsed command (DESIGN §3), never by this listener.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_core::{Access, PolicyContext, PrePolicy, Tier, ToolCall, Vote, Workspace, async_trait};

use crate::glob::PathPattern;

/// The tool whose rules another policy judges.
const SHELL: &str = "run_shell";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuleKind {
    Allow,
    Ask,
    Deny,
}

impl RuleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Allow => "allow",
            RuleKind::Ask => "ask",
            RuleKind::Deny => "deny",
        }
    }
}

/// Why a rule could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "`{rule}` is not a rule: {reason} (write `tool` or `tool(pattern)`, e.g. `read_file(src/**)`)"
)]
pub struct RuleError {
    pub rule: String,
    pub reason: String,
}

/// One permission rule, with where it came from for explanations.
#[derive(Clone, Debug)]
pub struct Rule {
    pub kind: RuleKind,
    pub tool: String,
    /// The text between the parentheses, if any.
    pub specifier: Option<String>,
    /// The specifier compiled as a path pattern (not for `run_shell`).
    pattern: Option<PathPattern>,
    /// Where the rule was written, e.g. "project .dsh/config.toml".
    pub origin: String,
}

impl Rule {
    pub fn parse(kind: RuleKind, text: &str, origin: impl Into<String>) -> Result<Self, RuleError> {
        let err = |reason: &str| RuleError {
            rule: text.to_owned(),
            reason: reason.to_owned(),
        };
        let text = text.trim();
        let (tool, specifier) = match text.find('(') {
            None => (text, None),
            Some(open) => {
                let Some(inner) = text[open + 1..].strip_suffix(')') else {
                    return Err(err("missing `)` at the end"));
                };
                if inner.trim().is_empty() {
                    return Err(err("empty `()`"));
                }
                (&text[..open], Some(inner.trim().to_owned()))
            }
        };
        let valid = !tool.is_empty()
            && tool
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(err("the tool name must be letters, digits, `_` or `-`"));
        }
        let pattern = match (&specifier, tool) {
            (Some(s), t) if t != SHELL => Some(PathPattern::new(s).map_err(|e| err(&e.reason))?),
            _ => None,
        };
        Ok(Rule {
            kind,
            tool: tool.to_owned(),
            specifier,
            pattern,
            origin: origin.into(),
        })
    }

    /// Whether the rule's path pattern matches a workspace-relative path (`false` for rules
    /// without a path pattern).
    pub fn path_matches(&self, rel: &std::path::Path) -> bool {
        self.pattern.as_ref().is_some_and(|p| p.matches(rel))
    }

    /// The rule as written.
    pub fn text(&self) -> String {
        match &self.specifier {
            Some(s) => format!("{}({s})", self.tool),
            None => self.tool.clone(),
        }
    }

    /// Whether the rule applies to a call of `tool` touching `paths` (workspace-relative).
    /// A `deny`/`ask` rule applies when any path matches; an `allow` rule only when every path
    /// does, so one allowed path cannot carry an unlisted one along.
    fn applies(&self, tool: &str, paths: &[PathBuf]) -> bool {
        if self.tool != tool {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return self.specifier.is_none();
        };
        if paths.is_empty() {
            return false;
        }
        match self.kind {
            RuleKind::Allow => paths.iter().all(|p| pattern.matches(p)),
            RuleKind::Ask | RuleKind::Deny => paths.iter().any(|p| pattern.matches(p)),
        }
    }
}

/// The permission rules as a gate-1 listener (tier `Rule`): any matching deny → deny; else any
/// matching ask → ask; else any matching allow → allow; else abstain. Paths are matched after
/// resolution, so `src/../.env` is `.env`.
#[derive(Clone, Debug)]
pub struct PermissionRules {
    workspace: Arc<Workspace>,
    rules: Vec<Rule>,
}

impl PermissionRules {
    pub fn new(workspace: Arc<Workspace>, rules: Vec<Rule>) -> Self {
        PermissionRules { workspace, rules }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rules that name `run_shell`, for the shell policy.
    pub fn shell_rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(|r| r.tool == SHELL)
    }

    fn decide(&self, call: &ToolCall, accesses: &[Access]) -> Vote {
        if call.name() == SHELL {
            return Vote::abstain();
        }
        let paths: Vec<PathBuf> = accesses
            .iter()
            .filter_map(|a| match a {
                Access::Read { path } | Access::Write { path } => {
                    let resolved = self.workspace.resolve(path.to_str()?).ok()?;
                    Some(resolved.rel)
                }
                _ => None,
            })
            .collect();
        for kind in [RuleKind::Deny, RuleKind::Ask, RuleKind::Allow] {
            let hit = self
                .rules
                .iter()
                .find(|r| r.kind == kind && r.applies(call.name(), &paths));
            if let Some(rule) = hit {
                let reason = format!(
                    "{} rule `{}` from {}",
                    kind.as_str(),
                    rule.text(),
                    rule.origin
                );
                return match kind {
                    RuleKind::Deny => Vote::deny(Tier::Rule, reason),
                    RuleKind::Ask => Vote::ask(Tier::Rule, reason),
                    RuleKind::Allow => Vote::allow(Tier::Rule, reason),
                };
            }
        }
        Vote::abstain()
    }
}

#[async_trait]
impl PrePolicy for PermissionRules {
    fn name(&self) -> &str {
        "permissions"
    }
    async fn vote(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        self.decide(call, cx.accesses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bare_and_specified_rules() {
        let r = Rule::parse(RuleKind::Allow, "read_file(src/**)", "user").unwrap();
        assert_eq!(
            (r.tool.as_str(), r.specifier.as_deref()),
            ("read_file", Some("src/**"))
        );
        let r = Rule::parse(RuleKind::Deny, "write_file", "user").unwrap();
        assert_eq!(r.specifier, None);
        let r = Rule::parse(RuleKind::Ask, "run_shell(git push *)", "user").unwrap();
        assert_eq!(r.text(), "run_shell(git push *)");
    }

    #[test]
    fn malformed_rules_are_errors() {
        for bad in [
            "read_file(src/**",
            "read file(x)",
            "(x)",
            "read_file()",
            "read_file(../x)",
        ] {
            assert!(Rule::parse(RuleKind::Allow, bad, "user").is_err(), "{bad}");
        }
    }
}
