//! Room in the model's context window (issue 10, item 1 — first stage: pruning).
//!
//! Each preset knows the window of its default model; `[model] context_window` sets it for
//! others. With a window known, before a request would pass `[context] max_fraction` of it,
//! old tool results above [`PRUNE_MIN_CHARS`] are cut to their head and tail, oldest first,
//! never those of the last [`KEEP_STEPS`] steps; the whole text is saved in the session's
//! spill store and the cut says how to page it back with `read_output`. A call's message
//! and its results stay together (only the results' text changes). With no window known, no
//! room is made ahead; a provider's "context too long" is answered by pruning and one retry.
//!
//! Not built yet: compaction (a summary of the oldest turns by the model). When pruning does
//! not make enough room, the request is sent as it is and the provider's refusal ends the run.

use dsh_core::SpillStore;
use dsh_model::{Message, ModelError, Role};

use crate::estimate_tokens;

/// Tool results at most this long are never pruned.
pub const PRUNE_MIN_CHARS: usize = 2_000;
/// The results of this many latest steps are never pruned.
pub const KEEP_STEPS: usize = 3;
/// What a pruned result keeps of its text.
const HEAD_CHARS: usize = 600;
const TAIL_CHARS: usize = 300;

/// The context window of a preset's default model.
fn preset_window(provider: &str, model: &str) -> Option<u64> {
    match (provider, model) {
        ("openai", "gpt-4.1-mini") => Some(1_047_576),
        ("anthropic", "claude-sonnet-4-5") => Some(200_000),
        ("deepseek", "deepseek-chat") => Some(128_000),
        _ => None,
    }
}

/// The window a session uses: the configured one, else the preset's for this model.
pub fn window_for(configured: Option<u64>, provider: &str, model: &str) -> Option<u64> {
    configured.or_else(|| preset_window(provider, model))
}

/// The estimated tokens of `messages` (four characters a token, tool calls included).
pub fn estimate(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| {
            estimate_tokens(&m.content)
                + m.tool_calls
                    .iter()
                    .map(|c| estimate_tokens(&c.arguments) + estimate_tokens(&c.name))
                    .sum::<u64>()
                + 4
        })
        .sum()
}

/// Whether the provider refused the request for its length.
pub fn is_too_long(error: &ModelError) -> bool {
    let says = |text: &str| {
        let t = text.to_ascii_lowercase();
        [
            "context length",
            "context_length",
            "context window",
            "maximum context",
            "prompt is too long",
            "too many tokens",
            "input is too long",
        ]
        .iter()
        .any(|w| t.contains(w))
    };
    match error {
        ModelError::Http {
            status: 400 | 413,
            message,
            ..
        } => says(message),
        ModelError::Reported { kind, message, .. } => {
            kind.as_deref().is_some_and(says) || says(message)
        }
        _ => false,
    }
}

/// What a pruning did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub results: usize,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// Cuts old tool results in `history`, oldest first, until `estimate(history) <= budget`
/// (`budget` 0: every result that may be cut). The results of the last [`KEEP_STEPS`] steps,
/// and results of at most [`PRUNE_MIN_CHARS`], stay whole.
pub fn prune(history: &mut [Message], budget: u64, spill: &SpillStore) -> Pruned {
    let before = estimate(history);
    let mut now = before;
    let protected_from = history
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == Role::Assistant)
        .nth(KEEP_STEPS - 1)
        .map_or(0, |(i, _)| i);
    let mut results = 0;
    for m in history[..protected_from].iter_mut() {
        if now <= budget && budget > 0 {
            break;
        }
        if m.role != Role::Tool || m.content.chars().count() <= PRUNE_MIN_CHARS {
            continue;
        }
        let call_id = m.tool_call_id.clone().unwrap_or_default();
        let old = estimate_tokens(&m.content);
        m.content = cut(&m.content, &call_id, spill);
        now = now - old + estimate_tokens(&m.content);
        results += 1;
    }
    Pruned {
        results,
        tokens_before: before,
        tokens_after: now,
    }
}

/// `text`'s head and tail, and where the whole is saved.
fn cut(text: &str, call_id: &str, spill: &SpillStore) -> String {
    let total = text.chars().count();
    let head: String = text.chars().take(HEAD_CHARS).collect();
    let tail: String = text.chars().skip(total - TAIL_CHARS).collect();
    let omitted = total - HEAD_CHARS - TAIL_CHARS;
    let note = match spill.save(&format!("{call_id}-pruned"), text) {
        Ok(id) => format!(
            "[pruned to make room in the context: {omitted} of {total} characters omitted; the \
             whole result is saved as `{id}`: page it with read_output{{\"id\":\"{id}\",\"offset\":{HEAD_CHARS}}}]"
        ),
        Err(e) => format!(
            "[pruned to make room in the context: {omitted} of {total} characters omitted; they could not be saved ({e})]"
        ),
    };
    format!("{head}\n…\n{note}\n…\n{tail}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use dsh_model::ToolCallRequest;

    fn step(i: usize, result: &str) -> [Message; 2] {
        [
            Message::assistant(
                "",
                vec![ToolCallRequest {
                    id: format!("c{i}"),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                }],
            ),
            Message::tool(format!("c{i}"), result),
        ]
    }

    #[test]
    fn old_big_results_are_cut_oldest_first_and_the_last_steps_stay_whole() {
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillStore::new(dir.path());
        let big = "x".repeat(10_000);
        let mut history = vec![Message::user("task")];
        for i in 0..6 {
            history.extend(step(i, if i == 1 { "small" } else { &big }));
        }
        let p = prune(&mut history, 0, &spill);
        // Steps 0, 2 (big, old) are cut; 1 is small; 3, 4, 5 are the last three steps.
        assert_eq!(p.results, 2);
        assert!(history[2].content.contains("saved as `out-c0-pruned`"));
        assert_eq!(history[4].content, "small");
        assert!(history[6].content.contains("out-c2-pruned"));
        for m in &history[8..] {
            assert!(m.role != Role::Tool || m.content == big);
        }
        assert!(p.tokens_after < p.tokens_before);
        let saved = spill.read("out-c0-pruned", 0, 20_000).unwrap();
        assert_eq!(saved.text.len(), 10_000);
    }

    #[test]
    fn pruning_stops_once_there_is_room() {
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillStore::new(dir.path());
        let big = "y".repeat(10_000);
        let mut history = vec![Message::user("task")];
        for i in 0..8 {
            history.extend(step(i, &big));
        }
        let budget = estimate(&history) - 1_000;
        let p = prune(&mut history, budget, &spill);
        assert_eq!(p.results, 1);
        assert!(p.tokens_after <= budget);
    }

    #[test]
    fn a_too_long_refusal_is_recognised() {
        let http = |status, message: &str| ModelError::Http {
            status,
            message: message.into(),
            hint: None,
        };
        assert!(is_too_long(&http(
            400,
            "This model's maximum context length is 8192 tokens"
        )));
        assert!(is_too_long(&http(
            400,
            "prompt is too long: 210000 tokens > 200000 maximum"
        )));
        assert!(!is_too_long(&http(400, "invalid tool schema")));
        assert!(is_too_long(&ModelError::Reported {
            kind: Some("context_length_exceeded".into()),
            message: "too big".into(),
            hint: None,
        }));
    }
}
