//! What every agent of one tree (a main agent and its sub-agents) has spent, by agent id:
//! the one place an agent's spend is kept. A sub-agent's spend is charged to its parent as
//! it goes, so a parent's budgets hold for all its children together.
//!
//! Children run side by side, so "spent so far" checked before each request would let
//! every child in flight through at once (issue 21: eight children passed a 50,000-token
//! budget by 19 %). Instead a child *reserves* its next request's estimate before sending it
//! ([`Ledger::reserve`]): granted only when what is spent, what the other children in flight
//! have reserved and this estimate together fit the budget; the reservation is settled with
//! the reply's real usage ([`Ledger::settle`]) or released when no reply comes. So the
//! budget is passed only by what the replies in flight use beyond their estimates — at most
//! one reply per live child.

use std::collections::HashMap;
use std::sync::Mutex;

use dsh_model::Usage;

use super::Spend;
use crate::events::AgentId;

/// One agent's account.
#[derive(Default)]
struct Account {
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

/// The spending limits a reservation is checked against (0: none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpendLimits {
    pub(crate) max_tokens: u64,
    pub(crate) max_cost_usd: f64,
}

/// The spending limit a request would pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exceeded {
    Tokens,
    Cost,
}

impl Account {
    fn unreserve(&mut self, estimate: Estimate) {
        self.reserved.tokens = self.reserved.tokens.saturating_sub(estimate.tokens);
        self.reserved.cost_usd = (self.reserved.cost_usd - estimate.cost_usd).max(0.0);
    }

    /// Its own spend and what its children spent that it has not counted yet.
    fn all(&self) -> Spend {
        let mut all = self.spent;
        all.add_spend(&self.owed);
        all
    }
}

/// The accounts of one agent tree.
#[derive(Default)]
pub(crate) struct Ledger {
    accounts: Mutex<HashMap<AgentId, Account>>,
}

