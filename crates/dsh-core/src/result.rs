//! The result of a call, as it is being shaped (gates 5–6) and once frozen (gate 7).
//!
//! Every call ends as exactly one [`FrozenResult`] — success, denial or failure alike — whose
//! JSON form is DESIGN §4's result object. The lists of failure kinds and gates are closed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a call did not succeed. Closed list (DESIGN §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Refused at gate 1 or by a guard (`decided_by.gate` says which).
    Denied,
    /// A person said no.
    Rejected,
    /// Asked, but no approver or no channel could answer.
    Unavailable,
    /// Cancelled before execution started.
    CancelledBefore,
    /// Cancelled after execution started.
    CancelledAfter,
    InvalidArgs,
    UnknownTool,
    Timeout,
    /// A panic in a policy, wrapper, guard, disposition or the tool.
    Crashed,
    /// The tool's output does not match its declared schema.
    InvalidOutput,
    StaleVersion,
    NotObserved,
    NotFound,
    /// The tool's own ordinary failure.
    ToolError,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Denied => "denied",
            FailureKind::Rejected => "rejected",
            FailureKind::Unavailable => "unavailable",
            FailureKind::CancelledBefore => "cancelled_before",
            FailureKind::CancelledAfter => "cancelled_after",
            FailureKind::InvalidArgs => "invalid_args",
            FailureKind::UnknownTool => "unknown_tool",
            FailureKind::Timeout => "timeout",
            FailureKind::Crashed => "crashed",
            FailureKind::InvalidOutput => "invalid_output",
            FailureKind::StaleVersion => "stale_version",
            FailureKind::NotObserved => "not_observed",
            FailureKind::NotFound => "not_found",
            FailureKind::ToolError => "tool_error",
        }
    }
}

/// The gates, in the order a call meets them (DESIGN §1). Closed list (DESIGN §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    /// Tool lookup and argument validation, before any policy.
    Registry,
    /// Gate 1: votes.
    PrePolicy,
    /// Gate 2: one-shot approval.
    Approval,
    /// Gate 3: deny-only guards.
    Guard,
    /// Gate 4: wrappers and the tool.
    Execute,
    /// Gate 5: dispositions.
    Disposition,
    /// Gates 6–7: normalization and the final check.
    Normalize,
}

impl Gate {
    pub fn as_str(self) -> &'static str {
        match self {
            Gate::Registry => "registry",
            Gate::PrePolicy => "pre_policy",
            Gate::Approval => "approval",
            Gate::Guard => "guard",
            Gate::Execute => "execute",
            Gate::Disposition => "disposition",
            Gate::Normalize => "normalize",
        }
    }
}

/// Which gate decided the outcome, which policy there, and why (SPEC P12). For a success it
/// names what let the call run (the allowing vote, or the approval).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecidedBy {
    pub gate: Gate,
    pub policy: Option<String>,
    pub reason: String,
}

impl DecidedBy {
    /// A reason longer than [`crate::REASON_MAX_BYTES`] is cut in the middle: listeners quote
    /// arguments capped ([`crate::quote_capped`]), and this bounds what one that did not can
    /// put in the journal and the model's input.
    pub(crate) fn new(gate: Gate, policy: Option<&str>, reason: impl Into<String>) -> Self {
        DecidedBy {
            gate,
            policy: policy.map(str::to_owned),
            reason: crate::quote::cap_reason(reason.into()),
        }
    }
}

/// The sandbox profile a command ran in (DESIGN §4 `sandbox`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxState {
    /// The read-only profile: writes only to the session's temporary directory, reads
    /// confined, no sockets (a call cleared [`crate::Clearance::ReadOnly`]).
    #[serde(rename = "landlock-read-only")]
    LandlockReadOnly,
    /// The workspace-write profile.
    Landlock,
    /// Not confined (or not fully: the result's content says how).
    None,
}

impl SandboxState {
    /// The name in results (DESIGN §4).
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxState::LandlockReadOnly => "landlock-read-only",
            SandboxState::Landlock => "landlock",
            SandboxState::None => "none",
        }
    }
}

