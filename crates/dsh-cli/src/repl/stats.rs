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
                "agent {agent}: {} model calls · {} tokens in ({} cached) · {} out · {cost} · {} waiting on the model",
                a.model_calls,
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
                out.push(format!("  {total} tool calls:"));
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
            "all agents: {} model calls · {} tokens in · {} out · {cost} · {} of model time (summed over agents)",
            sum(|a| a.model_calls),
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
}
