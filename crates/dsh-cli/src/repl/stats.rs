//! `/stats`: what this session spent, from the agents' events — tokens in and out, cost where
//! the prices are known, time, model calls, tool calls by tool and outcome — per agent.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use dsh_agent::{Event, EventKind};

/// One agent's account.
#[derive(Default)]
struct Account {
    model_calls: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
    cached_tokens: u64,
    /// `None` once a call's cost was unknown.
    cost_usd: Option<f64>,
    cost_known: bool,
    model_time: Duration,
    /// (tool, outcome) → calls.
    tools: BTreeMap<(String, String), u64>,
}

/// What the agents spent together, as a turn's footer counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Spent {
    model_calls: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
    cached_tokens: u64,
    /// `None`: some call's price is unknown.
    cost_usd: Option<f64>,
}

impl Spent {
    /// What was spent after `before` was taken.
    pub(crate) fn since(self, before: Spent) -> Spent {
        Spent {
            model_calls: self.model_calls - before.model_calls,
            prompt_tokens: self.prompt_tokens - before.prompt_tokens,
            completion_tokens: self.completion_tokens - before.completion_tokens,
            cached_tokens: self.cached_tokens - before.cached_tokens,
            cost_usd: self.cost_usd.zip(before.cost_usd).map(|(a, b)| a - b),
        }
    }

    /// The footer after a turn: `4.2 s · 12,400 tokens in (83% cached) · 310 out · $0.0021`
    /// (the cost only where the model's prices are known).
    pub(crate) fn footer(self, elapsed: Duration) -> String {
        let mut parts = vec![super::toolline::seconds(elapsed)];
        parts.extend(self.parts(false));
        parts.join(" · ")
    }

    /// `12,400 tokens in (83% cached) · 310 out · $0.0021`; `said_unknown`: an unknown cost
    /// is said as such instead of left out.
    fn parts(self, said_unknown: bool) -> Vec<String> {
        let mut parts = Vec::new();
        if self.model_calls == 0 {
            parts.push("no model call".to_owned());
        } else {
            let cached = if self.prompt_tokens > 0 && self.cached_tokens > 0 {
                format!(
                    " ({}% cached)",
                    self.cached_tokens * 100 / self.prompt_tokens
                )
            } else {
                String::new()
            };
            parts.push(format!(
                "{} tokens in{cached}",
                thousands(self.prompt_tokens)
            ));
            parts.push(format!("{} out", thousands(self.completion_tokens)));
            match self.cost_usd {
                Some(cost) => parts.push(format!("${cost:.4}")),
                None if said_unknown => {
                    parts.push(
                        "cost unknown (no prices for the model; [model] price sets them)"
                            .to_owned(),
                    );
                }
                None => {}
            }
        }
        parts
    }
}

/// `12400` as `12,400`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The session's statistics.
pub(crate) struct Stats {
    started: Instant,
    agents: BTreeMap<String, Account>,
}

impl Stats {
    pub(crate) fn new() -> Stats {
        Stats {
            started: Instant::now(),
            agents: BTreeMap::new(),
        }
    }

    /// Counts what `event` reports.
    pub(crate) fn event(&mut self, event: &Event) {
        match &event.kind {
            EventKind::ModelCall {
                usage,
                elapsed,
                cost_usd,
                ..
            } => {
                let a = self.account(&event.agent);
                if a.model_calls == 0 {
                    a.cost_known = true;
                    a.cost_usd = Some(0.0);
                }
                a.model_calls += 1;
                a.prompt_tokens += usage.prompt_tokens;
                a.completion_tokens += usage.completion_tokens;
                a.cached_tokens += usage.cached_tokens;
                a.model_time += *elapsed;
                match (a.cost_usd, cost_usd) {
                    (Some(total), Some(c)) => a.cost_usd = Some(total + c),
                    _ => {
                        a.cost_usd = None;
                        a.cost_known = false;
                    }
                }
            }
            EventKind::ToolFinished { result } => {
                let outcome = result
                    .failure_kind()
                    .map_or("ok", |k| k.as_str())
                    .to_owned();
                *self
                    .account(&event.agent)
                    .tools
                    .entry((result.tool().to_owned(), outcome))
                    .or_default() += 1;
            }
            _ => {}
        }
    }

