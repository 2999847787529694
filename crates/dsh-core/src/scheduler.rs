//! Scheduling one batch (SPEC P10, DESIGN §3 "Scheduling").
//!
//! *Starting* a call means: journal `tool_call`, gates 1–3, journal `tool_started`, spawn its
//! execution. Calls start strictly in submission order, so policies see them in that order
//! and see the workspace as the earlier calls left it. An exclusive call starts only when no
//! earlier call is still executing; a parallel-safe call starts when no exclusive call is
//! executing and fewer than `max_parallel` are. *Committing* a call — gates 5–7, journal
//! `tool_result`, observers — also happens in submission order, whatever the completion
//! order. A cancelled or timed-out call keeps its slot until its task has really ended.

use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::call::ToolCall;
use crate::journal::{JournalError, Record};
use crate::pipeline::{Admit, Admitted, BatchError, BatchOutcome, Mode, Pipeline};
use crate::result::{Candidate, DecidedBy, FailureKind, Gate};
use crate::tool::{ExecContext, ToolError, ToolErrorKind, ToolOutput};
use crate::wrappers::Next;

enum Slot {
    NotStarted,
    Running { allowed_by: DecidedBy },
    Done(Candidate),
    Committed,
}

type Executed = (Result<ToolOutput, ToolError>, Duration);

