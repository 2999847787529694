//! The composition root: turns configuration (`dsh_config::Loaded`, read only by `settings.rs`)
//! into settings and settings into a running session — the registry of tools, the
//! policies on each gate in their fixed order, the journal and the approver. `dsh check`,
//! `dsh batch` and (later) the agent loop all use this one assembly, so what `check` predicts is
//! what `batch` and the loop do.

mod agent;
mod assemble;
pub mod context;
pub mod cost;
mod ending;
pub mod events;
mod leftovers;
pub mod prompt;
pub mod replay;
pub mod resume;
mod session_id;
pub mod sessions;
mod settings;
pub mod trim;

pub use agent::{Agent, AgentError, AgentSpec, LoopConfig, Outcome, StopReason, estimate_tokens};
pub use assemble::{
    Approval, AssemblyError, RuleSpec, Session, SessionSettings, UNAVAILABLE_HINT, YoloApprover,
};
pub use ending::{Ending, Totals};
pub use events::{AgentId, Event, EventKind, EventSink, EventStream};
pub use session_id::new_session_id;
pub use settings::{
    Configured, SettingsError, model_settings, provider_from_config, provider_from_loaded,
};
