//! The two hook events that are gates: `PreToolUse` votes at gate 1 and `PostToolUse` is a
//! gate-5 disposition.

use std::sync::Arc;

use dsh_core::{
    Action, Candidate, Disposition, Gate, HookEvent, PolicyContext, PrePolicy, Tier, ToolCall,
    Vote, async_trait,
};
use serde_json::{Map, Value, json};

use super::{Heard, Hooks, Said, because, claude_call};

/// `PreToolUse` hooks as one gate-1 listener (`hooks`): every hook whose matcher sees the call
/// runs at once; a deny wins, then an ask, then an allow (each at tier `Rule`); silence
/// abstains. A hook error denies unless the hook abstains on errors. A project hook no person
/// approved that would see the call makes it ask.
pub struct HookPolicy {
    hooks: Arc<Hooks>,
}

impl HookPolicy {
    pub fn new(hooks: Arc<Hooks>) -> Self {
        HookPolicy { hooks }
    }
}

/// The event's tool fields: Claude Code's name and input, dsh's beside them.
fn tool_fields(hooks: &Hooks, call: &ToolCall) -> (String, Map<String, Value>) {
    let (name, input) = claude_call(call.name(), call.args(), &hooks.host.workspace);
    let mut m = Map::new();
    m.insert("tool_name".into(), json!(name));
    m.insert("tool_input".into(), input);
    m.insert("tool_use_id".into(), json!(call.id()));
    m.insert("dsh_tool_name".into(), json!(call.name()));
    m.insert("dsh_tool_input".into(), call.args().clone());
    (name, m)
}

#[async_trait]
impl PrePolicy for HookPolicy {
    fn name(&self) -> &str {
        "hooks"
    }

    async fn vote(&self, call: &ToolCall, _cx: &PolicyContext<'_>) -> Vote {
        if !self.hooks.listens(HookEvent::PreToolUse) {
            return Vote::abstain();
        }
        let (claude, fields) = tool_fields(&self.hooks, call);
        let tool = Some((claude.as_str(), call.name()));
        let waiting: Vec<String> = self
            .hooks
            .matching(HookEvent::PreToolUse, tool)
            .filter(|h| !h.may_run())
            .map(|h| h.named())
            .collect();
        let heard = self.hooks.fire(HookEvent::PreToolUse, tool, fields).await;
        let (mut deny, mut ask, mut allow) = (None, None, None);
        for Heard { hook, answer } in heard {
            let named = hook.named();
            match answer {
                Err(_) if hook.abstain_on_error => {}
                Err(e) => {
                    deny.get_or_insert(format!(
                        "{named} failed: {e}; the call is refused (on_error = \"abstain\" would let it go on)"
                    ));
                }
                Ok(a) => {
                    let ignored = if a.ignored.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " (its {} was ignored: a policy never rewrites a call)",
                            a.ignored.join(" and ")
                        )
                    };
                    if let Some(why) = &a.stop {
                        deny.get_or_insert(format!("{named} said not to go on: {why}{ignored}"));
                        continue;
                    }
                    let slot = match a.decision {
                        Some(Said::Deny) => &mut deny,
                        Some(Said::Ask) => &mut ask,
                        Some(Said::Allow) => &mut allow,
                        None => continue,
                    };
                    let verb = match a.decision {
                        Some(Said::Deny) => "denied it",
                        Some(Said::Ask) => "asks for approval",
                        _ => "allowed it",
                    };
                    slot.get_or_insert(format!("{}{ignored}", because(&named, &a.reason, verb)));
                }
            }
        }
        if let Some(r) = deny {
            return Vote::deny(Tier::Rule, r);
        }
        if let Some(first) = waiting.first() {
            return Vote::ask(
                Tier::Rule,
                format!(
                    "{first} would judge this call, but no person has approved it (or what it runs changed since the approval), so it did not run and the call needs approval (run `dsh hooks approve` in this workspace to approve the project's hooks)"
                ),
            );
        }
        if let Some(r) = ask {
            return Vote::ask(Tier::Rule, r);
        }
        if let Some(r) = allow {
            return Vote::allow(Tier::Rule, r);
        }
        Vote::abstain()
    }
}

/// `PostToolUse` hooks as a gate-5 disposition (`hooks`): they see every call that ran, with
/// the result (as DESIGN §4's object) in `tool_response`. A block (or an error, unless the
/// hook abstains on errors) withholds the result's content behind the hook's reason; context
/// is attached to the model's next input. Neither changes whether the call succeeded.
///
/// What a hook says comes after the redaction disposition: with [`PostToolUseHooks::with_scrub`]
/// its block reason and its context pass the session's redactor too, so a hook that prints a
/// secret does not bring it to the model or the journal.
pub struct PostToolUseHooks {
    hooks: Arc<Hooks>,
    scrub: Option<dsh_core::Scrub>,
}

impl PostToolUseHooks {
    pub fn new(hooks: Arc<Hooks>) -> Self {
        PostToolUseHooks { hooks, scrub: None }
    }

    /// Passes what the hooks say (block reasons, context) through `scrub` (the redactor).
    #[must_use]
    pub fn with_scrub(mut self, scrub: dsh_core::Scrub) -> Self {
        self.scrub = Some(scrub);
        self
    }

    fn scrubbed(&self, text: String) -> String {
        match self.scrub.as_ref().and_then(|s| s(&text)) {
            Some(clean) => clean,
            None => text,
        }
    }
}

#[async_trait]
impl Disposition for PostToolUseHooks {
    fn name(&self) -> &str {
        "hooks"
    }

    async fn dispose(&self, call: &ToolCall, candidate: &Candidate) -> Action {
        let ran = candidate.ok() || candidate.decided_by().gate >= Gate::Execute;
        if !ran || !self.hooks.listens(HookEvent::PostToolUse) {
            return Action::Accept;
        }
        let (claude, mut fields) = tool_fields(&self.hooks, call);
        fields.insert(
            "tool_response".into(),
            serde_json::to_value(candidate).unwrap_or(Value::Null),
        );
        let tool = Some((claude.as_str(), call.name()));
        let heard = self.hooks.fire(HookEvent::PostToolUse, tool, fields).await;
        let mut block = None;
        let mut context = Vec::new();
        for Heard { hook, answer } in heard {
            let named = hook.named();
            match answer {
                Err(_) if hook.abstain_on_error => {}
                Err(e) => {
                    block.get_or_insert(format!("{named} failed: {e}"));
                }
                Ok(a) => {
                    if a.decision == Some(Said::Deny) {
                        block.get_or_insert(because(&named, &a.reason, "blocked the result"));
                    } else if let Some(why) = a.stop {
                        block.get_or_insert(format!("{named} said not to go on: {why}"));
                    }
                    context.extend(a.context.map(|c| format!("{named} adds: {c}")));
                }
            }
        }
        match block {
            Some(why) => {
                let mut text = format!(
                    "result withheld by {why} (the call {} all the same)",
                    if candidate.ok() {
                        "succeeded"
                    } else {
                        "failed"
                    }
                );
                for c in &context {
                    text.push('\n');
                    text.push_str(c);
                }
                Action::Block(self.scrubbed(text))
            }
            None if context.is_empty() => Action::Accept,
            None => Action::AttachContext(self.scrubbed(context.join("\n"))),
        }
    }
}
