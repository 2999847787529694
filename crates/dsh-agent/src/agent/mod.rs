//! The agent loop (SPEC A1): model ↔ tools, step by step, until a stop line. Every model call
//! and every stop is journaled (DESIGN §6); tool calls go through the session's pipeline.
//!
//! Stop lines, each journaled as a `stop` record with its reason:
//! - `final_answer`: the model answered without calling a tool;
//! - `max_steps`: the step limit was reached;
//! - `token_budget`: the tokens used (as the provider reported them, estimated where it did
//!   not) reached the budget — a sub-agent's count its parent's spend, the parent's other
//!   children's included, and a sub-agent also stops before a request whose estimate
//!   would not fit in what its siblings left unspent and unreserved (`spend.rs`);
//! - `cost_budget`: what the calls cost (from the model's prices) reached `max_cost_usd`
//!   (for a sub-agent, likewise its parent's, with the same reservation);
//! - `repeated_call`: the model asked for the same call(s) `repeat_limit` times in a row —
//!   the repetition is not executed;
//! - `interrupted`: the user interrupted (running tools are cancelled and recorded).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use dsh_core::journal::{JournalError, Record, RequestedCall};
use dsh_core::{BatchError, CallSource, CancellationToken, Dispatch, Scope, ToolCall, ToolSet};
use dsh_model::{ChatRequest, Message, ModelError, Provider, StreamEvent, ToolSchema, Usage};
use serde_json::{Value, json};

mod room;
mod spend;

use crate::Session;
use crate::cost::Spend;
use crate::ending::Totals;
use crate::events::{AgentId, CallBridge, EventKind, EventSink, MAIN, journal_agent};

/// The loop's limits.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    pub max_steps: u32,
    /// Total prompt + completion tokens after which the loop stops; 0: no budget.
    pub max_tokens: u64,
    /// Stop when the same call(s) are asked for this many times in a row.
    pub repeat_limit: u32,
    /// Whole turns of history sent (see `trim`; `None`: all of them); adjustable between runs.
    pub keep_turns: Option<usize>,
    /// Total cost in USD after which the loop stops; 0: no budget. Enforced only when the
    /// model's prices are known.
    pub max_cost_usd: f64,
    /// `[model] price`; `None`: the preset's for its default model, if any (see `cost`).
    pub price: Option<dsh_config::Price>,
    /// `[model] context_window`; `None`: the preset's for its default model, if any.
    pub context_window: Option<u64>,
    /// `[context] max_fraction`: of the window, the most a request may fill before room is
    /// made.
    pub max_fraction: f64,
}

impl Default for LoopConfig {
    fn default() -> Self {
        // Every default from dsh-config: the key table's, through `Config::default`.
        let c = dsh_config::Config::default();
        LoopConfig {
            max_steps: u32::try_from(c.limits.max_steps).unwrap_or(u32::MAX),
            max_tokens: c.limits.max_tokens,
            repeat_limit: dsh_config::defaults::REPEAT_LIMIT,
            keep_turns: keep_turns(c.context.keep_turns),
            max_cost_usd: c.limits.max_cost_usd,
            price: None,
            context_window: None,
            max_fraction: c.context.max_fraction,
        }
    }
}

/// `[context] keep_turns` as the loop takes it: 0 is unlimited.
pub(crate) fn keep_turns(n: u64) -> Option<usize> {
    (n > 0).then(|| usize::try_from(n).unwrap_or(usize::MAX))
}

/// Why the loop stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    FinalAnswer,
    MaxSteps,
    TokenBudget,
    CostBudget,
    RepeatedCall,
    Interrupted,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::FinalAnswer => "final_answer",
            StopReason::MaxSteps => "max_steps",
            StopReason::TokenBudget => "token_budget",
            StopReason::CostBudget => "cost_budget",
            StopReason::RepeatedCall => "repeated_call",
            StopReason::Interrupted => "interrupted",
        }
    }
}

/// How a run ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub stop: StopReason,
    /// The final answer (or the last assistant text, for other stops).
    pub text: String,
    pub steps: u32,
    pub usage: Usage,
}

/// A harness fault that ended a run: the model could not answer, or the journal could not
/// record. Tool failures are results, never this.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Batch(#[from] BatchError),
}

