//! Scheduling one batch (SPEC P10, DESIGN §3 "Scheduling").
//!
//! *Starting* a call means: journal `tool_call`, gates 1–3, journal `tool_started`
//! (`Pipeline::start`), spawn its execution (`Batch::launch`). Calls start strictly in
//! submission order, so policies see them in that order and see the workspace as the earlier
//! calls left it. An exclusive call starts only when no earlier call is still executing; a
//! parallel-safe call starts when no exclusive call is executing and fewer than
//! `max_parallel` are. *Committing* a call — gates 5–7, journal `tool_result`, observers
//! (`Pipeline::commit`) — also happens in submission order, whatever the completion order. A
//! cancelled or timed-out call keeps its slot until its task has really ended. The batch's
//! state is [`Batch`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::call::ToolCall;
use crate::slots::Kind;
mod dispatch;

use crate::journal::{JournalError, Record};
use crate::pipeline::{Admitted, BatchError, BatchOutcome, Pipeline};
use crate::registry::Entry;
use crate::result::{AttachedContext, Candidate, DecidedBy, FailureKind, FrozenResult, Gate};
use crate::scope::Scope;
use crate::tool::{ExecContext, ToolError, ToolErrorKind, ToolOutput};
use crate::wrappers::Next;
pub use dispatch::Dispatch;
use dispatch::Nesting;

enum Slot {
    NotStarted,
    /// With the entry it was admitted under: its output is checked against that schema,
    /// whatever is registered meanwhile.
    Running {
        allowed_by: DecidedBy,
        entry: Arc<Entry>,
    },
    Done(Candidate),
    Committed,
}

type Executed = (Result<ToolOutput, ToolError>, Duration);

/// Why an execution produced no outcome of its own.
enum Stop {
    /// Cancelled while it waited for a slot of the session's: it never ran.
    NotStarted,
    /// Dropped after the cancellation grace.
    Aborted,
    /// Panicked outside the frames `Next::run` guards (should not happen).
    Panicked,
}

type Running = futures::future::BoxFuture<'static, (usize, Result<Executed, Stop>)>;

/// How to drop a running execution once its grace is over.
enum Abort {
    Task(AbortHandle),
    Inline(futures::future::AbortHandle),
}

impl Abort {
    fn abort(&self) {
        match self {
            Abort::Task(h) => h.abort(),
            Abort::Inline(h) => h.abort(),
        }
    }
}

/// The state of one batch: a slot per call, what is executing, and the committed results.
///
/// Its whole interface to the per-call gates is [`Pipeline::start`] (`tool_call`, gates 1–3,
/// `tool_started`), [`Batch::launch`] (gate 4) and [`Pipeline::commit`] (gates 5–7,
/// `tool_result`, observers); everything else here is ordering.
struct Batch<'a> {
    p: &'a Pipeline,
    scope: &'a Scope,
    calls: &'a [ToolCall],
    /// Our own child of the caller's token: a journal failure stops running calls without
    /// cancelling the caller.
    token: CancellationToken,
    slots: Vec<Slot>,
    aborts: Vec<Option<Abort>>,
    /// For each running call, its submissions (see [`dispatch::Nesting`]), and how
    /// many had begun when the grace last ended.
    nesting: Vec<Option<(Arc<Nesting>, usize)>>,
    /// Whether each call is parallel-safe, classified once, when it is next in line.
    class: Vec<Option<bool>>,
    running: FuturesUnordered<Running>,
    exclusive_running: bool,
    next_start: usize,
    next_commit: usize,
    results: Vec<Arc<FrozenResult>>,
    attached: Vec<AttachedContext>,
}

/// A batch dropped before it finished (its caller timed out or was aborted: a nested batch
/// inside a parent call) takes its running work with it: nothing it started outlives it.
impl Drop for Batch<'_> {
    fn drop(&mut self) {
        for a in self.aborts.iter().flatten() {
            a.abort();
        }
    }
}

/// How far [`Batch::start_ready`] got.
enum Started {
    /// Every call whose turn has come has started.
    Ready,
    /// A call was refused before execution: commit it before anything later starts, so its
    /// record never waits behind a later call's execution (a crash would lose it).
    Refused,
}

