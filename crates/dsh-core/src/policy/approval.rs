//! Gate 2, one-shot approval (SPEC P3).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::call::ToolCall;
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

    async fn approve(
        &self,
        request: &ApprovalRequest<'_>,
    ) -> Result<ApprovalOutcome, ApprovalError>;
}
