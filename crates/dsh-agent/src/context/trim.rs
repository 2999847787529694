//! Context trimming by whole turns (SPEC A5, the seed's rule): a *turn* is a user's message
//! and everything after it up to the next one — the model's answers, its tool calls with
//! their results, attached context (which is not a turn of its own). With `keep_turns` set,
//! only the last that many turns are sent; otherwise the whole history. Cutting only at turn
//! starts means a tool-call message is never separated from its results (providers reject
//! that), and the messages sent within one turn only ever grow at the end, so providers'
//! prompt caches keep serving their prefix. Room by tokens comes with the context work.

use dsh_model::Message;

/// The messages to send: `history` from the start of the `keep`-th last turn, or all of it.
/// `turn_starts` are the indices in `history` where turns begin, ascending.
pub fn trim(history: &[Message], turn_starts: &[usize], keep: Option<usize>) -> Vec<Message> {
    history[kept_from(history.len(), turn_starts, keep)..].to_vec()
}

/// Where the part of the history that [`trim`] keeps starts.
pub fn kept_from(len: usize, turn_starts: &[usize], keep: Option<usize>) -> usize {
    match keep {
        Some(keep) if keep > 0 && turn_starts.len() > keep => {
            turn_starts[turn_starts.len() - keep].min(len)
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_model::{Role, ToolCallRequest};

    fn call(id: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: id.to_owned(),
            name: "read_file".to_owned(),
            arguments: "{}".to_owned(),
        }
    }

    /// A deterministic pseudo-random history of turns: a user message, then answers,
    /// attached context and tool-call messages each followed by their results. Returns the
    /// history and where its turns start.
    fn history(seed: u64, len: usize) -> (Vec<Message>, Vec<usize>) {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut h = vec![Message::user("task 0")];
        let mut starts = vec![0];
        let mut n = 0;
        while h.len() < len {
            match next() % 4 {
                0 => {
                    starts.push(h.len());
                    h.push(Message::user(format!("task {}", starts.len() - 1)));
                }
                1 => h.push(Message::assistant("answer", vec![])),
                2 => h.push(Message::user("[from policy] attached context")),
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
        (h, starts)
    }

    #[test]
    fn trimming_keeps_whole_turns_and_never_separates_calls_from_results() {
        for seed in 0..500 {
            let (h, starts) = history(seed, 5 + (seed as usize % 60));
            for keep in 1..12 {
                let t = trim(&h, &starts, Some(keep));
                // It starts at a turn's first message, and is a suffix of the history.
                assert!(t[0].content.starts_with("task "), "seed {seed} keep {keep}");
                assert_eq!(t[..], h[h.len() - t.len()..]);
                let turns = t.iter().filter(|m| m.content.starts_with("task ")).count();
                assert_eq!(turns, keep.min(starts.len()), "seed {seed} keep {keep}");
                for (i, m) in t.iter().enumerate() {
                    if m.role == Role::Tool {
                        let owner = t[..i].iter().rev().find(|m| m.role != Role::Tool).unwrap();
                        assert_eq!(owner.role, Role::Assistant, "seed {seed} keep {keep}");
                    }
                }
            }
        }
    }

    #[test]
    fn without_a_limit_everything_is_sent() {
        let (h, starts) = history(7, 80);
        assert_eq!(trim(&h, &starts, None), h);
        assert_eq!(trim(&h, &starts, Some(0)), h);
        assert_eq!(trim(&h, &starts, Some(starts.len())), h);
    }

    #[test]
    fn a_long_turn_is_never_cut_inside() {
        // One task with 200 tool calls: whatever the limit, all of it is sent.
        let (mut h, starts) = (vec![Message::user("task 0")], vec![0]);
        for i in 0..200 {
            let c = call(&format!("c{i}"));
            h.push(Message::assistant("", vec![c.clone()]));
            h.push(Message::tool(c.id, "result"));
        }
        assert_eq!(trim(&h, &starts, Some(1)), h);
    }
}
