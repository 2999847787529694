//! Permission rules for the non-shell tools: `allow`, `ask` and `deny` lists of `Tool` or
//! `Tool(path pattern)` (DESIGN §5). Rules for `run_shell` are compiled here but judged by the
//! shell policy, against each parsed command (DESIGN §3), never by this listener.
//!
//! The rule *text* has one grammar, dsh-config's (`dsh_config::Rule::parse`): this crate never
//! reads rule text. It takes the parsed parts (tool, specifier) and compiles the specifier into a
//! path matcher — the second stage of "configuration in two stages" (STYLE 9).

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

/// Why a rule's specifier could not be compiled.
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
    /// A rule from its parsed parts (dsh-config's grammar splits the text): compiles the
    /// specifier as a path pattern, except for `run_shell`, whose specifier the shell policy
    /// reads as a command pattern. The specifier is trimmed; an empty one means none.
    pub fn new(
        kind: RuleKind,
        tool: impl Into<String>,
        specifier: Option<&str>,
        origin: impl Into<String>,
    ) -> Result<Self, RuleError> {
        let tool = tool.into();
        let specifier = specifier.map(str::trim).filter(|s| !s.is_empty());
        let pattern = match specifier {
            Some(s) if tool != SHELL => Some(PathPattern::new(s).map_err(|e| RuleError {
                rule: format!("{tool}({s})"),
                reason: e.reason,
            })?),
            _ => None,
        };
        Ok(Rule {
            kind,
            tool,
            specifier: specifier.map(str::to_owned),
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
    fn builds_bare_and_specified_rules() {
        let r = Rule::new(RuleKind::Allow, "read_file", Some(" src/** "), "user").unwrap();
        assert_eq!(
            (r.tool.as_str(), r.specifier.as_deref()),
            ("read_file", Some("src/**"))
        );
        let r = Rule::new(RuleKind::Deny, "write_file", None, "user").unwrap();
        assert_eq!(r.specifier, None);
        let r = Rule::new(RuleKind::Ask, "run_shell", Some("git push *"), "user").unwrap();
        assert_eq!(r.text(), "run_shell(git push *)");
    }

    #[test]
    fn a_path_pattern_leaving_the_workspace_is_an_error() {
        let e = Rule::new(RuleKind::Allow, "read_file", Some("../x"), "user").unwrap_err();
        assert_eq!(e.rule, "read_file(../x)");
    }
}
