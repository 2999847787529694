//! The dsh tool-call pipeline: mechanism only.
//!
//! A model asks for tool calls; this crate decides nothing about *which* calls are acceptable.
//! It fixes the order in which decisions are asked for and what each decision may express, so
//! that safety and truth hold by construction rather than by every policy being bug-free
//! (SPEC P1–P12):
//!
//! | step | gate | decision type | what it may do |
//! |------|------|---------------|----------------|
//! | 0 | journal | — | the call is on record, flushed, before any gate (P1) |
//! | 1 | [`PrePolicy`] | [`Vote`] | allow / ask / deny with a tier; never change arguments (P2) |
//! | 2 | [`Approver`] | [`ApprovalOutcome`] | only `AllowedOnce` proceeds; asked at most once (P3) |
//! | 3 | [`Guard`] | `Option<Denial>` | deny or abstain; there is no "allow" (P4) |
//! | 4 | [`Wrapper`] | — | timeout, retry (idempotent tools only), around the tool (P5) |
//! | 5 | [`Disposition`] | [`Action`] | accept / replace / block / attach; never flip `ok` (P6) |
//! | 6 | normalization | — | every `Err` and panic becomes one [`FailureKind`] (P7) |
//! | 7 | freeze | — | one [`FrozenResult`] behind an `Arc`, shared by every observer (P8) |
//!
//! The [`Pipeline`] runs a batch with the scheduler of P10: calls start (journal, gates 1–3,
//! execution) in submission order, execution overlaps only for calls their tool declares
//! parallel-safe, and results commit (gates 5–7, journal, observers) in submission order.
//!
//! This crate imports no concrete policy, tool or provider; the compiler enforces that the
//! mechanism knows none of them. Policies live in `dsh-policy`, tools in `dsh-tools`.
//!
//! It also holds the plain data that configuration and policies share, so that each concept
//! has one type in every crate: [`Decision`] (allow, ask, deny), a permission [`Rule`] and the
//! [`Origin`] of a setting, [`PermissionMode`].

mod builder;
mod call;
mod change;
mod check;
mod clearance;
mod decision;
mod hook_event;
pub mod journal;
mod origin;
mod panic;
mod permission_mode;
mod pipeline;
mod policy;
mod quote;
mod registry;
mod result;
mod rule;
mod scheduler;
mod scope;
mod slots;
mod spelled;
mod spill;
mod tool;
mod workspace;
mod wrappers;

pub use builder::PipelineBuilder;
pub use call::{CallSource, ToolCall};
pub use change::FileChange;
pub use check::{CheckReport, CheckVote};
pub use clearance::Clearance;
pub use decision::Decision;
pub use hook_event::HookEvent;
pub use origin::{Layer, Origin};
pub use permission_mode::{PermissionMode, Unlisted};
pub use pipeline::{BatchError, BatchOutcome, Observer, Pipeline, PipelineConfig, UnavailableHint};
pub use policy::{
    Action, ApprovalAnswer, ApprovalError, ApprovalOutcome, ApprovalRequest, Approver, Denial,
    Disposition, Guard, PolicyContext, PrePolicy, Tier, Vote, combine_votes,
};
pub use quote::{QUOTE_MAX_CHARS, REASON_MAX_BYTES, quote_capped, quote_capped_path};
pub use registry::{RegisterError, Registry};
pub use result::{
    AttachedContext, Candidate, DecidedBy, FailureKind, FrozenResult, Gate, SandboxState,
};
pub use rule::Rule;
pub use scheduler::Dispatch;
pub use scope::{CallEvents, Direct, Host, NoEvents, Scope, ToolSet};
pub use slots::Slots;
pub use spill::{Scrub, SpillError, SpillPage, SpillStore};
pub use tool::{
    Access, ExecContext, Parallel, SubmitError, Tool, ToolError, ToolErrorKind, ToolOutput,
    ToolSpec,
};
pub use workspace::{
    MAX_SYMLINKS, PATH_MAX, PathError, ResolvedPath, Workspace, check_path_length,
};
pub use wrappers::{Next, Retry, Timeout, Wrapper};

/// Re-exported so that implementors of the async gate traits need not name the crate.
pub use async_trait::async_trait;
/// The cancellation token threaded through execution (user interrupt, timeouts).
pub use tokio_util::sync::CancellationToken;