impl Ledger {
    fn accounts(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Account>> {
        self.accounts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens agent `id`'s account: nothing spent, by a model whose prices are known or not.
    pub(crate) fn open(&self, id: &AgentId, priced: bool) {
        let spent = if priced {
            Spend::default()
        } else {
            Spend::unpriced()
        };
        self.accounts().insert(
            id.clone(),
            Account {
                spent,
                ..Account::default()
            },
        );
    }

    /// What agent `id` has counted as spent.
    pub(crate) fn spent(&self, id: &AgentId) -> Spend {
        self.accounts().get(id).map(|a| a.spent).unwrap_or_default()
    }

    /// Agent `id` spent `usage` at `cost_usd` (`None`: unknown) itself.
    pub(crate) fn add(&self, id: &AgentId, usage: &Usage, cost_usd: Option<f64>) {
        if let Some(a) = self.accounts().get_mut(id) {
            a.spent.add(usage, cost_usd);
        }
    }

    /// Agent `id`'s model changed: its prices are known from now on, or not.
    pub(crate) fn priced(&self, id: &AgentId, priced: bool) {
        if let Some(a) = self.accounts().get_mut(id) {
            if priced {
                a.spent.gain_prices();
            } else {
                a.spent.lose_prices();
            }
        }
    }

    /// A child of `parent` spent `usage` at `cost_usd` (`None`: unknown), charged as it
    /// goes: the parent counts it after the batch that ran the child, and the parent's other
    /// children see it in [`Ledger::used`] at once.
    pub(crate) fn charge(&self, parent: &AgentId, usage: &Usage, cost_usd: Option<f64>) {
        if let Some(a) = self.accounts().get_mut(parent) {
            a.owed.add(usage, cost_usd);
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
        limits: SpendLimits,
    ) -> Result<(), Exceeded> {
        let mut accounts = self.accounts();
        let Some(m) = accounts.get_mut(parent) else {
            return Ok(());
        };
        let all = m.all();
        if limits.max_tokens > 0
            && all.tokens() + m.reserved.tokens + estimate.tokens > limits.max_tokens
        {
            return Err(Exceeded::Tokens);
        }
        if limits.max_cost_usd > 0.0
            && all.known_cost_usd() + m.reserved.cost_usd + estimate.cost_usd > limits.max_cost_usd
        {
            return Err(Exceeded::Cost);
        }
        m.reserved.tokens += estimate.tokens;
        m.reserved.cost_usd += estimate.cost_usd;
        Ok(())
    }

    /// Gives back a reservation whose request got no reply (an error, a cancellation).
    pub(crate) fn release(&self, parent: &AgentId, estimate: Estimate) {
        if let Some(m) = self.accounts().get_mut(parent) {
            m.unreserve(estimate);
        }
    }

    /// Settles a reservation with what the reply really used, in one step (so the spend is
    /// never counted twice nor missed by a sibling reserving meanwhile): the reservation is
    /// given back and `usage` at `cost_usd` charged as [`Ledger::charge`] does. The real
    /// usage may exceed the estimate; that excess is what the budget can be passed by.
    pub(crate) fn settle(
        &self,
        parent: &AgentId,
        estimate: Estimate,
        usage: &Usage,
        cost_usd: Option<f64>,
    ) {
        if let Some(m) = self.accounts().get_mut(parent) {
            m.unreserve(estimate);
            m.owed.add(usage, cost_usd);
        }
    }

    /// What `parent`'s budgets have been spent on so far, in tokens and known cost: its own
    /// spend and what its children have spent that it has not counted yet.
    pub(crate) fn used(&self, parent: &AgentId) -> (u64, f64) {
        let accounts = self.accounts();
        let Some(m) = accounts.get(parent) else {
            return (0, 0.0);
        };
        let all = m.all();
        (all.tokens(), all.known_cost_usd())
    }

    /// Counts what `id`'s children spent since the last time into its own spend.
    pub(crate) fn collect(&self, id: &AgentId) {
        if let Some(m) = self.accounts().get_mut(id) {
            let owed = std::mem::take(&mut m.owed);
            m.spent.add_spend(&owed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger_with_parent() -> (Ledger, AgentId) {
        let ledger = Ledger::default();
        let id: AgentId = "main".into();
        ledger.open(&id, true);
        (ledger, id)
    }

    const LIMITS: SpendLimits = SpendLimits {
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
        let (ledger, p) = ledger_with_parent();
        ledger.add(
            &p,
            &Usage {
                prompt_tokens: 200,
                ..Usage::default()
            },
            Some(0.0),
        );
        assert_eq!(ledger.reserve(&p, est(500), LIMITS), Ok(()));
        // 200 spent + 500 reserved + 400 > 1,000.
        assert_eq!(ledger.reserve(&p, est(400), LIMITS), Err(Exceeded::Tokens));
        assert_eq!(ledger.reserve(&p, est(300), LIMITS), Ok(()));
        // The first reply used less than its estimate: the rest comes back.
        let used = Usage {
            prompt_tokens: 250,
            completion_tokens: 50,
            ..Usage::default()
        };
        ledger.settle(&p, est(500), &used, Some(0.0));
        assert_eq!(ledger.used(&p).0, 500);
        // 500 spent + 300 reserved + 200 = 1,000: fits exactly.
        assert_eq!(ledger.reserve(&p, est(200), LIMITS), Ok(()));
        // A request that got no reply gives its reservation back.
        ledger.release(&p, est(300));
        ledger.release(&p, est(200));
        assert_eq!(ledger.reserve(&p, est(500), LIMITS), Ok(()));
    }

    #[test]
    fn a_cost_reservation_is_checked_against_the_known_cost() {
        let (ledger, p) = ledger_with_parent();
        let limits = SpendLimits {
            max_tokens: 0,
            max_cost_usd: 1.0,
        };
        let half = Estimate {
            tokens: 10,
            cost_usd: 0.5,
        };
        assert_eq!(ledger.reserve(&p, half, limits), Ok(()));
        // A reply without usage: unknown cost, counted as nothing known.
        ledger.settle(&p, half, &Usage::default(), None);
        assert_eq!(ledger.reserve(&p, half, limits), Ok(()));
        assert_eq!(ledger.reserve(&p, half, limits), Ok(()));
        assert_eq!(ledger.reserve(&p, half, limits), Err(Exceeded::Cost));
    }
}
