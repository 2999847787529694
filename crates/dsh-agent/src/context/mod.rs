//! Room in the model's context window (issue 10, item 1): pruning, then compaction.
//!
//! Each preset knows the window of its default model; `[model] context_window` sets it for
//! others. With a window known, before a request would pass `[context] max_fraction` of it,
//! old tool results above [`PRUNE_MIN_CHARS`] are cut to their head and tail, oldest first,
//! never those of the last [`KEEP_STEPS`] steps; the whole text is saved in the session's
//! spill store and the cut says how to page it back with `read_output`. A call's message
//! and its results stay together (only the results' text changes). With no window known, no
//! room is made ahead; a provider's "context too long" is answered by making room and one
//! retry.
//!
//! When pruning is not enough, the oldest turns — all but the last [`KEEP_TURNS`] — are
//! compacted: the same model summarizes their transcript in a bounded request of its own
//! ([`SUMMARY_PROMPT`], at most [`SUMMARY_MAX_TOKENS`]), and [`apply_compaction`] puts the
//! summary in place of their work, keeping each turn's first user message verbatim (a turn
//! is a `user_message` and everything after it; whole turns go, so a call is never separated
//! from its results). The system prompt, which holds the memory files, is never touched.
//! A summary is held to its request's bound whatever the model did with `max_tokens`
//! ([`bound_summary`]): cut to [`SUMMARY_MAX_TOKENS`], then refused unless it is at most
//! half of what it would replace — the turn then goes on uncompacted, with a notice, and
//! nothing is journaled. Compaction runs again only when more turns can go. If there is still no room, the request
//! is sent as it is and the provider's refusal ends the run.

use dsh_core::SpillStore;
use dsh_model::{Message, ModelError, Role};

pub mod trim;

/// A rough token count for text a provider did not count: four characters a token.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

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

// ---- compaction ----

/// The last turns compaction keeps verbatim (the one being worked on and the one before).
pub const KEEP_TURNS: usize = 2;
/// The longest transcript sent to be summarized, in characters (its newest part is kept).
const TRANSCRIPT_MAX_CHARS: usize = 200_000;
/// The most of one message the transcript quotes.
const TRANSCRIPT_MESSAGE_CHARS: usize = 4_000;
/// The summary's length cap, in tokens.
pub const SUMMARY_MAX_TOKENS: u32 = 1_024;

/// The system prompt of the summary request.
pub const SUMMARY_PROMPT: &str = "You compress the earlier part of a coding session so that the \
work can go on with less context. Write a concise, factual summary of the transcript you are \
given: what the user asked, what was found (files, functions, facts), what was changed and how \
(files edited, commands run, their outcomes), decisions taken, and what is still open. Name \
files and identifiers exactly. Plain text, no tool calls, no preamble.";

/// How many leading turns compaction may replace: all but the last [`KEEP_TURNS`].
pub fn compactable(turn_starts: &[usize]) -> usize {
    turn_starts.len().saturating_sub(KEEP_TURNS)
}

