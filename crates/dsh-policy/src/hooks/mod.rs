//! Hooks: programs a person configured (or approved) that listen on the session's moments in
//! the JSON protocol Claude Code's hooks speak, so the scripts a team already wrote run
//! unchanged (DESIGN §5). Each is a listener, never a side door: `PreToolUse` hooks vote at
//! gate 1 ([`HookPolicy`], tier `Rule`), `PostToolUse` hooks are a gate-5 disposition
//! ([`PostToolUseHooks`]) that may withhold a result or attach context but never flip
//! success, and the session's own moments (`SessionStart`, `UserPromptSubmit`, `Stop`,
//! `SubagentStop`, `PreCompact`, `Notification`) are fired by the runtime through
//! [`Hooks::on`].
//!
//! A hook that crashes, times out or answers in a shape that does not fit is an error: at
//! gate 1 it denies (fail closed — a deliberate difference from Claude Code, which goes on)
//! unless it is configured `on_error = "abstain"`. A project's hook no person has approved
//! does not run; a `PreToolUse` one still makes the calls it matches ask, so a team's guard
//! is never silently dropped.

mod answer;
mod claude;
mod matcher;
mod policy;
mod run;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_core::{HookEvent, PermissionMode};
use futures::future::join_all;
use serde_json::{Map, Value, json};

pub use answer::{Answer, Said};
pub use claude::{claude_call, claude_name, known_name};
pub use matcher::Matcher;
pub use policy::{HookPolicy, PostToolUseHooks};
pub use run::{Ended, MAX_OUTPUT, Outcome};

use crate::ModeSwitch;

/// One hook, as the runtime was given it.
#[derive(Debug)]
pub struct HookSpec {
    pub event: HookEvent,
    pub matcher: Matcher,
    /// Run with `sh -c` in the workspace.
    pub command: String,
    pub timeout: Duration,
    /// `on_error = "abstain"`: an error changes nothing instead of refusing.
    pub abstain_on_error: bool,
    /// Its own variables, beside the host's environment.
    pub env: Vec<(String, String)>,
    /// Where it was written (`.claude/settings.json:4: hooks.PreToolUse[0].hooks[0]`).
    pub origin: String,
    /// `false`: a project's hook no person has approved yet; it does not run.
    pub approved: bool,
    /// For a project's approved hook: whether the approval still holds, asked before each
    /// run (the agent may have changed a script it names since the session started).
    pub still_approved: Option<StillApproved>,
}

/// Whether a hook's approval still holds (see [`HookSpec::still_approved`]).
#[derive(Clone)]
pub struct StillApproved(pub Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for StillApproved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StillApproved(..)")
    }
}

impl HookSpec {
    /// Whether it may run now: approved, and nothing its approval covers changed since.
    pub fn may_run(&self) -> bool {
        self.approved && self.still_approved.as_ref().is_none_or(|c| (c.0)())
    }

    /// The hook, named for a reason: its command (capped) and where it was written.
    pub fn named(&self) -> String {
        format!(
            "hook {} ({})",
            dsh_core::quote_capped(&self.command),
            self.origin
        )
    }
}

/// What every hook of a session shares: where it runs and what it is told of the session.
#[derive(Debug)]
pub struct HookHost {
    pub workspace: PathBuf,
    /// The command environment's allowlist (never dsh's keys); `CLAUDE_PROJECT_DIR` is added.
    pub env: Vec<(OsString, OsString)>,
    pub session_id: String,
    /// The session's journal, given as `transcript_path`.
    pub transcript_path: PathBuf,
    /// The session's permission mode, given as `permission_mode` in Claude Code's words.
    pub mode: Option<ModeSwitch>,
}

/// One hook's answer to one firing: `Err` is a hook error, in words.
#[derive(Debug)]
pub struct Heard {
    pub hook: Arc<HookSpec>,
    pub answer: Result<Answer, String>,
}

/// What the hooks of a session moment said, together.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// A hook blocked (the prompt, the stop): why, naming it.
    pub block: Option<String>,
    /// Context for the model, in hook order.
    pub context: Vec<String>,
    /// A hook said not to go on (`continue: false`), naming it.
    pub stop: Option<String>,
    /// Things for the person: messages, and errors that decided nothing.
    pub messages: Vec<String>,
}

/// The session's hooks.
#[derive(Debug)]
pub struct Hooks {
    host: HookHost,
    specs: Vec<Arc<HookSpec>>,
}

impl Hooks {
    pub fn new(host: HookHost, specs: Vec<HookSpec>) -> Arc<Hooks> {
        Arc::new(Hooks {
            host,
            specs: specs.into_iter().map(Arc::new).collect(),
        })
    }

    pub fn specs(&self) -> &[Arc<HookSpec>] {
        &self.specs
    }

    /// Whether any hook listens on `event` (approved or not).
    pub fn listens(&self, event: HookEvent) -> bool {
        self.specs.iter().any(|h| h.event == event)
    }

