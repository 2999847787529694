//! Gate 1, pre-policy: listeners vote (SPEC P2, DESIGN §3).

use async_trait::async_trait;
use serde::Serialize;

use crate::call::ToolCall;
use crate::decision::Decision;
use crate::result::FailureKind;
use crate::tool::{Access, ToolSpec};

/// How a vote counts. `Rule` votes come from what someone configured or checked structurally
/// (permission rules, hooks, confinement, protected paths); `Default` votes from built-in
/// classifications (a tool's default, the shell's default lists). A rule allow lifts a default
/// ask; nothing lifts a deny.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    Rule,
    Default,
}

/// One listener's vote on one call. There is deliberately no way for it to carry new
/// arguments (SPEC P2): a policy that wants different input denies with a reason and the
/// model calls again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vote {
    /// What it decides; `None`: it abstains.
    pub decision: Option<Decision>,
    pub tier: Tier,
    /// Why, in words a person and the model can act on.
    pub reason: String,
    /// What a `Deny` makes of the call: `denied` for a decision; `crashed` when the
    /// pipeline caught the listener's panic; `tool_error` when the listener could not decide
    /// because of an OS error on the way ([`Vote::failed`]).
    pub(crate) refusal: FailureKind,
    /// An `Allow` that holds only if the call runs in the read-only profile
    /// ([`crate::Clearance::ReadOnly`]); see [`Vote::reading_only`].
    pub(crate) reading_only: bool,
    /// An `Allow` that holds only in the hardened workspace-write profile
    /// ([`crate::Clearance::Hardened`]); see [`Vote::in_hardened_sandbox`].
    pub(crate) hardened: bool,
}

impl Vote {
    pub fn allow(tier: Tier, reason: impl Into<String>) -> Self {
        Vote::new(Some(Decision::Allow), tier, reason)
    }
    pub fn ask(tier: Tier, reason: impl Into<String>) -> Self {
        Vote::new(Some(Decision::Ask), tier, reason)
    }
    pub fn deny(tier: Tier, reason: impl Into<String>) -> Self {
        Vote::new(Some(Decision::Deny), tier, reason)
    }
    pub fn abstain() -> Self {
        Vote::new(None, Tier::Default, "")
    }

    /// The listener could not decide: an OS error on the way (`EMFILE` while resolving a
    /// path, a path that changed while being resolved). The call must not run unjudged, so
    /// this counts as a `Rule` deny in [`combine_votes`] — but the call's result is
    /// `tool_error` naming the error, not `denied` (DESIGN §4: an OS error is never a
    /// denial), and a real denial by another listener is named before it.
    pub fn failed(reason: impl Into<String>) -> Self {
        Vote {
            refusal: FailureKind::ToolError,
            ..Vote::new(Some(Decision::Deny), Tier::Rule, reason)
        }
    }

    /// Makes an `Allow` hold only on the condition that the call runs in the read-only
    /// profile: the policy allows it because it knows the call only reads (the shell
    /// policy's free commands). The call is then cleared [`crate::Clearance::ReadOnly`].
    #[must_use]
    pub fn reading_only(mut self) -> Self {
        self.reading_only = true;
        self
    }

    /// Makes an `Allow` hold only on the condition that the call runs in the hardened
    /// workspace-write profile (the `auto` permission mode): cleared
    /// [`crate::Clearance::Hardened`].
    #[must_use]
    pub fn in_hardened_sandbox(mut self) -> Self {
        self.hardened = true;
        self
    }

    /// Whether this is a [`Vote::failed`]: a refusal that decides nothing about the call.
    pub fn is_failure(&self) -> bool {
        self.refusal == FailureKind::ToolError
    }

    fn new(decision: Option<Decision>, tier: Tier, reason: impl Into<String>) -> Self {
        Vote {
            decision,
            tier,
            reason: reason.into(),
            refusal: FailureKind::Denied,
            reading_only: false,
            hardened: false,
        }
    }

    pub(crate) fn crashed(reason: String) -> Self {
        Vote {
            refusal: FailureKind::Crashed,
            ..Vote::new(Some(Decision::Deny), Tier::Rule, reason)
        }
    }
}

/// What every gate-1 listener and guard may look at besides the call: the tool's declaration
/// and what this call declares it touches.
#[derive(Clone, Copy, Debug)]
pub struct PolicyContext<'a> {
    pub spec: &'a ToolSpec,
    pub accesses: &'a [Access],
}

