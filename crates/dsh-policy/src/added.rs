//! Rules a person adds while a session runs — the REPL's "always allow" — judged by the same
//! policies as configured rules, from the next call on. Only `allow` rules are added this way;
//! they sit with the user's own rules (a person chose them), so a configured `deny` or `ask`
//! still wins over them exactly as over any other allow.

use std::sync::{Arc, RwLock};

use dsh_core::Rule;

use crate::rules::{Decision, Matcher};

/// The added rules, shared by the policies that judge them; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct AddedRules(Arc<RwLock<Arc<Vec<Matcher>>>>);

impl AddedRules {
    pub fn new() -> Self {
        AddedRules::default()
    }

    /// Adds `rule` for every later call. Only `allow` rules whose specifier compiles:
    /// anything else is refused, saying why.
    pub fn add(&self, rule: Rule) -> Result<(), String> {
        let rule = Matcher::new(rule).map_err(|e| e.to_string())?;
        if rule.rule.decision != Decision::Allow {
            return Err(format!(
                "only allow rules are added while a session runs, not `{} {}`",
                rule.rule.decision.as_str(),
                rule.rule
            ));
        }
        let mut rules = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = Vec::clone(&rules);
        next.push(rule);
        *rules = Arc::new(next);
        Ok(())
    }

    /// The rules added so far, in the order they were added (a dry run of "always" judges
    /// them with the configured ones).
    pub fn list(&self) -> Vec<Rule> {
        self.rules().iter().map(|m| m.rule.clone()).collect()
    }

    /// The rules as they are now.
    pub(crate) fn rules(&self) -> Arc<Vec<Matcher>> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}
