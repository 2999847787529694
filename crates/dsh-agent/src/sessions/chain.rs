//! Sessions as a person knows them (DESIGN §4, `dsh sessions list`, the REPL's `/sessions`):
//! a chain of resumed journals is one session — its newest file stands for it — with the
//! name it was last saved under, its first prompt and how many turns it holds.
//!
//! The name, first prompt and turns need the journals' bodies: each file of a chain is read
//! once, and only its `user_message` and `session_named` lines are parsed (a JSON string never
//! holds an unescaped `"`, so the kind's text cannot be faked by what a record quotes). A file
//! a later one branched from (`/load NAME`) counts only up to the point the branch names.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use dsh_core::journal::{Record, Totals};

use super::{Summary, parse};

/// One session of the list: a chain of journals, oldest first.
#[derive(Clone, Debug)]
pub struct Chain {
    /// The newest file's summary: its id, start, model and how it ended.
    pub newest: Summary,
    /// Every file's session id, oldest first (the newest last).
    pub chain: Vec<String>,
    /// The chain's spend: each file's totals summed (the cost `None` when one is unknown).
    pub totals: Totals,
    /// The name it was last saved under (`/save NAME`), if any.
    pub name: Option<String>,
    /// The first thing the person asked.
    pub first_prompt: Option<String>,
    /// Prompts the conversation holds (the main agent's `user_message` records).
    pub turns: usize,
}

/// What one journal's body holds, up to a point.
#[derive(Default)]
struct Body {
    first_prompt: Option<String>,
    turns: usize,
    name: Option<String>,
}

/// The body of the journal at `path`, records after `upto` left out.
fn body(path: &Path, upto: Option<u64>) -> Body {
    let mut out = Body::default();
    let Ok(text) = std::fs::read_to_string(path) else {
        return out;
    };
    for line in text.lines() {
        let prompt = line.contains(r#""kind":"user_message""#);
        let named = line.contains(r#""kind":"session_named""#);
        // Sub-agents' records carry `"agent"`; only the main agent's conversation counts.
        if !(prompt || named) || line.contains(r#""agent":""#) {
            continue;
        }
        let Some((env, record)) = parse(line.as_bytes()) else {
            continue;
        };
        if upto.is_some_and(|u| env.seq > u) {
            break;
        }
        match record {
            Record::UserMessage { text } => {
                out.turns += 1;
                out.first_prompt.get_or_insert_with(|| text.into_owned());
            }
            Record::SessionNamed { name, .. } => out.name = Some(name.into_owned()),
            _ => {}
        }
    }
    out
}

/// The newest file of the chain the file `id` belongs to: the files that resumed it are
/// followed (where one was resumed twice, the newer branch) to one nobody resumed; `id`'s
/// own summary when nothing resumed it. `summaries` newest first, as [`super::list`]
/// returns them. An editor that loads a session by the id it first knew finds where the
/// session went on.
pub fn newest_of<'a>(summaries: &'a [Summary], id: &str) -> Option<&'a Summary> {
    let mut at = summaries.iter().find(|s| s.id == id)?;
    let mut seen: HashSet<&str> = HashSet::from([at.id.as_str()]);
    while let Some(next) = summaries.iter().find(|s| {
        s.resumed_from
            .as_ref()
            .is_some_and(|r| r.session.as_ref() == at.id)
    }) {
        if !seen.insert(next.id.as_str()) {
            break;
        }
        at = next;
    }
    Some(at)
}

/// `summaries` (newest first, as [`super::list`] returns them) grouped into chains, newest
/// first: a file some other listed file resumed is part of that one's chain, not a session
/// of its own. Two branches of one file are two sessions sharing their older files.
pub fn chains(summaries: &[Summary]) -> Vec<Chain> {
    let by_id: HashMap<&str, &Summary> = summaries.iter().map(|s| (s.id.as_str(), s)).collect();
    let resumed: HashSet<&str> = summaries
        .iter()
        .filter_map(|s| s.resumed_from.as_ref())
        .map(|r| r.session.as_ref())
        .collect();
    summaries
        .iter()
        .filter(|s| !resumed.contains(s.id.as_str()))
        .map(|newest| {
            // Newest first, each older file with the point the newer one linked to.
            let mut files: Vec<(&Summary, Option<u64>)> = vec![(newest, None)];
            let mut seen: HashSet<&str> = HashSet::from([newest.id.as_str()]);
            while let Some(link) = files.last().and_then(|(s, _)| s.resumed_from.as_ref()) {
                match by_id.get(link.session.as_ref()) {
                    Some(older) if seen.insert(older.id.as_str()) => {
                        files.push((older, Some(link.seq)));
                    }
                    _ => break,
                }
            }
            let bodies: Vec<Body> = files.iter().map(|(s, upto)| body(&s.path, *upto)).collect();
            let totals = files.iter().fold(
                Totals {
                    cost_usd: Some(0.0),
                    ..Totals::default()
                },
                |sum, (s, _)| Totals {
                    steps: sum.steps + s.totals.steps,
                    prompt_tokens: sum.prompt_tokens + s.totals.prompt_tokens,
                    completion_tokens: sum.completion_tokens + s.totals.completion_tokens,
                    cost_usd: sum.cost_usd.zip(s.totals.cost_usd).map(|(a, b)| a + b),
                },
            );
            Chain {
                newest: newest.clone(),
                chain: files.iter().rev().map(|(s, _)| s.id.clone()).collect(),
                totals,
                name: bodies.iter().find_map(|b| b.name.clone()),
                first_prompt: bodies.iter().rev().find_map(|b| b.first_prompt.clone()),
                turns: bodies.iter().map(|b| b.turns).sum(),
            }
        })
        .collect()
}
