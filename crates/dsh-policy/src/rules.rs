//! Permission rules for the non-shell tools: `allow`, `ask` and `deny` lists of `Tool` or
//! `Tool(path pattern)` (DESIGN §5). Rules for `run_shell` are compiled here but judged by the
//! shell policy, against each parsed command (DESIGN §3), never by this listener: it filters on
//! the *rule's* tool, not the call's name.
//!
//! Rules judge what a call declares (`Tool::accesses`), not which tool it is (DESIGN §3
//! "Declarations, not names"):
//!
//! - A rule applies to calls of the tool it names as it reads: a bare `deny TOOL` / `ask TOOL` /
//!   `allow TOOL` to every call of that tool (it is about the tool, not about paths); a
//!   `deny`/`ask` path rule when any declared path (read or written) matches; an `allow` path
//!   rule only when every declared path does.
//! - A `deny`/`ask` path rule also applies to every *other* tool's declarations: one naming a
//!   read-only tool (the registry's own `read_only` flag, passed in as `readers`) to every
//!   declared `Read`, so `deny read_file(.env)` stops `grep` over `.env` too; one naming any
//!   other tool (`write_file`, `edit_file`, …) to every declared `Write`. A write tool's path
//!   rule does not govern other tools' declared reads: `deny write_file(src/**)` must not stop
//!   reading `src`. The reason says when a rule applied through another tool's declaration.
//! - An `allow` rule never spreads: it allows only calls of the tool it names. Loosening by
//!   declaration would let any tool ride another's allow.
//! - A call that declares `Execute` is not special here; its declared paths, if any, are judged
//!   like any other's (its command is the shell policy's).
//!
//! A rule arrives as [`dsh_core::Rule`], the one rule type from the configuration file to here,
//! already parsed by its one grammar: this crate never reads rule text. It compiles each rule
//! into a private [`Matcher`] — the specifier trimmed and, for a tool other than `run_shell`,
//! compiled as a path pattern — the second stage of "configuration in two stages" (STYLE 9).

use std::path::PathBuf;
use std::sync::Arc;

use dsh_core::{
    Access, PolicyContext, PrePolicy, Rule, Tier, ToolCall, Vote, Workspace, async_trait,
};

use crate::glob::PathPattern;

/// The tool whose rules another policy judges.
const SHELL: &str = "run_shell";

/// Which list a rule is on: the one allow/ask/deny type, dsh-core's.
pub use dsh_core::Decision;

/// Why a rule's specifier could not be compiled. The rule says where it was written
/// ([`dsh_core::Origin::location`]), for the error the person fixes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "`{rule}` is not a rule: {reason} (write `tool` or `tool(pattern)`, e.g. `read_file(src/**)`)"
)]
pub struct RuleError {
    pub rule: Box<Rule>,
    pub reason: String,
}

/// A rule as the policies match it: its specifier trimmed (an empty one is none) and, for a
/// tool other than `run_shell`, compiled as a path pattern. `run_shell` specifiers are
/// command words, which the shell policy matches against each parsed command.
#[derive(Clone, Debug)]
pub(crate) struct Matcher {
    /// The rule, its specifier trimmed: its `Display` is the rule as reasons quote it.
    pub(crate) rule: Rule,
    /// The specifier compiled as a path pattern (not for `run_shell`).
    pattern: Option<PathPattern>,
}

impl Matcher {
    /// Compiles `rule`: a specifier that is not a valid path pattern (a file tool's) is an
    /// error naming the rule.
    pub(crate) fn new(rule: Rule) -> Result<Self, RuleError> {
        let rule = trimmed(rule);
        let pattern = match &rule.specifier {
            Some(s) if rule.tool != SHELL => match PathPattern::new(s) {
                Ok(p) => Some(p),
                Err(e) => {
                    return Err(RuleError {
                        rule: Box::new(rule),
                        reason: e.reason,
                    });
                }
            },
            _ => None,
        };
        Ok(Matcher { rule, pattern })
    }

    /// A `run_shell` rule: its specifier is command words, so nothing can fail to compile.
    pub(crate) fn command(rule: Rule) -> Self {
        Matcher {
            rule: trimmed(rule),
            pattern: None,
        }
    }

    /// Whether the rule's path pattern matches a workspace-relative path (`false` for rules
    /// without a path pattern).
    pub(crate) fn path_matches(&self, rel: &std::path::Path) -> bool {
        self.pattern.as_ref().is_some_and(|p| p.matches(rel))
    }

