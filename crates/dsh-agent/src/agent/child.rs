//! An agent starting a child (SPEC A9): what `call_sub_agent` finds in the scope of the
//! calls an agent makes ([`ChildHost`]: the agent as it was when it made the call — its
//! model and limits — and the tree it belongs to), and how the child runs: its limits from
//! the parent's, its model the parent's (or another of the same provider), its spend charged
//! to the parent as it goes, its ending always on the record.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use dsh_core::journal::Record;
use dsh_core::{Dispatch, ExecContext, ToolError, ToolOutput};
use dsh_model::{ChatRequest, Completion, ModelError, Provider, StreamEvent};
use serde_json::json;

use super::family::Family;
use super::{Agent, AgentError, AgentSpec, CallCounts, LoopConfig, StopReason};
use crate::Session;
use crate::events::{AgentId, EventKind, journal_agent};
use crate::subagent::{Profile, StartChild};

/// The agent that made a `call_sub_agent` call, as it was at that step: a child starts from
/// its model and limits, in its tree.
pub(crate) struct ChildHost {
    pub(crate) family: Arc<Family>,
    pub(crate) parent: AgentId,
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) config: LoopConfig,
}

/// The parent's provider asking for another model (`[agents.NAME] model`).
struct OtherModel {
    inner: Arc<dyn Provider>,
    model: String,
}

#[dsh_core::async_trait]
impl Provider for OtherModel {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        &self.model
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
        cancel: &dsh_core::CancellationToken,
    ) -> Result<Completion, ModelError> {
        // The request already names this model (the agent asks for `model()`).
        self.inner.complete(request, on_event, cancel).await
    }
}

/// A child's limits: its profile's steps (never more than its parent may take), the
/// parent's token and cost budgets — shared: a child checks them against everything its
/// parent and the parent's children have spent (`Ledger::used`) — and the parent's model
/// settings (prices and window only for the parent's own model).
fn child_config(parent: &ChildHost, profile: &Profile) -> LoopConfig {
    let same_model = profile
        .model
        .as_deref()
        .is_none_or(|m| m == parent.provider.model());
    let p = &parent.config;
    LoopConfig {
        max_steps: profile.max_steps.min(p.max_steps).max(1),
        keep_turns: None,
        price: if same_model { p.price } else { None },
        context_window: if same_model { p.context_window } else { None },
        ..p.clone()
    }
}

/// The child's system prompt: its profile's, the workspace facts, the project notes.
fn child_system(session: &Session, profile: &Profile) -> String {
    format!(
        "{}\n\n{}",
        profile.system,
        crate::prompt::sub_agent_facts(&session.workspace)
    )
}

/// A child while it runs. However the run ends — even when the `call_sub_agent` future is
/// dropped before the child returns (the batch around it gave up waiting) — its ending is
/// written: the child's `stop` if it wrote none, and `sub_agent_end` in the parent's name.
struct Running {
    session: Arc<Session>,
    parent: AgentId,
    child: Agent,
    ended: bool,
}

impl Running {
    /// Journals `sub_agent_end` with `stop` and reports `SubAgentFinished`.
    fn end(&mut self, stop: &str) -> Result<(), dsh_core::journal::JournalError> {
        self.ended = true;
        let totals = self.child.totals();
        let child = self.child.spec().id.clone();
        let ended = self.session.pipeline.journal().append_as(
            journal_agent(&self.parent).as_deref(),
            &Record::SubAgentEnd {
                child: Cow::Borrowed(&child),
                stop: Cow::Borrowed(stop),
                steps: totals.steps,
                tokens: totals.prompt_tokens + totals.completion_tokens,
                cost_usd: totals.cost_usd,
            },
        );
        self.session.events.send(
            &self.parent,
            EventKind::SubAgentFinished {
                child,
                stop: stop.to_owned(),
            },
        );
        ended.map(|_| ())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.ended {
            let stop = StopReason::Interrupted.as_str();
            let why = "the call that started it was stopped before the sub-agent finished";
            let _ = self.child.record_stop(stop, Some(why));
            self.session.events.send(
                &self.child.spec().id,
                EventKind::Stop {
                    reason: stop.to_owned(),
                    text: why.to_owned(),
                },
            );
            let _ = self.end(stop);
        }
    }
}

#[dsh_core::async_trait]
impl StartChild for ChildHost {
    async fn start_child(
        &self,
        profile: &Profile,
        task: &str,
        dispatch: Dispatch,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        run_child(self, profile, task, dispatch, cx).await
    }
}

