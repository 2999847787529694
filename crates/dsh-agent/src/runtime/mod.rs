//! The runtime every front end drives (DESIGN §2–§3): `dsh exec`, the REPL, and later an
//! editor's ACP client or an MCP client of dsh. A front end holds a [`Runtime`] handle, sends
//! it [`Command`]s and reads the session's ordered event stream; it holds no runtime logic.
//!
//! The runtime owns the main agent (and through it the agents' tree: what each spent, the
//! numbering of children, their models and limits as each call starts a child) and runs one
//! command at a time, in the order sent, on a task of its own. Every command ends with one
//! [`EventKind::Done`] carrying its [`Reply`], after every event it caused. An interrupt is
//! not queued: [`Runtime::interrupt`] cancels every command sent before it at once (running
//! calls are cancelled and recorded), none sent after.
//!
//! - `undo.rs`: `/undo`, the last turns' file changes put back as the person's calls.
//! - `verify.rs`: after a turn that changed files, the configured check, and its failure
//!   handed back to the model.

mod undo;
mod verify;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dsh_core::journal::Record;
use dsh_core::{CallSource, CancellationToken, ToolCall};
use dsh_model::Provider;
use tokio::sync::mpsc;

pub use crate::reply::{CommandId, Reply, VerifyStep};
pub use undo::{UndoReport, Undone};
pub use verify::VerifyConfig;

use crate::events::{EventKind, MAIN};
use crate::{Agent, Ending, Session, Totals};

/// What a front end asks of the runtime.
#[non_exhaustive]
pub enum Command {
    /// One turn of the main agent on this prompt (then, with verify on and files changed,
    /// the configured check and up to its rounds of turns handing a failure back).
    Prompt(String),
    /// Calls no model asked for, marked with who asked (`source`): `user` for a person's
    /// own (the REPL's `/memory add`), `config` for a configured command. Through every gate
    /// like any other call; their events are the main agent's.
    OwnCalls {
        calls: Vec<ToolCall>,
        source: CallSource,
    },
    /// Put back the files the last `turns` turns that changed files changed through the
    /// file tools (`/undo N`), as `source`'s own calls; the model is told.
    Undo { turns: usize, source: CallSource },
    /// Put what a person's own call showed in the conversation for the next request
    /// (`!command`; journaled as `context_attached` from `user`).
    Note { call_id: String, text: String },
    /// Talk to this provider from the next request on (journaled as `model_changed`, so a
    /// resume takes it up again).
    SwitchModel(Arc<dyn Provider>),
    /// The models the current endpoint lists.
    ListModels,
    /// Summarize the oldest turns now (as room-making would; nothing when there is too little
    /// to summarize), keeping in particular what the text names (`/compact FOCUS`).
    Compact(Option<String>),
    /// Empty the conversation (journaled as `history_cleared`).
    Clear,
    /// Send only the last N whole turns (`None`: all of them).
    KeepTurns(Option<usize>),
    /// Build the system prompt again from the workspace (its memory files changed).
    ReloadPrompt,
    /// Name the session (journaled as `session_named`): `/load NAME` finds it.
    Name(String),
    /// Run the configured check after each turn that changed files (`true`), or not.
    Verify(bool),
    /// End the session: its `session_end` is written with the main agent's totals, then the
    /// runtime stops taking commands.
    Finish(Ending),
}

/// What a front end shows of the runtime between commands.
#[derive(Clone, Debug, Default)]
pub struct Status {
    /// The main agent's provider and model.
    pub provider: String,
    pub model: String,
    /// Its endpoint's base URL.
    pub base_url: String,
    /// Turns the conversation holds.
    pub turns: usize,
    /// What the main agent (with its children) spent in this process.
    pub totals: Totals,
    /// `max_cost_usd` is set but the model's prices are unknown, so it cannot stop a run.
    pub cost_budget_unenforced: bool,
    /// Whole turns sent (`None`: all).
    pub keep_turns: Option<usize>,
    /// Whether the configured check runs after turns that change files.
    pub verify: bool,
}

struct Envelope {
    id: CommandId,
    command: Command,
    cancel: CancellationToken,
}

/// The handle a front end holds. Cheap to share behind a reference; dropping it (after
/// [`Command::Finish`]) lets the event stream end.
pub struct Runtime {
    session: Arc<Session>,
    commands: mpsc::UnboundedSender<Envelope>,
    root: CancellationToken,
    /// Commands sent since the last interrupt run under children of this token.
    epoch: Mutex<CancellationToken>,
    sent: AtomicU64,
    status: Arc<Mutex<Status>>,
}

/// The runtime has stopped (after [`Command::Finish`], or its task ended): nothing more runs.
#[derive(Debug, thiserror::Error)]
#[error("the session has ended")]
pub struct Stopped;

impl Runtime {
    /// Starts the runtime around `agent` (the session's main agent) on a task of its own.
    /// `cancel` is the session's: cancelled (SIGINT, SIGTERM), it interrupts every command.
    pub fn start(agent: Agent, verify: VerifyConfig, cancel: CancellationToken) -> Runtime {
        let session = agent.session().clone();
        // The MCP servers start beside the first prompt: a slow one never delays it.
        session.start_extensions();
        let status = Arc::new(Mutex::new(Status::default()));
        let (commands, rx) = mpsc::unbounded_channel();
        let serving = Serving {
            agent,
            verify: verify::Verify::new(verify),
            status: status.clone(),
        };
        serving.publish();
        tokio::spawn(serving.serve(rx));
        Runtime {
            session,
            commands,
            epoch: Mutex::new(cancel.child_token()),
            root: cancel,
            sent: AtomicU64::new(0),
            status,
        }
    }