    /// Whether its specifier is a path pattern (a rule for a tool other than `run_shell`
    /// that names one).
    pub(crate) fn names_paths(&self) -> bool {
        self.pattern.is_some()
    }

    /// Whether the rule applies to a call of its own tool declaring `paths` (resolved,
    /// workspace-relative, reads and writes alike). A bare rule always applies; a `deny`/`ask`
    /// path rule when any path matches; an `allow` rule only when every path does, so one
    /// allowed path cannot carry an unlisted one along.
    fn applies(&self, paths: &[PathBuf]) -> bool {
        let Some(pattern) = &self.pattern else {
            return self.rule.specifier.is_none();
        };
        if paths.is_empty() {
            return false;
        }
        match self.rule.decision {
            Decision::Allow => paths.iter().all(|p| pattern.matches(p)),
            Decision::Ask | Decision::Deny => paths.iter().any(|p| pattern.matches(p)),
        }
    }
}

/// `rule` with its specifier trimmed, an empty one dropped.
fn trimmed(mut rule: Rule) -> Rule {
    rule.specifier = rule
        .specifier
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    rule
}

/// Which declared accesses of other tools a `deny`/`ask` path rule governs (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spread {
    Reads,
    Writes,
}

impl Spread {
    fn covers(self, access: &Access) -> bool {
        matches!(
            (self, access),
            (Spread::Reads, Access::Read { .. }) | (Spread::Writes, Access::Write { .. })
        )
    }

    fn noun(self) -> &'static str {
        match self {
            Spread::Reads => "read",
            Spread::Writes => "write",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Spread::Reads => "reads",
            Spread::Writes => "writes",
        }
    }
}

/// A rule with the declarations it governs beyond its own tool's calls.
#[derive(Clone, Debug)]
struct Compiled {
    matcher: Matcher,
    spread: Option<Spread>,
}

impl Compiled {
    /// Why the rule applies to `call` declaring `declared` (resolved, workspace-relative), or
    /// `None` when it does not.
    fn applies(&self, call: &ToolCall, declared: &[(&Access, PathBuf)]) -> Option<String> {
        applies(&self.matcher, self.spread, call, declared)
    }
}

/// Why `matcher`'s rule (spread over other tools' declarations as `spread` says) applies to
/// `call` declaring `declared`, or `None` when it does not.
fn applies(
    matcher: &Matcher,
    spread: Option<Spread>,
    call: &ToolCall,
    declared: &[(&Access, PathBuf)],
) -> Option<String> {
    let rule = &matcher.rule;
    let named = || {
        format!(
            "{} rule `{}` from {}",
            rule.decision.as_str(),
            rule,
            rule.origin
        )
    };
    if rule.names(call.name()) {
        let paths: Vec<PathBuf> = declared.iter().map(|(_, p)| p.clone()).collect();
        if matcher.applies(&paths) {
            return Some(named());
        }
    }
    let spread = spread?;
    let (_, path) = declared
        .iter()
        .find(|(a, p)| spread.covers(a) && matcher.path_matches(p))?;
    Some(format!(
        "{} applies to every declared {}: `{}` {} {}",
        named(),
        spread.noun(),
        call.name(),
        spread.verb(),
        path.display()
    ))
}

/// The permission rules as a gate-1 listener (tier `Rule`): any applying deny → deny; else any
/// applying ask → ask; else any applying allow → allow; else abstain. Paths are matched after
/// resolution, so `src/../.env` is `.env`; a declared path that does not resolve inside the
/// workspace is left to confinement.
#[derive(Clone, Debug)]
pub struct PermissionRules {
    workspace: Arc<Workspace>,
    rules: Vec<Compiled>,
    /// Allow rules added while the session runs (they never spread).
    added: crate::AddedRules,
}

