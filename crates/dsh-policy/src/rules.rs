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
//! The rule *text* has one grammar, dsh-config's (`dsh_config::Rule::parse`): this crate never
//! reads rule text. It takes the parsed parts (tool, specifier) and compiles the specifier into a
//! path matcher — the second stage of "configuration in two stages" (STYLE 9).

use std::path::PathBuf;
use std::sync::Arc;

use dsh_core::{Access, PolicyContext, PrePolicy, Tier, ToolCall, Vote, Workspace, async_trait};

use crate::glob::PathPattern;

/// The tool whose rules another policy judges.
const SHELL: &str = "run_shell";

/// Which list a rule is on: the one allow/ask/deny type, dsh-core's.
pub use dsh_core::Decision;

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
    pub kind: Decision,
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
        kind: Decision,
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

    /// Whether its specifier is a path pattern (a rule for a tool other than `run_shell`
    /// that names one).
    pub(crate) fn names_paths(&self) -> bool {
        self.pattern.is_some()
    }

    /// The rule as written.
    pub fn text(&self) -> String {
        match &self.specifier {
            Some(s) => format!("{}({s})", self.tool),
            None => self.tool.clone(),
        }
    }

    /// Whether the rule applies to a call of its own tool declaring `paths` (resolved,
    /// workspace-relative, reads and writes alike). A bare rule always applies; a `deny`/`ask`
    /// path rule when any path matches; an `allow` rule only when every path does, so one
    /// allowed path cannot carry an unlisted one along.
    fn applies(&self, paths: &[PathBuf]) -> bool {
        let Some(pattern) = &self.pattern else {
            return self.specifier.is_none();
        };
        if paths.is_empty() {
            return false;
        }
        match self.kind {
            Decision::Allow => paths.iter().all(|p| pattern.matches(p)),
            Decision::Ask | Decision::Deny => paths.iter().any(|p| pattern.matches(p)),
        }
    }
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
    rule: Rule,
    spread: Option<Spread>,
}

impl Compiled {
    /// Why the rule applies to `call` declaring `declared` (resolved, workspace-relative), or
    /// `None` when it does not.
    fn applies(&self, call: &ToolCall, declared: &[(&Access, PathBuf)]) -> Option<String> {
        applies(&self.rule, self.spread, call, declared)
    }
}

/// Why `rule` (spread over other tools' declarations as `spread` says) applies to `call`
/// declaring `declared`, or `None` when it does not.
fn applies(
    rule: &Rule,
    spread: Option<Spread>,
    call: &ToolCall,
    declared: &[(&Access, PathBuf)],
) -> Option<String> {
    let named = || {
        format!(
            "{} rule `{}` from {}",
            rule.kind.as_str(),
            rule.text(),
            rule.origin
        )
    };
    if rule.tool == call.name() {
        let paths: Vec<PathBuf> = declared.iter().map(|(_, p)| p.clone()).collect();
        if rule.applies(&paths) {
            return Some(named());
        }
    }
    let spread = spread?;
    let (_, path) = declared
        .iter()
        .find(|(a, p)| spread.covers(a) && rule.path_matches(p))?;
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
    pub fn new(workspace: Arc<Workspace>, rules: Vec<Rule>, readers: &[String]) -> Self {
        let rules = rules
            .into_iter()
            .map(|rule| {
                let spread =
                    (rule.kind != Decision::Allow && rule.pattern.is_some() && rule.tool != SHELL)
                        .then(|| {
                            if readers.contains(&rule.tool) {
                                Spread::Reads
                            } else {
                                Spread::Writes
                            }
                        });
                Compiled { rule, spread }
            })
            .collect();
        PermissionRules {
            workspace,
            rules,
            added: crate::AddedRules::new(),
        }
    }

    /// Also judges the allow rules added to `added` while the session runs.
    #[must_use]
    pub fn with_added(mut self, added: crate::AddedRules) -> Self {
        self.added = added;
        self
    }

    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().map(|c| &c.rule)
    }

    /// The rules that name `run_shell`, for the shell policy.
    pub fn shell_rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules().filter(|r| r.tool == SHELL)
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
                .filter(|c| c.rule.kind == kind && c.rule.tool != SHELL)
                .find_map(|c| c.applies(call, &declared));
            let reason = reason.or_else(|| {
                (kind == Decision::Allow).then(|| {
                    self.added
                        .rules()
                        .iter()
                        .filter(|r| r.tool != SHELL)
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

    #[test]
    fn builds_bare_and_specified_rules() {
        let r = Rule::new(Decision::Allow, "read_file", Some(" src/** "), "user").unwrap();
        assert_eq!(
            (r.tool.as_str(), r.specifier.as_deref()),
            ("read_file", Some("src/**"))
        );
        let r = Rule::new(Decision::Deny, "write_file", None, "user").unwrap();
        assert_eq!(r.specifier, None);
        let r = Rule::new(Decision::Ask, "run_shell", Some("git push *"), "user").unwrap();
        assert_eq!(r.text(), "run_shell(git push *)");
    }

    #[test]
    fn a_path_pattern_leaving_the_workspace_is_an_error() {
        let e = Rule::new(Decision::Allow, "read_file", Some("../x"), "user").unwrap_err();
        assert_eq!(e.rule, "read_file(../x)");
    }
}