impl<'a> Batch<'a> {
    fn new(
        p: &'a Pipeline,
        scope: &'a Scope,
        calls: &'a [ToolCall],
        cancel: &CancellationToken,
    ) -> Self {
        let n = calls.len();
        Batch {
            p,
            scope,
            calls,
            token: cancel.child_token(),
            slots: (0..n).map(|_| Slot::NotStarted).collect(),
            aborts: (0..n).map(|_| None).collect(),
            nesting: (0..n).map(|_| None).collect(),
            class: vec![None; n],
            running: FuturesUnordered::new(),
            exclusive_running: false,
            next_start: 0,
            next_commit: 0,
            results: Vec::with_capacity(n),
            attached: Vec::new(),
        }
    }

    fn all_committed(&self) -> bool {
        self.next_commit == self.calls.len()
    }

    /// Commits, in submission order, every call that is done.
    async fn commit_ready(&mut self) -> Result<(), JournalError> {
        while self.next_commit < self.calls.len() {
            let idx = self.next_commit;
            if !matches!(self.slots[idx], Slot::Done(_)) {
                break;
            }
            let Slot::Done(candidate) = std::mem::replace(&mut self.slots[idx], Slot::Committed)
            else {
                unreachable!("the slot was just seen to be done")
            };
            let result = self
                .p
                .commit(self.scope, &self.calls[idx], candidate, &mut self.attached)
                .await?;
            self.results.push(result);
            self.next_commit += 1;
        }
        Ok(())
    }

    /// Starts every call whose turn has come, in submission order.
    async fn start_ready(&mut self) -> Result<Started, JournalError> {
        let (p, calls) = (self.p, self.calls);
        while self.next_start < calls.len() {
            let idx = self.next_start;
            let call = &calls[idx];
            let parallel = *self.class[idx].get_or_insert_with(|| p.parallel_safe(call));
            let may_start = self.running.is_empty()
                || self.token.is_cancelled()
                || (parallel
                    && !self.exclusive_running
                    && self.running.len() < p.config.max_parallel);
            if !may_start {
                break;
            }
            match p.start(self.scope, call, &self.token).await? {
                Ok(admitted) => self.launch(idx, admitted, parallel),
                Err(refused) => {
                    self.slots[idx] = Slot::Done(refused);
                    self.next_start += 1;
                    return Ok(Started::Refused);
                }
            }
            self.next_start += 1;
        }
        Ok(Started::Ready)
    }

    /// Gate 4: executes an admitted call (wrappers ∘ tool), once one of the session's slots is
    /// free for it (DESIGN §3, "Nested calls").
    fn launch(&mut self, idx: usize, admitted: Admitted, parallel: bool) {
        let Admitted {
            entry,
            allowed_by,
            clearance,
        } = admitted;
        let call = self.calls[idx].clone();
        let permit = Arc::new(tokio::sync::Mutex::new(None));
        let nesting = Arc::new(Nesting::default());
        self.nesting[idx] = Some((nesting.clone(), 0));
        let dispatch =
            self.p.me.upgrade().map(|p| {
                Dispatch::new(p, call.clone(), self.scope.clone(), permit.clone(), nesting)
            });
        let cx = ExecContext {
            call,
            spec: entry.spec.clone(),
            cancel: self.token.child_token(),
            attempt: 1,
            dispatch,
            clearance,
        };
        let tool = entry.tool.clone();
        let wrappers = self.p.wrappers.clone();
        let slots = self.p.slots.clone();
        let kind = if parallel {
            Kind::Parallel
        } else {
            Kind::Exclusive
        };
        let work = async move {
            let begun = Instant::now();
            let Ok(held) = slots.acquire(kind, &cx.cancel).await else {
                return Err(Stop::NotStarted);
            };
            *permit.lock().await = Some(held);
            let outcome = Next::new(&wrappers, tool.as_ref()).run(cx).await;
            // The slot is free the moment the work is, whoever still holds the handle.
            drop(permit.lock().await.take());
            Ok((outcome, begun.elapsed()))
        };
        if parallel {
            // Its own task, so CPU-bound tools really run side by side.
            let handle = tokio::spawn(work);
            self.aborts[idx] = Some(Abort::Task(handle.abort_handle()));
            self.running.push(Box::pin(async move {
                let joined = handle.await.map_err(|e| {
                    if e.is_panic() {
                        Stop::Panicked
                    } else {
                        Stop::Aborted
                    }
                });
                (idx, joined.and_then(|r| r))
            }) as Running);
        } else {
            // Nothing overlaps an exclusive call: poll it here and save the cross-thread
            // wake-ups of a spawned task.
            let (work, handle) = futures::future::abortable(work);
            self.aborts[idx] = Some(Abort::Inline(handle));
            self.running.push(Box::pin(async move {
                let joined = work.await.map_err(|_| Stop::Aborted);
                (idx, joined.and_then(|r| r))
            }) as Running);
        }
        self.exclusive_running |= !parallel;
        self.slots[idx] = Slot::Running { allowed_by, entry };
    }