impl PermissionRules {
    /// The rules, judged for a session whose read-only tools are `readers` (the registry's own
    /// `read_only` flag, never a list of names): a `deny`/`ask` path rule naming one of them
    /// governs every declared read, one naming any other tool every declared write.
    ///
    /// Each rule is compiled here; the first whose specifier is not a valid path pattern is
    /// the error.
    pub fn new(
        workspace: Arc<Workspace>,
        rules: Vec<Rule>,
        readers: &[String],
    ) -> Result<Self, RuleError> {
        let rules = rules
            .into_iter()
            .map(|rule| {
                let matcher = Matcher::new(rule)?;
                let rule = &matcher.rule;
                let spread = (rule.decision != Decision::Allow
                    && matcher.names_paths()
                    && rule.tool != SHELL)
                    .then(|| {
                        if readers.contains(&rule.tool) {
                            Spread::Reads
                        } else {
                            Spread::Writes
                        }
                    });
                Ok(Compiled { matcher, spread })
            })
            .collect::<Result<_, RuleError>>()?;
        Ok(PermissionRules {
            workspace,
            rules,
            added: crate::AddedRules::new(),
        })
    }

    /// Also judges the allow rules added to `added` while the session runs.
    #[must_use]
    pub fn with_added(mut self, added: crate::AddedRules) -> Self {
        self.added = added;
        self
    }

    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().map(|c| &c.matcher.rule)
    }

    /// The rules that name `run_shell`, for the shell policy.
    pub fn shell_rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules().filter(|r| r.tool == SHELL)
    }

    /// The `deny`/`ask` path rules that govern other tools' declared reads, and those that
    /// govern their declared writes: what the shell policy carries over to shell words
    /// ([`crate::ShellPolicy::with_file_rules`]).
    pub(crate) fn spread_rules(&self) -> (Vec<Matcher>, Vec<Matcher>) {
        let of = |spread| {
            self.rules
                .iter()
                .filter(|c| c.spread == Some(spread))
                .map(|c| c.matcher.clone())
                .collect()
        };
        (of(Spread::Reads), of(Spread::Writes))
    }

    /// Whether the rules allow `call` declaring `accesses` (no deny or ask rule applies, and
    /// an allow rule does): what the read-only mode asks of a call to a service that says it
    /// only reads.
    pub fn allow(&self, call: &ToolCall, accesses: &[Access]) -> bool {
        self.decide(call, accesses).decision == Some(Decision::Allow)
    }

    fn decide(&self, call: &ToolCall, accesses: &[Access]) -> Vote {
        let declared: Vec<(&Access, PathBuf)> = accesses
            .iter()
            .filter_map(|a| match a {
                Access::Read { path } | Access::Write { path } => {
                    let resolved = self.workspace.resolve(path.to_str()?).ok()?;
                    Some((a, resolved.rel))
                }
                _ => None,
            })
            .collect();
        for kind in [Decision::Deny, Decision::Ask, Decision::Allow] {
            let reason = self
                .rules
                .iter()
                .filter(|c| c.matcher.rule.decision == kind && c.matcher.rule.tool != SHELL)
                .find_map(|c| c.applies(call, &declared));
            let reason = reason.or_else(|| {
                (kind == Decision::Allow).then(|| {
                    self.added
                        .rules()
                        .iter()
                        .filter(|r| r.rule.tool != SHELL)
                        .find_map(|rule| applies(rule, None, call, &declared))
                })?
            });
            if let Some(reason) = reason {
                return match kind {
                    Decision::Deny => Vote::deny(Tier::Rule, reason),
                    Decision::Ask => Vote::ask(Tier::Rule, reason),
                    Decision::Allow => Vote::allow(Tier::Rule, reason),
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

    fn rule(decision: Decision, tool: &str, specifier: Option<&str>) -> Rule {
        Rule {
            decision,
            tool: tool.to_owned(),
            specifier: specifier.map(str::to_owned),
            origin: dsh_core::Origin::builtin(),
        }
    }

    #[test]
    fn builds_bare_and_specified_rules() {
        let r = Matcher::new(rule(Decision::Allow, "read_file", Some(" src/** "))).unwrap();
        assert_eq!(
            (r.rule.tool.as_str(), r.rule.specifier.as_deref()),
            ("read_file", Some("src/**"))
        );
        let r = Matcher::new(rule(Decision::Deny, "write_file", None)).unwrap();
        assert_eq!(r.rule.specifier, None);
        let r = Matcher::new(rule(Decision::Ask, "run_shell", Some("git push *"))).unwrap();
        assert_eq!(r.rule.to_string(), "run_shell(git push *)");
    }

    #[test]
    fn a_path_pattern_leaving_the_workspace_is_an_error() {
        let e = Matcher::new(rule(Decision::Allow, "read_file", Some("../x"))).unwrap_err();
        assert_eq!(e.rule.to_string(), "read_file(../x)");
    }
}
