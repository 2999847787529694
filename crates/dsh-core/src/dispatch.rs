//! Re-entrant dispatch (DESIGN §3, "Nested calls"): how a running tool — `call_sub_agent`,
//! `run_code` — submits calls of its own into the same session.
//!
//! A submission is a batch of its own, run by the same scheduler: each call journaled first
//! with `parent` = the submitting call's id and the source the submitter gives, then every
//! gate in submission order, results committed in order. Its calls are cancelled with the
//! parent. While the batch runs, the parent gives its execution slot back to the session's
//! one [`crate::Budget`] and takes one again afterwards, so a parent waiting on its sub-calls
//! never holds a slot they need. One submission at a time per parent call: a second waits
//! for the first to finish.
//!
//! Once cancelled, a submission's calls get the same grace as any batch's before they are
//! dropped, and the batch around the parent does not drop the parent while it waits on a
//! submission (it is given another grace each time the grace ends): the sub-calls are
//! recorded, then the parent records its own ending, and a dropped call never outlives its
//! grace as a zombie.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::budget::Permit;
use crate::call::{CallSource, ToolCall};
use crate::pipeline::{BatchError, BatchOutcome, Pipeline};
use crate::scope::Scope;

/// A running call's handle into its session's pipeline; in [`crate::ExecContext::dispatch`].
#[derive(Clone)]
pub struct Dispatch {
    pipeline: Arc<Pipeline>,
    parent: ToolCall,
    scope: Scope,
    /// The parent's execution slot, given back while a submission runs.
    permit: Arc<Mutex<Option<Permit>>>,
    /// How many submissions of the parent are running: while any is, the batch the parent
    /// runs in does not drop the parent when its cancel grace ends (the submission's calls
    /// have their own grace, and the parent records its ending after them).
    nesting: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Dispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatch")
            .field("parent", &self.parent.id())
            .finish_non_exhaustive()
    }
}

impl Dispatch {
    pub(crate) fn new(
        pipeline: Arc<Pipeline>,
        parent: ToolCall,
        scope: Scope,
        permit: Arc<Mutex<Option<Permit>>>,
        nesting: Arc<AtomicUsize>,
    ) -> Self {
        Dispatch {
            pipeline,
            parent,
            scope,
            permit,
            nesting,
        }
    }

    /// The tools the submitting call's agent may call: every submission is confined to them.
    pub fn tools(&self) -> &crate::ToolSet {
        &self.scope.tools
    }

    /// Runs `calls` as a batch in the parent's scope (Code Mode: the same agent's tools),
    /// cancelled with `cancel` — pass the parent's [`crate::ExecContext::cancel`], so a
    /// timeout or an interrupt of the parent reaches its sub-calls.
    pub async fn submit(
        &self,
        source: CallSource,
        calls: Vec<ToolCall>,
        cancel: &CancellationToken,
    ) -> Result<BatchOutcome, BatchError> {
        self.submit_in(&self.scope, source, calls, cancel).await
    }

    /// Runs `calls` as a batch in `scope` (a sub-agent: its own tool set and agent id, which
    /// the calls carry), confined to this handle's tool set: a submission never reaches a
    /// tool its submitter could not call. Each call gets `parent` = this handle's call and
    /// `source`; a call without a step gets the parent's.
    pub async fn submit_in(
        &self,
        scope: &Scope,
        source: CallSource,
        calls: Vec<ToolCall>,
        cancel: &CancellationToken,
    ) -> Result<BatchOutcome, BatchError> {
        let scope = &Scope {
            tools: scope.tools.clone().within(&self.scope.tools),
            events: scope.events.clone(),
        };
        let calls: Vec<ToolCall> = calls
            .into_iter()
            .map(|c| {
                let step = if c.step() == 0 {
                    self.parent.step()
                } else {
                    c.step()
                };
                // A sub-call is its parent's agent's unless the submitter says otherwise (a
                // sub-agent's calls carry the sub-agent's id).
                let agent = c.agent().or(self.parent.agent()).map(Arc::from);
                c.with_source(source)
                    .with_parent(self.parent.id())
                    .with_step(step)
                    .with_agent(agent)
            })
            .collect();
        // Counted until the parent holds a slot again, its submission recorded.
        let _waiting = Waiting::on(&self.nesting);
        let mut slot = self.permit.lock().await;
        if let Some(p) = slot.as_mut() {
            p.suspend();
        }
        let outcome = crate::scheduler::run_batch(&self.pipeline, scope, calls, cancel).await;
        if let Some(p) = slot.as_mut() {
            // The parent takes a slot again before it goes on — even when it was cancelled,
            // so its winding-down never overlaps an exclusive call. Bounded by the cancel
            // grace: running calls stop within it, so a slot frees up.
            let never = CancellationToken::new();
            let limit = self.pipeline.config.cancel_grace;
            if tokio::time::timeout(limit, p.resume(&never)).await.is_err()
                && !cancel.is_cancelled()
            {
                // Not cancelled and still no slot after the grace: keep waiting for one.
                let _ = p.resume(&never).await;
            }
        }
        outcome
    }
}

/// A submission in progress, counted for as long as it lives (dropped with its future too).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn on(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