impl AgentError {
    /// The `stop` reason a run that ended on this fault records.
    pub fn stop_reason(&self) -> &'static str {
        match self {
            AgentError::Model(_) => "model_error",
            AgentError::Journal(_) | AgentError::Batch(_) => "journal_error",
        }
    }
}

/// One tool's calls by one agent: how many ran, how many were refused or failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CallCounts {
    pub(crate) ran: u64,
    pub(crate) refused_or_failed: u64,
}

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
    /// The main agent: every tool of the session.
    pub fn main() -> Self {
        AgentSpec {
            id: MAIN.into(),
            profile: None,
            tools: ToolSet::all(),
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

/// One conversation with a model over a session's shared resources: its own identity, tool
/// set, history, step counter and budget ([`LoopConfig`]).
pub struct Agent {
    session: Arc<Session>,
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
    /// What this agent (and its sub-agents, once counted) spent in this process; its cost
    /// is `None` while the prices are unknown.
    spent: Spend,
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

/// A rough token count for text a provider did not count: four characters a token.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

impl Agent {
    /// The main agent of `session`: every tool, the workspace's system prompt.
    pub fn new(session: Arc<Session>, provider: Arc<dyn Provider>, config: LoopConfig) -> Self {
        Agent::with_spec(session, AgentSpec::main(), provider, config)
    }

    /// An agent over `session`'s shared resources, as `spec` describes it. Its events go to
    /// the session's event sink.
    pub fn with_spec(
        session: Arc<Session>,
        spec: AgentSpec,
        provider: Arc<dyn Provider>,
        config: LoopConfig,
    ) -> Self {
        let events = session.events.clone();
        let scope = Scope::new(
            spec.tools.clone(),
            Arc::new(CallBridge {
                agent: spec.id.clone(),
                sink: events.clone(),
            }),
        );
        let system = spec
            .system
            .clone()
            .unwrap_or_else(|| crate::prompt::system_prompt(&session.workspace));
        let price = crate::cost::price_for(config.price, provider.name(), provider.model());
        session.link.set(&session);
        if spec.profile.is_none() {
            // An agent of no profile may start sub-agents: they start from its model.
            session
                .roster
                .enlist(&spec.id, provider.clone(), config.clone());
        }
        Agent {
            session,
            spec,
            scope,
            events,
            price,
            spent: if price.is_some() {
                Spend::default()
            } else {
                Spend::unpriced()
            },
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
        }
    }

    /// A sub-agent of `parent` whose calls are sub-calls of the `call_sub_agent` call
    /// owning `dispatch` (journaled with it as `parent`, `source: sub_agent`, cancelled with
    /// it). What it spends is charged to `parent` as it goes; `config`'s budgets are the
    /// parent's, checked against the parent's spend.
    pub(crate) fn child(
        session: Arc<Session>,
        spec: AgentSpec,
        provider: Arc<dyn Provider>,
        config: LoopConfig,
        dispatch: Dispatch,
        parent: AgentId,
    ) -> Self {
        let mut agent = Agent::with_spec(session, spec, provider, config);
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
        session.roster.continue_after(resumed.last_child);
        let mut agent = Agent::new(session, provider, config);
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
        messages.extend(crate::trim::trim(
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

    /// Who this agent is.
    pub fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// The tools offered to the model: the agent's set as the session registers them now, in
    /// name order (so requests stay byte-stable between registrations).
    pub fn tools(&self) -> Vec<ToolSchema> {
        self.session
            .pipeline
            .specs(&self.spec.tools)
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

    /// Talks to `provider` from the next request on (the REPL's `/model`). Its prices and
    /// context window are the presets' for its model; a `[model] price` or
    /// `context_window` configured for another model no longer applies.
    pub fn switch_provider(&mut self, provider: Arc<dyn Provider>) {
        if provider.model() != self.provider.model() {
            self.config.price = None;
            self.config.context_window = None;
        }
        self.price = crate::cost::price_for(self.config.price, provider.name(), provider.model());
        if self.price.is_none() {
            self.spent.lose_prices();
        } else {
            self.spent.gain_prices();
        }
        self.window = crate::context::window_for(
            self.config.context_window,
            provider.name(),
            provider.model(),
        );
        self.provider = provider;
        self.session
            .roster
            .switch(&self.spec.id, self.provider.clone(), self.config.clone());
    }

    /// The provider's name (`openai`, `anthropic`, …).
    pub fn provider_name(&self) -> &str {
        self.provider.name()
    }

    /// Builds the main agent's system prompt again from the workspace (after its memory
    /// files changed); the next request carries it. A sub-agent keeps its profile's.
    pub fn reload_system_prompt(&mut self) {
        if self.spec.system.is_none() {
            self.system = crate::prompt::system_prompt(&self.session.workspace);
        }
    }

    /// How many turns the conversation holds.
    pub fn turns(&self) -> usize {
        self.turn_starts.len()
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
        Totals {
            steps: self.step - self.steps_before,
            prompt_tokens: self.spent.usage.prompt_tokens,
            completion_tokens: self.spent.usage.completion_tokens,
            cost_usd: self.spent.cost_usd(),
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

    fn stop(&self, stop: StopReason, text: String) -> Result<Outcome, AgentError> {
        self.record_stop(stop.as_str(), None)?;
        self.emit(EventKind::Stop {
            reason: stop.as_str().to_owned(),
            text: text.clone(),
        });
        Ok(Outcome {
            stop,
            text,
            steps: self.step,
            usage: self.spent.usage,
        })
    }

    /// Runs `prompt` to a stop line; what happens meanwhile goes to the session's events.
    /// Every way out writes `stop` with the totals: a stop line, or on a fault `model_error`
    /// / `journal_error` (tried even though the journal failed; see `ending.rs`).
    pub async fn run(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<Outcome, AgentError> {
        let result = self.run_steps(prompt, cancel).await;
        if let Err(e) = &result {
            let reason = e.stop_reason();
            let _ = self.record_stop(reason, Some(&e.to_string()));
            self.emit(EventKind::Stop {
                reason: reason.to_owned(),
                text: e.to_string(),
            });
        }
        result
    }

    async fn run_steps(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<Outcome, AgentError> {
        let seq = self.record(&Record::UserMessage {
            text: prompt.into(),
        })?;
        self.turn_seqs.resize(self.turn_starts.len(), None);
        self.turn_seqs.push(Some(seq));
        self.turn_starts.push(self.history.len());
        self.history.push(Message::user(prompt));
        let mut last_text = String::new();
        let mut previous: Option<Vec<(String, String)>> = None;
        let mut repeats = 0;
        let first_step = self.step + 1;
        loop {
            if cancel.is_cancelled() {
                return self.stop(StopReason::Interrupted, last_text);
            }
            if self.step + 1 - first_step >= self.config.max_steps {
                return self.stop(StopReason::MaxSteps, last_text);
            }
            // A sub-agent's budgets are shared with its parent's other children, who may be
            // spending them right now: its request reserves its estimate first and is not
            // sent when that would pass a budget (`spend.rs`). Estimated before room is
            // made, which only shrinks the request; built only when there is something to
            // reserve (not for the main agent).
            let reservation = match self.reserve(|| self.request()) {
                Ok(r) => r,
                Err(stop) => return self.stop(stop, last_text),
            };
            self.step += 1;
            let step = self.step;
            match self.make_room(cancel).await {
                Err(AgentError::Model(ModelError::Cancelled)) => {
                    return self.stop(StopReason::Interrupted, last_text);
                }
                other => other?,
            }
            let mut request = self.request();
            let begun = Instant::now();
            let (agent, sink) = (self.spec.id.clone(), self.events.clone());
            let mut on_event = move |e: StreamEvent| {
                let kind = match e {
                    StreamEvent::Text(t) => EventKind::TextDelta(t),
                    StreamEvent::Reasoning(t) => EventKind::ReasoningDelta(t),
                    StreamEvent::Retrying { attempt, reason } => {
                        EventKind::ModelRetry { attempt, reason }
                    }
                    StreamEvent::ToolCall { .. } => return,
                };
                sink.send(&agent, kind);
            };
            let mut retried = false;
            let completion = loop {
                match self
                    .provider
                    .complete(&request, &mut on_event, cancel)
                    .await
                {
                    Ok(c) => break c,
                    Err(ModelError::Cancelled) => {
                        return self.stop(StopReason::Interrupted, last_text);
                    }
                    // Too long for the model: make what room pruning and compaction can, and
                    // try once more.
                    Err(e) if !retried && crate::context::is_too_long(&e) => {
                        retried = true;
                        let pruned = self.prune(0).results > 0;
                        let compacted = match self.compact(cancel).await {
                            Err(AgentError::Model(ModelError::Cancelled)) => {
                                return self.stop(StopReason::Interrupted, last_text);
                            }
                            other => other?,
                        };
                        if !pruned && !compacted {
                            return Err(e.into());
                        }
                        request = self.request();
                    }
                    Err(e) => return Err(e.into()),
                }
            };
            let elapsed = begun.elapsed();
            let (usage, cost) =
                self.record_model_call(step, &request, &completion, elapsed, reservation)?;
            let message = completion.message;
            self.emit(EventKind::ModelCall {
                step,
                usage,
                elapsed,
                cost_usd: cost,
            });
            let mut message = message;
            unique_call_ids(&mut message, step);
            self.record(&Record::AssistantMessage {
                step,
                content: Cow::Borrowed(&message.content),
                tool_calls: message
                    .tool_calls
                    .iter()
                    .map(|c| RequestedCall {
                        id: Cow::Borrowed(&c.id),
                        name: Cow::Borrowed(&c.name),
                        arguments: Cow::Borrowed(&c.arguments),
                    })
                    .collect(),
                reasoning: message.reasoning.as_deref().map(Cow::Borrowed),
            })?;
            if !message.content.is_empty() {
                last_text.clone_from(&message.content);
            }
            let calls = message.tool_calls.clone();
            self.history.push(message);
            if calls.is_empty() {
                return self.stop(StopReason::FinalAnswer, last_text);
            }

            let signature: Vec<(String, String)> = calls
                .iter()
                .map(|c| (c.name.clone(), canonical_args(&c.arguments)))
                .collect();
            repeats = if previous.as_ref() == Some(&signature) {
                repeats + 1
            } else {
                1
            };
            previous = Some(signature);
            if repeats >= self.config.repeat_limit {
                return self.stop(StopReason::RepeatedCall, last_text);
            }

            let agent = journal_agent(&self.spec.id);
            let tool_calls: Vec<ToolCall> = calls
                .iter()
                .map(|c| {
                    ToolCall::new(c.id.clone(), c.name.clone(), parse_args(&c.arguments))
                        .with_step(step)
                        .with_agent(agent.clone())
                })
                .collect();
            let batch = match &self.dispatch {
                None => {
                    self.session
                        .pipeline
                        .run_batch_in(&self.scope, tool_calls, cancel)
                        .await?
                }
                Some(d) => {
                    d.submit_in(&self.scope, CallSource::SubAgent, tool_calls, cancel)
                        .await?
                }
            };
            self.count_children();
            for r in &batch.results {
                let counts = self.tool_counts.entry(r.tool().to_owned()).or_default();
                if r.ok() {
                    counts.ran += 1;
                } else {
                    counts.refused_or_failed += 1;
                }
                self.history.push(Message::tool(r.call_id(), r.content()));
            }
            for a in &batch.attached {
                self.emit(EventKind::ContextAttached {
                    policy: a.policy.clone(),
                    text: a.text.clone(),
                });
            }
            if !batch.attached.is_empty() {
                let text = batch
                    .attached
                    .iter()
                    .map(|a| format!("[from {}] {}", a.policy, a.text))
                    .collect::<Vec<_>>()
                    .join("\n");
                self.history.push(Message::user(text));
            }
            if cancel.is_cancelled() {
                return self.stop(StopReason::Interrupted, last_text);
            }
            if let Some(stop) = self.budget_spent_up() {
                return self.stop(stop, last_text);
            }
        }
    }
}

/// The model's argument text as JSON; text that is not JSON is passed on as a string, which
/// the registry refuses as `invalid_args` with a message the model can act on.
fn parse_args(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// Arguments compared for repetition: parsed and re-serialized when they are JSON.
fn canonical_args(raw: &str) -> String {
    serde_json::from_str::<Value>(raw).map_or_else(|_| raw.to_owned(), |v| v.to_string())
}

/// Some servers omit or repeat call ids; the pipeline and the journal need them unique.
fn unique_call_ids(message: &mut Message, step: u32) {
    let mut seen = std::collections::HashSet::new();
    for (i, c) in message.tool_calls.iter_mut().enumerate() {
        if c.id.is_empty() || !seen.insert(c.id.clone()) {
            c.id = format!("call_{step}_{i}");
            seen.insert(c.id.clone());
        }
    }
}
