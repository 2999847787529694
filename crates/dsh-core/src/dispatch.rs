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

use std::sync::Arc;

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
    /// The cancel grace of the batch the parent call runs in (see [`Dispatch::new`]).
    grace: std::time::Duration,
}

impl std::fmt::Debug for Dispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatch")
            .field("parent", &self.parent.id())
            .finish_non_exhaustive()
    }
}

impl Dispatch {
    /// A handle for `parent`, which runs in a batch whose cancel grace is `grace` (G). Once
    /// cancelled, a submission's calls have G/2 to stop before they are dropped and
    /// recorded, and the parent then waits at most G/4 for its slot: G/2 + G/4 < G, so a
    /// cancelled submission has recorded its calls, and the parent its own ending, before
    /// the batch around the parent gives up on it.
    pub(crate) fn new(
        pipeline: Arc<Pipeline>,
        parent: ToolCall,
        scope: Scope,
        permit: Arc<Mutex<Option<Permit>>>,
        grace: std::time::Duration,
    ) -> Self {
        Dispatch {
            pipeline,
            parent,
            scope,
            permit,
            grace,
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
        let mut slot = self.permit.lock().await;
        if let Some(p) = slot.as_mut() {
            p.suspend();
        }
        let outcome =
            crate::scheduler::run_batch(&self.pipeline, scope, calls, cancel, self.grace / 2).await;
        if let Some(p) = slot.as_mut() {
            // The parent takes a slot again before it goes on — even when it was cancelled,
            // so its winding-down never overlaps an exclusive call. Bounded once cancelled
            // (G/4, see `new`): running calls stop within their grace, so a slot frees up.
            let never = CancellationToken::new();
            let limit = self.grace / 4;
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
