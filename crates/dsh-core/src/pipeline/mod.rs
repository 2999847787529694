//! The pipeline: the seven gates in their fixed order, and the batch entry point.
//!
//! ```text
//! journal tool_call (flushed)          P1  nothing reaches a gate unrecorded
//! ── Pipeline::admit: gates 1–3, one code path for `dsh check` and the batch ──
//! registry: known tool, valid args,        fails before any policy sees it
//!   declared paths of ≤ PATH_MAX bytes
//! 1 pre-policy votes, combined         P2  allow | ask | deny, never new arguments
//! 2 approval, only on ask              P3  AllowedOnce or nothing; asked at most once
//!   (`dsh check` stops here: `ask`)        (policy::ask_once)
//! 3 guards                             P4  Option<Denial>: nothing can allow past them
//! ──
//! journal tool_started
//! 4 wrappers ∘ tool                    P5  timeout, retry (idempotent only), elapsed
//! 6 normalization                      P7  every Err and panic → one failure kind
//! 5 dispositions, registration order   P6  reshape the result, never flip `ok`
//! 7 freeze → Arc<FrozenResult>         P8  the journal and every observer share it
//! journal checkpoints, tool_result; observers
//! ```
//!
//! Gates keep SPEC's numbers; they run in the order above: normalization (6) comes before
//! the dispositions (5), so that a disposition sees a tool's panic or error already turned
//! into one failure kind, never a raw one (tests/gates.rs,
//! `a_disposition_sees_a_normalized_result`).
//!
//! [`Pipeline::admit`] is gates 1–3 for one call, in order; each gate's function is in
//! `gates.rs` (gate 2 asks through `policy::ask_once`). A batch starts a call with
//! `Pipeline::start` — `record_call`, `admit`, `record_started` — runs gate 4 and
//! normalizes (gate 6) in the scheduler, and commits
//! it with `Pipeline::commit` — `settle` (gates 5 and 7), `record_checkpoints`, `record_result`,
//! observers. Those four `record_*` functions are the only writers of a call's own records; gate 2 writes its
//! `approval`.
//!
//! Why the boundaries sit where they do: gate 1 cannot rewrite arguments because they were
//! already journaled and shown (P2); approval comes before the guards so no approval can
//! outrank a red line (P3, P4); wrappers come after every decision so a retry never re-asks
//! (P5); dispositions come after execution but before the freeze so what is recorded is what
//! the model sees (P6, P8). The scheduling of a batch (P10) lives in the scheduler, which adds
//! `Pipeline::run_batch` and `Pipeline::run_batch_in`.

use std::borrow::Cow;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use futures::FutureExt;
use futures::future::join_all;
use tokio_util::sync::CancellationToken;

use crate::call::ToolCall;
use crate::clearance::Clearance;
use crate::decision::Decision;
use crate::journal::{Journal, JournalError, Record, Stored};
use crate::panic;
use crate::policy::{
    ApprovalRequest, Approver, Disposition, Guard, PolicyContext, PrePolicy, Vote, combine_votes,
};
use crate::registry::{Entry, RegisterError, Registry};
use crate::result::{AttachedContext, Candidate, DecidedBy, FailureKind, FrozenResult, Gate};
use crate::scope::{Scope, ToolSet};
use crate::slots::Slots;
use crate::tool::{Access, Tool, ToolSpec};
use crate::wrappers::Wrapper;

mod gates;

use gates::Gate1Step;

/// Sees every frozen result, after it is journaled, in submission order. Receives the same
/// `Arc` as the caller and every other observer (SPEC P8). A panic here is contained and
/// changes nothing.
pub trait Observer: Send + Sync {
    fn observe(&self, result: &Arc<FrozenResult>);
}

/// Tunables of the mechanism.
#[derive(Clone, Debug)]
pub struct PipelineConfig {
    /// How many parallel-safe calls may execute at once (1 = serial).
    pub max_parallel: usize,
    /// After a user interrupt, how long running tools get to stop before they are dropped.
    pub cancel_grace: Duration,
    /// Appended to an `unavailable` result: how the user can let such a call run.
    pub unavailable_hint: UnavailableHint,
}

