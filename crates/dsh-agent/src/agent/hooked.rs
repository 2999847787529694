//! The hook events the runtime fires itself (the session's moments; `PreToolUse` and
//! `PostToolUse` are listeners in the pipeline): `SessionStart` and `UserPromptSubmit` may
//! add context (journaled as `context_attached` from `hooks`, so a resume puts it back in the
//! same place) or, for a prompt, block it; `Stop`/`SubagentStop` may send the agent back to
//! work, at most `max_continuations` times a turn; `PreCompact` is told before a summary.
//! What a hook says for the person, and its errors that decide nothing, become
//! [`EventKind::HookSaid`] events.

use dsh_core::journal::{JournalError, Record};
use dsh_core::{AttachedContext, HookEvent};
use dsh_model::Message;
use serde_json::{Map, Value, json};

use super::Agent;
use crate::events::{EventKind, MAIN};

/// The `policy` of context hooks attach.
const HOOKS: &str = "hooks";

impl Agent {
    fn is_main(&self) -> bool {
        &*self.spec.id == MAIN
    }

    /// Fires `event`'s hooks with `fields`; tells the person what they said.
    async fn fire_hooks(
        &self,
        event: HookEvent,
        fields: Map<String, Value>,
    ) -> dsh_policy::hooks::Verdict {
        let hooks = self.session.hooks.clone();
        if !hooks.listens(event) {
            return dsh_policy::hooks::Verdict::default();
        }
        let verdict = hooks.on(event, fields).await;
        for text in &verdict.messages {
            self.emit(EventKind::HookSaid {
                event,
                text: text.clone(),
            });
        }
        verdict
    }

    /// `SessionStart` (`source`: `startup`, `resume`, `clear`): its context waits for the
    /// next prompt.
    pub(crate) async fn session_start_hooks(&mut self, source: &str) {
        let mut fields = Map::new();
        fields.insert("source".into(), json!(source));
        let verdict = self.fire_hooks(HookEvent::SessionStart, fields).await;
        self.hook_context.extend(verdict.context);
    }

    /// `UserPromptSubmit` for the main agent's prompt: `Err` is why a hook blocked it.
    /// Context (with any waiting from `SessionStart`) is returned to attach after the prompt.
    pub(super) async fn prompt_hooks(&mut self, prompt: &str) -> Result<Vec<String>, String> {
        let mut context = std::mem::take(&mut self.hook_context);
        if !self.is_main() {
            return Ok(context);
        }
        let mut fields = Map::new();
        fields.insert("prompt".into(), json!(prompt));
        let verdict = self.fire_hooks(HookEvent::UserPromptSubmit, fields).await;
        if let Some(why) = verdict.block.or(verdict.stop) {
            return Err(why);
        }
        context.extend(verdict.context);
        Ok(context)
    }

    /// `Stop` (the main agent) or `SubagentStop` as the agent would end its turn with
    /// `answer`: `Some(reason)` sends it back to work (`continued` counts how often it did
    /// this turn, up to `max_continuations`).
    pub(super) async fn stop_hooks(&mut self, continued: &mut u32, answer: &str) -> Option<String> {
        let event = if self.is_main() {
            HookEvent::Stop
        } else {
            HookEvent::SubagentStop
        };
        let mut fields = Map::new();
        fields.insert("stop_hook_active".into(), json!(*continued > 0));
        fields.insert("last_assistant_message".into(), json!(answer));
        if !self.is_main() {
            fields.insert("agent_id".into(), json!(&*self.spec.id));
        }
        let verdict = self.fire_hooks(event, fields).await;
        // `continue: false` lets it stop, whatever else was said.
        let go_on = verdict.block.filter(|_| verdict.stop.is_none())?;
        let max = self.session.settings.max_continuations;
        if *continued >= max {
            self.emit(EventKind::HookSaid {
                event,
                text: format!(
                    "{go_on} — not going on: the hooks already sent the agent back {max} time(s) this turn ([hooks] max_continuations)"
                ),
            });
            return None;
        }
        *continued += 1;
        Some(go_on)
    }

    /// `PreCompact` before the oldest turns are summarized (`trigger`: `manual` or `auto`).
    pub(super) async fn pre_compact_hooks(&self, trigger: &str, focus: Option<&str>) {
        let mut fields = Map::new();
        fields.insert("trigger".into(), json!(trigger));
        fields.insert("custom_instructions".into(), json!(focus.unwrap_or("")));
        let _ = self.fire_hooks(HookEvent::PreCompact, fields).await;
    }

    /// Puts hook context in the conversation: each text journaled as `context_attached` from
    /// `hooks`, all of them one user message (as a resume rebuilds them).
    pub(super) fn attach_hook_context(&mut self, texts: &[String]) -> Result<(), JournalError> {
        if texts.is_empty() {
            return Ok(());
        }
        // A hook may print a secret: it reaches neither the model nor the journal.
        let scrub = self.session.scrub.clone();
        let texts: Vec<String> = texts
            .iter()
            .map(|t| scrub(t).unwrap_or_else(|| t.clone()))
            .collect();
        for text in &texts {
            let attached = AttachedContext {
                call_id: String::new(),
                policy: HOOKS.to_owned(),
                text: text.clone(),
            };
            self.record(&Record::ContextAttached(dsh_core::journal::Held::Borrowed(
                &attached,
            )))?;
            self.emit(EventKind::ContextAttached {
                policy: HOOKS.to_owned(),
                text: text.clone(),
            });
        }
        let joined = texts
            .iter()
            .map(|t| format!("[from {HOOKS}] {t}"))
            .collect::<Vec<_>>()
            .join("\n");
        self.history.push(Message::user(joined));
        Ok(())
    }
}
