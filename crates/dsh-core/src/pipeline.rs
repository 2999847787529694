//! The pipeline: the seven gates in their fixed order, and the batch entry point.
//!
//! ```text
//! journal tool_call (flushed)          P1  nothing reaches a gate unrecorded
//! registry: known tool, valid args,        fails before any policy sees it
//!   declared paths of ≤ PATH_MAX bytes
//! 1 pre-policy votes, combined         P2  allow | ask | deny, never new arguments
//! 2 approval, only on ask              P3  AllowedOnce or nothing; asked at most once
//! 3 guards                             P4  Option<Denial>: nothing can allow past them
//! journal tool_started
//! 4 wrappers ∘ tool                    P5  timeout, retry (idempotent only), elapsed
//! 5 dispositions, registration order   P6  reshape the result, never flip `ok`
//! 6 normalization                      P7  every Err and panic → one failure kind
//! 7 freeze → Arc<FrozenResult>         P8  the journal and every observer share it
//! journal tool_result; observers
//! ```
//!
//! Why the boundaries sit where they do: gate 1 cannot rewrite arguments because they were
//! already journaled and shown (P2); approval comes before the guards so no approval can
//! outrank a red line (P3, P4); wrappers come after every decision so a retry never re-asks
//! (P5); dispositions come after execution but before the freeze so what is recorded is what
//! the model sees (P6, P8). The scheduling of a batch (P10) lives in `crate::scheduler`.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::join_all;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::call::ToolCall;
use crate::journal::{Journal, JournalError, Record};
use crate::panic;
use crate::policy::{
    ApprovalOutcome, ApprovalRequest, Approver, Disposition, Guard, PolicyContext, PrePolicy, Tier,
    Verdict, Vote, combine_votes,
};
use crate::registry::{Entry, Registry};
use crate::result::{AttachedContext, Candidate, DecidedBy, FailureKind, FrozenResult, Gate};
use crate::tool::Access;
use crate::wrappers::Wrapper;

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
    pub unavailable_hint: String,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            max_parallel: 8,
            cancel_grace: Duration::from_secs(5),
            unavailable_hint: "allow it with a permission rule, or run with an approver".to_owned(),
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
/// record failed; the results already committed are kept here.
#[derive(Debug, thiserror::Error)]
#[error("the batch stopped: {source}")]
pub struct BatchError {
    #[source]
    pub source: JournalError,
    pub committed: Vec<Arc<FrozenResult>>,
}

/// `dsh check`'s decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

/// One vote as `dsh check` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckVote {
    pub policy: String,
    pub tier: Tier,
    pub vote: Verdict,
    pub reason: String,
}

/// What gates 1 and 3 would decide for a call, without running it or asking anyone (DESIGN
/// §4). `allow` ⇔ a batch without an approver runs it; `ask` ⇔ such a batch answers
/// `unavailable`; `deny` ⇔ the batch refuses it whatever the approver says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    pub tool: String,
    pub decision: Decision,
    pub gate: Gate,
    pub policy: Option<String>,
    pub reason: String,
    pub votes: Vec<CheckVote>,
}

/// The assembled pipeline of one session.
pub struct Pipeline {
    pub(crate) registry: Registry,
    pub(crate) policies: Vec<Arc<dyn PrePolicy>>,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    pub(crate) guards: Vec<Arc<dyn Guard>>,
    pub(crate) wrappers: Arc<[Arc<dyn Wrapper>]>,
    pub(crate) dispositions: Vec<Arc<dyn Disposition>>,
    pub(crate) observers: Vec<Arc<dyn Observer>>,
    pub(crate) journal: Arc<dyn Journal>,
    pub(crate) config: PipelineConfig,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("tools", &self.registry)
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

/// Assembles a [`Pipeline`]. Listeners of each gate keep their registration order.
pub struct PipelineBuilder {
    inner: Pipeline,
    wrappers: Vec<Arc<dyn Wrapper>>,
}

impl PipelineBuilder {
    #[must_use]
    pub fn pre_policy(mut self, policy: impl PrePolicy + 'static) -> Self {
        self.inner.policies.push(Arc::new(policy));
        self
    }
    #[must_use]
    pub fn pre_policy_arc(mut self, policy: Arc<dyn PrePolicy>) -> Self {
        self.inner.policies.push(policy);
        self
    }
    /// Mounts the approver; without one every `ask` ends as `unavailable` (SPEC P3).
    #[must_use]
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.inner.approver = Some(approver);
        self
    }
    #[must_use]
    pub fn guard(mut self, guard: impl Guard + 'static) -> Self {
        self.inner.guards.push(Arc::new(guard));
        self
    }
    #[must_use]
    pub fn guard_arc(mut self, guard: Arc<dyn Guard>) -> Self {
        self.inner.guards.push(guard);
        self
    }
    /// The first wrapper registered is the outermost.
    #[must_use]
    pub fn wrapper(mut self, wrapper: impl Wrapper + 'static) -> Self {
        self.wrappers.push(Arc::new(wrapper));
        self
    }
    #[must_use]
    pub fn disposition(mut self, disposition: impl Disposition + 'static) -> Self {
        self.inner.dispositions.push(Arc::new(disposition));
        self
    }
    #[must_use]
    pub fn disposition_arc(mut self, disposition: Arc<dyn Disposition>) -> Self {
        self.inner.dispositions.push(disposition);
        self
    }
    #[must_use]
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.inner.observers.push(observer);
        self
    }
    #[must_use]
    pub fn config(mut self, config: PipelineConfig) -> Self {
        self.inner.config = config;
        self
    }
    pub fn build(mut self) -> Pipeline {
        self.inner.wrappers = self.wrappers.into();
        self.inner.config.max_parallel = self.inner.config.max_parallel.max(1);
        self.inner
    }
}

