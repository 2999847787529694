//! How a run ends: a stop line ([`StopReason`], [`Outcome`]) or a harness fault
//! ([`AgentError`]).

use dsh_core::BatchError;
use dsh_core::journal::JournalError;
use dsh_model::{ModelError, Usage};

/// Why the loop stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    FinalAnswer,
    MaxSteps,
    TokenBudget,
    CostBudget,
    RepeatedCall,
    Interrupted,
    /// A `UserPromptSubmit` hook blocked the prompt: it was not sent (`text` says why).
    PromptBlocked,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::FinalAnswer => "final_answer",
            StopReason::MaxSteps => "max_steps",
            StopReason::TokenBudget => "token_budget",
            StopReason::CostBudget => "cost_budget",
            StopReason::RepeatedCall => "repeated_call",
            StopReason::Interrupted => "interrupted",
            StopReason::PromptBlocked => "prompt_blocked",
        }
    }
}

/// How a run ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub stop: StopReason,
    /// The final answer (or the last assistant text, for other stops).
    pub text: String,
    pub steps: u32,
    pub usage: Usage,
}

/// A harness fault that ended a run: the model could not answer, or the journal could not
/// record. Tool failures are results, never this.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Batch(#[from] BatchError),
}

impl AgentError {
    /// The `stop` reason a run that ended on this fault records.
    pub fn stop_reason(&self) -> &'static str {
        match self {
            AgentError::Model(_) => "model_error",
            AgentError::Journal(_) | AgentError::Batch(_) => "journal_error",
        }
    }
}
