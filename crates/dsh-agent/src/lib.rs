//! The agent runtime every front end shares: `dsh exec`, `dsh batch`, `dsh check`, the REPL,
//! and sub-agents (a parent agent is a front end too). Its modules, in the order a prompt
//! passes through them:
//!
//! - **`runtime/`**: the handle front ends hold ([`Runtime`]): [`Command`]s in (a prompt,
//!   an interrupt, a person's own calls, a model switch, compaction, clearing, naming,
//!   verify), the session's ordered [`Event`]s out, each command ending with its
//!   [`Reply`]; `verify.rs` runs the configured check after turns that change files. Front
//!   ends hold no runtime logic.
//! - **Assembly** (`settings.rs`, `assemble.rs`): configuration (`dsh_config::Loaded`, read
//!   only by `settings.rs`) becomes settings, and settings one [`Session`] — the resources its
//!   agents share: workspace, journal, spill store, file seam, the tool registry (tools added
//!   later through [`Session::register_tool`]), the policies on each gate in their fixed
//!   order, the approver and the event sink. `dsh check` and `dsh batch` use this one
//!   assembly, so what `check` predicts is what `batch` and the loop do. `keep.rs` (what the
//!   hardened sandbox keeps), `allow_rule.rs` and `always.rs` ("always allow"), `mode.rs`
//!   (the permission mode) belong to it. `extensions.rs` starts the configured MCP servers
//!   and registers their tools between steps.
//! - **`agent/`**: the loop ([`Agent`]): any number over one session, each with its own
//!   [`AgentSpec`] (identity, tool set, system prompt), history and steps; `family.rs` is
//!   the tree an agent heads (what each of its agents spent, the numbering of children),
//!   `child.rs` how it starts a sub-agent, `room.rs` when it makes room in its context
//!   window, `account.rs` how it accounts each model call. What agents do reaches front ends
//!   as [`Event`]s (`events.rs`), approvals included; `prompt.rs` builds system prompts.
//! - **`subagent/`**: what a sub-agent may be (its profile *is* its permission) and the
//!   `call_sub_agent` tool, which asks the agent that made the call to start the child.
//! - **`context/`**: room in the context window — windows, token estimates, pruning,
//!   compaction — and whole-turn trimming (`trim.rs`).
//! - **`spend/`**: usage, prices and cost, and every agent's account with the reservations
//!   that hold a parent's budgets for its children (`ledger.rs`).
//! - **Sessions on disk**: ids and where journals live (`session_id.rs`), the end of a
//!   session (`ending.rs`), listing, showing and verifying (`sessions.rs`), resuming
//!   (`resume/`, with `cut_off.rs` for calls the old process never finished), replaying
//!   under today's gates (`replay.rs`), what dead sessions leave — temporary directories and
//!   crash artefacts — and their removal (`leftovers.rs`).

mod agent;
mod allow_rule;
mod always;
mod assemble;
pub mod checkpoint;
pub mod context;
mod ending;
pub mod events;
mod extensions;
pub mod hooks;
mod keep;
pub mod leftovers;
mod mode;
mod outcome;
mod plugins;
pub mod prompt;
pub mod replay;
mod reply;
pub mod resume;
pub mod runtime;
mod session_id;
pub mod sessions;
mod settings;
mod skills;
pub mod spend;
pub mod subagent;

pub use agent::{Agent, AgentError, AgentSpec, LoopConfig, Outcome, StopReason};

/// For the fuzz targets only (`fuzz/`): not an API.
#[doc(hidden)]
pub mod fuzzing {
    /// A tool call's argument text as the loop reads it before the pipeline sees it.
    pub fn tool_args(raw: &str) -> serde_json::Value {
        crate::agent::step::parse_args(raw)
    }

    /// The same arguments as compared for repetition.
    pub fn repeated_args(raw: &str) -> String {
        crate::agent::step::canonical_args(raw)
    }
}
pub use always::{AlwaysAllow, AlwaysError};
pub use assemble::{
    Approval, AssemblyError, Session, SessionSettings, UNAVAILABLE_HINT, YoloApprover,
};
pub use context::estimate_tokens;
/// Code Mode's reserved tool, by name.
pub use dsh_code::RUN_CODE;
pub use ending::{Ending, Totals};
pub use events::{AgentId, Event, EventKind, EventSink, EventStream};
pub use mode::{ModeError, next_mode};
pub use plugins::{PluginState, PluginStatus};
pub use runtime::{Command, Reply, Runtime, Status, VerifyConfig, VerifyStep};
pub use session_id::new_session_id;
pub use settings::{
    Configured, ModelChoice, SettingsError, choice_defaults, fallback_endpoint, model_choices,
    model_settings, provider_for_choice, provider_for_switch, provider_from_config,
    provider_from_loaded,
};
