//! What an agent spends (SPEC A11): each model call accounted and journaled, its cost from
//! the model's prices; a sub-agent's spend charged to its parent as it goes, and the
//! parent's children's spend counted into the parent's account after each batch.
//!
//! A sub-agent under a budget reserves each request's estimate against its parent's budgets
//! before sending it ([`Agent::reserve`], see `spend/ledger.rs`), and the reply settles
//! the reservation with the real usage: parallel children then pass the budget by no more
//! than what their replies in flight use beyond their estimates.

use std::borrow::{Borrow, Cow};
use std::sync::Arc;

use dsh_core::journal::{JournalError, Record};
use dsh_model::{ChatRequest, Message, Usage};
use serde_json::json;

use super::family::Family;
use super::{Agent, StopReason};
use crate::context::estimate_tokens;
use crate::events::AgentId;
use crate::spend::{Estimate, Exceeded, SpendLimits};

/// The output a request is expected to produce when it sets no `max_tokens` (a sub-agent's
/// step requests do not): a stated estimate, not a cap. Most steps answer with tool calls
/// or a short text well under it; a reply that writes more passes its reservation by the
/// difference.
pub const OUTPUT_ESTIMATE_TOKENS: u64 = 1_024;

/// Part of a parent's budgets held for one request of its child, until its reply settles
/// it; dropped unsettled (no reply: an error, a cancellation), it is given back.
pub(super) struct Reservation {
    family: Arc<Family>,
    parent: AgentId,
    estimate: Estimate,
    settled: bool,
}

impl Reservation {
    /// Settles it with the reply's real `usage` at `cost_usd`, charged to the parent.
    fn settle(mut self, usage: &Usage, cost_usd: Option<f64>) {
        self.settled = true;
        self.family
            .ledger
            .settle(&self.parent, self.estimate, usage, cost_usd);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.settled {
            self.family.ledger.release(&self.parent, self.estimate);
        }
    }
}

impl Agent {
    /// Accounts one model call (a step's, or a summary's), journals its `llm_call` and
    /// reports it (`ModelCall`, so a front end's spend counts it): the provider's usage
    /// (estimated when it reported none), its cost; both returned.
    pub(super) fn record_model_call(
        &mut self,
        step: u32,
        request: &ChatRequest,
        completion: &dsh_model::Completion,
        elapsed: std::time::Duration,
        reservation: Option<Reservation>,
    ) -> Result<(Usage, Option<f64>), JournalError> {
        let message = &completion.message;
        let (usage, estimated) = match completion.usage {
            Some(u) => (u, false),
            None => (estimated_usage(request, message), true),
        };
        let cost = self.account(&usage, estimated, reservation);
        self.record(&Record::LlmCall {
            step,
            provider: self.provider.name().into(),
            model: self.provider.model().into(),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            tokens_estimated: estimated,
            cached_tokens: usage.cached_tokens,
            cache_write_tokens: usage.cache_write_tokens,
            cost_usd: cost,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            has_tool_calls: !message.tool_calls.is_empty(),
            finish_reason: Cow::Owned(json!(completion.finish_reason)),
        })?;
        self.emit(crate::events::EventKind::ModelCall {
            step,
            usage,
            elapsed,
            cost_usd: cost,
        });
        Ok((usage, cost))
    }

    /// Adds a call's usage to the agent's, and its cost when the prices are known and the
    /// counts are not estimates; the call's cost. A sub-agent's is charged to its parent,
    /// settling the call's `reservation` when it made one.
    fn account(
        &mut self,
        usage: &Usage,
        estimated: bool,
        reservation: Option<Reservation>,
    ) -> Option<f64> {
        // Estimated counts give no cost: a guess is never shown as a fact, and the total is
        // unknown from then on.
        let cost = self
            .price
            .filter(|_| !estimated)
            .map(|p| crate::spend::cost_usd(usage, &p));
        self.family.ledger.add(&self.spec.id, usage, cost);
        match (&self.spends_for, reservation) {
            (Some(_), Some(r)) => r.settle(usage, cost),
            (Some(parent), None) => self.family.ledger.charge(parent, usage, cost),
            (None, _) => {}
        }
        cost
    }