/// A result before the freeze, as dispositions see it. Read-only to them: a disposition
/// answers with an [`crate::Action`], and no action can change `ok` (SPEC P6). Frozen, it
/// is a [`FrozenResult`]: the same fields, which nothing changes any more.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub(crate) call_id: String,
    pub(crate) tool: String,
    pub(crate) ok: bool,
    pub(crate) failure_kind: Option<FailureKind>,
    pub(crate) decided_by: DecidedBy,
    pub(crate) content: String,
    pub(crate) value: Option<Value>,
    pub(crate) elapsed_ms: u64,
    pub(crate) exit_code: Option<i32>,
    pub(crate) sandbox: Option<SandboxState>,
    /// The files the call changed (journaled as `checkpoint` records, not in the §4 object):
    /// kept whatever the result says, since the files changed either way.
    #[serde(skip)]
    pub(crate) changes: Vec<crate::FileChange>,
}

impl Candidate {
    pub(crate) fn failure(
        call_id: &str,
        tool: &str,
        kind: FailureKind,
        decided_by: DecidedBy,
    ) -> Self {
        Candidate {
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            ok: false,
            failure_kind: Some(kind),
            content: decided_by.reason.clone(),
            decided_by,
            value: None,
            elapsed_ms: 0,
            exit_code: None,
            sandbox: None,
            changes: Vec::new(),
        }
    }

    pub fn call_id(&self) -> &str {
        &self.call_id
    }
    pub fn tool(&self) -> &str {
        &self.tool
    }
    pub fn ok(&self) -> bool {
        self.ok
    }
    pub fn failure_kind(&self) -> Option<FailureKind> {
        self.failure_kind
    }
    pub fn decided_by(&self) -> &DecidedBy {
        &self.decided_by
    }
    pub fn content(&self) -> &str {
        &self.content
    }
    pub fn value(&self) -> Option<&Value> {
        self.value.as_ref()
    }
    pub fn elapsed_ms(&self) -> u64 {
        self.elapsed_ms
    }
    pub fn exit_code(&self) -> Option<i32> {
        self.exit_code
    }
    pub fn sandbox(&self) -> Option<SandboxState> {
        self.sandbox
    }
    /// The files the call changed through the file seam.
    pub fn changes(&self) -> &[crate::FileChange] {
        &self.changes
    }
}

/// The authoritative, immutable result of one call (SPEC P8). Built only by the pipeline and
/// handed out as one `Arc<FrozenResult>`: the caller, every observer and the journal see the
/// same allocation. (Deserializing one only reads back what a journal recorded.) Serializes
/// to DESIGN §4's result object, field for field. Its fields are the candidate's, read with
/// [`Candidate`]'s accessors; nothing can reach them to change them.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FrozenResult(Candidate);

impl std::ops::Deref for FrozenResult {
    type Target = Candidate;
    fn deref(&self) -> &Candidate {
        &self.0
    }
}

impl FrozenResult {
    /// Gate 7: the final check. The invariants that make a result well-formed hold here by
    /// construction; they are restated as a debug assertion.
    pub(crate) fn freeze(c: Candidate) -> Self {
        debug_assert_eq!(c.ok, c.failure_kind.is_none());
        FrozenResult(c)
    }

    /// The result of a call whose process died before it had one, written when its session
    /// is resumed (DESIGN §6): `cancelled_after` when its `tool_started` is on record (it may
    /// have run, partly or fully), else `cancelled_before` (it did not run). Nothing else
    /// builds a result outside the pipeline.
    pub fn cut_off(call_id: &str, tool: &str, started: bool) -> Self {
        let (kind, reason) = if started {
            (
                FailureKind::CancelledAfter,
                "the previous dsh process ended while this call was running: it may have run partly or fully; check its effects before repeating it",
            )
        } else {
            (
                FailureKind::CancelledBefore,
                "the previous dsh process ended before this call started: it did not run",
            )
        };
        let mut c = Candidate::failure(
            call_id,
            tool,
            kind,
            DecidedBy::new(Gate::Normalize, None, reason),
        );
        c.content = format!("cut off: {reason}");
        FrozenResult::freeze(c)
    }

    /// The §4 result object as one line of JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain strings, numbers and a `Value` cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(r#"{{"call_id":null,"error":"result not serializable: {e}"}}"#)
        })
    }
}

/// Context a disposition attached to a result, released as the model's next input only after
/// the whole batch's results are journaled (SPEC P6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachedContext {
    pub call_id: String,
    pub policy: String,
    pub text: String,
}
