//! The agents of a session that may start sub-agents, as `call_sub_agent` needs them: the
//! model each talks to and its limits (a child starts from its parent's), what it has spent,
//! and what its children have spent that it has not counted yet — charged as they go, so a
//! parent's budgets hold for all its children together.
//!
//! Children run side by side, so "spent so far" checked before each request would let
//! every child in flight through at once (issue 21: eight children passed a 50,000-token
//! budget by 19 %). Instead a child *reserves* its next request's estimate before sending it
//! ([`Roster::reserve`]): granted only when what is spent, what the other children in flight
//! have reserved and this estimate together fit the budget; the reservation is settled with
//! the reply's real usage ([`Roster::settle`]) or released when no reply comes. So the
//! budget is passed only by what the replies in flight use beyond their estimates — at most
//! one reply per live child.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use dsh_model::{Provider, Usage};

use crate::agent::{LoopConfig, StopReason};
use crate::cost::Spend;
use crate::events::AgentId;

/// What a child starts from: its parent's model and limits.
#[derive(Clone)]
pub(crate) struct Parent {
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) config: LoopConfig,
}

struct Member {
    parent: Parent,
    /// What the agent has counted as spent (its children's, once collected, included).
    spent: Spend,
    /// What its children spent since it last collected.
    owed: Spend,
    /// What its children's requests in flight have reserved of its budgets.
    reserved: Estimate,
}

/// A request's expected spend, as a child reserves it: tokens, and their cost at the
/// model's prices (0 when they are unknown: the cost budget is then held to known costs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Estimate {
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
}

/// The budgets a reservation is checked against (0: none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) max_tokens: u64,
    pub(crate) max_cost_usd: f64,
}

impl Member {
    fn unreserve(&mut self, estimate: Estimate) {
        self.reserved.tokens = self.reserved.tokens.saturating_sub(estimate.tokens);
        self.reserved.cost_usd = (self.reserved.cost_usd - estimate.cost_usd).max(0.0);
    }
}

#[derive(Default)]
pub(crate) struct Roster {
    members: Mutex<HashMap<AgentId, Member>>,
    /// The last `sub-N` handed out in this session.
    children: AtomicU32,
}