    /// Queues `command`; its events and then its [`EventKind::Done`] come on the stream.
    pub fn send(&self, command: Command) -> Result<CommandId, Stopped> {
        let id = self.sent.fetch_add(1, Ordering::Relaxed) + 1;
        let cancel = lock(&self.epoch).child_token();
        self.commands
            .send(Envelope {
                id,
                command,
                cancel,
            })
            .map_err(|_| Stopped)?;
        Ok(id)
    }

    /// Interrupts every command sent so far: the running one stops (its running calls are
    /// cancelled and recorded, its turn ends as `interrupted`), the queued ones end at once.
    pub fn interrupt(&self) {
        let mut epoch = lock(&self.epoch);
        epoch.cancel();
        *epoch = self.root.child_token();
    }

    /// The runtime as of the last command's end.
    pub fn status(&self) -> Status {
        lock(&self.status).clone()
    }

    /// The session's shared resources, to read: its id, journal, workspace, tools and
    /// profiles, its permission mode.
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The runtime's task: the main agent and what lasts between commands.
struct Serving {
    agent: Agent,
    verify: verify::Verify,
    status: Arc<Mutex<Status>>,
}

impl Serving {
    async fn serve(mut self, mut commands: mpsc::UnboundedReceiver<Envelope>) {
        // Before the first command: a resumed conversation is a resume.
        let source = if self.agent.turns() > 0 {
            "resume"
        } else {
            "startup"
        };
        self.agent.session_start_hooks(source).await;
        while let Some(Envelope {
            id,
            command,
            cancel,
        }) = commands.recv().await
        {
            let finish = matches!(command, Command::Finish(_));
            let reply = self.run(command, &cancel).await;
            self.publish();
            self.agent
                .session()
                .events
                .send(&MAIN.into(), EventKind::Done { command: id, reply });
            if finish {
                break;
            }
        }
    }

    async fn run(&mut self, command: Command, cancel: &CancellationToken) -> Reply {
        match command {
            Command::Prompt(text) => {
                let checkpoints = self.agent.session().checkpoints.clone();
                checkpoints.begin(&text);
                let outcome = verify::prompt(&mut self.agent, &self.verify, &text, cancel).await;
                checkpoints.end();
                Reply::Turn(outcome)
            }
            Command::Undo { turns, source } => {
                Reply::Undone(undo::undo(&mut self.agent, turns, source, cancel).await)
            }
            Command::OwnCalls { calls, source } => Reply::Calls(
                self.agent
                    .session()
                    .run_own_calls(calls, source, cancel)
                    .await,
            ),
            Command::Note { call_id, text } => {
                Reply::Recorded(self.agent.attach_note(&call_id, &text))
            }
            Command::SwitchModel(provider) => {
                let record = Record::ModelChanged {
                    provider: provider.name().into(),
                    model: provider.model().into(),
                    base_url: provider.base_url().into(),
                };
                let journaled = self.agent.session().pipeline.journal().append(&record);
                self.agent.switch_provider(provider);
                Reply::Recorded(journaled.map(|_| ()))
            }
            Command::ListModels => Reply::Models(
                self.agent
                    .provider()
                    .list_models()
                    .await
                    .map_err(|e| e.to_string()),
            ),
            Command::Compact(focus) => Reply::Compacted(
                self.agent
                    .compact_now(cancel, focus.as_deref().filter(|f| !f.trim().is_empty()))
                    .await,
            ),
            Command::Clear => {
                let cleared = self.agent.clear_history();
                self.agent.session_start_hooks("clear").await;
                Reply::Recorded(cleared)
            }
            Command::KeepTurns(n) => {
                self.agent.config.keep_turns = n;
                Reply::Done
            }
            Command::ReloadPrompt => {
                self.agent.reload_system_prompt();
                Reply::Done
            }
            // What a front end shows of a name (lists, `/load`) is what it holds: a name
            // is one line of visible text.
            Command::Name(name) if name.trim().is_empty() || name.chars().any(char::is_control) => {
                Reply::Refused(
                    "a session name is visible text on one line: no control characters".to_owned(),
                )
            }
            Command::Name(name) => {
                let journal = self.agent.session().pipeline.journal();
                Reply::Recorded(
                    journal
                        .append(&Record::SessionNamed {
                            name: name.as_str().into(),
                            point: journal.last_seq(),
                        })
                        .map(|_| ()),
                )
            }
            Command::Verify(on) => match self.verify.turn(on) {
                Ok(()) => Reply::Done,
                Err(why) => Reply::Refused(why),
            },
            Command::Finish(ending) => {
                self.agent.session().close_extensions().await;
                let totals = self.agent.totals();
                Reply::Finished(self.agent.session().finish(ending, totals))
            }
        }
    }

    fn publish(&self) {
        let a = &self.agent;
        *lock(&self.status) = Status {
            provider: a.provider_name().to_owned(),
            model: a.model().to_owned(),
            base_url: a.provider().base_url().to_owned(),
            turns: a.turns(),
            totals: a.totals(),
            cost_budget_unenforced: a.cost_budget_unenforced(),
            keep_turns: a.config.keep_turns,
            verify: self.verify.on(),
        };
    }
}
