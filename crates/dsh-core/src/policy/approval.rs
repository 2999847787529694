//! Gate 2, one-shot approval (SPEC P3): the [`Approver`] contract and [`ask_once`], the
//! pipeline's whole handling of an `ask`.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::call::{CallSource, ToolCall};
use crate::journal::{Journal, JournalError, Record};
use crate::result::{Candidate, DecidedBy, FailureKind, Gate};
use crate::tool::{Access, ToolSpec};

/// The closed set of approval outcomes. Exactly one variant lets the call proceed; anything
/// uncertain — nobody to ask, a channel that broke, an approver that panicked — is one of the
/// other three.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalOutcome {
    /// A person explicitly allowed this one call.
    AllowedOnce,
    /// A person said no.
    Rejected,
    /// The question was withdrawn (user interrupt) before an answer.
    Cancelled,
    /// No approver, no person reachable, or the approver failed.
    Unavailable,
}

/// What an approver answers: the outcome and, with a refusal, what the person told the
/// model (it becomes part of the call's result).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalAnswer {
    pub outcome: ApprovalOutcome,
    /// Kept only with [`ApprovalOutcome::Rejected`].
    pub message: Option<String>,
}

impl From<ApprovalOutcome> for ApprovalAnswer {
    fn from(outcome: ApprovalOutcome) -> Self {
        ApprovalAnswer {
            outcome,
            message: None,
        }
    }
}

impl ApprovalAnswer {
    /// A refusal with a message for the model.
    pub fn rejected_with(message: impl Into<String>) -> Self {
        ApprovalAnswer {
            outcome: ApprovalOutcome::Rejected,
            message: Some(message.into()),
        }
    }
}

/// What an approver is asked. The call is immutable: approving it approves exactly these
/// arguments.
#[derive(Debug)]
pub struct ApprovalRequest<'a> {
    pub call: &'a ToolCall,
    pub spec: &'a ToolSpec,
    pub accesses: &'a [Access],
    /// The policy whose `ask` vote sent the call here (`None`: the tool's default).
    pub policy: Option<&'a str>,
    /// Why it is being asked.
    pub reason: &'a str,
    /// What the call would change, as its tool shows it ([`crate::Tool::preview`]): a diff
    /// for a file change. A display only.
    pub preview: Option<&'a str>,
    /// Cancelled on user interrupt; the approver should stop waiting and answer `Cancelled`.
    pub cancel: CancellationToken,
}

/// An approver failure; the pipeline turns it into [`ApprovalOutcome::Unavailable`].
pub type ApprovalError = Box<dyn std::error::Error + Send + Sync>;

/// Gate 2: the channel to a person.
///
/// **Lifetime:** one per session. It is asked at most once per call — retries in gate 4 never
/// ask again.
///
/// **On panic or `Err`:** the outcome is `Unavailable`, and the call is not run.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Short stable name, shown in results.
    fn name(&self) -> &str;

    /// Whether it shows a person what a call would change ([`ApprovalRequest::preview`]);
    /// only then is the preview computed (it may read and diff a large file).
    fn shows_preview(&self) -> bool {
        false
    }

    async fn approve(&self, request: &ApprovalRequest<'_>)
    -> Result<ApprovalAnswer, ApprovalError>;
}

/// The approver named for a call a person typed: typing it was the approval.
pub const TYPED_BY_PERSON: &str = "typed by the person";

/// Gate 2 for one call that gate 1 sent to `ask`: asks `approver` once (no approver, an `Err`
/// or a panic are `Unavailable`; the request's cancellation is `Cancelled`), journals the
/// `approval` record, and returns what the call may proceed with — `Ok(allowed_by)` only on
/// `AllowedOnce` — or the refusal. An `Err` only when the journal could not record.
pub(crate) async fn ask_once(
    approver: Option<&Arc<dyn Approver>>,
    request: &ApprovalRequest<'_>,
    journal: &dyn Journal,
    unavailable_hint: &str,
) -> Result<Result<DecidedBy, Candidate>, JournalError> {
    let call = request.call;
    let (answer, approver) = match approver {
        // What a person typed at a terminal (`/memory add`) is its own approval (DESIGN §3):
        // nobody is asked, and the record says who approved it. Front ends give this source
        // only to what a person typed; piped lines are `Batch`, and the calls they build
        // must write what the person named (no symlink taking them elsewhere).
        _ if call.source() == CallSource::User => {
            (ApprovalOutcome::AllowedOnce.into(), Some(TYPED_BY_PERSON))
        }
        None => (ApprovalOutcome::Unavailable.into(), None),
        Some(approver) => {
            let asked = AssertUnwindSafe(approver.approve(request)).catch_unwind();
            let answer: ApprovalAnswer = tokio::select! {
                r = asked => match r {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(_)) | Err(_) => ApprovalOutcome::Unavailable.into(),
                },
                () = request.cancel.cancelled() => ApprovalOutcome::Cancelled.into(),
            };
            (answer, Some(approver.name()))
        }
    };
    let outcome = answer.outcome;
    let message = answer
        .message
        .filter(|m| outcome == ApprovalOutcome::Rejected && !m.trim().is_empty());
    journal.append_as(
        call.agent(),
        &Record::Approval {
            call_id: call.id().into(),
            outcome,
            message: message.as_deref().map(Into::into),
        },
    )?;
    let ask = request.reason;
    let (kind, reason) = match outcome {
        ApprovalOutcome::AllowedOnce => {
            return Ok(Ok(DecidedBy::new(
                Gate::Approval,
                approver,
                if approver == Some(TYPED_BY_PERSON) {
                    format!("typed by the person, which approves it ({ask})")
                } else {
                    format!("approved once ({ask})")
                },
            )));
        }
        ApprovalOutcome::Rejected => (
            FailureKind::Rejected,
            match &message {
                Some(m) => format!("the user rejected this call ({ask}) and says: {}", m.trim()),
                None => format!(
                    "the user rejected this call ({ask}); do not retry it unchanged — ask the user how to proceed"
                ),
            },
        ),
        ApprovalOutcome::Cancelled => (
            FailureKind::CancelledBefore,
            format!("the approval was cancelled before an answer ({ask}); the call did not run"),
        ),
        ApprovalOutcome::Unavailable => {
            let why = if approver.is_some() {
                "the approver could not answer"
            } else {
                "no approver is available to ask"
            };
            (
                FailureKind::Unavailable,
                format!(
                    "`{}` needs approval ({ask}) and {why}; {unavailable_hint}",
                    call.name()
                ),
            )
        }
    };
    Ok(Err(Candidate::failure(
        call.id(),
        call.name(),
        kind,
        DecidedBy::new(Gate::Approval, approver, reason),
    )))
}