/// How the user can let a call that found nobody to ask run: a sentence for the call and
/// what it declares (the allow rule that would lift its ask, naming its own tool).
#[derive(Clone)]
pub struct UnavailableHint(pub Arc<HintFn>);

/// The sentence of an [`UnavailableHint`] for one call and what it declares.
pub type HintFn = dyn Fn(&ToolCall, &[Access]) -> String + Send + Sync;

impl UnavailableHint {
    /// The same sentence for every call.
    pub fn fixed(text: impl Into<String>) -> Self {
        let text: String = text.into();
        UnavailableHint(Arc::new(move |_, _| text.clone()))
    }

    pub fn for_call(&self, call: &ToolCall, accesses: &[Access]) -> String {
        (self.0)(call, accesses)
    }
}

impl std::fmt::Debug for UnavailableHint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UnavailableHint")
    }
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            max_parallel: 8,
            cancel_grace: Duration::from_secs(5),
            unavailable_hint: UnavailableHint::fixed(
                "allow it with a permission rule, or run with an approver",
            ),
        }
    }
}

/// The outcome of a batch: one frozen result per call in submission order, and the context
/// dispositions attached, to be sent as the model's next input.
#[derive(Debug)]
pub struct BatchOutcome {
    pub results: Vec<Arc<FrozenResult>>,
    pub attached: Vec<AttachedContext>,
}

/// A harness fault that stopped a batch: the journal could not record. No call runs after its
/// record failed; the results already committed are kept here. Its message is the journal's
/// own: the front end says what stopped (`dsh batch`'s batch, `dsh exec`'s run, a turn).
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub struct BatchError {
    #[source]
    pub source: JournalError,
    pub committed: Vec<Arc<FrozenResult>>,
}

/// The assembled pipeline of one session, shared by `Arc` (running calls hold it through
/// their dispatch handle).
pub struct Pipeline {
    /// Tools may be registered while the session runs ([`Pipeline::register`]); a call sees
    /// the registry as it was when the call reached the registry step.
    pub(crate) registry: RwLock<Registry>,
    pub(crate) policies: Vec<Arc<dyn PrePolicy>>,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    pub(crate) guards: Vec<Arc<dyn Guard>>,
    pub(crate) wrappers: Arc<[Arc<dyn Wrapper>]>,
    pub(crate) dispositions: Vec<Arc<dyn Disposition>>,
    pub(crate) observers: Vec<Arc<dyn Observer>>,
    pub(crate) journal: Arc<dyn Journal>,
    pub(crate) config: PipelineConfig,
    /// Every executing call of the session draws from it (DESIGN §3, "Nested calls").
    pub(crate) slots: Slots,
    /// This pipeline, for the dispatch handles of running calls.
    pub(crate) me: Weak<Pipeline>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("tools", &*self.read_registry())
            .field(
                "policies",
                &self.policies.iter().map(|p| p.name()).collect::<Vec<_>>(),
            )
            .field(
                "guards",
                &self.guards.iter().map(|g| g.name()).collect::<Vec<_>>(),
            )
            .field(
                "wrappers",
                &self.wrappers.iter().map(|w| w.name()).collect::<Vec<_>>(),
            )
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A call that passed gates 1–3 and may execute.
pub(crate) struct Admitted {
    pub(crate) entry: Arc<Entry>,
    pub(crate) allowed_by: DecidedBy,
    /// What the call may do when it runs: read-only when gate 1 allowed it on that condition,
    /// write when a person approved it (gate 2) or a rule allowed it outright.
    pub(crate) clearance: Clearance,
}

/// How far [`Pipeline::admit`] goes at gate 2.
#[derive(Clone, Copy)]
pub(crate) enum Mode<'c> {
    /// `dsh check`: gate 2 reports `ask` instead of asking; nothing is journaled.
    Check { tools: &'c ToolSet },
    /// A batch: gate 2 asks the approver once and journals `approval`; `cancel` is the batch's.
    Run {
        tools: &'c ToolSet,
        cancel: &'c CancellationToken,
        /// Told while gate 2 waits for a person.
        events: &'c dyn crate::scope::CallEvents,
    },
}

impl Mode<'_> {
    fn tools(&self) -> &ToolSet {
        match self {
            Mode::Check { tools } | Mode::Run { tools, .. } => tools,
        }
    }
}