/// Why an execution produced no outcome of its own.
enum Stop {
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

pub(crate) async fn run_batch(
    p: &Pipeline,
    calls: Vec<ToolCall>,
    cancel: &CancellationToken,
) -> Result<BatchOutcome, BatchError> {
    let n = calls.len();
    // Our own child: a journal failure stops running calls without cancelling the caller.
    let batch = cancel.child_token();
    let mut slots: Vec<Slot> = (0..n).map(|_| Slot::NotStarted).collect();
    let mut aborts: Vec<Option<Abort>> = (0..n).map(|_| None).collect();
    let mut class: Vec<Option<bool>> = vec![None; n];
    let mut running: FuturesUnordered<Running> = FuturesUnordered::new();
    let mut exclusive_running = false;
    let mut next_start = 0;
    let mut next_commit = 0;
    let mut results = Vec::with_capacity(n);
    let mut attached = Vec::new();
    let mut failure: Option<JournalError> = None;
    let mut force_at: Option<tokio::time::Instant> = None;
    let mut forced = false;

    'batch: loop {
        // Commit, in submission order, every call that is done.
        while failure.is_none() && next_commit < n {
            let Slot::Done(_) = &slots[next_commit] else {
                break;
            };
            let Slot::Done(candidate) = std::mem::replace(&mut slots[next_commit], Slot::Committed)
            else {
                break;
            };
            let result = p
                .settle(&calls[next_commit], candidate, &mut attached)
                .await;
            match p.record_result(&result) {
                Ok(()) => {
                    p.notify(&result);
                    results.push(result);
                    next_commit += 1;
                }
                Err(e) => failure = Some(e),
            }
        }

        if next_commit == n && failure.is_none() {
            break;
        }

        // Start every call whose turn has come.
        while failure.is_none() && next_start < n {
            let call = &calls[next_start];
            // Classified once, when the call is next in line.
            let parallel = *class[next_start].get_or_insert_with(|| p.parallel_safe(call));
            let may_start = running.is_empty()
                || batch.is_cancelled()
                || (parallel && !exclusive_running && running.len() < p.config.max_parallel);
            if !may_start {
                break;
            }
            match start_one(p, call, &batch).await {
                Err(e) => failure = Some(e),
                Ok(Admit::Refused(c)) => {
                    // Commit a refusal before anything later starts: its record must not
                    // wait behind a later call's execution (a crash would lose it).
                    slots[next_start] = Slot::Done(c);
                    next_start += 1;
                    continue 'batch;
                }
                Ok(Admit::WouldAsk(_)) => unreachable!("only Mode::Check stops before asking"),
                Ok(Admit::Admitted(Admitted { entry, allowed_by })) => {
                    let cx = ExecContext {
                        call: call.clone(),
                        spec: entry.spec.clone(),
                        cancel: batch.child_token(),
                        attempt: 1,
                    };
                    let tool = entry.tool.clone();
                    let wrappers = p.wrappers.clone();
                    let work = async move {
                        let begun = Instant::now();
                        let outcome = Next::new(&wrappers, tool.as_ref()).run(cx).await;
                        (outcome, begun.elapsed())
                    };
                    let idx = next_start;
                    if parallel {
                        // Its own task, so CPU-bound tools really run side by side.
                        let handle = tokio::spawn(work);
                        aborts[idx] = Some(Abort::Task(handle.abort_handle()));
                        running.push(Box::pin(async move {
                            let joined = handle.await.map_err(|e| {
                                if e.is_panic() {
                                    Stop::Panicked
                                } else {
                                    Stop::Aborted
                                }
                            });
                            (idx, joined)
                        }) as Running);
                    } else {
                        // Nothing overlaps an exclusive call: poll it here and save the
                        // cross-thread wake-ups of a spawned task.
                        let (work, handle) = futures::future::abortable(work);
                        aborts[idx] = Some(Abort::Inline(handle));
                        running.push(Box::pin(async move {
                            (idx, work.await.map_err(|_| Stop::Aborted))
                        }) as Running);
                    }
                    exclusive_running |= !parallel;
                    slots[next_start] = Slot::Running { allowed_by };
                }
            }
            if failure.is_some() {
                break;
            }
            next_start += 1;
        }

        if let Some(source) = failure.take() {
            // Stop: nothing more may run unrecorded. Running calls are cancelled and awaited
            // so no work outlives the batch.
            batch.cancel();
            drain(&mut running, &aborts, p.config.cancel_grace).await;
            return Err(BatchError {
                source,
                committed: results,
            });
        }
        if running.is_empty() {
            // Everything started so far was refused before execution: commit it.
            continue;
        }

        // Wait for a running call to end.
        let done = tokio::select! {
            d = running.next() => d,
            () = batch.cancelled(), if force_at.is_none() => {
                force_at = Some(tokio::time::Instant::now() + p.config.cancel_grace);
                continue;
            }
            () = sleep_until(force_at), if force_at.is_some() && !forced => {
                // The grace is over: drop what has not stopped. The slot is still held until
                // the task reports back below.
                forced = true;
                for a in aborts.iter().flatten() {
                    a.abort();
                }
                continue;
            }
        };
        let Some((idx, joined)) = done else {
            continue;
        };
        aborts[idx] = None;
        if running.is_empty() {
            exclusive_running = false;
        }
        let allowed_by = match std::mem::replace(&mut slots[idx], Slot::Committed) {
            Slot::Running { allowed_by } => allowed_by,
            _ => DecidedBy::new(Gate::Execute, None, String::new()),
        };
        let entry = p.registry.entry(calls[idx].name());
        let candidate = normalize(&calls[idx], joined, allowed_by, batch.is_cancelled(), |v| {
            entry.map_or(Ok(()), |e| e.check_output(v))
        });
        slots[idx] = Slot::Done(candidate);
    }

    for a in &attached {
        p.journal
            .append(&Record::ContextAttached(a.into()))
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

/// Journal `tool_call`, then gates 1–3 ([`Pipeline::admit`]), then `tool_started` if
/// admitted.
async fn start_one<'p>(
    p: &'p Pipeline,
    call: &ToolCall,
    batch: &CancellationToken,
) -> Result<Admit<'p>, JournalError> {
    p.record_call(call)?;
    let admitted = p.admit(call, Mode::Run { cancel: batch }).await?.verdict;
    if let Admit::Admitted(_) = &admitted {
        p.record_started(call)?;
    }
    Ok(admitted)
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
            let (kind, reason) = if matches!(stop, Stop::Panicked) {
                (
                    FailureKind::Crashed,
                    format!("`{}` crashed outside its own frame", call.name()),
                )
            } else {
                (
                    FailureKind::CancelledAfter,
                    format!(
                        "`{}` was stopped by force after the batch was cancelled",
                        call.name()
                    ),
                )
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
            },
            Err(why) => fail(
                FailureKind::InvalidOutput,
                Gate::Normalize,
                None,
                format!(
                    "`{}` returned output that does not match its declared schema ({why}); its content is withheld",
                    call.name()
                ),
                elapsed,
            ),
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
