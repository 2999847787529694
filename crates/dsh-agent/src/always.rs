//! "Always allow": a policy change a person may make at an approval prompt, not an approval.
//! dsh-agent computes the candidate rule and where it would be written; a front end only
//! shows it and relays the choice.
//!
//! - The rule: for a declared command, its program and subcommand with ` *`
//!   (`run_shell(git commit *)`); for a call declaring one path, the tool and that exact path
//!   (`write_file(src/main.rs)`); otherwise the tool's name.
//! - It is offered only when `dsh check` with the rule added would answer `allow` for this
//!   call: a structural `Rule`-tier ask (the memory file, a shell construct) or a guard
//!   cannot be lifted by a rule, so "always" is not offered there.
//! - Where: the project's `.dsh/config.toml` in a trusted workspace; otherwise the user
//!   configuration, in the section for this workspace only. Never by trusting the
//!   workspace.
//! - Once written, the running session judges it too (from the next call), as the user's
//!   own rule.

use std::path::PathBuf;

use dsh_core::{Access, Layer, Origin, Rule, ToolCall};
use dsh_policy::Decision;

use crate::{EventSink, Session};

/// What "always allow" would do for one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlwaysAllow {
    /// The rule, in the rule grammar: `run_shell(cargo test *)`.
    pub rule: String,
    /// The configuration file it goes to.
    pub file: PathBuf,
    /// Where in that file, for the person: `[permissions] allow` or
    /// `[workspaces."/repo".permissions] allow`.
    pub section: String,
    scope: dsh_config::RuleScope,
    tool: String,
    specifier: Option<String>,
}

/// Why "always allow" could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum AlwaysError {
    #[error(transparent)]
    Config(#[from] dsh_config::ConfigError),
    #[error("the rule `{rule}` cannot be added: {reason}")]
    Rule { rule: String, reason: String },
}

impl Session {
    /// The "always allow" a person may choose for `call` (which declares `accesses`), if a
    /// rule can lift its `ask`; `None` otherwise.
    pub async fn always_allow_for(
        &self,
        call: &ToolCall,
        accesses: &[Access],
    ) -> Option<AlwaysAllow> {
        let rule = self.rule_for(call, accesses)?;
        let parsed = Rule::parse(Decision::Allow, &rule, Origin::builtin()).ok()?;
        let (file, scope) = self.settings.rule_target.clone()?;
        // A project file (or its directory) linking out of the workspace would have the rule
        // written somewhere the person was not shown: not offered.
        if scope == dsh_config::RuleScope::Permissions && !self.inside_workspace(&file) {
            return None;
        }
        let section = match &scope {
            dsh_config::RuleScope::Permissions => "[permissions] allow".to_owned(),
            dsh_config::RuleScope::Workspace(ws) => {
                format!("[workspaces.\"{}\".permissions] allow", ws.display())
            }
        };
        let candidate = AlwaysAllow {
            rule,
            file,
            section,
            scope,
            tool: parsed.tool,
            specifier: parsed.specifier,
        };
        self.would_allow(&candidate, call)
            .await
            .then_some(candidate)
    }

    /// Every permission rule in force, with where it was written: the rules the session was
    /// assembled with, then those "always allow" added while it runs (`/permissions`).
    pub fn rules_in_force(&self) -> Vec<Rule> {
        let mut rules = self.settings.rules.clone();
        rules.extend(self.added.list());
        rules
    }

    /// The protected path patterns in force (no tool writes a path they match).
    pub fn protected_in_force(&self) -> &[String] {
        &self.settings.protected
    }

    /// Writes the rule (comments and the rest of the file kept) and has the running session
    /// judge it from the next call on. What was written, for the person.
    pub fn always_allow(&self, a: &AlwaysAllow) -> Result<String, AlwaysError> {
        let recorded = dsh_config::record_rule(&a.file, a.scope.clone(), Decision::Allow, &a.rule)?;
        let origin = Origin {
            path: Some(recorded.file.clone()),
            line: recorded.line,
            key: Some(recorded.key.clone()),
            ..origin_of(a)
        };
        let rule = self.spec_of(a, origin);
        self.added.add(rule).map_err(|reason| AlwaysError::Rule {
            rule: a.rule.clone(),
            reason,
        })?;
        Ok(if recorded.added {
            format!(
                "added `{}` to {} in {}",
                a.rule,
                a.section,
                recorded.file.display()
            )
        } else {
            format!(
                "`{}` was already in {} ({}); it applies to this session now",
                a.rule,
                recorded.file.display(),
                recorded.key
            )
        })
    }

    /// The rule "always" would add, before any check.
    fn rule_for(&self, call: &ToolCall, accesses: &[Access]) -> Option<String> {
        crate::allow_rule::rule_for(&self.shell, &self.workspace, call, accesses)
    }

    /// Whether `file` (or, when it does not exist yet, its directory) resolves inside the
    /// workspace.
    fn inside_workspace(&self, file: &std::path::Path) -> bool {
        let resolved = std::fs::canonicalize(file).or_else(|_| {
            file.parent()
                .map_or_else(|| Ok(PathBuf::new()), std::fs::canonicalize)
                .or_else(|_| {
                    // Neither exists: the project's `.dsh` would be created inside.
                    Ok::<_, std::io::Error>(self.workspace.root().join(".dsh"))
                })
        });
        resolved.is_ok_and(|p| p.starts_with(self.workspace.root()))
    }

    fn spec_of(&self, a: &AlwaysAllow, origin: Origin) -> Rule {
        Rule {
            decision: Decision::Allow,
            tool: a.tool.clone(),
            specifier: a.specifier.clone(),
            origin,
        }
    }

    /// `dsh check` for `call` on a dry session with the rule (and the ones added before)
    /// added: whether it would answer `allow`.
    async fn would_allow(&self, a: &AlwaysAllow, call: &ToolCall) -> bool {
        let mut settings = self.settings.clone();
        settings.events = EventSink::none();
        settings.rules.extend(self.added.list());
        settings.rules.push(self.spec_of(a, origin_of(a)));
        let Ok(dry) = Session::assemble_dry(&settings) else {
            return false;
        };
        dry.pipeline.check(call).await.decision == dsh_core::Decision::Allow
    }
}

/// Where "always" writes the rule, before it is written: the project file of a trusted
/// workspace, else the user file's section for this workspace.
fn origin_of(a: &AlwaysAllow) -> Origin {
    let layer = match a.scope {
        dsh_config::RuleScope::Permissions => Layer::Project,
        dsh_config::RuleScope::Workspace(_) => Layer::User,
    };
    Origin {
        layer,
        path: Some(a.file.clone()),
        line: None,
        key: None,
    }
}
