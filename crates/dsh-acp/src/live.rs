//! One open session: the runtime handle the client's requests drive, and the task that turns
//! the runtime's events into the client's updates, in their order — a prompt's answer is
//! sent after every update its turn caused, since both leave from here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, PromptResponse, SessionUpdate, StopReason, TextContent,
    ToolCallContent, ToolCallUpdate, ToolCallUpdateFields,
};
use agent_client_protocol::{Error, ErrorCode};
use dsh_agent::events::MAIN;
use dsh_agent::runtime::CommandId;
use dsh_agent::{Command, Ending, EventKind, EventStream, Reply, Runtime, Session, VerifyStep};
use dsh_core::ToolCall;

use crate::outbox::Outbox;
use crate::{commands, permission, tool_call};

/// How long ending a session waits for its runtime to write `session_end`.
const FINISH_WAIT: Duration = Duration::from_secs(30);

/// What a command's `Done` answers.
enum Wait {
    /// A prompt: its stop reason.
    Prompt(Responder<PromptResponse>),
    /// A slash command: what it did, as the agent's message, then the end of the turn.
    Slash(Responder<PromptResponse>),
    /// The session's end.
    Finish(tokio::sync::oneshot::Sender<()>),
}

type Waiting = Arc<Mutex<HashMap<CommandId, Wait>>>;

/// An open session.
pub(crate) struct Live {
    runtime: Runtime,
    waiting: Waiting,
    outbox: Outbox,
    /// The events, until [`Live::begin`] hands them to the forwarder.
    stream: Mutex<Option<EventStream>>,
}

impl Live {
    /// An open session whose events wait for [`Live::begin`].
    pub(crate) fn new(runtime: Runtime, stream: EventStream, outbox: Outbox) -> Arc<Live> {
        Arc::new(Live {
            runtime,
            waiting: Arc::default(),
            outbox,
            stream: Mutex::new(Some(stream)),
        })
    }

    /// Starts sending the session's events (once the client knows the session: after the
    /// response that names it).
    pub(crate) fn begin(&self) {
        if let Some(stream) = lock(&self.stream).take() {
            tokio::spawn(forward(
                stream,
                self.outbox.clone(),
                self.runtime.session().clone(),
                self.waiting.clone(),
            ));
        }
    }

    pub(crate) fn session(&self) -> &Arc<Session> {
        self.runtime.session()
    }

    pub(crate) fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// One turn on `text`; `responder` gets its stop reason once its updates are sent.
    pub(crate) fn prompt(&self, text: String, responder: Responder<PromptResponse>) {
        self.send(Command::Prompt(text), Wait::Prompt(responder));
    }

    /// A slash command's runtime command.
    pub(crate) fn slash(&self, command: Command, responder: Responder<PromptResponse>) {
        self.send(command, Wait::Slash(responder));
    }

    fn send(&self, command: Command, wait: Wait) {
        // Held while sending, so the forwarder cannot see the command's `Done` before its
        // responder is filed.
        let mut waiting = lock(&self.waiting);
        match self.runtime.send(command) {
            Ok(id) => {
                waiting.insert(id, wait);
            }
            Err(e) => {
                if let Wait::Prompt(r) | Wait::Slash(r) = wait {
                    let _ =
                        r.respond_with_error(Error::new(ErrorCode::INTERNAL_ERROR, e.to_string()));
                }
            }
        }
    }

    /// `session/cancel`: the running turn stops (its running calls are cancelled and
    /// recorded), and answers `cancelled`.
    pub(crate) fn cancel(&self) {
        self.runtime.interrupt();
    }

