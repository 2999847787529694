//! Verify (`[verify] command`, `/verify on`, `dsh exec --verify`): after a turn that ended
//! with an answer and changed files, the configured command runs as a call of its own —
//! `source: config`, through every gate like a model's call, so a configured command never
//! runs unasked where a model's would be asked — and a failure goes back to the model as the
//! next prompt, at most `max_rounds` times. "Changed files": a call of a tool that does not
//! declare itself read-only succeeded during the turn, the main agent's or a sub-agent's.

use dsh_core::{CallSource, CancellationToken, ToolCall};
use serde_json::json;

use crate::events::{EventKind, MAIN};
use crate::reply::VerifyStep;
use crate::{Agent, AgentError, Outcome, StopReason};

/// `[verify]` as the runtime takes it.
#[derive(Clone, Debug, Default)]
pub struct VerifyConfig {
    /// The command; `None`: verify cannot be turned on.
    pub command: Option<String>,
    /// Turns handing a failure back, at most (at least 1).
    pub max_rounds: u64,
    /// On from the start (`dsh exec --verify`).
    pub on: bool,
}

pub(super) struct Verify {
    config: VerifyConfig,
}

impl Verify {
    pub(super) fn new(config: VerifyConfig) -> Self {
        Verify { config }
    }

    pub(super) fn on(&self) -> bool {
        self.config.on
    }

    /// Turns verify on or off; on needs a configured command.
    pub(super) fn turn(&mut self, on: bool) -> Result<(), String> {
        if on && self.config.command.is_none() {
            return Err(
                "no [verify] command is configured (e.g. [verify] command = \"cargo test\")"
                    .to_owned(),
            );
        }
        self.config.on = on;
        Ok(())
    }

    fn rounds(&self) -> u64 {
        self.config.max_rounds.max(1)
    }
}

/// Successful calls of tools that may change things, so far, by the agent or its children.
fn changes(agent: &Agent) -> u64 {
    agent.changes()
}

/// One turn on `text`, then, with verify on and files changed, the check and up to its
/// rounds of turns handing a failure back; the last turn's outcome.
pub(super) async fn prompt(
    agent: &mut Agent,
    verify: &Verify,
    text: &str,
    cancel: &CancellationToken,
) -> Result<Outcome, AgentError> {
    let before = changes(agent);
    let mut outcome = agent.run(text, cancel).await?;
    let command = match &verify.config.command {
        Some(c) if verify.on() => c.clone(),
        _ => return Ok(outcome),
    };
    if outcome.stop != StopReason::FinalAnswer || changes(agent) == before {
        return Ok(outcome);
    }
    let rounds = verify.rounds();
    let say = |agent: &Agent, step: VerifyStep| {
        agent
            .session()
            .events
            .send(&MAIN.into(), EventKind::Verify(step));
    };
    for round in 1..=rounds {
        say(
            agent,
            VerifyStep::Running {
                command: command.clone(),
                round,
                rounds,
            },
        );
        let call = ToolCall::new(
            format!("verify-{}", crate::new_session_id()),
            "run_shell",
            json!({"command": command}),
        );
        let ran = agent
            .session()
            .run_own_calls(vec![call], CallSource::Config, cancel)
            .await?;
        let Some(result) = ran.results.first() else {
            break;
        };
        if result.ok() && result.exit_code() == Some(0) {
            say(agent, VerifyStep::Passed);
            break;
        }
        if !result.ok() {
            say(agent, VerifyStep::NotRun);
            break;
        }
        let exit = result.exit_code().unwrap_or(-1);
        say(
            agent,
            VerifyStep::Failed {
                exit,
                round,
                rounds,
            },
        );
        let report = format!(
            "The verify command `{command}` failed (exit {exit}). Its output:\n{}\nFix the cause; do not change the verify command.",
            result.content()
        );
        let before = changes(agent);
        outcome = agent.run(&report, cancel).await?;
        if outcome.stop != StopReason::FinalAnswer || changes(agent) == before {
            break;
        }
    }
    Ok(outcome)
}
