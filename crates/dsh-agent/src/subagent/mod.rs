//! Sub-agents (SPEC A9; DESIGN §3 "Agents and events", "Nested calls"): what a child agent
//! may be and the tool that starts one. `call_sub_agent` finds the agent that made the call
//! in the call's scope (`Parent`, put there by that agent) and asks it to start a child
//! over the same session — its own history, system prompt (its profile's) and step limit,
//! its parent's budgets (shared by all its children), and a tool set that is its profile's
//! list and nothing else. Every call the child makes goes through the parent call's dispatch
//! handle: the same pipeline, journaled with the child's id, `source: sub_agent` and the
//! `call_sub_agent` call as `parent`, cancelled with it. The child's spend rolls up into its
//! parent's account. How an agent runs a child is the agent's (`agent/child.rs`).
//!
//! - `profile.rs`: the profiles, built-in and configured, and what they may run beside;
//! - `tool.rs`: the tool itself.

mod profile;
mod tool;

use std::sync::Arc;

use dsh_core::{Dispatch, ExecContext, ToolError, ToolOutput};

pub use profile::{
    CALL_SUB_AGENT, DEFAULT_MAX_STEPS, NO_NESTING, Profile, ProfileSpec, Profiles,
    SubAgentConfigError, check_rules,
};
pub(crate) use tool::SubAgentTool;

/// An agent as `call_sub_agent` reaches it through its call's scope: able to start a child.
#[dsh_core::async_trait]
pub(crate) trait StartChild: Send + Sync {
    /// Runs one child of `profile` on `task` to its stop line for the `call_sub_agent` call
    /// in `cx`, its calls submitted through `dispatch`; its answer with an account of what it
    /// spent.
    async fn start_child(
        &self,
        profile: &Profile,
        task: &str,
        dispatch: Dispatch,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError>;
}

/// What an agent puts in its calls' scope ([`dsh_core::Scope::host`]) for `call_sub_agent`
/// to find.
pub(crate) struct Parent(pub(crate) Arc<dyn StartChild>);