    /// A running call ended: gate 6 turns what it produced into its candidate.
    fn finished(&mut self, idx: usize, joined: Result<Executed, Stop>) {
        self.aborts[idx] = None;
        self.nesting[idx] = None;
        if self.running.is_empty() {
            self.exclusive_running = false;
        }
        let (allowed_by, entry) = match std::mem::replace(&mut self.slots[idx], Slot::Committed) {
            Slot::Running { allowed_by, entry } => (allowed_by, Some(entry)),
            _ => (DecidedBy::new(Gate::Execute, None, String::new()), None),
        };
        let call = &self.calls[idx];
        let candidate = normalize(call, joined, allowed_by, self.token.is_cancelled(), |v| {
            entry.as_ref().map_or(Ok(()), |e| e.check_output(v))
        });
        self.slots[idx] = Slot::Done(candidate);
    }
}

impl Pipeline {
    /// Runs one batch (one model step) with every tool of the session, reporting nothing;
    /// see [`Pipeline::run_batch_in`].
    pub async fn run_batch(
        &self,
        calls: Vec<ToolCall>,
        cancel: &CancellationToken,
    ) -> Result<BatchOutcome, BatchError> {
        self.run_batch_in(&Scope::default(), calls, cancel).await
    }

    /// Runs one batch (one model step) of an agent through every gate, scheduled as SPEC P10
    /// says: only tools in `scope.tools` may run; `scope.events` hears each call's progress.
    ///
    /// Returns one result per call, in submission order, whatever happened to each call; an
    /// `Err` only when the journal could not record (then no further call runs).
    pub async fn run_batch_in(
        &self,
        scope: &Scope,
        calls: Vec<ToolCall>,
        cancel: &CancellationToken,
    ) -> Result<BatchOutcome, BatchError> {
        run_batch(self, scope, calls, cancel).await
    }
}

pub(crate) async fn run_batch(
    p: &Pipeline,
    scope: &Scope,
    calls: Vec<ToolCall>,
    cancel: &CancellationToken,
) -> Result<BatchOutcome, BatchError> {
    let mut b = Batch::new(p, scope, &calls, cancel);
    let mut force_at: Option<tokio::time::Instant> = None;
    let mut forced = false;

    loop {
        let step = match b.commit_ready().await {
            Ok(()) if b.all_committed() => break,
            Ok(()) => b.start_ready().await,
            Err(e) => Err(e),
        };
        match step {
            Ok(Started::Ready) => {}
            Ok(Started::Refused) => continue,
            Err(source) => {
                // Stop: nothing more may run unrecorded. Running calls are cancelled and
                // awaited so no work outlives the batch.
                b.token.cancel();
                drain(&mut b.running, &b.aborts, p.config.cancel_grace).await;
                return Err(BatchError {
                    source,
                    committed: std::mem::take(&mut b.results),
                });
            }
        }
        if b.running.is_empty() {
            // Everything started so far was refused before execution: commit it.
            continue;
        }

        // Wait for a running call to end.
        let done = tokio::select! {
            d = b.running.next() => d,
            () = b.token.cancelled(), if force_at.is_none() => {
                force_at = Some(tokio::time::Instant::now() + p.config.cancel_grace);
                continue;
            }
            () = sleep_until(force_at), if force_at.is_some() && !forced => {
                // The grace is over: drop what has not stopped. The slot is still held until
                // the task reports back below. A call busy with calls it submitted is given
                // another grace instead (see `Nesting`).
                let mut waiting = false;
                for (a, nesting) in b.aborts.iter().zip(b.nesting.iter_mut()) {
                    let Some(a) = a else { continue };
                    if nesting.as_mut().is_some_and(|(n, seen)| n.busy_since(seen)) {
                        waiting = true;
                    } else {
                        a.abort();
                    }
                }
                if waiting {
                    force_at = Some(tokio::time::Instant::now() + p.config.cancel_grace);
                } else {
                    forced = true;
                }
                continue;
            }
        };
        if let Some((idx, joined)) = done {
            b.finished(idx, joined);
        }
    }

    let (results, attached) = (
        std::mem::take(&mut b.results),
        std::mem::take(&mut b.attached),
    );
    drop(b);
    let agent = calls.first().and_then(ToolCall::agent);
    for a in &attached {
        p.journal
            .append_as(agent, &Record::ContextAttached(a.into()))
            .map_err(|source| BatchError {
                source,
                committed: results.clone(),
            })?;
    }
    p.journal.sync().map_err(|source| BatchError {
        source,
        committed: results.clone(),
    })?;
    Ok(BatchOutcome { results, attached })
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// After a harness fault: wait for running calls to stop, dropping them after `grace`.
async fn drain<F>(running: &mut FuturesUnordered<F>, aborts: &[Option<Abort>], grace: Duration)
where
    F: std::future::Future,
{
    let deadline = tokio::time::sleep(grace);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            d = running.next() => if d.is_none() { return },
            () = &mut deadline => break,
        }
    }
    for a in aborts.iter().flatten() {
        a.abort();
    }
    while running.next().await.is_some() {}
}

