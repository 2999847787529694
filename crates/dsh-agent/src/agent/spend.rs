//! What an agent spends (SPEC A11): each model call accounted and journaled, its cost from
//! the model's prices; a sub-agent's spend charged to its parent as it goes, and the
//! parent's children's spend counted into the parent's account after each batch.

use std::borrow::Cow;

use dsh_core::journal::{JournalError, Record};
use dsh_model::{ChatRequest, Message, Usage};
use serde_json::json;

use super::{Agent, estimate_tokens};

impl Agent {
    /// Accounts one model call and journals its `llm_call`: the provider's usage (estimated
    /// when it reported none), its cost; both returned.
    pub(super) fn record_model_call(
        &mut self,
        step: u32,
        request: &ChatRequest,
        completion: &dsh_model::Completion,
        elapsed: std::time::Duration,
    ) -> Result<(Usage, Option<f64>), JournalError> {
        let message = &completion.message;
        let (usage, estimated) = match completion.usage {
            Some(u) => (u, false),
            None => (estimated_usage(request, message), true),
        };
        let cost = self.account(&usage, estimated);
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
        Ok((usage, cost))
    }

    /// Adds a call's usage to the agent's, and its cost when the prices are known and the
    /// counts are not estimates; the call's cost.
    fn account(&mut self, usage: &Usage, estimated: bool) -> Option<f64> {
        // Estimated counts give no cost: a guess is never shown as a fact, and the total is
        // unknown from then on.
        let cost = self
            .price
            .filter(|_| !estimated)
            .map(|p| crate::cost::cost_usd(usage, &p));
        self.spent.add(usage, cost);
        match &self.spends_for {
            Some(parent) => self.session.roster.charge(parent, usage, cost),
            None => self.report_spent(),
        }
        cost
    }

    /// Tells the session's roster what this agent has spent (its children's budgets are
    /// its own, shared).
    fn report_spent(&self) {
        self.session.roster.spent(&self.spec.id, self.spent);
    }

    /// The spend its budgets are checked against: its own, or for a sub-agent its parent's
    /// with everything the parent's children have spent so far.
    fn budget_spent(&self) -> (u64, f64) {
        match &self.spends_for {
            Some(parent) => self.session.roster.used(parent),
            None => (self.spent.tokens(), self.spent.known_cost_usd()),
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
        let Some(owed) = self.session.roster.collect(&self.spec.id) else {
            return;
        };
        self.spent.add_spend(&owed);
        self.report_spent();
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
