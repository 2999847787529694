//! Whose calls a batch runs: the agent's tool set (what its model is offered and the only
//! tools its calls may dispatch) and where the batch reports what happens to each call.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::call::ToolCall;
use crate::result::FrozenResult;

/// The tools an agent may call: every tool of the session or a named subset, less the tools
/// it is refused, each with the reason a call to it is told.
#[derive(Clone, Debug, Default)]
pub struct ToolSet {
    members: Members,
    /// Never in the set, whatever `members` says: name → why.
    withheld: Arc<BTreeMap<String, String>>,
    /// A set this one is confined to (a sub-agent's, to its parent's): a name must be in
    /// both.
    within: Option<Arc<ToolSet>>,
    /// Which of its tools the agent's model may call itself (Code Mode); the others only its
    /// programs may call. The set's own: [`ToolSet::within`] does not carry it over.
    direct: Direct,
}

/// Which tools of a set its agent's model may call directly (and is offered); the rest only
/// the agent's programs (`run_code`) may call. A direct call to any other is refused at the
/// registry step, before any policy, with the reason given.
#[derive(Clone, Debug, Default)]
pub enum Direct {
    /// Every tool of the set.
    #[default]
    Any,
    /// Every tool but these (the `native` tools mode: all but `run_code`).
    Except(Arc<BTreeSet<String>>, Arc<str>),
    /// Only these (the `code` tools mode: `run_code`).
    Only(Arc<BTreeSet<String>>, Arc<str>),
}

#[derive(Clone, Debug, Default)]
enum Members {
    /// Every tool registered in the session, including tools registered later.
    #[default]
    All,
    /// Only these names.
    Only(Arc<BTreeSet<String>>),
}

impl ToolSet {
    /// Every tool of the session, including tools registered later.
    pub fn all() -> Self {
        ToolSet::default()
    }

    /// The subset `names`; a call to any other is `unknown_tool` at the registry step. A name
    /// ending `*` (`mcp__SERVER__*`, the only form the configuration accepts) holds every
    /// tool whose name starts with what precedes it.
    pub fn only<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ToolSet {
            members: Members::Only(Arc::new(names.into_iter().map(Into::into).collect())),
            withheld: Arc::default(),
            within: None,
            direct: Direct::Any,
        }
    }

    /// This set with `direct` saying which of its tools the model may call itself.
    #[must_use]
    pub fn with_direct(mut self, direct: Direct) -> Self {
        self.direct = direct;
        self
    }

    /// Why the agent's model may not call `name` itself, when it may not (only its programs
    /// may); `None` when it may, or when `name` is not in the set at all.
    pub fn not_direct(&self, name: &str) -> Option<&str> {
        match &self.direct {
            Direct::Any => None,
            Direct::Except(names, why) => names.contains(name).then_some(&**why),
            Direct::Only(names, why) => (!names.contains(name)).then_some(&**why),
        }
    }

    /// The set as the agent's model is offered it: the tools it may call itself.
    #[must_use]
    pub fn offered(&self) -> ToolSet {
        match &self.direct {
            Direct::Any => self.clone(),
            Direct::Except(names, why) => {
                let mut set = self.clone().with_direct(Direct::Any);
                for n in names.iter() {
                    set = set.withholding(n.as_str(), &**why);
                }
                set
            }
            Direct::Only(names, _) => {
                ToolSet::only(names.iter().cloned()).within(&self.clone().with_direct(Direct::Any))
            }
        }
    }

    /// This set without `name`: a call to it is refused at the registry step with `reason`
    /// (before any policy), whether or not the set would otherwise hold it.
    #[must_use]
    pub fn withholding(mut self, name: impl Into<String>, reason: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.withheld).insert(name.into(), reason.into());
        self
    }

    /// This set, less every tool `outer` does not hold: what a nested submission may use
    /// is never more than its submitter's.
    #[must_use]
    pub fn within(mut self, outer: &ToolSet) -> Self {
        self.within = Some(Arc::new(match self.within.take() {
            None => outer.clone(),
            Some(already) => (*already).clone().within(outer),
        }));
        self
    }

    pub fn contains(&self, name: &str) -> bool {
        if self.withheld.contains_key(name) {
            return false;
        }
        let member = match &self.members {
            Members::All => true,
            Members::Only(names) => {
                names.contains(name)
                    || names
                        .iter()
                        .any(|n| n.strip_suffix('*').is_some_and(|p| name.starts_with(p)))
            }
        };
        member && self.within.as_ref().is_none_or(|w| w.contains(name))
    }

    /// Why `name` is withheld from this set (or from a set it is confined to), when it is.
    pub fn withheld(&self, name: &str) -> Option<&str> {
        self.withheld
            .get(name)
            .map(String::as_str)
            .or_else(|| self.within.as_ref().and_then(|w| w.withheld(name)))
    }
}

/// What a batch reports about each call as it goes, in order for each call: proposed (its
/// `tool_call` is journaled), started (it passed gates 1–3 and executes), output while it
/// runs (if it prints), finished (its result is journaled). Reports only: nothing a listener does changes a decision or a record, and
/// a panicking listener is ignored.
pub trait CallEvents: Send + Sync {
    fn proposed(&self, _call: &ToolCall) {}
    fn started(&self, _call: &ToolCall) {}
    /// While it runs, the latest lines the call printed (bounded, at most a few times a
    /// second): for a live view only — the result holds what counts.
    fn output(&self, _call: &ToolCall, _text: &str) {}
    /// Gate 2 waits for a person's answer about the call (`true`), or no longer (`false`).
    fn person(&self, _call: &ToolCall, _waiting: bool) {}
    fn finished(&self, _call: &ToolCall, _result: &Arc<FrozenResult>) {}
}

/// Reports nothing.
#[derive(Debug, Default)]
pub struct NoEvents;

impl CallEvents for NoEvents {}

/// What runs an agent, as a tool running for it may reach it: type-erased, so dsh-core
/// knows nothing of agents. A tool that needs its runtime (`call_sub_agent` starting a child)
/// downcasts it to the type its runtime put there; none is set outside a runtime.
pub type Host = Arc<dyn std::any::Any + Send + Sync>;

/// The scope of a batch: its agent's tool set and listener, and what runs the agent.
#[derive(Clone)]
pub struct Scope {
    pub tools: ToolSet,
    pub events: Arc<dyn CallEvents>,
    /// The agent's runtime, for the tools its calls run ([`crate::Dispatch::host`]).
    pub host: Option<Host>,
}

impl Default for Scope {
    fn default() -> Self {
        Scope {
            tools: ToolSet::all(),
            events: Arc::new(NoEvents),
            host: None,
        }
    }
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl Scope {
    /// `tools`, reporting to `events`, with no host.
    pub fn new(tools: ToolSet, events: Arc<dyn CallEvents>) -> Self {
        Scope {
            tools,
            events,
            host: None,
        }
    }

    /// This scope with `host` as what runs its agent.
    pub fn with_host(mut self, host: Host) -> Self {
        self.host = Some(host);
        self
    }

    pub(crate) fn proposed(&self, call: &ToolCall) {
        crate::panic::quietly(|| self.events.proposed(call));
    }

    pub(crate) fn started(&self, call: &ToolCall) {
        crate::panic::quietly(|| self.events.started(call));
    }

    pub(crate) fn finished(&self, call: &ToolCall, result: &Arc<FrozenResult>) {
        crate::panic::quietly(|| self.events.finished(call, result));
    }
}
