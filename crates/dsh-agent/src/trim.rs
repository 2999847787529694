//! Context trimming by whole units (SPEC A5): the system prompt is kept, the task (the first
//! user message) is kept, and then the most recent units that fit. A unit is a user message,
//! or an assistant message together with every tool result answering it — so a tool-call
//! message is never separated from its results, which providers reject.

use dsh_model::{Message, Role};

/// Splits `history` (without the system message) into units: index ranges.
pub fn units(history: &[Message]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < history.len() {
        let start = i;
        i += 1;
        if history[start].role == Role::Assistant {
            while i < history.len() && history[i].role == Role::Tool {
                i += 1;
            }
        }
        out.push(start..i);
    }
    out
}

/// The messages to send: the first unit (the task) and the last `keep - 1` other units, in
/// order. `keep` is at least 2, so the latest unit is always sent.
pub fn trim(history: &[Message], keep: usize) -> Vec<Message> {
    let units = units(history);
    let keep = keep.max(2);
    if units.len() <= keep {
        return history.to_vec();
    }
    let mut out: Vec<Message> = history[units[0].clone()].to_vec();
    let tail = &units[units.len() - (keep - 1)..];
    for u in tail {
        out.extend_from_slice(&history[u.clone()]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_model::ToolCallRequest;

    fn call(id: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: id.to_owned(),
            name: "read_file".to_owned(),
            arguments: "{}".to_owned(),
        }
    }

    /// A deterministic pseudo-random history of user messages, assistant answers and
    /// assistant tool-call messages each followed by their results.
    fn history(seed: u64, len: usize) -> Vec<Message> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut h = vec![Message::user("task")];
        let mut n = 0;
        while h.len() < len {
            match next() % 3 {
                0 => h.push(Message::user("more")),
                1 => h.push(Message::assistant("answer", vec![])),
                _ => {
                    let k = 1 + (next() % 3) as usize;
                    let calls: Vec<_> = (0..k).map(|j| call(&format!("c{n}-{j}"))).collect();
                    h.push(Message::assistant("", calls.clone()));
                    for c in calls {
                        h.push(Message::tool(c.id, "result"));
                    }
                    n += 1;
                }
            }
        }
        h
    }

    #[test]
    fn trimming_never_separates_a_tool_call_from_its_results() {
        for seed in 0..500 {
            let h = history(seed, 5 + (seed as usize % 60));
            for keep in 1..12 {
                let t = trim(&h, keep);
                assert_eq!(t[0].content, "task", "the task is kept");
                // Every tool result answers a call of the assistant message before it, and
                // every call of a kept assistant message has its result.
                for (i, m) in t.iter().enumerate() {
                    if m.role == Role::Tool {
                        let owner = t[..i].iter().rev().find(|m| m.role != Role::Tool).unwrap();
                        assert_eq!(owner.role, Role::Assistant, "seed {seed} keep {keep}");
                        assert!(
                            owner
                                .tool_calls
                                .iter()
                                .any(|c| Some(&c.id) == m.tool_call_id.as_ref())
                        );
                    }
                    for c in &m.tool_calls {
                        assert!(
                            t.iter().any(|r| r.tool_call_id.as_ref() == Some(&c.id)),
                            "seed {seed}"
                        );
                    }
                }
                assert!(units(&t).len() <= keep.max(2));
                // The kept units are the most recent ones.
                assert_eq!(t.last(), h.last());
            }
        }
    }

    #[test]
    fn short_histories_are_untouched() {
        let h = history(7, 6);
        assert_eq!(trim(&h, 100), h);
    }
}