    /// `/cost`: the session's spend, then each agent's.
    pub(crate) fn cost_lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "this session: {}",
            self.spent().parts(true).join(" · ")
        )];
        if self.agents.len() > 1 {
            for (agent, a) in &self.agents {
                let one = Self::spent_of(std::iter::once(a));
                out.push(format!(
                    "  {}: {}",
                    super::visible::visible(agent, false),
                    one.parts(true).join(" · ")
                ));
            }
        }
        out
    }

    /// Every agent's spend so far, summed.
    pub(crate) fn spent(&self) -> Spent {
        Self::spent_of(self.agents.values())
    }

    fn spent_of<'a>(all: impl Iterator<Item = &'a Account> + Clone) -> Spent {
        Spent {
            model_calls: all.clone().map(|a| a.model_calls).sum(),
            prompt_tokens: all.clone().map(|a| a.prompt_tokens).sum(),
            completion_tokens: all.clone().map(|a| a.completion_tokens).sum(),
            cached_tokens: all.clone().map(|a| a.cached_tokens).sum(),
            cost_usd: all.clone().try_fold(0.0, |sum, a| {
                Some(sum + a.cost_usd.filter(|_| a.cost_known)?)
            }),
        }
    }

    fn account(&mut self, agent: &str) -> &mut Account {
        self.agents.entry(agent.to_owned()).or_default()
    }

    /// The `/stats` lines. `elapsed` is the session's time so far (given, so tests can fix
    /// it).
    pub(crate) fn lines_at(&self, elapsed: Duration) -> Vec<String> {
        let mut out = vec![format!(
            "this session: {}",
            super::toolline::seconds(elapsed)
        )];
        if self.agents.is_empty() {
            out.push("  no model calls yet".to_owned());
        }
        for (agent, a) in &self.agents {
            let agent = super::visible::visible(agent, false);
            let cost = match (a.cost_known, a.cost_usd) {
                (true, Some(c)) => format!("${c:.4}"),
                _ => "cost unknown (no prices for the model)".to_owned(),
            };
            out.push(format!(
                "agent {agent}: {} · {} tokens in ({} cached) · {} out · {cost} · {} waiting on the model",
                crate::words::plural(a.model_calls, "model call"),
                a.prompt_tokens,
                a.cached_tokens,
                a.completion_tokens,
                super::toolline::seconds(a.model_time),
            ));
            let mut by_tool: BTreeMap<&str, Vec<String>> = BTreeMap::new();
            for ((tool, outcome), n) in &a.tools {
                by_tool
                    .entry(tool)
                    .or_default()
                    .push(format!("{n} {}", outcome.replace('_', " ")));
            }
            if by_tool.is_empty() {
                out.push("  no tool calls".to_owned());
            } else {
                let total: u64 = a.tools.values().sum();
                out.push(format!("  {}:", crate::words::plural(total, "tool call")));
                for (tool, outcomes) in by_tool {
                    let tool = super::visible::visible(tool, false);
                    out.push(format!("    {tool:<14} {}", outcomes.join(", ")));
                }
            }
        }
        if self.agents.len() > 1 {
            out.push(self.total_line());
        }
        out
    }

    /// Every agent's spend together: what the session's `stop` record counts (sub-agents'
    /// spend rolls up into their parent's).
    fn total_line(&self) -> String {
        let all = self.agents.values();
        let sum = |f: fn(&Account) -> u64| all.clone().map(f).sum::<u64>();
        let known = all.clone().all(|a| a.cost_known);
        let cost = if known {
            format!(
                "${:.4}",
                all.clone().filter_map(|a| a.cost_usd).sum::<f64>()
            )
        } else {
            "cost unknown".to_owned()
        };
        let time: Duration = all.clone().map(|a| a.model_time).sum();
        format!(
            "all agents: {} · {} tokens in · {} out · {cost} · {} of model time (summed over agents)",
            crate::words::plural(sum(|a| a.model_calls), "model call"),
            sum(|a| a.prompt_tokens),
            sum(|a| a.completion_tokens),
            super::toolline::seconds(time),
        )
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines_at(self.started.elapsed())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use dsh_agent::{Event, EventKind};
    use dsh_model::Usage;
    use serde_json::json;

    use super::Stats;

    fn model_call(agent: &str, prompt: u64, completion: u64, cost: Option<f64>) -> Event {
        Event {
            agent: agent.into(),
            kind: EventKind::ModelCall {
                step: 1,
                usage: Usage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    cached_tokens: prompt / 2,
                    ..Usage::default()
                },
                elapsed: Duration::from_millis(1500),
                cost_usd: cost,
            },
        }
    }

    fn finished(agent: &str, tool: &str, failure: Option<&str>) -> Event {
        let result = serde_json::from_value(json!({
            "call_id": "c", "tool": tool, "ok": failure.is_none(), "failure_kind": failure,
            "decided_by": {"gate": "pre_policy", "policy": null, "reason": "r"},
            "content": "", "value": null, "elapsed_ms": 1, "exit_code": null, "sandbox": null,
        }))
        .unwrap();
        Event {
            agent: agent.into(),
            kind: EventKind::ToolFinished {
                result: Arc::new(result),
            },
        }
    }

    #[test]
    fn stats_count_per_agent_tool_and_outcome() {
        let mut s = Stats::new();
        for e in [
            model_call("main", 1200, 80, Some(0.0012)),
            finished("main", "read_file", None),
            finished("main", "read_file", None),
            finished("main", "run_shell", Some("denied")),
            model_call("main", 1500, 40, Some(0.0010)),
            model_call("sub-1", 300, 20, None),
            finished("sub-1", "grep", None),
        ] {
            s.event(&e);
        }
        insta::assert_snapshot!(s.lines_at(Duration::from_secs(75)).join("\n"));
    }

    #[test]
    fn the_footer_counts_what_the_turn_spent_across_agents() {
        let mut s = Stats::new();
        s.event(&model_call("main", 1000, 10, Some(0.001)));
        let before = s.spent();
        s.event(&model_call("main", 12_000, 300, Some(0.002)));
        s.event(&model_call("sub-1", 400, 10, Some(0.0001)));
        let turn = s.spent().since(before);
        assert_eq!(
            turn.footer(Duration::from_millis(4200)),
            "4.2 s · 12,400 tokens in (50% cached) · 310 out · $0.0021"
        );
        // A price unknown anywhere: no cost rather than a wrong one.
        s.event(&model_call("sub-2", 10, 1, None));
        let turn = s.spent().since(before);
        assert!(!turn.footer(Duration::ZERO).contains('$'));
        assert!(
            Stats::new()
                .spent()
                .footer(Duration::from_secs(1))
                .ends_with("no model call")
        );
    }
}
