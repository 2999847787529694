//! Re-entrant dispatch (DESIGN §3, "Nested calls"): how a running tool — `call_sub_agent`,
//! `run_code` — submits calls of its own into the same session.
//!
//! A submission is a batch of its own, run by the same scheduler: each call journaled first
//! with `parent` = the submitting call's id and the source the submitter gives, then every
//! gate in submission order, results committed in order. Its calls are cancelled with the
//! parent. While the batch runs, the parent gives its execution slot back to the session's
//! one [`crate::Slots`] and takes one again afterwards, so a parent waiting on its sub-calls
//! never holds a slot they need. One submission at a time per parent call: a second waits
//! for the first to finish.
//!
//! Once cancelled, a submission's calls get the same grace as any batch's before they are
//! dropped, and the batch around the parent does not drop the parent while it waits on a
//! submission, nor in the grace after one ended ([`Nesting`]): the sub-calls are recorded,
//! then the parent records its own ending, and a dropped call never outlives its grace as a
//! zombie.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::call::{CallSource, ToolCall};
use crate::pipeline::{BatchError, BatchOutcome, Pipeline};
use crate::scope::Scope;
use crate::slots::Permit;

/// A running call's handle into its session's pipeline; in [`crate::ExecContext::dispatch`].
#[derive(Clone)]
pub struct Dispatch {
    pipeline: Arc<Pipeline>,
    parent: ToolCall,
    scope: Scope,
    /// The parent's execution slot, given back while a submission runs.
    permit: Arc<Mutex<Option<Permit>>>,
    /// The parent's submissions, as the batch it runs in sees them when its cancel grace
    /// ends (see [`Nesting`]).
    nesting: Arc<Nesting>,
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
        nesting: Arc<Nesting>,
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

    /// What runs the submitting call's agent (its scope's [`crate::Scope::host`]).
    pub fn host(&self) -> Option<&crate::scope::Host> {
        self.scope.host.as_ref()
    }

    /// The parent's scope: its tools, listener and host.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The declarations of the tools a submission may reach: the parent's scope's.
    pub fn tool_specs(&self) -> Vec<Arc<crate::ToolSpec>> {
        self.pipeline.specs(&self.scope.tools)
    }

    /// Reports what the parent call has printed lately to its scope's listener
    /// ([`crate::CallEvents::output`]); a report only.
    pub fn report_output(&self, text: &str) {
        let events = &self.scope.events;
        crate::panic::quietly(|| events.output(&self.parent, text));
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
            host: scope.host.clone(),
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
        // Open until the parent holds a slot again, its submission recorded.
        let _open = self.nesting.open();
        let mut slot = self.permit.lock().await;
        if let Some(p) = slot.as_mut() {
            p.suspend();
        }
        let outcome = super::run_batch(&self.pipeline, scope, calls, cancel).await;
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

/// A running call's submissions, for the batch it runs in: when the batch's cancel grace
/// ends, a call that is waiting on a submission, or has had one since the grace last ended,
/// is given another grace instead of being dropped — its sub-calls have a grace of their own,
/// and once they are recorded the call records its own ending (a sub-agent's `stop` and
/// `sub_agent_end`) in the time after.
#[derive(Debug, Default)]
pub(crate) struct Nesting {
    open: AtomicUsize,
    begun: AtomicUsize,
}

impl Nesting {
    fn open(&self) -> Open<'_> {
        self.begun.fetch_add(1, Ordering::SeqCst);
        self.open.fetch_add(1, Ordering::SeqCst);
        Open(&self.open)
    }

    /// Whether the call deserves another grace: a submission is open, or one began since
    /// `seen` (the count at the last check, updated).
    pub(crate) fn busy_since(&self, seen: &mut usize) -> bool {
        let open = self.open.load(Ordering::SeqCst) > 0;
        let begun = self.begun.load(Ordering::SeqCst);
        let fresh = begun > *seen;
        *seen = begun;
        open || fresh
    }
}

/// A submission in progress, open for as long as it lives (dropped with its future too).
struct Open<'a>(&'a AtomicUsize);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