/// `messages` as a plain transcript for the summary request, each message capped, the whole
/// capped to its beginning and its newest part: at most [`TRANSCRIPT_MAX_CHARS`], and at most half of `window`
/// (in tokens, four characters each) when it is known, so the summary request itself fits.
pub fn transcript(messages: &[Message], window: Option<u64>) -> String {
    let cap = |t: &str| -> String {
        let n = t.chars().count();
        if n <= TRANSCRIPT_MESSAGE_CHARS {
            t.to_owned()
        } else {
            let head: String = t.chars().take(TRANSCRIPT_MESSAGE_CHARS).collect();
            format!("{head} […{} more characters]", n - TRANSCRIPT_MESSAGE_CHARS)
        }
    };
    let mut out = String::new();
    for m in messages {
        let line = match m.role {
            Role::System => continue,
            Role::User => format!("USER: {}", cap(&m.content)),
            Role::Assistant => {
                let calls: Vec<String> = m
                    .tool_calls
                    .iter()
                    .map(|c| format!("[calls {}({})]", c.name, cap(&c.arguments)))
                    .collect();
                format!("ASSISTANT: {} {}", cap(&m.content), calls.join(" "))
            }
            Role::Tool => format!(
                "RESULT of {}: {}",
                m.tool_call_id.as_deref().unwrap_or("?"),
                cap(&m.content)
            ),
        };
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let max = window.map_or(TRANSCRIPT_MAX_CHARS, |w| {
        TRANSCRIPT_MAX_CHARS.min(usize::try_from(w.saturating_mul(2)).unwrap_or(usize::MAX))
    });
    let n = out.chars().count();
    if n > max {
        // The beginning (the task) and the newest part; the middle goes.
        let head_n = max / 5;
        let head: String = out.chars().take(head_n).collect();
        let tail: String = out.chars().skip(n - (max - head_n)).collect();
        out = format!(
            "{head}\n[… {} characters of the transcript left out …]\n{tail}",
            n - max
        );
    }
    out
}

/// A summary is kept only when it is at most 1 / `SUMMARY_MAX_SHARE` of what it replaces.
pub const SUMMARY_MAX_SHARE: u64 = 2;

/// Why a summary was not put in place of the turns it summarizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SummaryRefused {
    /// The summary's message, cut to its bound, in estimated tokens.
    pub summary_tokens: u64,
    /// What it would have replaced, in estimated tokens.
    pub replaced_tokens: u64,
}

impl std::fmt::Display for SummaryRefused {
    /// What a front end says of it, after "N old turns not summarized: ".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "their summary ({} tokens, cut to its bound of {SUMMARY_MAX_TOKENS}) is more than half \
             of what it would replace ({} tokens); the turn goes on without it",
            self.summary_tokens, self.replaced_tokens
        )
    }
}

/// The summary as it may stand for the work of the turns before `history[end]`, or why it
/// may not. The rule, whatever the model made of the request's `max_tokens`: a summary
/// longer than [`SUMMARY_MAX_TOKENS`] (four characters a token) is cut to it, saying so;
/// then its message must be at most half (1 / [`SUMMARY_MAX_SHARE`]) of the messages it
/// replaces — the turns' work, their first user messages being kept — or it is refused.
/// So a compaction always shrinks the history by at least half of what it touches, and no
/// summary journaled is longer than its bound.
pub fn bound_summary(
    summary: &str,
    history: &[Message],
    turn_starts: &[usize],
    turns: usize,
) -> Result<String, SummaryRefused> {
    let bound = usize::try_from(SUMMARY_MAX_TOKENS).unwrap_or(usize::MAX) * 4;
    let total = summary.chars().count();
    let text = if total <= bound {
        summary.to_owned()
    } else {
        let note = format!(
            "\n[… the summary was cut to its bound of {SUMMARY_MAX_TOKENS} tokens; the model \
             wrote about {} tokens]",
            (total as u64).div_ceil(4)
        );
        let keep = bound.saturating_sub(note.chars().count());
        let head: String = summary.chars().take(keep).collect();
        format!("{}{note}", head.trim_end())
    };
    let end = turn_starts.get(turns).copied().unwrap_or(history.len());
    let kept: Vec<Message> = turn_starts[..turns.min(turn_starts.len())]
        .iter()
        .map(|&i| history[i].clone())
        .collect();
    let replaced_tokens = estimate(&history[..end]).saturating_sub(estimate(&kept));
    let summary_tokens = estimate(&[summary_message(&text)]);
    if summary_tokens.saturating_mul(SUMMARY_MAX_SHARE) > replaced_tokens {
        return Err(SummaryRefused {
            summary_tokens,
            replaced_tokens,
        });
    }
    Ok(text)
}

/// The message that stands for the compacted work.
pub fn summary_message(summary: &str) -> Message {
    Message::assistant(
        format!("[Summary of the earlier work, compacted to make room in the context]\n{summary}"),
        Vec::new(),
    )
}