    /// A sub-agent under a budget reserves the estimate of the request `request` gives
    /// against its parent's budgets before sending it: its text at four characters a token
    /// (tools included), plus its `max_tokens` or else [`OUTPUT_ESTIMATE_TOKENS`], and their
    /// cost at the model's prices. `Ok(None)`: nothing to reserve (the main agent, whose
    /// budgets are checked after each step, or no budget set) — then `request` is not called,
    /// so a step does not build its request twice for nothing; `Err`: the budget the request
    /// would pass — it is not sent.
    pub(super) fn reserve<R: Borrow<ChatRequest>>(
        &self,
        request: impl FnOnce() -> R,
    ) -> Result<Option<Reservation>, StopReason> {
        let Some(parent) = &self.spends_for else {
            return Ok(None);
        };
        let limits = SpendLimits {
            max_tokens: self.config.max_tokens,
            max_cost_usd: self.config.max_cost_usd,
        };
        if limits.max_tokens == 0 && limits.max_cost_usd <= 0.0 {
            return Ok(None);
        }
        let request = request();
        let request = request.borrow();
        let usage = Usage {
            prompt_tokens: crate::context::estimate(&request.messages)
                + estimate_tokens(&serde_json::to_string(&request.tools).unwrap_or_default()),
            completion_tokens: request.max_tokens.map_or(OUTPUT_ESTIMATE_TOKENS, u64::from),
            ..Usage::default()
        };
        let estimate = Estimate {
            tokens: usage.prompt_tokens + usage.completion_tokens,
            cost_usd: self
                .price
                .map_or(0.0, |p| crate::spend::cost_usd(&usage, &p)),
        };
        self.family
            .ledger
            .reserve(parent, estimate, limits)
            .map_err(|e| match e {
                Exceeded::Tokens => StopReason::TokenBudget,
                Exceeded::Cost => StopReason::CostBudget,
            })?;
        Ok(Some(Reservation {
            family: self.family.clone(),
            parent: parent.clone(),
            estimate,
            settled: false,
        }))
    }

    /// The spend its budgets are checked against: its own, or for a sub-agent its parent's
    /// with everything the parent's children have spent so far.
    fn budget_spent(&self) -> (u64, f64) {
        match &self.spends_for {
            Some(parent) => self.family.ledger.used(parent),
            None => {
                let spent = self.family.ledger.spent(&self.spec.id);
                (spent.tokens(), spent.known_cost_usd())
            }
        }
    }

    /// The budget stop line this agent has reached, if any: tokens, then known cost.
    pub(super) fn budget_spent_up(&self) -> Option<super::StopReason> {
        let (tokens, cost) = self.budget_spent();
        if self.config.max_tokens > 0 && tokens >= self.config.max_tokens {
            return Some(super::StopReason::TokenBudget);
        }
        (self.config.max_cost_usd > 0.0 && cost >= self.config.max_cost_usd)
            .then_some(super::StopReason::CostBudget)
    }

    /// Counts what this agent's sub-agents spent since the last batch into its own account
    /// (so its budgets, totals and `stop` record include them).
    pub(super) fn count_children(&mut self) {
        self.family.ledger.collect(&self.spec.id);
    }
}

/// Token counts for a call whose provider reported none: the request's text and tools, the
/// answer's text and call arguments.
fn estimated_usage(request: &ChatRequest, message: &Message) -> Usage {
    Usage {
        prompt_tokens: request
            .messages
            .iter()
            .map(|m| estimate_tokens(&m.content))
            .sum::<u64>()
            + estimate_tokens(&serde_json::to_string(&request.tools).unwrap_or_default()),
        completion_tokens: estimate_tokens(&message.content)
            + message
                .tool_calls
                .iter()
                .map(|c| estimate_tokens(&c.arguments))
                .sum::<u64>(),
        ..Usage::default()
    }
}
