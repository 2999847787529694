//! Who an agent is and what it may use.

use dsh_core::ToolSet;

use crate::events::{AgentId, MAIN};

/// Who an agent is and what it may use (DESIGN §3, "Agents and events").
#[derive(Clone, Debug)]
pub struct AgentSpec {
    /// `main`, or `sub-N`.
    pub id: AgentId,
    /// The sub-agent profile it runs (`None` for the main agent).
    pub profile: Option<String>,
    /// What its model is offered and the only tools its calls may dispatch.
    pub tools: ToolSet,
    /// Its system prompt (`None`: the main agent's, for the workspace).
    pub system: Option<String>,
}

impl AgentSpec {
    /// The main agent: every tool of the session but the person's `restore_file` (`/undo`),
    /// which no model is offered (nor, through it, any sub-agent).
    pub fn main() -> Self {
        AgentSpec {
            id: MAIN.into(),
            profile: None,
            tools: ToolSet::all().withholding(
                dsh_tools::RESTORE_FILE,
                "restore_file is the person's /undo; models do not call it (use write_file or edit_file)",
            ),
            system: None,
        }
    }

    /// Sub-agent `n` running `profile` with `tools`.
    pub fn sub(n: u32, profile: impl Into<String>, tools: ToolSet) -> Self {
        AgentSpec {
            id: crate::events::child_id(n),
            profile: Some(profile.into()),
            tools,
            system: None,
        }
    }
}
