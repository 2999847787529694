//! The agent loop (SPEC A1): model ↔ tools, step by step, until a stop line. Every model call
//! and every stop is journaled (DESIGN §6); tool calls go through the session's pipeline.
//!
//! Stop lines, each journaled as a `stop` record with its reason:
//! - `final_answer`: the model answered without calling a tool;
//! - `max_steps`: the step limit was reached;
//! - `token_budget`: the tokens used (as the provider reported them, estimated where it did
//!   not) reached the budget — a sub-agent's count its parent's spend, the parent's other
//!   children's included, and a sub-agent also stops before a request whose estimate
//!   would not fit in what its siblings left unspent and unreserved (`account.rs`);
//! - `cost_budget`: what the calls cost (from the model's prices) reached `max_cost_usd`
//!   (for a sub-agent, likewise its parent's, with the same reservation);
//! - `repeated_call`: the model asked for the same call(s) `repeat_limit` times in a row —
//!   the repetition is not executed;
//! - `interrupted`: the user interrupted (running tools are cancelled and recorded).
//!
//! Here the agent itself (its state and what front ends read of it); `step.rs` one run to a
//! stop line; `room.rs` room in the context window before a request; `account.rs` each model
//! call's spend; `family.rs` the tree an agent heads, `child.rs` how it starts a sub-agent;
//! `config.rs` and `spec.rs` its limits and identity (its endings are `crate::outcome`'s).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use dsh_core::journal::{JournalError, Record};
use dsh_core::{CancellationToken, Dispatch, Scope};
use dsh_model::{ChatRequest, Message, Provider, ToolSchema};

mod account;
mod child;
mod config;
mod family;
mod hooked;
mod room;
mod spec;
pub(crate) mod step;

pub use crate::outcome::{AgentError, Outcome, StopReason};
pub use config::LoopConfig;
pub(crate) use config::keep_turns;
pub use spec::AgentSpec;

use crate::Session;
use crate::ending::Totals;
use crate::events::{AgentId, CallBridge, EventKind, EventSink, journal_agent};
use family::Family;

/// One tool's calls by one agent: how many ran, how many were refused or failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CallCounts {
    pub(crate) ran: u64,
    pub(crate) refused_or_failed: u64,
}

