//! `dsh check` (DESIGN §4): gates 1–3 as a dry run, through the same
//! [`Pipeline::admit`](crate::Pipeline) as the batch, so the check⇔batch invariant is one code
//! path.

use serde::Serialize;

use crate::call::ToolCall;
use crate::decision::Decision;
use crate::pipeline::{Admission, Admit, Mode, Pipeline};
use crate::policy::Tier;
use crate::result::{Candidate, DecidedBy, FailureKind, Gate};
use crate::scope::ToolSet;

/// One vote as `dsh check` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckVote {
    pub policy: String,
    pub tier: Tier,
    /// `None`: the listener abstained (reported as `"abstain"`).
    #[serde(serialize_with = "vote_text")]
    pub vote: Option<Decision>,
    pub reason: String,
}

/// A vote as `dsh check` spells it: its decision, or `abstain`.
fn vote_text<S: serde::Serializer>(vote: &Option<Decision>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(vote.map_or("abstain", Decision::as_str))
}

/// What gates 1 and 3 would decide for a call, without running it or asking anyone (DESIGN
/// §4). `allow` ⇔ a batch without an approver runs it; `ask` ⇔ such a batch answers
/// `unavailable`; `deny` ⇔ the batch refuses it whatever the approver says — as `denied`, or
/// as `tool_error` when a listener or guard could not decide for an OS error on the way
/// ([`crate::Vote::failed`]; the reason names the error).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    pub tool: String,
    pub decision: Decision,
    pub gate: Gate,
    pub policy: Option<String>,
    pub reason: String,
    pub votes: Vec<CheckVote>,
}

impl Pipeline {
    /// [`Pipeline::check_in`] with every tool of the session.
    pub async fn check(&self, call: &ToolCall) -> CheckReport {
        self.check_in(&ToolSet::all(), call).await
    }

    /// Gates 1–3 as a dry run for an agent with `tools`: `Pipeline::admit` in `Mode::Check` —
    /// nothing executes, nobody is asked, nothing is journaled.
    pub async fn check_in(&self, tools: &ToolSet, call: &ToolCall) -> CheckReport {
        let admission = match self.admit(call, Mode::Check { tools }).await {
            Ok(a) => a,
            // Mode::Check journals nothing; were that ever to change, a failure to record
            // is reported as a refusal, never as an allow.
            Err(e) => Admission::refused(Candidate::failure(
                call.id(),
                call.name(),
                FailureKind::Denied,
                DecidedBy::new(Gate::Registry, None, format!("cannot check: {e}")),
            )),
        };
        let (decision, decided) = match admission.verdict {
            Admit::Admitted(a) => (Decision::Allow, a.allowed_by),
            Admit::WouldAsk(decided) => (Decision::Ask, decided),
            Admit::Refused(c) => (Decision::Deny, c.decided_by),
        };
        CheckReport {
            tool: call.name().to_owned(),
            decision,
            gate: decided.gate,
            policy: decided.policy,
            reason: decided.reason,
            votes: admission
                .votes
                .into_iter()
                .map(|(policy, v)| CheckVote {
                    policy,
                    tier: v.tier,
                    vote: v.decision,
                    reason: v.reason,
                })
                .collect(),
        }
    }
}