/// A call that passed gates 1–3 and may execute.
pub(crate) struct Admitted<'p> {
    pub(crate) entry: &'p Entry,
    pub(crate) allowed_by: DecidedBy,
}

/// What starting a call led to.
pub(crate) enum Started<'p> {
    Admitted(Admitted<'p>),
    Refused(Candidate),
}

/// Gate 1's combined outcome for one call, with every vote for `dsh check`.
struct Gate1 {
    votes: Vec<(String, Vote)>,
    verdict: Verdict,
    decider: Option<usize>,
}

impl Gate1 {
    fn decided_by(&self, tool: &str, read_only: bool) -> DecidedBy {
        match self.decider {
            Some(i) => {
                let (name, vote) = &self.votes[i];
                DecidedBy::new(Gate::PrePolicy, Some(name), vote.reason.clone())
            }
            None if read_only => DecidedBy::new(
                Gate::PrePolicy,
                None,
                format!("no policy voted; `{tool}` is read-only, so it is allowed by default"),
            ),
            None => DecidedBy::new(
                Gate::PrePolicy,
                None,
                format!("no policy voted; `{tool}` can change things, so it needs approval"),
            ),
        }
    }

    fn crashed(&self) -> bool {
        self.decider.is_some_and(|i| self.votes[i].1.crashed)
    }
}

