//! What resuming a session knows of sub-agents: a child cut off by the process's end has its
//! unfinished calls closed in its own name (the new journal's first records after the main
//! agent's), never in the main agent's history.

use std::sync::Arc;

use dsh_core::FrozenResult;
use dsh_core::journal::{Entry, Record};

/// A call opened with a `tool_call` and not closed yet.
struct Open {
    agent: String,
    call_id: String,
    tool: String,
    started: bool,
}

/// The sub-agents' calls the last file of the chain (`session`) opened with a `tool_call`
/// and never closed, in order, each with its agent. Keyed by agent and call id: children
/// number their calls on their own, and only within one file (a resumed session numbers its
/// children after the chain's).
pub(crate) fn unfinished_calls(
    entries: &[Entry],
    session: &str,
) -> Vec<(String, Arc<FrozenResult>)> {
    let mut open: Vec<Open> = Vec::new();
    for e in entries.iter().filter(|e| e.session == session) {
        let Some(agent) = e.agent.as_deref() else {
            continue;
        };
        let at = |id: &str| {
            open.iter()
                .rposition(|o| o.agent == agent && o.call_id == id)
        };
        match &e.record {
            Record::ToolCall { call_id, name, .. } => {
                if let Some(i) = at(call_id) {
                    open.remove(i);
                }
                open.push(Open {
                    agent: agent.to_owned(),
                    call_id: call_id.to_string(),
                    tool: name.to_string(),
                    started: false,
                });
            }
            Record::ToolStarted { call_id } => {
                if let Some(i) = at(call_id) {
                    open[i].started = true;
                }
            }
            Record::ToolResult(r) => {
                if let Some(i) = at(r.call_id()) {
                    open.remove(i);
                }
            }
            _ => {}
        }
    }
    open.into_iter()
        .map(|o| {
            let result = FrozenResult::cut_off(&o.call_id, &o.tool, o.started);
            (o.agent, Arc::new(result))
        })
        .collect()
}