    /// The hooks of `event` that see the tool `(claude, dsh)` (every one when `None`).
    fn matching(
        &self,
        event: HookEvent,
        tool: Option<(&str, &str)>,
    ) -> impl Iterator<Item = &Arc<HookSpec>> {
        self.specs
            .iter()
            .filter(move |h| h.event == event && tool.is_none_or(|(c, d)| h.matcher.matches(c, d)))
    }

    /// Runs every approved hook of `event` that sees `tool`, all at once, with the event's
    /// `fields` beside the common ones; answers in hook order.
    pub async fn fire(
        &self,
        event: HookEvent,
        tool: Option<(&str, &str)>,
        fields: Map<String, Value>,
    ) -> Vec<Heard> {
        let hooks: Vec<&Arc<HookSpec>> =
            self.matching(event, tool).filter(|h| h.may_run()).collect();
        if hooks.is_empty() {
            return Vec::new();
        }
        let mut input = self.common(event);
        input.extend(fields);
        let input = Value::Object(input).to_string();
        join_all(hooks.into_iter().map(|hook| {
            let input = input.as_bytes();
            async move {
                let outcome = run::run(
                    &hook.command,
                    input,
                    &self.env_for(hook),
                    &self.host.workspace,
                    hook.timeout,
                )
                .await;
                Heard {
                    hook: hook.clone(),
                    answer: answer::read(event, &outcome),
                }
            }
        }))
        .await
    }

    /// Fires a session moment's hooks (not `PreToolUse`/`PostToolUse`) and puts their answers
    /// together. An error blocks a prompt (`UserPromptSubmit`, unless the hook abstains on
    /// errors); elsewhere it decides nothing and is told to the person.
    pub async fn on(&self, event: HookEvent, fields: Map<String, Value>) -> Verdict {
        let mut v = Verdict::default();
        for heard in self.fire(event, None, fields).await {
            let named = heard.hook.named();
            match heard.answer {
                Err(e) => {
                    let fail = format!("{named} failed: {e}");
                    if event == HookEvent::UserPromptSubmit && !heard.hook.abstain_on_error {
                        v.block.get_or_insert(format!(
                            "{fail}; the prompt is not sent (on_error = \"abstain\" would let it through)"
                        ));
                    } else {
                        v.messages.push(fail);
                    }
                }
                Ok(a) => {
                    if a.decision == Some(Said::Deny) {
                        v.block
                            .get_or_insert(because(&named, &a.reason, "blocked it"));
                    }
                    if let Some(why) = a.stop {
                        v.stop.get_or_insert(format!("{named}: {why}"));
                    }
                    v.context.extend(a.context);
                    v.messages
                        .extend(a.message.map(|m| format!("{named}: {m}")));
                }
            }
        }
        v
    }

    /// The project's hooks no person approved yet, for the notice.
    pub fn unapproved(&self) -> impl Iterator<Item = &Arc<HookSpec>> {
        self.specs.iter().filter(|h| !h.approved)
    }

    fn common(&self, event: HookEvent) -> Map<String, Value> {
        let mode = self.host.mode.as_ref().map(ModeSwitch::get);
        let claude_mode = match mode {
            Some(PermissionMode::ReadOnly) => "plan",
            Some(PermissionMode::Auto) => "acceptEdits",
            Some(PermissionMode::Yolo) => "bypassPermissions",
            Some(PermissionMode::Ask) | None => "default",
        };
        let mut m = Map::new();
        m.insert("session_id".into(), json!(self.host.session_id));
        m.insert(
            "transcript_path".into(),
            json!(self.host.transcript_path.display().to_string()),
        );
        m.insert(
            "cwd".into(),
            json!(self.host.workspace.display().to_string()),
        );
        m.insert("permission_mode".into(), json!(claude_mode));
        if let Some(mode) = mode {
            m.insert("dsh_permission_mode".into(), json!(mode.as_str()));
        }
        m.insert("hook_event_name".into(), json!(event.as_str()));
        m
    }

    fn env_for(&self, hook: &HookSpec) -> Vec<(OsString, OsString)> {
        let mut env = self.host.env.clone();
        env.extend(hook.env.iter().map(|(k, v)| (k.into(), v.into())));
        // Last, so a hook's own `env` cannot point it elsewhere (its approval reads it as
        // the workspace).
        env.retain(|(k, _)| k != "CLAUDE_PROJECT_DIR");
        env.push((
            "CLAUDE_PROJECT_DIR".into(),
            self.host.workspace.clone().into_os_string(),
        ));
        env
    }
}

/// `named: reason`, or `named what` when it gave no reason.
fn because(named: &str, reason: &str, what: &str) -> String {
    if reason.trim().is_empty() {
        format!("{named} {what}")
    } else {
        format!("{named}: {}", reason.trim())
    }
}
