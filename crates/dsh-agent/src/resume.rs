//! Resuming a session (DESIGN §4 `dsh exec --resume | --continue`, §6): the conversation is
//! rebuilt from the journal — following `resumed_from` links back to the first session, each
//! link's hash checked — and continued in a **new** journal linked to the old one.
//!
//! What resume does not do: it never re-runs a call, never reuses an approval (the new
//! session asks again), and does not restore the file seam's observations (the model must
//! read a file again before editing it). A call the old process never finished is closed in
//! the new journal, before anything else, as `cancelled_after` when its `tool_started` is on
//! record and `cancelled_before` otherwise; its result tells the model it was cut off.
//!
//! Refused: a session still open in another process (its journal is locked), and a journal
//! whose chain is broken anywhere but a torn last line (which is ignored).

use std::collections::{HashMap, HashSet};
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_core::FrozenResult;
use dsh_core::journal::{Entry, Record, ResumedFrom, read_journal};
use dsh_model::{Message, ToolCallRequest};

use crate::sessions::{self, SessionsError};

/// Why a session cannot be resumed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    #[error(transparent)]
    Find(#[from] SessionsError),
    #[error(
        "session {0} is still open in another dsh process (its journal is locked); wait for it to end or resume another"
    )]
    Open(String),
    #[error(
        "cannot resume {path}: record {line} is broken ({what}); `dsh sessions verify` shows the chain"
    )]
    Broken {
        path: String,
        line: usize,
        what: String,
    },
    #[error("cannot resume {path}: {reason}")]
    Unusable { path: String, reason: String },
    #[error(
        "no session of {workspace} can be continued (none has a user message, or all are open); start one with `dsh exec PROMPT`"
    )]
    NothingToContinue { workspace: String },
}

/// A conversation rebuilt from the journal, ready for a new session to continue.
#[derive(Debug)]
pub struct Resumed {
    /// The old session's id.
    pub session: String,
    /// What the new `session_start` links to: the old file's last intact record.
    pub link: ResumedFrom<'static>,
    /// The main agent's conversation, oldest first, with the cut-off calls' results in place.
    pub history: Vec<Message>,
    /// Where each turn starts in `history`.
    pub turn_starts: Vec<usize>,
    /// The calls the old process never finished, closed: the new journal's first records.
    pub cut_off: Vec<Arc<FrozenResult>>,
    /// The main agent's last step number, so new steps (and call ids) continue after it.
    pub steps: u32,
    /// How many leading turns are compacted (the last `context_compacted`'s `turns`).
    pub compacted_turns: usize,
}

/// Rebuilds the session at `path` (a journal under `DSH_HOME/sessions`).
pub fn load(path: &Path) -> Result<Resumed, ResumeError> {
    let shown = path.display().to_string();
    if is_open(path) {
        let id = path
            .file_stem()
            .map_or_else(|| shown.clone(), |s| s.to_string_lossy().into_owned());
        return Err(ResumeError::Open(id));
    }
    // Every file of the chain, and every link between them, must verify.
    for check in sessions::verify(path) {
        if let Some(p) = check.problem {
            return Err(ResumeError::Broken {
                path: check.path.display().to_string(),
                line: p.line,
                what: p.what,
            });
        }
    }
    let files = chain(path)?;
    let mut entries: Vec<Entry> = Vec::new();
    for file in &files {
        let transcript = read_journal(file).map_err(|e| ResumeError::Unusable {
            path: file.display().to_string(),
            reason: e.to_string(),
        })?;
        entries.extend(transcript.records);
    }
    let last = read_journal(path)
        .map_err(|e| ResumeError::Unusable {
            path: shown.clone(),
            reason: e.to_string(),
        })?
        .records
        .pop()
        .ok_or_else(|| ResumeError::Unusable {
            path: shown.clone(),
            reason: "it has no complete record".to_owned(),
        })?;
    let mut resumed = rebuild(&entries);
    resumed.session.clone_from(&last.session);
    resumed.link = ResumedFrom {
        session: last.session.into(),
        seq: last.seq,
        hash: last.hash.into(),
    };
    Ok(resumed)
}

/// The newest session of `workspace` (canonical) under `dsh_home` that has a user message
/// and is not open in another process (`dsh exec --continue`).
pub fn newest_for(dsh_home: &Path, workspace: &Path) -> Result<PathBuf, ResumeError> {
    let canonical = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let (summaries, _) = sessions::list(dsh_home);
    summaries
        .into_iter()
        .filter(|s| s.workspace == canonical && s.end != sessions::End::Running)
        .map(|s| s.path)
        .find(|p| has_user_message(p) && !is_open(p))
        .ok_or_else(|| ResumeError::NothingToContinue {
            workspace: canonical.display().to_string(),
        })
}

fn has_user_message(path: &Path) -> bool {
    read_journal(path).is_ok_and(|t| {
        t.records
            .iter()
            .any(|e| e.agent.is_none() && matches!(e.record, Record::UserMessage { .. }))
    })
}

