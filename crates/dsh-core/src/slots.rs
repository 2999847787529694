//! The session's execution slots (DESIGN §3, "Nested calls"): how many calls execute at
//! once. (Spending limits — tokens, cost — are the agent's, and called budgets there.)
//!
//! Every executing call of a session — a model's call, a Code Mode sub-call, a sub-agent's
//! call — holds a [`Permit`] while it runs: a parallel-safe call holds one of
//! `max_parallel` shared slots, an exclusive call holds them all. A call waiting on
//! calls it submitted gives its permit back for the wait ([`Permit::suspend`]) and takes one
//! of the same kind again when it resumes, so nesting cannot deadlock: with `max_parallel =
//! 1`, a parent's sub-call runs in the slot the parent left.
//!
//! An exclusive call waits until no *leaf* call (one not waiting on sub-calls) is running,
//! and while it waits no new parallel call starts — so two parallel-safe parents that each
//! submit an exclusive sub-call take turns: the first sub-call runs once the other parent is
//! waiting too. Every wait ends when the call's cancellation token fires.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The slots' state: how many parallel calls run, whether an exclusive one does, and how
/// many exclusive calls wait (they go first).
#[derive(Debug, Default)]
struct State {
    parallel: usize,
    exclusive: bool,
    exclusive_waiting: usize,
    /// The most parallel calls seen at once, for tests and benchmarks.
    peak: usize,
}

/// The session's execution slots; cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct Slots {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    max_parallel: usize,
    state: Mutex<State>,
    changed: Notify,
}

/// What kind of slot a call holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Parallel,
    Exclusive,
}

/// Waiting was cancelled before a slot was free.
#[derive(Debug)]
pub(crate) struct Cancelled;

impl Slots {
    pub fn new(max_parallel: usize) -> Self {
        Slots {
            inner: Arc::new(Inner {
                max_parallel: max_parallel.max(1),
                state: Mutex::new(State::default()),
                changed: Notify::new(),
            }),
        }
    }

    /// The most calls that ever executed at once in these slots (an exclusive call counts
    /// as one).
    pub fn peak(&self) -> usize {
        self.lock().peak
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a few counters updated in one step each: a panic elsewhere cannot
        // leave it half-changed, so a poisoned lock is still sound to use.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits for a slot of `kind`; `Err` when `cancel` fires first.
    pub(crate) async fn acquire(
        &self,
        kind: Kind,
        cancel: &CancellationToken,
    ) -> Result<Permit, Cancelled> {
        // Counted as waiting from the first look, so parallel calls stop overtaking it; the
        // guard takes the count back however the wait ends (granted, cancelled, dropped).
        let _waiting = (kind == Kind::Exclusive).then(|| Waiting::new(self));
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.try_take(kind) {
                return Ok(Permit {
                    slots: self.clone(),
                    kind,
                    held: true,
                });
            }
            tokio::select! {
                () = &mut changed => {}
                () = cancel.cancelled() => return Err(Cancelled),
            }
        }
    }

    fn try_take(&self, kind: Kind) -> bool {
        let mut s = self.lock();
        let free = match kind {
            Kind::Parallel => {
                !s.exclusive && s.exclusive_waiting == 0 && s.parallel < self.inner.max_parallel
            }
            Kind::Exclusive => !s.exclusive && s.parallel == 0,
        };
        if free {
            match kind {
                Kind::Parallel => s.parallel += 1,
                Kind::Exclusive => s.exclusive = true,
            }
            let running = s.parallel + usize::from(s.exclusive);
            s.peak = s.peak.max(running);
        }
        free
    }

    fn give_back(&self, kind: Kind) {
        {
            let mut s = self.lock();
            match kind {
                Kind::Parallel => s.parallel = s.parallel.saturating_sub(1),
                Kind::Exclusive => s.exclusive = false,
            }
        }
        self.inner.changed.notify_waiters();
    }
}

/// Counts an exclusive call as waiting while it lives.
struct Waiting<'b>(&'b Slots);

impl<'b> Waiting<'b> {
    fn new(slots: &'b Slots) -> Self {
        slots.lock().exclusive_waiting += 1;
        Waiting(slots)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        {
            let mut s = self.0.lock();
            s.exclusive_waiting = s.exclusive_waiting.saturating_sub(1);
        }
        self.0.inner.changed.notify_waiters();
    }
}

/// A running call's slot; given back when dropped.
#[derive(Debug)]
pub(crate) struct Permit {
    slots: Slots,
    kind: Kind,
    held: bool,
}

impl Permit {
    /// Gives the slot back while the call waits on its sub-calls.
    pub(crate) fn suspend(&mut self) {
        if std::mem::replace(&mut self.held, false) {
            self.slots.give_back(self.kind);
        }
    }

    /// Takes a slot of the same kind again after [`Permit::suspend`]; `Err` on cancellation
    /// (the permit then holds nothing).
    pub(crate) async fn resume(&mut self, cancel: &CancellationToken) -> Result<(), Cancelled> {
        if self.held {
            return Ok(());
        }
        let mut again = self.slots.acquire(self.kind, cancel).await?;
        again.held = false;
        self.held = true;
        Ok(())
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.suspend();
    }
}
