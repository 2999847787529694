//! The agents of a session that may start sub-agents, as `call_sub_agent` needs them: the
//! model each talks to and its limits (a child starts from its parent's), what it has spent,
//! and what its children have spent that it has not counted yet — charged as they go, so a
//! parent's budgets hold for all its children together.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use dsh_model::{Provider, Usage};

use crate::agent::LoopConfig;
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