/// Whether another process holds the journal's lock (its writer keeps it until it exits).
pub fn is_open(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(_)) => false,
    }
}

/// The files of the chain ending at `path`, oldest first (links already verified).
fn chain(path: &Path) -> Result<Vec<PathBuf>, ResumeError> {
    let mut files = vec![path.to_path_buf()];
    let mut seen = HashSet::new();
    let mut at = path.to_path_buf();
    loop {
        let key = at.canonicalize().unwrap_or_else(|_| at.clone());
        if !seen.insert(key) {
            return Err(ResumeError::Unusable {
                path: at.display().to_string(),
                reason: "its resumed_from links form a cycle".to_owned(),
            });
        }
        let first = read_journal(&at)
            .ok()
            .and_then(|t| t.records.into_iter().next());
        let Some(Entry {
            record:
                Record::SessionStart {
                    resumed_from: Some(link),
                    ..
                },
            ..
        }) = first
        else {
            break;
        };
        at = at
            .parent()
            .unwrap_or(Path::new("."))
            .join(format!("{}.jsonl", link.session));
        files.push(at.clone());
    }
    files.reverse();
    Ok(files)
}

/// The main agent's conversation from a chain's records, with the unfinished calls closed.
fn rebuild(entries: &[Entry]) -> Resumed {
    let mut history: Vec<Message> = Vec::new();
    let mut turn_starts = Vec::new();
    let mut steps = 0;
    // Calls the last assistant message asked for that have no result yet, in order.
    let mut open: Vec<(String, String)> = Vec::new();
    let mut started: HashSet<String> = HashSet::new();
    let mut attached: Vec<String> = Vec::new();
    let flush_attached = |history: &mut Vec<Message>, attached: &mut Vec<String>| {
        if !attached.is_empty() {
            history.push(Message::user(attached.join("\n")));
            attached.clear();
        }
    };
    let mut names: HashMap<String, String> = HashMap::new();
    // The calls the last assistant message asked for: only their results are the model's to
    // see (a nested call's, or a `dsh batch` session's, never were).
    let mut requested: HashSet<String> = HashSet::new();
    let mut nested: HashSet<String> = HashSet::new();
    let mut compacted_turns = 0;
    for e in entries.iter().filter(|e| e.agent.is_none()) {
        match &e.record {
            Record::UserMessage { text } => {
                flush_attached(&mut history, &mut attached);
                turn_starts.push(history.len());
                history.push(Message::user(text.as_ref()));
            }
            Record::LlmCall { step, .. } => steps = steps.max(*step),
            Record::AssistantMessage {
                content,
                tool_calls,
                reasoning,
                ..
            } => {
                flush_attached(&mut history, &mut attached);
                let calls: Vec<ToolCallRequest> = tool_calls
                    .iter()
                    .map(|c| ToolCallRequest {
                        id: c.id.to_string(),
                        name: c.name.to_string(),
                        arguments: c.arguments.to_string(),
                    })
                    .collect();
                open = calls
                    .iter()
                    .map(|c| (c.id.clone(), c.name.clone()))
                    .collect();
                requested = calls.iter().map(|c| c.id.clone()).collect();
                started.clear();
                let mut m = Message::assistant(content.as_ref(), calls);
                m.reasoning = reasoning.as_ref().map(ToString::to_string);
                history.push(m);
            }
            Record::ToolCall {
                call_id,
                name,
                parent,
                ..
            } => {
                if parent.is_some() {
                    nested.insert(call_id.to_string());
                } else {
                    names.insert(call_id.to_string(), name.to_string());
                }
            }
            Record::ToolStarted { call_id } => {
                started.insert(call_id.to_string());
            }
            Record::ToolResult(r) => {
                let id = r.call_id();
                if nested.contains(id) || !requested.contains(id) {
                    continue;
                }
                requested.remove(id);
                open.retain(|(open_id, _)| open_id != id);
                history.push(Message::tool(id, r.content()));
            }
            Record::ContextAttached(a) => attached.push(format!("[from {}] {}", a.policy, a.text)),
            Record::HistoryCleared {} => {
                history.clear();
                turn_starts.clear();
                attached.clear();
                open.clear();
                requested.clear();
                compacted_turns = 0;
            }
            Record::ContextCompacted { turns, summary, .. } => {
                flush_attached(&mut history, &mut attached);
                let turns = usize::try_from(*turns).unwrap_or(usize::MAX);
                crate::context::apply_compaction(&mut history, &mut turn_starts, turns, summary);
                compacted_turns = turns;
            }
            _ => {}
        }
    }
    let cut_off: Vec<Arc<FrozenResult>> = open
        .iter()
        .map(|(id, name)| {
            let tool = names.get(id).unwrap_or(name);
            Arc::new(FrozenResult::cut_off(id, tool, started.contains(id)))
        })
        .collect();
    for r in &cut_off {
        history.push(Message::tool(r.call_id(), r.content()));
    }
    flush_attached(&mut history, &mut attached);
    Resumed {
        session: String::new(),
        link: ResumedFrom {
            session: "".into(),
            seq: 0,
            hash: "".into(),
        },
        history,
        turn_starts,
        cut_off,
        steps,
        compacted_turns,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::borrow::Cow;

    use dsh_core::journal::{Journal, JsonlJournal, RequestedCall, SyncPolicy};
    use dsh_core::{CallSource, FailureKind};
    use serde_json::json;

    use super::*;

    fn start() -> Record<'static> {
        Record::SessionStart {
            workspace: Cow::Owned(PathBuf::from("/w")),
            provider: None,
            model: None,
            dsh_version: "0".into(),
            config_digest: "d".into(),
            resumed_from: None,
        }
    }

    fn call(id: &str) -> Record<'static> {
        Record::ToolCall {
            call_id: id.to_owned().into(),
            name: "run_shell".into(),
            args: Cow::Owned(json!({"command": "true"})),
            source: CallSource::Model,
            parent: None,
            step: 1,
        }
    }

    #[test]
    fn only_the_results_the_model_asked_for_are_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        {
            let j = JsonlJournal::create(&path, "s", SyncPolicy::EveryRecord).unwrap();
            j.append(&start()).unwrap();
            j.append(&Record::UserMessage { text: "go".into() })
                .unwrap();
            j.append(&Record::AssistantMessage {
                step: 1,
                content: "".into(),
                tool_calls: vec![RequestedCall {
                    id: "a".into(),
                    name: "run_code".into(),
                    arguments: "{}".into(),
                }],
                reasoning: None,
            })
            .unwrap();
            j.append(&call("a")).unwrap();
            let nested = Record::ToolCall {
                call_id: "a.0".into(),
                name: "read_file".into(),
                args: Cow::Owned(json!({})),
                source: CallSource::Code,
                parent: Some("a".into()),
                step: 1,
            };
            j.append(&nested).unwrap();
            let result = |id: &str| dsh_core::FrozenResult::cut_off(id, "t", false);
            j.append(&Record::ToolResult(dsh_core::journal::Held::Owned(result(
                "a.0",
            ))))
            .unwrap();
            j.append(&Record::ToolResult(dsh_core::journal::Held::Owned(result(
                "a",
            ))))
            .unwrap();
            // A result nobody asked for (a `dsh batch` call, say).
            j.append(&Record::ToolResult(dsh_core::journal::Held::Owned(result(
                "z",
            ))))
            .unwrap();
        }
        let r = load(&path).unwrap();
        let tools: Vec<&str> = r
            .history
            .iter()
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect();
        assert_eq!(tools, ["a"]);
        assert!(r.cut_off.is_empty());
    }

    #[test]
    fn a_link_that_is_a_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        {
            let j = JsonlJournal::create(&path, "s", SyncPolicy::EveryRecord).unwrap();
            j.append(&Record::SessionStart {
                workspace: Cow::Owned(PathBuf::from("/w")),
                provider: None,
                model: None,
                dsh_version: "0".into(),
                config_digest: "d".into(),
                resumed_from: Some(ResumedFrom {
                    session: "../../elsewhere/x".into(),
                    seq: 1,
                    hash: "0".into(),
                }),
            })
            .unwrap();
        }
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("not a session id"), "{e}");
    }

    #[test]
    fn unfinished_calls_close_by_what_the_journal_shows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        {
            let j = JsonlJournal::create(&path, "s", SyncPolicy::EveryRecord).unwrap();
            j.append(&start()).unwrap();
            j.append(&Record::UserMessage { text: "go".into() })
                .unwrap();
            let requested = |id: &'static str| RequestedCall {
                id: id.into(),
                name: "run_shell".into(),
                arguments: "{}".into(),
            };
            j.append(&Record::AssistantMessage {
                step: 4,
                content: "".into(),
                tool_calls: vec![requested("a"), requested("b"), requested("c")],
                reasoning: None,
            })
            .unwrap();
            // `a` started, `b` passed no gate, `c` was never even recorded as a call.
            j.append(&call("a")).unwrap();
            j.append(&Record::ToolStarted {
                call_id: "a".into(),
            })
            .unwrap();
            j.append(&call("b")).unwrap();
        }
        let r = load(&path).unwrap();
        let kinds: Vec<(&str, Option<FailureKind>)> = r
            .cut_off
            .iter()
            .map(|r| (r.call_id(), r.failure_kind()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("a", Some(FailureKind::CancelledAfter)),
                ("b", Some(FailureKind::CancelledBefore)),
                ("c", Some(FailureKind::CancelledBefore)),
            ]
        );
        // Each requested call has its result right after the assistant message.
        let tail: Vec<Option<&str>> = r.history[2..]
            .iter()
            .map(|m| m.tool_call_id.as_deref())
            .collect();
        assert_eq!(tail, [Some("a"), Some("b"), Some("c")]);
        assert_eq!(r.link.seq, 6);
        assert_eq!(r.turn_starts, [0]);
    }
}