/// Replaces the work of the first `turns` turns by `summary`: their first user messages stay
/// verbatim, then one summary message, then the kept turns as they were. A call and its
/// results are never separated (whole turns go). `turn_starts` follows.
pub fn apply_compaction(
    history: &mut Vec<Message>,
    turn_starts: &mut Vec<usize>,
    turns: usize,
    summary: &str,
) {
    if turns == 0 || turns >= turn_starts.len() {
        return;
    }
    let end = turn_starts[turns];
    let mut new: Vec<Message> = turn_starts[..turns]
        .iter()
        .map(|&i| history[i].clone())
        .collect();
    new.push(summary_message(summary));
    let shift = new.len();
    new.extend(history.drain(end..));
    let mut starts: Vec<usize> = (0..turns).collect();
    starts.extend(turn_starts[turns..].iter().map(|&i| i - end + shift));
    *history = new;
    *turn_starts = starts;
}

#[cfg(test)]
mod compaction_tests {
    use super::*;
    use dsh_model::ToolCallRequest;

    #[test]
    fn old_turns_keep_their_first_message_and_calls_stay_with_their_results() {
        let call = |id: &str| {
            Message::assistant(
                "",
                vec![ToolCallRequest {
                    id: id.into(),
                    name: "grep".into(),
                    arguments: "{}".into(),
                }],
            )
        };
        let mut history = vec![
            Message::user("first task"),
            call("a"),
            Message::tool("a", "found"),
            Message::assistant("done one", Vec::new()),
            Message::user("second task"),
            call("b"),
            Message::tool("b", "found b"),
            Message::user("third task"),
            call("c"),
            Message::tool("c", "found c"),
        ];
        let mut starts = vec![0, 4, 7];
        assert_eq!(compactable(&starts), 1);
        apply_compaction(&mut history, &mut starts, 1, "did the first task");
        let roles: Vec<(Role, &str)> = history
            .iter()
            .map(|m| (m.role, m.content.as_str()))
            .collect();
        assert_eq!(roles[0], (Role::User, "first task"));
        assert!(roles[1].1.ends_with("did the first task"));
        assert_eq!(roles[2], (Role::User, "second task"));
        assert_eq!(starts, [0, 2, 5]);
        assert_eq!(history[3].tool_calls[0].id, "b");
        assert_eq!(history[4].tool_call_id.as_deref(), Some("b"));
        assert!(transcript(&[Message::user("x"), call("z")], None).contains("[calls grep({})]"));
        let long = vec![Message::user("y".repeat(3_000)); 10];
        let t = transcript(&long, Some(1_000));
        assert!(t.chars().count() <= 2_100, "{}", t.len());
        assert!(t.starts_with("USER: yyy"));
    }

    #[test]
    fn a_summary_is_cut_to_its_bound_then_refused_unless_it_halves_what_it_replaces() {
        // One old turn of 20,000 characters of work (about 5,000 tokens), one kept.
        let history = vec![
            Message::user("first task"),
            Message::assistant("w".repeat(20_000), Vec::new()),
            Message::user("second task"),
            Message::user("third task"),
        ];
        let starts = [0, 2, 3];
        // A model that ignored max_tokens: cut to the bound, saying so.
        let huge = "s".repeat(2_000_000);
        let kept = bound_summary(&huge, &history, &starts, 1).unwrap();
        assert!(
            estimate_tokens(&kept) <= u64::from(SUMMARY_MAX_TOKENS),
            "{}",
            kept.len()
        );
        assert!(
            kept.ends_with("the model wrote about 500000 tokens]"),
            "{kept}"
        );
        // A short one stays as it is.
        assert_eq!(
            bound_summary("did it", &history, &starts, 1).unwrap(),
            "did it"
        );
        // With less to replace, even the cut summary is more than half of it: refused.
        let small = vec![
            Message::user("first task"),
            Message::assistant("w".repeat(6_000), Vec::new()),
            Message::user("second task"),
            Message::user("third task"),
        ];
        let refused = bound_summary(&huge, &small, &starts, 1).unwrap_err();
        assert!(refused.summary_tokens > 1_000, "{refused:?}");
        assert_eq!(refused.replaced_tokens, 1_504);
    }
}