/// Gate 6: turns what execution produced into a candidate, checking the output against the
/// declared schema.
fn normalize(
    call: &ToolCall,
    joined: Result<Executed, Stop>,
    allowed_by: DecidedBy,
    cancelled: bool,
    check_output: impl Fn(&serde_json::Value) -> Result<(), String>,
) -> Candidate {
    let fail = |kind, gate, policy: Option<&str>, reason: String, elapsed: Duration| {
        let mut c = Candidate::failure(
            call.id(),
            call.name(),
            kind,
            DecidedBy::new(gate, policy, reason),
        );
        c.elapsed_ms = millis(elapsed);
        c
    };
    match joined {
        Err(stop) => {
            let (kind, reason) = match stop {
                Stop::Panicked => (
                    FailureKind::Crashed,
                    format!("`{}` crashed outside its own frame", call.name()),
                ),
                Stop::NotStarted => (
                    FailureKind::CancelledBefore,
                    format!(
                        "`{}` was cancelled while it waited for an execution slot; it did not run",
                        call.name()
                    ),
                ),
                Stop::Aborted => (
                    FailureKind::CancelledAfter,
                    format!(
                        "`{}` was stopped by force after the batch was cancelled",
                        call.name()
                    ),
                ),
            };
            fail(kind, Gate::Execute, None, reason, Duration::ZERO)
        }
        Ok((Ok(output), elapsed)) => match check_output(&output.value) {
            Ok(()) => Candidate {
                call_id: call.id().to_owned(),
                tool: call.name().to_owned(),
                ok: true,
                failure_kind: None,
                decided_by: allowed_by,
                content: output.content,
                value: Some(output.value),
                elapsed_ms: millis(elapsed),
                exit_code: output.exit_code,
                sandbox: output.sandbox,
                changes: output.changes,
            },
            Err(why) => {
                let mut c = fail(
                    FailureKind::InvalidOutput,
                    Gate::Normalize,
                    None,
                    format!(
                        "`{}` returned output that does not match its declared schema ({why}); its content is withheld",
                        call.name()
                    ),
                    elapsed,
                );
                // What it changed is changed all the same.
                c.changes = output.changes;
                c
            }
        },
        Ok((Err(e), elapsed)) => {
            let mut c = if cancelled && e.kind != ToolErrorKind::Crashed {
                fail(
                    FailureKind::CancelledAfter,
                    Gate::Execute,
                    None,
                    format!(
                        "`{}` was cancelled while running: {}",
                        call.name(),
                        e.message
                    ),
                    elapsed,
                )
            } else {
                fail(
                    e.kind.failure_kind(),
                    Gate::Execute,
                    e.policy.as_deref(),
                    e.message,
                    elapsed,
                )
            };
            c.exit_code = e.exit_code;
            c
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