impl Roster {
    fn members(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Member>> {
        self.members
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Enters (or replaces) agent `id` with its model and limits.
    pub(crate) fn enlist(&self, id: &AgentId, provider: Arc<dyn Provider>, config: LoopConfig) {
        self.members().insert(
            id.clone(),
            Member {
                parent: Parent { provider, config },
                spent: Spend::default(),
                owed: Spend::default(),
                reserved: Estimate::default(),
            },
        );
    }

    /// Agent `id` talks to `provider` with `config` from now on.
    pub(crate) fn switch(&self, id: &AgentId, provider: Arc<dyn Provider>, config: LoopConfig) {
        if let Some(m) = self.members().get_mut(id) {
            m.parent = Parent { provider, config };
        }
    }

    /// Agent `id` has counted `spent` in all.
    pub(crate) fn spent(&self, id: &AgentId, spent: Spend) {
        if let Some(m) = self.members().get_mut(id) {
            m.spent = spent;
        }
    }

    /// Agent `id` as a child starts from it; `None` when it is not a parent here.
    pub(crate) fn parent(&self, id: &AgentId) -> Option<Parent> {
        self.members().get(id).map(|m| m.parent.clone())
    }

    /// Children are numbered after `n` (a resumed session, after its chain's).
    pub(crate) fn continue_after(&self, n: u32) {
        self.children.fetch_max(n, Ordering::Relaxed);
    }

    /// The next child's number: 1, 2, … for the session's life.
    pub(crate) fn next_child(&self) -> u32 {
        self.children.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A child of `parent` spent `usage` at `cost_usd` (`None`: unknown), charged as it
    /// goes: the parent counts it after the batch that ran the child, and the parent's other
    /// children see it in [`Roster::used`] at once.
    pub(crate) fn charge(&self, parent: &AgentId, usage: &Usage, cost_usd: Option<f64>) {
        if let Some(m) = self.members().get_mut(parent) {
            m.owed.add(usage, cost_usd);
        }
    }

    /// Reserves `estimate` of `parent`'s budgets for a child's next request. Granted when
    /// what is spent (the parent's own and its children's), what the children in flight
    /// have reserved and `estimate` together stay within `limits`; otherwise the budget the
    /// request would pass, and nothing is reserved. A parent not here has no budgets to hold.
    pub(crate) fn reserve(
        &self,
        parent: &AgentId,
        estimate: Estimate,
        limits: Limits,
    ) -> Result<(), StopReason> {
        let mut members = self.members();
        let Some(m) = members.get_mut(parent) else {
            return Ok(());
        };
        let mut all = m.spent;
        all.add_spend(&m.owed);
        if limits.max_tokens > 0
            && all.tokens() + m.reserved.tokens + estimate.tokens > limits.max_tokens
        {
            return Err(StopReason::TokenBudget);
        }
        if limits.max_cost_usd > 0.0
            && all.known_cost_usd() + m.reserved.cost_usd + estimate.cost_usd > limits.max_cost_usd
        {
            return Err(StopReason::CostBudget);
        }
        m.reserved.tokens += estimate.tokens;
        m.reserved.cost_usd += estimate.cost_usd;
        Ok(())
    }

    /// Gives back a reservation whose request got no reply (an error, a cancellation).
    pub(crate) fn release(&self, parent: &AgentId, estimate: Estimate) {
        if let Some(m) = self.members().get_mut(parent) {
            m.unreserve(estimate);
        }
    }

    /// Settles a reservation with what the reply really used, in one step (so the spend is
    /// never counted twice nor missed by a sibling reserving meanwhile): the reservation is
    /// given back and `usage` at `cost_usd` charged as [`Roster::charge`] does. The real
    /// usage may exceed the estimate; that excess is what the budget can be passed by.
    pub(crate) fn settle(
        &self,
        parent: &AgentId,
        estimate: Estimate,
        usage: &Usage,
        cost_usd: Option<f64>,
    ) {
        if let Some(m) = self.members().get_mut(parent) {
            m.unreserve(estimate);
            m.owed.add(usage, cost_usd);
        }
    }

    /// What `parent`'s budgets have been spent on so far, in tokens and known cost: its own
    /// spend and what its children have spent that it has not counted yet.
    pub(crate) fn used(&self, parent: &AgentId) -> (u64, f64) {
        let members = self.members();
        let Some(m) = members.get(parent) else {
            return (0, 0.0);
        };
        let mut all = m.spent;
        all.add_spend(&m.owed);
        (all.tokens(), all.known_cost_usd())
    }

    /// What `id`'s children spent since the last call, for it to count; `None` when `id` is
    /// not a parent here.
    pub(crate) fn collect(&self, id: &AgentId) -> Option<Spend> {
        let mut members = self.members();
        let m = members.get_mut(id)?;
        Some(std::mem::take(&mut m.owed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roster_with_parent() -> (Roster, AgentId) {
        struct NoModel;
        #[dsh_core::async_trait]
        impl Provider for NoModel {
            fn name(&self) -> &str {
                "none"
            }
            fn model(&self) -> &str {
                "none"
            }
            async fn complete(
                &self,
                _: &dsh_model::ChatRequest,
                _: &mut (dyn FnMut(dsh_model::StreamEvent) + Send),
                _: &dsh_core::CancellationToken,
            ) -> Result<dsh_model::Completion, dsh_model::ModelError> {
                Err(dsh_model::ModelError::Cancelled)
            }
        }
        let roster = Roster::default();
        let id: AgentId = "main".into();
        roster.enlist(&id, Arc::new(NoModel), LoopConfig::default());
        (roster, id)
    }

    const LIMITS: Limits = Limits {
        max_tokens: 1_000,
        max_cost_usd: 0.0,
    };

    fn est(tokens: u64) -> Estimate {
        Estimate {
            tokens,
            cost_usd: 0.0,
        }
    }

    #[test]
    fn reservations_in_flight_never_add_up_past_the_budget() {
        let (roster, p) = roster_with_parent();
        roster.spent(&p, {
            let mut s = Spend::default();
            s.add(
                &Usage {
                    prompt_tokens: 200,
                    ..Usage::default()
                },
                Some(0.0),
            );
            s
        });
        assert_eq!(roster.reserve(&p, est(500), LIMITS), Ok(()));
        // 200 spent + 500 reserved + 400 > 1,000.
        assert_eq!(
            roster.reserve(&p, est(400), LIMITS),
            Err(StopReason::TokenBudget)
        );
        assert_eq!(roster.reserve(&p, est(300), LIMITS), Ok(()));
        // The first reply used less than its estimate: the rest comes back.
        let used = Usage {
            prompt_tokens: 250,
            completion_tokens: 50,
            ..Usage::default()
        };
        roster.settle(&p, est(500), &used, Some(0.0));
        assert_eq!(roster.used(&p).0, 500);
        // 500 spent + 300 reserved + 200 = 1,000: fits exactly.
        assert_eq!(roster.reserve(&p, est(200), LIMITS), Ok(()));
        // A request that got no reply gives its reservation back.
        roster.release(&p, est(300));
        roster.release(&p, est(200));
        assert_eq!(roster.reserve(&p, est(500), LIMITS), Ok(()));
    }

    #[test]
    fn a_cost_reservation_is_checked_against_the_known_cost() {
        let (roster, p) = roster_with_parent();
        let limits = Limits {
            max_tokens: 0,
            max_cost_usd: 1.0,
        };
        let half = Estimate {
            tokens: 10,
            cost_usd: 0.5,
        };
        assert_eq!(roster.reserve(&p, half, limits), Ok(()));
        // A reply without usage: unknown cost, counted as nothing known.
        roster.settle(&p, half, &Usage::default(), None);
        assert_eq!(roster.reserve(&p, half, limits), Ok(()));
        assert_eq!(roster.reserve(&p, half, limits), Ok(()));
        assert_eq!(
            roster.reserve(&p, half, limits),
            Err(StopReason::CostBudget)
        );
    }
}