impl Pipeline {
    /// Starts a pipeline around `registry`, recording into `journal`.
    pub fn builder(registry: Registry, journal: Arc<dyn Journal>) -> PipelineBuilder {
        PipelineBuilder {
            inner: Pipeline {
                registry,
                policies: Vec::new(),
                approver: None,
                guards: Vec::new(),
                wrappers: Arc::from(Vec::new()),
                dispositions: Vec::new(),
                observers: Vec::new(),
                journal,
                config: PipelineConfig::default(),
            },
            wrappers: Vec::new(),
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn journal(&self) -> &Arc<dyn Journal> {
        &self.journal
    }

    /// Runs one batch (one model step) through every gate, scheduled as SPEC P10 says.
    ///
    /// Returns one result per call, in submission order, whatever happened to each call; an
    /// `Err` only when the journal could not record (then no further call runs).
    pub async fn run_batch(
        &self,
        calls: Vec<ToolCall>,
        cancel: &CancellationToken,
    ) -> Result<BatchOutcome, BatchError> {
        crate::scheduler::run_batch(self, calls, cancel).await
    }

    /// Gates 1 and 3 as a dry run: nothing executes, nobody is asked, nothing is journaled.
    pub async fn check(&self, call: &ToolCall) -> CheckReport {
        let report = |decision, decided: DecidedBy, votes: &[(String, Vote)]| CheckReport {
            tool: call.name().to_owned(),
            decision,
            gate: decided.gate,
            policy: decided.policy,
            reason: decided.reason,
            votes: votes
                .iter()
                .map(|(policy, v)| CheckVote {
                    policy: policy.clone(),
                    tier: v.tier,
                    vote: v.verdict,
                    reason: v.reason.clone(),
                })
                .collect(),
        };
        let (entry, accesses) = match self.admit_to_gates(call) {
            Ok(x) => x,
            Err(c) => return report(Decision::Deny, c.decided_by, &[]),
        };
        let cx = PolicyContext {
            spec: &entry.spec,
            accesses: &accesses,
        };
        let g1 = self.gate1(call, &cx).await;
        let decided = g1.decided_by(call.name(), entry.spec.read_only);
        if g1.verdict == Verdict::Deny {
            return report(Decision::Deny, decided, &g1.votes);
        }
        if let Some(c) = self.guards(call, &cx) {
            return report(Decision::Deny, c.decided_by, &g1.votes);
        }
        let decision = if g1.verdict == Verdict::Allow {
            Decision::Allow
        } else {
            Decision::Ask
        };
        report(decision, decided, &g1.votes)
    }

    /// Registry checks: the tool exists, the arguments match its schema, its access
    /// declaration can be computed, and no declared path is longer than [`crate::PATH_MAX`].
    fn admit_to_gates(&self, call: &ToolCall) -> Result<(&Entry, Vec<Access>), Box<Candidate>> {
        let fail = |kind, reason: String| {
            Box::new(Candidate::failure(
                call.id(),
                call.name(),
                kind,
                DecidedBy::new(Gate::Registry, None, reason),
            ))
        };
        let Some(entry) = self.registry.entry(call.name()) else {
            let known: Vec<&str> = self.registry.specs().map(|s| s.name.as_str()).collect();
            return Err(fail(
                FailureKind::UnknownTool,
                format!(
                    "there is no tool named {}; the tools are: {}",
                    crate::quote_capped(call.name()),
                    known.join(", ")
                ),
            ));
        };
        if let serde_json::Value::String(raw) = call.args() {
            let preview: String = raw.chars().take(120).collect();
            return Err(fail(
                FailureKind::InvalidArgs,
                format!(
                    "the arguments of `{}` are not valid JSON (got `{preview}`); send them again as one JSON object",
                    call.name()
                ),
            ));
        }
        if let Err(why) = entry.check_input(call.args()) {
            return Err(fail(
                FailureKind::InvalidArgs,
                format!(
                    "the arguments do not match `{}`'s input schema ({why}); fix them and call again",
                    call.name()
                ),
            ));
        }
        let tool = &entry.tool;
        match std::panic::catch_unwind(AssertUnwindSafe(|| tool.accesses(call.args()))) {
            Ok(accesses) => {
                // A path no system call accepts is a malformed argument, not something for a
                // policy to judge: every policy would have to refuse it, quoting it whole.
                let too_long = accesses.iter().find_map(|a| match a {
                    Access::Read { path } | Access::Write { path } => {
                        crate::workspace::check_path_length(path).err()
                    }
                    _ => None,
                });
                match too_long {
                    Some(e) => Err(fail(FailureKind::InvalidArgs, e.to_string())),
                    None => Ok((entry, accesses)),
                }
            }
            Err(p) => Err(fail(
                FailureKind::Crashed,
                format!(
                    "`{}` panicked while declaring what it accesses: {}",
                    call.name(),
                    panic::message(p.as_ref())
                ),
            )),
        }
    }

    /// Gate 1: every listener votes (concurrently; the combination does not depend on order).
    async fn gate1(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Gate1 {
        let votes = join_all(self.policies.iter().map(|p| async move {
            let vote = match AssertUnwindSafe(p.vote(call, cx)).catch_unwind().await {
                Ok(v) => v,
                Err(e) => Vote::crashed(format!(
                    "policy `{}` panicked: {}; the call is refused",
                    p.name(),
                    panic::message(e.as_ref())
                )),
            };
            (p.name().to_owned(), vote)
        }))
        .await;
        let plain: Vec<Vote> = votes.iter().map(|(_, v)| v.clone()).collect();
        let (verdict, decider) = combine_votes(&plain, cx.spec.read_only);
        Gate1 {
            votes,
            verdict,
            decider,
        }
    }

    /// Gate 3: the first denial, or `None`. A panicking guard refuses.
    fn guards(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Option<Candidate> {
        for g in &self.guards {
            let verdict = std::panic::catch_unwind(AssertUnwindSafe(|| g.check(call, cx)));
            let (kind, reason) = match verdict {
                Ok(None) => continue,
                Ok(Some(d)) => (FailureKind::Denied, d.reason),
                Err(p) => (
                    FailureKind::Crashed,
                    format!(
                        "guard `{}` panicked: {}; the call is refused",
                        g.name(),
                        panic::message(p.as_ref())
                    ),
                ),
            };
            return Some(Candidate::failure(
                call.id(),
                call.name(),
                kind,
                DecidedBy::new(Gate::Guard, Some(g.name()), reason),
            ));
        }
        None
    }

    /// Gate 2: asks the approver once. No approver, an `Err` or a panic are `Unavailable`.
    async fn approval(
        &self,
        request: &ApprovalRequest<'_>,
        cancel: &CancellationToken,
    ) -> (ApprovalOutcome, Option<String>) {
        let Some(approver) = &self.approver else {
            return (ApprovalOutcome::Unavailable, None);
        };
        let name = Some(approver.name().to_owned());
        let asked = AssertUnwindSafe(approver.approve(request)).catch_unwind();
        tokio::select! {
            r = asked => match r {
                Ok(Ok(outcome)) => (outcome, name),
                Ok(Err(_)) | Err(_) => (ApprovalOutcome::Unavailable, name),
            },
            () = cancel.cancelled() => (ApprovalOutcome::Cancelled, name),
        }
    }

    /// Everything before execution, in gate order: the registry, gate 1, gate 2 (only on
    /// `ask`), gate 3. The `tool_call` record is already written.
    pub(crate) async fn start<'p>(
        &'p self,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Result<Started<'p>, JournalError> {
        let refuse = |kind, gate, policy: Option<&str>, reason: String| {
            Ok(Started::Refused(Candidate::failure(
                call.id(),
                call.name(),
                kind,
                DecidedBy::new(gate, policy, reason),
            )))
        };
        if cancel.is_cancelled() {
            return refuse(
                FailureKind::CancelledBefore,
                Gate::Normalize,
                None,
                "the batch was cancelled before this call started; it did not run".to_owned(),
            );
        }
        let (entry, accesses) = match self.admit_to_gates(call) {
            Ok(x) => x,
            Err(c) => return Ok(Started::Refused(*c)),
        };
        let cx = PolicyContext {
            spec: &entry.spec,
            accesses: &accesses,
        };
        let g1 = self.gate1(call, &cx).await;
        let decided = g1.decided_by(call.name(), entry.spec.read_only);
        let allowed_by = match g1.verdict {
            Verdict::Deny => {
                let kind = if g1.crashed() {
                    FailureKind::Crashed
                } else {
                    FailureKind::Denied
                };
                let mut c = Candidate::failure(call.id(), call.name(), kind, decided);
                c.content = format!("denied: {}", c.decided_by.reason);
                return Ok(Started::Refused(c));
            }
            Verdict::Ask => {
                // A call a guard will refuse is never sent to a person.
                if let Some(c) = self.guards(call, &cx) {
                    return Ok(Started::Refused(c));
                }
                let request = ApprovalRequest {
                    call,
                    spec: &entry.spec,
                    accesses: &accesses,
                    policy: decided.policy.as_deref(),
                    reason: &decided.reason,
                    cancel: cancel.clone(),
                };
                let (outcome, approver) = self.approval(&request, cancel).await;
                self.journal.append(&Record::Approval {
                    call_id: call.id().into(),
                    outcome,
                })?;
                let approver = approver.as_deref();
                let ask = &decided.reason;
                match outcome {
                    ApprovalOutcome::AllowedOnce => {
                        DecidedBy::new(Gate::Approval, approver, format!("approved once ({ask})"))
                    }
                    ApprovalOutcome::Rejected => {
                        return refuse(
                            FailureKind::Rejected,
                            Gate::Approval,
                            approver,
                            format!(
                                "the user rejected this call ({ask}); do not retry it unchanged — ask the user how to proceed"
                            ),
                        );
                    }
                    ApprovalOutcome::Cancelled => {
                        return refuse(
                            FailureKind::CancelledBefore,
                            Gate::Approval,
                            approver,
                            format!(
                                "the approval was cancelled before an answer ({ask}); the call did not run"
                            ),
                        );
                    }
                    ApprovalOutcome::Unavailable => {
                        let why = if approver.is_some() {
                            "the approver could not answer"
                        } else {
                            "no approver is available to ask"
                        };
                        return refuse(
                            FailureKind::Unavailable,
                            Gate::Approval,
                            approver,
                            format!(
                                "`{}` needs approval ({ask}) and {why}; {}",
                                call.name(),
                                self.config.unavailable_hint
                            ),
                        );
                    }
                }
            }
            Verdict::Allow | Verdict::Abstain => decided,
        };
        // The authoritative guard check: after approval, just before execution.
        if let Some(c) = self.guards(call, &cx) {
            return Ok(Started::Refused(c));
        }
        Ok(Started::Admitted(Admitted { entry, allowed_by }))
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
                Ok(crate::policy::Action::AttachContext(text)) => {
                    // Code Mode sub-calls get no attached context: call and result stay
                    // adjacent (SPEC P11).
                    if !matches!(call.source(), crate::CallSource::Code { .. }) {
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
                    candidate = c;
                    break;
                }
            }
        }
        Arc::new(FrozenResult::freeze(candidate))
    }

    /// Tells every observer; a panicking observer changes nothing.
    pub(crate) fn notify(&self, result: &Arc<FrozenResult>) {
        for o in &self.observers {
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| o.observe(result)));
        }
    }

    /// Whether `call` may overlap other parallel-safe calls. Unknown tools never execute, so
    /// they do not wait; an `Err` or a panic in the classifier means exclusive (SPEC P10).
    pub(crate) fn parallel_safe(&self, call: &ToolCall) -> bool {
        let Some(entry) = self.registry.entry(call.name()) else {
            return true;
        };
        let tool = &entry.tool;
        matches!(
            std::panic::catch_unwind(AssertUnwindSafe(|| tool.parallel_safe(call.args()))),
            Ok(Ok(true))
        )
    }
}
