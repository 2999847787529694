//! What the runtime answers a front end (`runtime/`): each command's [`Reply`] and each
//! verify step, carried by the event stream ([`crate::EventKind::Done`],
//! [`crate::EventKind::Verify`]).

use dsh_core::journal::JournalError;
use dsh_core::{BatchError, BatchOutcome};

use crate::outcome::{AgentError, Outcome};

/// Which command an event answers: numbered from 1 in the order sent.
pub type CommandId = u64;

/// How a command ended, in its [`crate::EventKind::Done`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Reply {
    /// A prompt: the last turn's outcome (with verify, the turn that ended the rounds).
    Turn(Result<Outcome, AgentError>),
    /// A person's or a configured command's own calls.
    Calls(Result<BatchOutcome, BatchError>),
    /// Compaction: whether turns were summarized.
    Compacted(Result<bool, AgentError>),
    /// A change the journal records (clearing, naming), or its failure.
    Recorded(Result<(), JournalError>),
    /// Done; nothing to say beyond the events and `Runtime::status`.
    Done,
    /// Not done, and why (e.g. verify turned on with no command configured).
    Refused(String),
    /// What `/undo` put back, or why it could not run.
    Undone(Result<crate::runtime::UndoReport, String>),
    /// The models the endpoint lists, or why it could not list them.
    Models(Result<Vec<String>, String>),
    /// The session ended (its `session_end` written, or why not).
    Finished(Result<(), JournalError>),
}

/// What verify reports as it goes, as the main agent's events.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerifyStep {
    /// The command runs (round `round` of `rounds`).
    Running {
        command: String,
        round: u64,
        rounds: u64,
    },
    /// It exited 0.
    Passed,
    /// It did not run (refused, cancelled, or failed to start; its call's result says why):
    /// nothing is handed to the model.
    NotRun,
    /// It failed; its output goes to the model (round `round` of `rounds`).
    Failed { exit: i32, round: u64, rounds: u64 },
}