/// Runs one child to its stop line for the `call_sub_agent` call in `cx`: journals
/// `sub_agent_start` and `sub_agent_end` in the parent's name, reports
/// `SubAgentStarted`/`SubAgentFinished` as the parent's events, and returns the child's
/// answer with an account of what it spent (charged to the parent as it went).
async fn run_child(
    parent: &ChildHost,
    profile: &Profile,
    task: &str,
    dispatch: Dispatch,
    cx: &ExecContext,
) -> Result<ToolOutput, ToolError> {
    let session = &parent.family.session;
    let parent_id = parent.parent.clone();
    let provider: Arc<dyn Provider> = match &profile.model {
        Some(m) if m != parent.provider.model() => Arc::new(OtherModel {
            inner: parent.provider.clone(),
            model: m.clone(),
        }),
        _ => parent.provider.clone(),
    };
    let config = child_config(parent, profile);
    let priced = |config: &LoopConfig, p: &dyn Provider| {
        crate::spend::price_for(config.price, p.name(), p.model()).is_some()
    };
    if config.max_cost_usd > 0.0
        && priced(&parent.config, parent.provider.as_ref())
        && !priced(&config, provider.as_ref())
    {
        return Err(ToolError::failed(format!(
            "the `{}` profile's model `{}` has no known prices, so what it spends could not \
             be counted against the cost budget (max_cost_usd = {}); use another profile or \
             set [model] price for that model",
            profile.name,
            provider.model(),
            config.max_cost_usd
        )));
    }
    let max_steps = config.max_steps;
    // Never more tools than the parent may call itself.
    let tools = session.profile_tools(profile).within(dispatch.tools());
    let spec = AgentSpec {
        system: Some(child_system(session, profile)),
        ..AgentSpec::sub(parent.family.next_child(), &profile.name, tools)
    };
    let child_id = spec.id.clone();
    let journal_failed = |e: dsh_core::journal::JournalError| {
        ToolError::failed(format!("the journal could not record the sub-agent: {e}"))
    };
    session
        .pipeline
        .journal()
        .append_as(
            journal_agent(&parent_id).as_deref(),
            &Record::SubAgentStart {
                child: Cow::Borrowed(&child_id),
                profile: Cow::Borrowed(&profile.name),
                call_id: Cow::Borrowed(cx.call.id()),
                task: Cow::Borrowed(task),
            },
        )
        .map_err(journal_failed)?;
    session.events.send(
        &parent_id,
        EventKind::SubAgentStarted {
            child: child_id.clone(),
            profile: profile.name.clone(),
        },
    );

    let mut running = Running {
        session: session.clone(),
        parent: parent_id.clone(),
        child: Agent::child(&parent.family, spec, provider, config, dispatch, parent_id),
        ended: false,
    };
    let outcome = running.child.run(task, &cx.cancel).await;
    let stop = match &outcome {
        Ok(o) => o.stop.as_str(),
        Err(e) => e.stop_reason(),
    };
    running.end(stop).map_err(journal_failed)?;
    let totals = running.child.totals();
    let tools = running.child.tool_counts().clone();

    let account = |ended| Account {
        child: &child_id,
        profile: &profile.name,
        ended,
        totals: &totals,
        tools: &tools,
        max_steps,
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            let headline = account(Err(&e)).headline();
            return Err(ToolError::failed(format!("{headline}: {e}")));
        }
    };
    let account = account(Ok(outcome.stop));
    let answer = outcome.text;
    if outcome.stop == StopReason::Interrupted {
        // A failure, so the pipeline records the call as cancelled with this account.
        let had = if answer.trim().is_empty() {
            String::new()
        } else {
            format!("; what it had: {answer}")
        };
        return Err(ToolError::failed(format!("{}{had}", account.headline())));
    }
    let content = if answer.trim().is_empty() {
        format!("{}\n(it gave no answer text)", account.headline())
    } else if outcome.stop == StopReason::FinalAnswer {
        format!("{answer}\n\n[{}]", account.headline())
    } else {
        format!(
            "[{}; what it had when it stopped follows]\n{answer}",
            account.headline()
        )
    };
    let ran: BTreeMap<&str, u64> = tools
        .iter()
        .filter(|(_, n)| n.ran > 0)
        .map(|(t, n)| (t.as_str(), n.ran))
        .collect();
    Ok(ToolOutput::new(
        content,
        json!({
            "agent": &*child_id,
            "profile": profile.name,
            "stop": stop,
            "answer": answer,
            "steps": totals.steps,
            "prompt_tokens": totals.prompt_tokens,
            "completion_tokens": totals.completion_tokens,
            "cost_usd": totals.cost_usd,
            "tools": ran,
        }),
    ))
}

/// What a child spent, as its result's account line says it.
struct Account<'a> {
    child: &'a str,
    profile: &'a str,
    /// How its run ended: a stop line, or a fault.
    ended: Result<StopReason, &'a AgentError>,
    totals: &'a crate::Totals,
    tools: &'a BTreeMap<String, CallCounts>,
    max_steps: u32,
}

impl Account<'_> {
    fn headline(&self) -> String {
        let how = match self.ended {
            Ok(StopReason::FinalAnswer) => "answered".to_owned(),
            Ok(StopReason::MaxSteps) => format!("stopped at its step limit ({})", self.max_steps),
            Ok(StopReason::TokenBudget) => "stopped: the token budget is spent".to_owned(),
            Ok(StopReason::CostBudget) => "stopped: the cost budget is spent".to_owned(),
            Ok(StopReason::RepeatedCall) => "stopped: it repeated the same call".to_owned(),
            Ok(StopReason::Interrupted) => "was interrupted".to_owned(),
            Ok(StopReason::PromptBlocked) => "stopped: a hook blocked its task".to_owned(),
            Err(AgentError::Model(_)) => "stopped: its model failed".to_owned(),
            Err(_) => "stopped: the journal failed".to_owned(),
        };
        let t = self.totals;
        let cost = t
            .cost_usd
            .map_or_else(|| "cost unknown".to_owned(), |c| format!("${c:.4}"));
        let list = |pick: fn(&CallCounts) -> u64| {
            self.tools
                .iter()
                .filter(|(_, n)| pick(n) > 0)
                .map(|(t, n)| format!("{t} ×{}", pick(n)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (ran, failed) = (list(|n| n.ran), list(|n| n.refused_or_failed));
        let mut tools = match (ran.is_empty(), failed.is_empty()) {
            (true, true) => "no tool calls".to_owned(),
            (false, _) => format!("ran {ran}"),
            (true, false) => "ran nothing".to_owned(),
        };
        if !failed.is_empty() {
            tools.push_str(&format!("; refused or failed: {failed}"));
        }
        format!(
            "sub-agent {} ({}) {how} after {} steps · {} tokens in · {} out · {cost} · {tools}",
            self.child, self.profile, t.steps, t.prompt_tokens, t.completion_tokens
        )
    }
}