    /// Ends the session: a running turn is interrupted, then `session_end` is written.
    pub(crate) async fn finish(&self, ending: Ending) {
        self.runtime.interrupt();
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Command::Finish(ending), Wait::Finish(tx));
        if tokio::time::timeout(FINISH_WAIT, rx).await.is_err() {
            eprintln!(
                "dsh: session {} did not end within {} s",
                self.session().id,
                FINISH_WAIT.as_secs()
            );
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The runtime's events as the client's updates, until the session ends.
async fn forward(mut stream: EventStream, outbox: Outbox, session: Arc<Session>, waiting: Waiting) {
    let root = session.workspace.root().to_path_buf();
    // The calls proposed and not finished yet: their arguments make a finished edit's diff.
    let mut calls: HashMap<String, ToolCall> = HashMap::new();
    let chunk = |text: &str| ContentChunk::new(ContentBlock::Text(TextContent::new(text)));
    while let Some(event) = stream.recv().await {
        let main = &*event.agent == MAIN;
        match event.kind {
            EventKind::TextDelta(t) if main => {
                outbox.update(SessionUpdate::AgentMessageChunk(chunk(&t)));
            }
            EventKind::ReasoningDelta(t) if main => {
                outbox.update(SessionUpdate::AgentThoughtChunk(chunk(&t)));
            }
            EventKind::ModelRetry { attempt, reason } if main => {
                outbox.update(SessionUpdate::AgentThoughtChunk(chunk(&format!(
                    "\n(the model call failed; attempt {attempt} follows: {reason})\n"
                ))));
            }
            EventKind::ToolProposed { call } => {
                outbox.update(SessionUpdate::ToolCall(tool_call::proposed(&call, &root)));
                calls.insert(call.id().to_owned(), call);
            }
            EventKind::ToolStarted { call_id } => {
                outbox.update(SessionUpdate::ToolCallUpdate(tool_call::started(&call_id)));
            }
            EventKind::ToolOutput { call_id, text } => {
                outbox.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    call_id,
                    ToolCallUpdateFields::new().content(vec![ToolCallContent::from(
                        ContentBlock::Text(TextContent::new(text)),
                    )]),
                )));
            }
            EventKind::ApprovalAsked { request, reply } => {
                tokio::spawn(permission::ask(
                    outbox.clone(),
                    session.clone(),
                    request,
                    reply,
                ));
            }
            EventKind::ToolFinished { result } => {
                let call = calls.remove(result.call_id());
                outbox.update(SessionUpdate::ToolCallUpdate(tool_call::finished(
                    &session,
                    call.as_ref(),
                    &result,
                )));
            }
            EventKind::HookSaid { event: hook, text } => {
                outbox.say(&format!("\n\n*{hook} hook: {text}*\n\n"));
            }
            EventKind::Verify(step) => outbox.say(&format!("\n\n*{}*\n\n", verify_line(&step))),
            EventKind::Done { command, reply } => {
                let wait = lock(&waiting).remove(&command);
                match wait {
                    Some(Wait::Prompt(r)) => answer_turn(&outbox, r, reply),
                    Some(Wait::Slash(r)) => {
                        outbox.say(&commands::said(reply));
                        let _ = r.respond(PromptResponse::new(StopReason::EndTurn));
                    }
                    Some(Wait::Finish(tx)) => {
                        let _ = tx.send(());
                        break;
                    }
                    None => {}
                }
            }
            _ => {}
        }
    }
}

/// A turn's end as the protocol's stop reason (a model or journal failure is the prompt's
/// error). A stop line other than the answer is also said, so the person knows why.
fn answer_turn(outbox: &Outbox, r: Responder<PromptResponse>, reply: Reply) {
    let outcome = match reply {
        Reply::Turn(Ok(outcome)) => outcome,
        Reply::Turn(Err(e)) => {
            let _ = r.respond_with_error(Error::new(ErrorCode::INTERNAL_ERROR, e.to_string()));
            return;
        }
        _ => {
            let _ = r.respond(PromptResponse::new(StopReason::EndTurn));
            return;
        }
    };
    use dsh_agent::StopReason as Dsh;
    let stop = match outcome.stop {
        Dsh::FinalAnswer => StopReason::EndTurn,
        Dsh::Interrupted => StopReason::Cancelled,
        Dsh::PromptBlocked => {
            outbox.say(&format!("The prompt was not sent: {}", outcome.text));
            StopReason::Refusal
        }
        Dsh::MaxSteps | Dsh::TokenBudget | Dsh::CostBudget | Dsh::RepeatedCall => {
            outbox.say(&format!(
                "\n\n*Stopped after {} step{}: {}.*",
                outcome.steps,
                if outcome.steps == 1 { "" } else { "s" },
                outcome.stop.as_str().replace('_', " ")
            ));
            match outcome.stop {
                Dsh::MaxSteps => StopReason::MaxTurnRequests,
                Dsh::TokenBudget | Dsh::CostBudget => StopReason::MaxTokens,
                // dsh stopped a model repeating one call: the turn is over, nothing refused.
                _ => StopReason::EndTurn,
            }
        }
    };
    let _ = r.respond(PromptResponse::new(stop));
}

fn verify_line(step: &VerifyStep) -> String {
    match step {
        VerifyStep::Running {
            command,
            round,
            rounds,
        } => format!("verify: running `{command}` (round {round} of {rounds})"),
        VerifyStep::Passed => "verify: passed".to_owned(),
        VerifyStep::NotRun => "verify: the check did not run (its call says why)".to_owned(),
        VerifyStep::Failed {
            exit,
            round,
            rounds,
        } => format!(
            "verify: failed with exit {exit} (round {round} of {rounds}); its output goes to the model"
        ),
        _ => String::new(),
    }
}