/// What [`Pipeline::admit`] decided for one call, with every gate-1 vote for `dsh check`.
pub(crate) struct Admission {
    pub(crate) votes: Vec<(String, Vote)>,
    pub(crate) verdict: Admit,
}

/// The decision of gates 1–3.
pub(crate) enum Admit {
    Admitted(Admitted),
    /// Only in [`Mode::Check`]: gate 2 would ask; gate 1's reason for asking.
    WouldAsk(DecidedBy),
    Refused(Candidate),
}

impl Admission {
    pub(crate) fn refused(c: Candidate) -> Self {
        Admission {
            votes: Vec::new(),
            verdict: Admit::Refused(c),
        }
    }
}

fn cancelled_before(call: &ToolCall) -> Candidate {
    Candidate::failure(
        call.id(),
        call.name(),
        FailureKind::CancelledBefore,
        DecidedBy::new(
            Gate::Normalize,
            None,
            "the batch was cancelled before this call started; it did not run",
        ),
    )
}

impl Pipeline {
    fn read_registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        // Registration either happens whole or not at all (the map insert is the last
        // step), so a poisoned lock still guards a consistent registry.
        self.registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The one registration point for tools added while the session runs (MCP servers,
    /// plugins): the same checks as at assembly (SPEC P9). Calls already past the registry
    /// step are not affected.
    pub fn register(&self, tool: Arc<dyn Tool>) -> Result<(), RegisterError> {
        self.registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .register_arc(tool)
    }

    /// Replaces a registered tool whose declaration changed ([`Registry::replace_arc`]).
    pub fn replace(&self, tool: Arc<dyn Tool>) -> Result<(), RegisterError> {
        self.registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .replace_arc(tool)
    }

    /// The declarations of the tools in `tools`, by name.
    pub fn specs(&self, tools: &ToolSet) -> Vec<Arc<ToolSpec>> {
        self.read_registry()
            .entries()
            .filter(|e| tools.contains(&e.spec.name))
            .map(|e| e.spec.clone())
            .collect()
    }

    /// One tool's declaration.
    pub fn spec(&self, name: &str) -> Option<Arc<ToolSpec>> {
        self.read_registry().entry(name).map(|e| e.spec.clone())
    }

    pub(crate) fn entry(&self, name: &str) -> Option<Arc<Entry>> {
        self.read_registry().entry(name)
    }

    /// The session's execution slots.
    pub fn slots(&self) -> &Slots {
        &self.slots
    }

    pub fn journal(&self) -> &Arc<dyn Journal> {
        &self.journal
    }

    /// The gate sequence of one call, top to bottom: the registry, gate 1, gate 2 (only on
    /// `ask`), gate 3. Shared by `dsh check` ([`Mode::Check`]) and the batch ([`Mode::Run`]),
    /// so the check⇔batch invariant of DESIGN §4 is this one code path. In a batch the
    /// `tool_call` record is already written. An `Err` only when the journal could not record.
    pub(crate) async fn admit(
        &self,
        call: &ToolCall,
        mode: Mode<'_>,
    ) -> Result<Admission, JournalError> {
        if let Mode::Run { cancel, .. } = mode
            && cancel.is_cancelled()
        {
            return Ok(Admission::refused(cancelled_before(call)));
        }
        let (entry, accesses) = match self.registry_check(call, mode.tools()) {
            Ok(x) => x,
            Err(c) => return Ok(Admission::refused(*c)),
        };
        let spec = entry.spec.clone();
        let cx = PolicyContext {
            spec: &spec,
            accesses: &accesses,
        };
        let g1 = self.gate1(call, &cx).await;
        let done = |verdict| {
            Ok(Admission {
                votes: g1.votes,
                verdict,
            })
        };
        let (allowed_by, clearance) = match g1.step {
            Gate1Step::Deny(refused) => return done(Admit::Refused(refused)),
            Gate1Step::Allow(decided, clearance) => (decided, clearance),
            // A person's approval (or an approver standing in for one) clears writing.
            Gate1Step::Ask(decided) => match self.gate2(call, &cx, &entry, decided, mode).await? {
                Ok(approved) => (approved, Clearance::Write),
                Err(stopped) => return done(stopped),
            },
        };
        done(self.gate3(call, &cx, entry, allowed_by, clearance))
    }

    /// Starting a call in a batch: `tool_call` (SPEC P1), gates 1–3 ([`Pipeline::admit`]),
    /// then `tool_started` if admitted — its execution begins next.
    pub(crate) async fn start(
        &self,
        scope: &Scope,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Result<Result<Admitted, Candidate>, JournalError> {
        self.record_call(call)?;
        scope.proposed(call);
        let mode = Mode::Run {
            tools: &scope.tools,
            cancel,
            events: scope.events.as_ref(),
        };
        match self.admit(call, mode).await?.verdict {
            Admit::Admitted(admitted) => {
                self.record_started(call)?;
                scope.started(call);
                Ok(Ok(admitted))
            }
            Admit::Refused(c) => Ok(Err(c)),
            // Only `Mode::Check` stops before asking; were it ever to reach a batch, the call
            // is refused as unasked, never run.
            Admit::WouldAsk(decided) => Ok(Err(Candidate::failure(
                call.id(),
                call.name(),
                FailureKind::Unavailable,
                decided,
            ))),
        }
    }

    /// Committing a call, in submission order: gates 5–7 ([`Pipeline::settle`]), then
    /// `tool_result`, then the observers.
    pub(crate) async fn commit(
        &self,
        scope: &Scope,
        call: &ToolCall,
        candidate: Candidate,
        attached: &mut Vec<AttachedContext>,
    ) -> Result<Arc<FrozenResult>, JournalError> {
        let result = self.settle(call, candidate, attached).await;
        self.record_checkpoints(call, &result)?;
        self.record_result(call, &result)?;
        self.notify(&result);
        scope.finished(call, &result);
        Ok(result)
    }

    /// Gates 5–7 for one call: dispositions in registration order, then the freeze.
    pub(crate) async fn settle(
        &self,
        call: &ToolCall,
        mut candidate: Candidate,
        attached: &mut Vec<AttachedContext>,
    ) -> Arc<FrozenResult> {
        for d in &self.dispositions {
            let action = AssertUnwindSafe(d.dispose(call, &candidate))
                .catch_unwind()
                .await;
            match action {
                Ok(crate::policy::Action::Accept) => {}
                Ok(crate::policy::Action::Replace(content)) => {
                    candidate.content = content;
                    candidate.value = None;
                }
                Ok(crate::policy::Action::Block(reason)) => {
                    candidate.content.clone_from(&reason);
                    candidate.value = None;
                    candidate.decided_by =
                        DecidedBy::new(Gate::Disposition, Some(d.name()), reason);
                }
                Ok(crate::policy::Action::Redact {
                    content,
                    value,
                    reason,
                }) => {
                    candidate.content = content;
                    candidate.value = value;
                    candidate.decided_by.reason = reason;
                }
                Ok(crate::policy::Action::AttachContext(text)) => {
                    // Code Mode sub-calls get no attached context: call and result stay
                    // adjacent (SPEC P11).
                    if call.source() != crate::CallSource::Code {
                        attached.push(AttachedContext {
                            call_id: call.id().to_owned(),
                            policy: d.name().to_owned(),
                            text,
                        });
                    }
                }
                Err(p) => {
                    // Fail closed: a crashed redactor must not leak what it was redacting.
                    let reason = format!(
                        "result withheld: disposition `{}` panicked: {}",
                        d.name(),
                        panic::message(p.as_ref())
                    );
                    let mut c = Candidate::failure(
                        call.id(),
                        call.name(),
                        FailureKind::Crashed,
                        DecidedBy::new(Gate::Disposition, Some(d.name()), reason),
                    );
                    c.elapsed_ms = candidate.elapsed_ms;
                    // What the call changed is changed all the same.
                    c.changes = std::mem::take(&mut candidate.changes);
                    candidate = c;
                    break;
                }
            }
        }
        Arc::new(FrozenResult::freeze(candidate))
    }

    /// `tool_call`: written (and flushed, as every record) before the call reaches gate 1
    /// (SPEC P1). With [`Pipeline::record_started`] and [`Pipeline::record_result`], the one
    /// place a call's own records are written; gate 2 writes `approval` in
    /// [`crate::policy::ask_once`].
    pub(crate) fn record_call(&self, call: &ToolCall) -> Result<(), JournalError> {
        // Arguments over 1 MiB go to a blob, durable before the record naming it.
        let args = Stored::value(self.journal.as_ref(), call.args())?;
        self.journal.append_as(
            call.agent(),
            &Record::ToolCall {
                call_id: call.id().into(),
                name: call.name().into(),
                args,
                source: call.source(),
                parent: call.parent().map(Cow::Borrowed),
                step: call.step(),
            },
        )?;
        Ok(())
    }

    /// `tool_started`: the call passed gates 1–3 and its execution begins.
    pub(crate) fn record_started(&self, call: &ToolCall) -> Result<(), JournalError> {
        self.journal.append_as(
            call.agent(),
            &Record::ToolStarted {
                call_id: call.id().into(),
            },
        )?;
        Ok(())
    }

    /// `checkpoint`: one for each file the call changed through the file seam, with the
    /// digests of its content before and after (DESIGN §6), before its `tool_result`.
    pub(crate) fn record_checkpoints(
        &self,
        call: &ToolCall,
        result: &FrozenResult,
    ) -> Result<(), JournalError> {
        for change in result.changes() {
            self.journal.append_as(
                call.agent(),
                &Record::Checkpoint {
                    call_id: call.id().into(),
                    path: change.path.as_str().into(),
                    before: change.before.as_deref().map(Into::into),
                    after: change.after.as_deref().map(Into::into),
                },
            )?;
        }
        Ok(())
    }

    /// `tool_result`: the frozen result, committed in submission order.
    pub(crate) fn record_result(
        &self,
        call: &ToolCall,
        result: &FrozenResult,
    ) -> Result<(), JournalError> {
        self.journal
            .append_as(call.agent(), &Record::ToolResult(result.into()))?;
        Ok(())
    }

    /// Tells every observer; a panicking observer changes nothing.
    pub(crate) fn notify(&self, result: &Arc<FrozenResult>) {
        for o in &self.observers {
            panic::quietly(|| o.observe(result));
        }
    }

    /// Whether `call` may overlap other parallel-safe calls, as its tool declares
    /// ([`crate::Parallel`]). An unknown tool is exclusive: it may be registered before the
    /// call is admitted, and must not then run beside others on a guess. Per call, an `Err`
    /// or a panic in the classifier means exclusive too (SPEC P10).
    pub(crate) fn parallel_safe(&self, call: &ToolCall) -> bool {
        let Some(entry) = self.entry(call.name()) else {
            return false;
        };
        match entry.spec.parallel {
            crate::Parallel::Never => return false,
            crate::Parallel::Always => return true,
            crate::Parallel::PerCall => {}
        }
        let tool = &entry.tool;
        matches!(
            std::panic::catch_unwind(AssertUnwindSafe(|| tool.parallel_safe(call.args()))),
            Ok(Ok(true))
        )
    }
}