/// A gate-1 listener.
///
/// **Lifetime:** one value per session, shared by every call; calls are voted on one at a
/// time, in submission order (SPEC P10), so a listener may keep order-sensitive state (a
/// breaker that trips after three dangerous calls in a row) behind its own lock.
///
/// **May not:** change the arguments (there is no way to), or rely on other listeners: votes
/// are combined by [`combine_votes`], never by registration order.
///
/// **On panic:** the vote counts as a `Rule` deny and the call fails as `crashed` at gate
/// `pre_policy`, naming this listener. The batch goes on.
#[async_trait]
pub trait PrePolicy: Send + Sync {
    /// Short stable name, shown in results (`decided_by.policy`) and in `dsh check`.
    fn name(&self) -> &str;

    async fn vote(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Vote;
}

/// DESIGN §3's combination, first match wins:
///
/// 1. any `Deny` → deny (a listener that decided is named before one that could not,
///    [`Vote::failed`]);
/// 2. any `Rule` `Ask` → ask;
/// 3. any `Rule` `Allow` → allow (it lifts `Default` asks);
/// 4. any `Default` `Ask` → ask;
/// 5. any `Default` `Allow` → allow;
/// 6. no votes → the tool's default (read-only → allow, otherwise ask).
///
/// Within a row the earliest vote in registration order is named as the decider.
pub fn combine_votes(votes: &[Vote], read_only: bool) -> (Decision, Option<usize>) {
    let find = |decision: Decision, tier: Option<Tier>| {
        votes
            .iter()
            .position(|v| v.decision == Some(decision) && tier.is_none_or(|t| v.tier == t))
    };
    // A decision names the denial; a failure only when no listener decided to deny.
    if let Some(i) = votes
        .iter()
        .position(|v| v.decision == Some(Decision::Deny) && !v.is_failure())
    {
        return (Decision::Deny, Some(i));
    }
    let rows = [
        (Decision::Deny, None),
        (Decision::Ask, Some(Tier::Rule)),
        (Decision::Allow, Some(Tier::Rule)),
        (Decision::Ask, Some(Tier::Default)),
        (Decision::Allow, Some(Tier::Default)),
    ];
    for (decision, tier) in rows {
        if let Some(i) = find(decision, tier) {
            return (decision, Some(i));
        }
    }
    if read_only {
        (Decision::Allow, None)
    } else {
        (Decision::Ask, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn combine(votes: &[Vote]) -> (Decision, Option<usize>) {
        combine_votes(votes, false)
    }

    #[test]
    fn any_deny_wins_over_rule_allow() {
        let v = [Vote::allow(Tier::Rule, "r"), Vote::deny(Tier::Default, "d")];
        assert_eq!(combine(&v), (Decision::Deny, Some(1)));
    }

    #[test]
    fn rule_ask_beats_rule_allow() {
        let v = [Vote::allow(Tier::Rule, "a"), Vote::ask(Tier::Rule, "q")];
        assert_eq!(combine(&v), (Decision::Ask, Some(1)));
    }

    #[test]
    fn rule_allow_lifts_default_ask() {
        let v = [Vote::ask(Tier::Default, "q"), Vote::allow(Tier::Rule, "a")];
        assert_eq!(combine(&v), (Decision::Allow, Some(1)));
    }

    #[test]
    fn default_ask_beats_default_allow() {
        let v = [
            Vote::allow(Tier::Default, "a"),
            Vote::ask(Tier::Default, "q"),
        ];
        assert_eq!(combine(&v), (Decision::Ask, Some(1)));
    }

    #[test]
    fn default_allow_applies_when_alone() {
        let v = [Vote::abstain(), Vote::allow(Tier::Default, "a")];
        assert_eq!(combine(&v), (Decision::Allow, Some(1)));
    }

    #[test]
    fn a_decided_deny_is_named_before_a_failed_one() {
        let v = [
            Vote::failed("`x`: Too many open files (os error 24)"),
            Vote::allow(Tier::Rule, "a"),
            Vote::deny(Tier::Default, "d"),
        ];
        assert_eq!(combine(&v), (Decision::Deny, Some(2)));
    }

    #[test]
    fn a_failed_vote_refuses_over_any_allow_or_ask() {
        let v = [
            Vote::allow(Tier::Rule, "a"),
            Vote::ask(Tier::Rule, "q"),
            Vote::failed("`x` changed while being resolved; try again"),
        ];
        assert_eq!(combine(&v), (Decision::Deny, Some(2)));
        assert!(v[2].is_failure() && !v[0].is_failure());
    }

    #[test]
    fn no_votes_fall_back_to_the_tools_default() {
        assert_eq!(
            combine_votes(&[Vote::abstain()], true),
            (Decision::Allow, None)
        );
        assert_eq!(combine_votes(&[], false), (Decision::Ask, None));
    }
}
