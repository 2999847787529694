//! What agents spend (SPEC A11): usage and its cost (this file), every agent's account and
//! the reservations that hold a parent's budgets for its children (`ledger.rs`); how an
//! agent accounts each model call is the agent's (`agent/account.rs`).
//!
//! What model calls cost: prices per million tokens — input, cached input, output
//! — from `[model] price`, else the preset's for its default models; `None` for any other
//! model, never a guess shown as a fact.
//!
//! The preset prices are the providers' list prices for their default models, as published
//! when this table was written; `[model] price` overrides them.

use dsh_config::Price;
use dsh_model::Usage;

mod ledger;

pub(crate) use ledger::{Estimate, Exceeded, Ledger, SpendLimits};

/// Tokens used and what they cost. The cost is the sum of the calls whose cost is known,
/// shown as a fact only when every call's was ([`Spend::cost_usd`]); a cost budget is held
/// to the known sum either way ([`Spend::known_cost_usd`]), so one reply without usage does
/// not switch it off.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spend {
    pub usage: Usage,
    known_cost_usd: f64,
    /// Every call's cost was known.
    cost_complete: bool,
}

impl Default for Spend {
    /// Nothing spent, at a known cost of zero.
    fn default() -> Self {
        Spend {
            usage: Usage::default(),
            known_cost_usd: 0.0,
            cost_complete: true,
        }
    }
}

impl Spend {
    /// Nothing spent, by a model whose prices are unknown (so is every cost it adds).
    pub fn unpriced() -> Self {
        Spend {
            cost_complete: false,
            ..Spend::default()
        }
    }

    /// Adds one call's `usage` and `cost_usd` (`None`: unknown).
    pub fn add(&mut self, usage: &Usage, cost_usd: Option<f64>) {
        self.usage.prompt_tokens += usage.prompt_tokens;
        self.usage.completion_tokens += usage.completion_tokens;
        self.usage.cached_tokens += usage.cached_tokens;
        self.usage.cache_write_tokens += usage.cache_write_tokens;
        self.known_cost_usd += cost_usd.unwrap_or(0.0);
        self.cost_complete &= cost_usd.is_some();
    }

    /// Adds everything `other` spent.
    pub fn add_spend(&mut self, other: &Spend) {
        self.add(&other.usage, Some(other.known_cost_usd));
        self.cost_complete &= other.cost_complete;
    }

    /// What it cost, when every call's cost is known.
    pub fn cost_usd(&self) -> Option<f64> {
        self.cost_complete.then_some(self.known_cost_usd)
    }

    /// What the calls whose cost is known cost.
    pub fn known_cost_usd(&self) -> f64 {
        self.known_cost_usd
    }

    /// From now on the prices are unknown, and so is the total.
    pub fn lose_prices(&mut self) {
        self.cost_complete = false;
    }

    /// Prices became known: the total is known again if nothing has been spent yet.
    pub fn gain_prices(&mut self) {
        if self.usage.prompt_tokens == 0 {
            self.cost_complete = true;
        }
    }

    /// Prompt and completion tokens together (what a token budget counts).
    pub fn tokens(&self) -> u64 {
        self.usage.prompt_tokens + self.usage.completion_tokens
    }
}

/// The list prices (USD per million tokens) of each preset's default model; a local Ollama
/// model costs nothing.
fn preset_price(provider: &str, model: &str) -> Option<Price> {
    let price = |input, cached_input, output| Price {
        input,
        cached_input: Some(cached_input),
        output,
    };
    match (provider, model) {
        ("openai", "gpt-4.1-mini") => Some(price(0.40, 0.10, 1.60)),
        ("anthropic", "claude-sonnet-4-5") => Some(price(3.00, 0.30, 15.00)),
        ("deepseek", "deepseek-chat") => Some(price(0.27, 0.07, 1.10)),
        ("ollama", _) => Some(price(0.0, 0.0, 0.0)),
        _ => None,
    }
}

/// The prices a session uses: the configured ones, else the preset's for this model.
pub fn price_for(configured: Option<Price>, provider: &str, model: &str) -> Option<Price> {
    configured.or_else(|| preset_price(provider, model))
}

/// Anthropic bills tokens written to its prompt cache at 1.25 times the input price.
const CACHE_WRITE_FACTOR: f64 = 1.25;

/// The cost of one call's `usage` at `price`, in USD.
pub fn cost_usd(usage: &Usage, price: &Price) -> f64 {
    let cached = usage.cached_tokens.min(usage.prompt_tokens);
    let written = usage.cache_write_tokens.min(usage.prompt_tokens - cached);
    let plain = usage.prompt_tokens - cached - written;
    let per_million = |tokens: u64, usd: f64| tokens as f64 * usd / 1_000_000.0;
    per_million(plain, price.input)
        + per_million(cached, price.cached_input.unwrap_or(price.input))
        + per_million(written, price.input * CACHE_WRITE_FACTOR)
        + per_million(usage.completion_tokens, price.output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_and_written_tokens_are_priced_apart() {
        let price = Price {
            input: 2.0,
            cached_input: Some(0.5),
            output: 10.0,
        };
        let usage = Usage {
            prompt_tokens: 1_000_000,
            completion_tokens: 100_000,
            cached_tokens: 600_000,
            cache_write_tokens: 200_000,
        };
        // 0.2M × 2 + 0.6M × 0.5 + 0.2M × 2.5 + 0.1M × 10
        let c = cost_usd(&usage, &price);
        assert!((c - (0.4 + 0.3 + 0.5 + 1.0)).abs() < 1e-9, "{c}");
        // Without a cached price, cached tokens cost the input price.
        let plain = Price {
            cached_input: None,
            ..price
        };
        let c = cost_usd(&usage, &plain);
        assert!((c - (0.4 + 1.2 + 0.5 + 1.0)).abs() < 1e-9, "{c}");
    }

    #[test]
    fn only_known_models_have_a_price() {
        assert!(price_for(None, "openai", "gpt-4.1-mini").is_some());
        assert!(price_for(None, "openai", "some-other-model").is_none());
        let mine = Price {
            input: 1.0,
            cached_input: None,
            output: 1.0,
        };
        assert_eq!(price_for(Some(mine), "openai", "x"), Some(mine));
    }
}