/// One conversation with a model over a session's shared resources: its own identity, tool
/// set, history, step counter and budget ([`LoopConfig`]).
pub struct Agent {
    session: Arc<Session>,
    /// The tree it belongs to: what every agent of it spent, the numbering of children.
    family: Arc<Family>,
    spec: AgentSpec,
    /// The agent's tool set and its bridge from the pipeline's reports to events.
    scope: Scope,
    events: EventSink,
    provider: Arc<dyn Provider>,
    pub config: LoopConfig,
    system: String,
    history: Vec<Message>,
    /// Where each turn (a `run`'s prompt) starts in `history`.
    turn_starts: Vec<usize>,
    /// The `seq` of each turn's `user_message` in this session's file (`None`: a turn of
    /// the session this one resumes, or one compacted).
    turn_seqs: Vec<Option<u64>>,
    /// How many leading turns are already compacted: compaction runs again only when more
    /// turns can go.
    compacted: usize,
    /// The prices of the agent's model (`None`: unknown, so is the cost).
    price: Option<dsh_config::Price>,
    /// The model's context window in tokens, when known.
    window: Option<u64>,
    step: u32,
    /// Steps taken before this process (a resumed conversation); not counted in totals.
    steps_before: u32,
    /// A sub-agent's way into the pipeline: the `call_sub_agent` call's dispatch handle, so
    /// its calls are that call's sub-calls. `None`: batches of its own.
    dispatch: Option<Dispatch>,
    /// A sub-agent's parent: what the sub-agent spends is charged to it as it goes, and its
    /// budgets are the parent's (shared by all its children).
    spends_for: Option<AgentId>,
    /// Calls made in this process, by tool.
    tool_counts: BTreeMap<String, CallCounts>,
    /// Context `SessionStart` hooks gave, for the next prompt.
    hook_context: Vec<String>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.spec.id)
            .field("provider", &self.provider.name())
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// The main agent of `session`: every tool, the workspace's system prompt.
    pub fn new(session: Arc<Session>, provider: Arc<dyn Provider>, config: LoopConfig) -> Self {
        let spec = AgentSpec {
            tools: session.main_tools(),
            ..AgentSpec::main()
        };
        Agent::with_spec(session, spec, provider, config)
    }

    /// An agent over `session`'s shared resources, as `spec` describes it, heading a tree of
    /// its own (the sub-agents it starts). Its events go to the session's event sink.
    pub fn with_spec(
        session: Arc<Session>,
        spec: AgentSpec,
        provider: Arc<dyn Provider>,
        config: LoopConfig,
    ) -> Self {
        let family = Family::new(session.clone());
        Agent::in_family(&family, spec, provider, config)
    }

    /// An agent of `family`, as `spec` describes it; its account opened in the family's
    /// ledger.
    fn in_family(
        family: &Arc<Family>,
        spec: AgentSpec,
        provider: Arc<dyn Provider>,
        config: LoopConfig,
    ) -> Self {
        let session = family.session.clone();
        let events = session.events.clone();
        let scope = Scope::new(
            spec.tools.clone(),
            Arc::new(CallBridge {
                agent: spec.id.clone(),
                sink: events.clone(),
            }),
        );
        let mut system = spec
            .system
            .clone()
            .unwrap_or_else(|| crate::prompt::system_prompt(&session.workspace));
        system.push_str(&crate::prompt::code_mode(&session, &spec.tools).unwrap_or_default());
        system.push_str(&crate::prompt::skills(&session, &spec.tools).unwrap_or_default());
        let price = crate::spend::price_for(config.price, provider.name(), provider.model());
        family.ledger.open(&spec.id, price.is_some());
        Agent {
            session,
            family: family.clone(),
            spec,
            scope,
            events,
            price,
            window: crate::context::window_for(
                config.context_window,
                provider.name(),
                provider.model(),
            ),
            provider,
            config,
            system,
            history: Vec::new(),
            turn_starts: Vec::new(),
            turn_seqs: Vec::new(),
            compacted: 0,
            step: 0,
            steps_before: 0,
            dispatch: None,
            spends_for: None,
            tool_counts: BTreeMap::new(),
            hook_context: Vec::new(),
        }
    }

    /// A sub-agent of `parent` whose calls are sub-calls of the `call_sub_agent` call
    /// owning `dispatch` (journaled with it as `parent`, `source: sub_agent`, cancelled with
    /// it). What it spends is charged to `parent` as it goes; `config`'s budgets are the
    /// parent's, checked against the parent's spend.
    fn child(
        family: &Arc<Family>,
        spec: AgentSpec,
        provider: Arc<dyn Provider>,
        config: LoopConfig,
        dispatch: Dispatch,
        parent: AgentId,
    ) -> Self {
        let mut agent = Agent::in_family(family, spec, provider, config);
        agent.dispatch = Some(dispatch);
        agent.spends_for = Some(parent);
        agent
    }

    /// The main agent of `session` continuing a conversation rebuilt from the journal
    /// ([`crate::resume::load`]): its history, turns and step count (new steps and call ids
    /// continue after the old ones; totals count this process's steps only).
    pub fn resumed(
        session: Arc<Session>,
        provider: Arc<dyn Provider>,
        config: LoopConfig,
        resumed: crate::resume::Resumed,
    ) -> Self {
        let mut agent = Agent::new(session, provider, config);
        agent.family.continue_after(resumed.last_child);
        agent.history = resumed.history;
        agent.turn_starts = resumed.turn_starts;
        agent.compacted = resumed.compacted_turns;
        agent.step = resumed.steps;
        agent.steps_before = resumed.steps;
        agent
    }

    /// This step's request: the system prompt, the history as trimming keeps it, the tools.
    fn request(&self) -> ChatRequest {
        let mut messages = vec![Message::system(self.system.clone())];
        messages.extend(crate::context::trim::trim(
            &self.history,
            &self.turn_starts,
            self.config.keep_turns,
        ));
        ChatRequest {
            model: self.provider.model().to_owned(),
            messages,
            tools: self.tools(),
            max_tokens: None,
        }
    }

    /// Calls this agent made in this process, by tool.
    pub(crate) fn tool_counts(&self) -> &BTreeMap<String, CallCounts> {
        &self.tool_counts
    }

    /// The model this agent talks to.
    pub fn model(&self) -> &str {
        self.provider.model()
    }

    /// The session it runs over.
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// Who this agent is.
    pub fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// The tools offered to the model: the agent's set as the session registers them now, in
    /// name order (so requests stay byte-stable between registrations).
    pub fn tools(&self) -> Vec<ToolSchema> {
        self.session
            .pipeline
            .specs(&self.spec.tools.offered())
            .iter()
            .map(|s| ToolSchema {
                name: s.name.clone(),
                description: s.description.clone(),
                parameters: s.input_schema.clone(),
            })
            .collect()
    }

    fn emit(&self, kind: EventKind) {
        self.events.send(&self.spec.id, kind);
    }

    /// The system prompt.
    pub fn system_prompt(&self) -> &str {
        &self.system
    }

    /// The conversation so far (without the system prompt).
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// Empties the conversation (the system prompt stays) and journals `history_cleared`, so
    /// a resumed session starts from here too. The next request carries only what follows.
    pub fn clear_history(&mut self) -> Result<(), JournalError> {
        self.record(&Record::HistoryCleared {})?;
        self.history.clear();
        self.turn_starts.clear();
        self.turn_seqs.clear();
        self.compacted = 0;
        Ok(())
    }

    /// Puts what a person's own call showed (`!command`) in the conversation for the next
    /// request: journaled as `context_attached` from `user` (so a resume puts it back in the
    /// same place), as a user message `[from user] …`.
    pub fn attach_note(&mut self, call_id: &str, text: &str) -> Result<(), JournalError> {
        let attached = dsh_core::AttachedContext {
            call_id: call_id.to_owned(),
            policy: "user".to_owned(),
            text: text.to_owned(),
        };
        self.record(&Record::ContextAttached(dsh_core::journal::Held::Borrowed(
            &attached,
        )))?;
        self.history
            .push(Message::user(format!("[from user] {text}")));
        Ok(())
    }

    /// Talks to `provider` from the next request on (the REPL's `/model`). Its prices and
    /// context window are the presets' for its model; a `[model] price` or
    /// `context_window` configured for another model no longer applies.
    pub fn switch_provider(&mut self, provider: Arc<dyn Provider>) {
        if provider.model() != self.provider.model() {
            self.config.price = None;
            self.config.context_window = None;
        }
        self.price = crate::spend::price_for(self.config.price, provider.name(), provider.model());
        self.family
            .ledger
            .priced(&self.spec.id, self.price.is_some());
        self.window = crate::context::window_for(
            self.config.context_window,
            provider.name(),
            provider.model(),
        );
        self.provider = provider;
    }

    /// The provider's name (`openai`, `anthropic`, …).
    pub fn provider_name(&self) -> &str {
        self.provider.name()
    }

    /// The provider requests go to.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// Builds the main agent's system prompt again from the workspace (after its memory
    /// files changed); the next request carries it. A sub-agent keeps its profile's.
    pub fn reload_system_prompt(&mut self) {
        if self.spec.system.is_none() {
            self.system = crate::prompt::system_prompt(&self.session.workspace);
            self.system.push_str(
                &crate::prompt::code_mode(&self.session, &self.spec.tools).unwrap_or_default(),
            );
            self.system.push_str(
                &crate::prompt::skills(&self.session, &self.spec.tools).unwrap_or_default(),
            );
        }
    }

    /// Summarizes the oldest turns now, as room-making would (all but the last few; nothing
    /// when there are too few). Whether turns were summarized.
    /// `focus`: what the summary should keep in particular.
    pub async fn compact_now(
        &mut self,
        cancel: &CancellationToken,
        focus: Option<&str>,
    ) -> Result<bool, AgentError> {
        self.compact_with(cancel, focus, "manual").await
    }

    /// Successful calls so far, by this agent or any of its tree, of tools that may change
    /// things (that do not declare themselves read-only).
    pub(crate) fn changes(&self) -> u64 {
        self.family.changes()
    }

    /// How many turns the conversation holds.
    pub fn turns(&self) -> usize {
        self.turn_starts.len()
    }

    /// The scope of this step's calls: the agent's tools and event bridge, and the agent as
    /// it is now for a `call_sub_agent` among them to start a child from.
    fn scope_for_step(&self) -> Scope {
        let host = child::ChildHost {
            family: self.family.clone(),
            parent: self.spec.id.clone(),
            provider: self.provider.clone(),
            config: self.config.clone(),
        };
        let parent = crate::subagent::Parent(Arc::new(host));
        self.scope.clone().with_host(Arc::new(parent))
    }

    /// Journals `record` for this agent; its `seq`.
    fn record(&self, record: &Record<'_>) -> Result<u64, JournalError> {
        let agent = journal_agent(&self.spec.id);
        self.session
            .pipeline
            .journal()
            .append_as(agent.as_deref(), record)
    }

    /// What this agent spent so far in this process.
    pub fn totals(&self) -> Totals {
        let spent = self.family.ledger.spent(&self.spec.id);
        Totals {
            steps: self.step - self.steps_before,
            prompt_tokens: spent.usage.prompt_tokens,
            completion_tokens: spent.usage.completion_tokens,
            cost_usd: spent.cost_usd(),
        }
    }

    /// Whether `max_cost_usd` is set but cannot be enforced: the model's prices are unknown
    /// (a front end says so; the run is not stopped on a guess).
    pub fn cost_budget_unenforced(&self) -> bool {
        self.config.max_cost_usd > 0.0 && self.price.is_none()
    }

    /// Writes `stop` for this agent (the main agent's through the session, which closes).
    pub(crate) fn record_stop(
        &self,
        reason: &str,
        error: Option<&str>,
    ) -> Result<u64, JournalError> {
        match journal_agent(&self.spec.id) {
            None => self.session.record_stop(reason, error, self.totals()),
            Some(agent) => self.session.pipeline.journal().append_as(
                Some(&agent),
                &Record::Stop {
                    reason: reason.into(),
                    error: error.map(Cow::Borrowed),
                    totals: self.totals(),
                },
            ),
        }
    }
}
