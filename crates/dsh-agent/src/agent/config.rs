//! The loop's limits, as configured.

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
