//! The agents of one tree — a main agent and the sub-agents it starts — as they share state:
//! the session they run over, the ledger of what each has spent (`spend::Ledger`, the one
//! place an agent's spend is kept), and the numbering of children. A main agent makes its
//! family; its children join it. Nothing here points back from the session: the family is
//! reached through the agents, and `call_sub_agent` reaches it through its call's scope.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::Session;
use crate::spend::Ledger;

pub(crate) struct Family {
    pub(crate) session: Arc<Session>,
    pub(crate) ledger: Ledger,
    /// The last `sub-N` handed out in this tree.
    children: AtomicU32,
    /// Successful calls, by any agent of the tree, of tools that do not declare themselves
    /// read-only: "files changed" for verify.
    changes: AtomicU64,
}

impl Family {
    pub(crate) fn new(session: Arc<Session>) -> Arc<Family> {
        Arc::new(Family {
            session,
            ledger: Ledger::default(),
            children: AtomicU32::new(0),
            changes: AtomicU64::new(0),
        })
    }

    /// Children are numbered after `n` (a resumed session, after its chain's).
    pub(crate) fn continue_after(&self, n: u32) {
        self.children.fetch_max(n, Ordering::Relaxed);
    }

    /// A call that may have changed something succeeded.
    pub(crate) fn changed(&self) {
        self.changes.fetch_add(1, Ordering::Relaxed);
    }

    /// How many calls that may have changed something succeeded so far.
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// The next child's number: 1, 2, … for the tree's life.
    pub(crate) fn next_child(&self) -> u32 {
        self.children.fetch_add(1, Ordering::Relaxed) + 1
    }
}
