//! `call_sub_agent{profile, task}`: the tool through which an agent starts a child.
//!
//! Starting a child changes nothing by itself — each call the child makes passes every gate
//! on its own, journaled as the child's with this call as its `parent` — so the tool declares
//! itself read-only (allowed unless a rule says otherwise). Whether two of its calls may
//! overlap is the profile's tools' declarations (see [`super::Profile::parallel_safe`]),
//! read once, when the session is assembled: a profile names only tools registered before
//! this one, and a registered tool's declaration never changes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dsh_core::{ExecContext, Tool, ToolError, ToolErrorKind, ToolOutput, ToolSpec, async_trait};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{CALL_SUB_AGENT, Parent, Profiles};

/// The longest a child may run (gate 4's deadline for this tool): its own model calls and
/// tool calls each have their deadlines; this only bounds the whole.
const CHILD_DEADLINE: Duration = Duration::from_secs(2 * 3600);

pub(crate) struct SubAgentTool {
    profiles: Arc<Profiles>,
    /// Whether children of each profile may run beside other calls.
    parallel: BTreeMap<String, bool>,
}

impl SubAgentTool {
    /// The tool for `profiles`, whose tools' declarations `spec` gives.
    pub(crate) fn new(
        profiles: Arc<Profiles>,
        spec: impl Fn(&str) -> Option<Arc<dsh_core::ToolSpec>>,
    ) -> Self {
        let parallel = profiles
            .iter()
            .map(|p| (p.name.clone(), p.parallel_safe(&spec)))
            .collect();
        SubAgentTool { profiles, parallel }
    }
}

#[derive(Deserialize)]
struct Args {
    profile: String,
    task: String,
}

#[async_trait]
impl Tool for SubAgentTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            CALL_SUB_AGENT,
            format!(
                "Hand a self-contained task to a sub-agent with its own context and a limited \
                 set of tools (its profile), and get back its final answer with an account of \
                 what it spent. Give it everything it needs in `task`: it sees nothing of this \
                 conversation. Sub-agents whose tools are all read-only, called in one step, may \
                 run at the same time; the others run one after another. The profiles:\n{}",
                self.profiles.listing()
            ),
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "profile": {"type": "string", "enum": self.profiles.names()},
                "task": {"type": "string", "minLength": 1}
            },
            "required": ["profile", "task"],
            "additionalProperties": false
        }))
        .output_schema(json!({
            "type": "object",
            "properties": {
                "agent": {"type": "string"},
                "profile": {"type": "string"},
                "stop": {"type": "string"},
                "answer": {"type": "string"},
                "steps": {"type": "integer", "minimum": 0},
                "prompt_tokens": {"type": "integer", "minimum": 0},
                "completion_tokens": {"type": "integer", "minimum": 0},
                "cost_usd": {"type": ["number", "null"]},
                "tools": {"type": "object", "additionalProperties": {"type": "integer"}}
            },
            "required": ["agent", "profile", "stop", "answer", "steps", "prompt_tokens",
                         "completion_tokens", "cost_usd", "tools"],
            "additionalProperties": false
        }))
        .read_only(true)
        .timeout(CHILD_DEADLINE)
    }

    /// Parallel-safe only for a profile whose every tool is read-only and always
    /// parallel-safe by its own declaration; an unknown profile is exclusive.
    fn parallel_safe(&self, args: &Value) -> Result<bool, String> {
        let name = args.get("profile").and_then(Value::as_str).unwrap_or("");
        Ok(self.parallel.get(name).copied().unwrap_or(false))
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = serde_json::from_value(args.clone())
            .map_err(|e| ToolError::new(ToolErrorKind::InvalidArgs, e.to_string()))?;
        let Some(profile) = self.profiles.get(&args.profile) else {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArgs,
                format!(
                    "there is no sub-agent profile `{}`; the profiles are: {}",
                    args.profile,
                    self.profiles.names().join(", ")
                ),
            ));
        };
        let parent = cx
            .dispatch
            .as_ref()
            .and_then(|d| d.host())
            .and_then(|h| h.downcast_ref::<Parent>());
        let (Some(Parent(parent)), Some(dispatch)) = (parent, cx.dispatch.clone()) else {
            return Err(ToolError::failed(
                "call_sub_agent runs only inside an agent's turn (dsh exec or the REPL)",
            ));
        };
        parent.start_child(profile, &args.task, dispatch, cx).await
    }
}
