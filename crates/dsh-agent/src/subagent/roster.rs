//! The agents of a session that may start sub-agents, as `call_sub_agent` needs them: the
//! model each talks to and its limits (a child starts from its parent's), what it has spent
//! (a child's budget is what its parent has left), and what its children spent that it has
//! not yet counted (rolled up into its account after the batch that ran them).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use dsh_model::{Provider, Usage};

use crate::agent::LoopConfig;
use crate::events::AgentId;

/// A parent as a child starts from it.
#[derive(Clone)]
pub(crate) struct Parent {
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) config: LoopConfig,
    /// Tokens and cost the parent has spent so far (its children's included once counted).
    pub(crate) tokens: u64,
    pub(crate) cost_usd: Option<f64>,
}

/// What children spent that their parent has not counted yet.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Owed {
    pub(crate) usage: Usage,
    /// `None` once a child's cost was unknown.
    pub(crate) cost_usd: Option<f64>,
    pub(crate) any: bool,
}

struct Member {
    parent: Parent,
    owed: Owed,
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
                parent: Parent {
                    provider,
                    config,
                    tokens: 0,
                    cost_usd: Some(0.0),
                },
                owed: Owed::default(),
            },
        );
    }

    /// Agent `id` talks to `provider` with `config` from now on.
    pub(crate) fn switch(&self, id: &AgentId, provider: Arc<dyn Provider>, config: LoopConfig) {
        if let Some(m) = self.members().get_mut(id) {
            m.parent.provider = provider;
            m.parent.config = config;
        }
    }

    /// Agent `id` has spent `tokens` and `cost_usd` in all.
    pub(crate) fn spent(&self, id: &AgentId, tokens: u64, cost_usd: Option<f64>) {
        if let Some(m) = self.members().get_mut(id) {
            m.parent.tokens = tokens;
            m.parent.cost_usd = cost_usd;
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

    /// A child of `parent` spent `usage` and `cost_usd` (`None`: unknown), charged as it
    /// goes: the parent counts it after the batch that ran the child, and the parent's other
    /// children see it in [`Roster::used`] at once.
    pub(crate) fn charge(&self, parent: &AgentId, usage: Usage, cost_usd: Option<f64>) {
        if let Some(m) = self.members().get_mut(parent) {
            let owed = &mut m.owed;
            owed.usage.prompt_tokens += usage.prompt_tokens;
            owed.usage.completion_tokens += usage.completion_tokens;
            owed.usage.cached_tokens += usage.cached_tokens;
            owed.usage.cache_write_tokens += usage.cache_write_tokens;
            owed.cost_usd = match (if owed.any { owed.cost_usd } else { Some(0.0) }, cost_usd) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            owed.any = true;
        }
    }

    /// What `parent`'s budgets have been spent on so far: its own spend and what its
    /// children have spent that it has not counted yet.
    pub(crate) fn used(&self, parent: &AgentId) -> (u64, Option<f64>) {
        let members = self.members();
        let Some(m) = members.get(parent) else {
            return (0, Some(0.0));
        };
        let owed = &m.owed;
        let tokens = m.parent.tokens + owed.usage.prompt_tokens + owed.usage.completion_tokens;
        let cost = match (m.parent.cost_usd, owed.any.then_some(owed.cost_usd)) {
            (Some(a), Some(Some(b))) => Some(a + b),
            (Some(a), None) => Some(a),
            _ => None,
        };
        (tokens, cost)
    }

    /// What `id`'s children spent since the last call, for it to count.
    pub(crate) fn collect(&self, id: &AgentId) -> Option<Owed> {
        let mut members = self.members();
        let m = members.get_mut(id)?;
        let owed = std::mem::take(&mut m.owed);
        owed.any.then_some(owed)
    }
}
