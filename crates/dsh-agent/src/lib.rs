//! The agent runtime every front end shares: `dsh exec`, `dsh batch`, `dsh check`, the REPL,
//! and sub-agents (a parent agent is a front end too).
//!
//! - **Assembly** (`settings.rs`, `assemble.rs`): configuration (`dsh_config::Loaded`, read
//!   only by `settings.rs`) becomes settings, and settings one [`Session`] — the resources its
//!   agents share: workspace, journal, spill store, file seam, the tool registry (tools added
//!   later through [`Session::register_tool`]), the policies on each gate in their fixed
//!   order, the approver and the event sink. `dsh check` and `dsh batch` use this one
//!   assembly, so what `check` predicts is what `batch` and the loop do.
//! - **Agents** (`agent/`: the loop; `room.rs` makes room in the context window, `spend.rs`
//!   accounts): any number over one session, each with its own [`AgentSpec`] (identity, tool
//!   set, system prompt), history, steps and budget (a sub-agent's budget is its parent's,
//!   shared); what they do reaches front ends as [`Event`]s (`events.rs`), approvals
//!   included.
//! - **Sub-agents** (`subagent/`): `call_sub_agent` runs a child agent whose profile is its
//!   permission, its calls sub-calls of the parent's call, its spend rolled up.
//! - **Long sessions**: whole-turn trimming (`trim.rs`), room by tokens — pruning and
//!   compaction (`context.rs`) — and cost (`cost.rs`).
//! - **Sessions on disk**: listing, showing and verifying (`sessions.rs`), resuming
//!   (`resume.rs`), replaying under today's gates (`replay.rs`), what dead sessions leave —
//!   temporary directories and crash artefacts — and their removal (`leftovers.rs`).

mod agent;
mod always;
mod assemble;
pub mod context;
pub mod cost;
mod ending;
pub mod events;
mod keep;
pub mod leftovers;
mod mode;
pub mod prompt;
pub mod replay;
pub mod resume;
mod session_id;
pub mod sessions;
mod settings;
pub mod subagent;
pub mod trim;

pub use agent::{Agent, AgentError, AgentSpec, LoopConfig, Outcome, StopReason, estimate_tokens};
pub use always::{AlwaysAllow, AlwaysError};
pub use assemble::{
    Approval, AssemblyError, Session, SessionSettings, UNAVAILABLE_HINT, YoloApprover,
};
pub use ending::{Ending, Totals};
pub use events::{AgentId, Event, EventKind, EventSink, EventStream};
pub use mode::{ModeError, next_mode};
pub use session_id::new_session_id;
pub use settings::{
    Configured, ModelChoice, SettingsError, choice_defaults, model_choices, model_settings,
    provider_for_choice, provider_from_config, provider_from_loaded,
};
