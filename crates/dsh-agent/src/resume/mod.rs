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
//! Refused: a session still open in another process (its journal is locked), a crash
//! artefact (no complete first record: there is no session), and a journal whose chain is
//! broken anywhere but a torn last line (which is ignored).
//!
//! The resumed session keeps its workspace: [`Resumed::workspace`] is the one the resumed
//! file records, for the front end to start in (it decides what an explicit `--workspace`
//! or a vanished directory changes).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_core::FrozenResult;
use dsh_core::journal::{Entry, Record, ResumedFrom, read_journal, resolve_blobs};
use dsh_model::{Message, ToolCallRequest};

use crate::sessions::{self, SessionsError};

mod cut_off;

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
        "cannot resume {path}: it is a crash artefact with no session to resume ({what}: its process ended before its first record was complete); `dsh sessions prune` removes it"
    )]
    CrashArtefact {
        path: String,
        what: crate::leftovers::Artefact,
    },
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
        "{path} is not a session under {dir}: copy it there (named by its session id) to resume it"
    )]
    Elsewhere { path: String, dir: String },
    #[error(
        "{path} holds session {session}: a journal must be named by its session id to be resumed"
    )]
    Misnamed { path: String, session: String },
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
    /// The workspace the resumed file's `session_start` records (the newest of the chain:
    /// a resume that moved it on purpose recorded where to).
    pub workspace: Option<PathBuf>,
    /// What the new `session_start` links to: the old file's last intact record.
    pub link: ResumedFrom<'static>,
    /// The main agent's conversation, oldest first, with the cut-off calls' results in place.
    pub history: Vec<Message>,
    /// Where each turn starts in `history`.
    pub turn_starts: Vec<usize>,
    /// The main agent's calls the old process never finished, closed: the new journal's
    /// first records.
    pub cut_off: Vec<Arc<FrozenResult>>,
    /// The sub-agents' calls the old file left unfinished (the process died while a child
    /// ran), closed in the child's name after those; never part of the history.
    pub cut_off_children: Vec<(String, Arc<FrozenResult>)>,
    /// The highest `sub-N` the chain started: the new session's children are numbered after
    /// it, so no two children of one chain share an id.
    pub last_child: u32,
    /// The main agent's last step number, so new steps (and call ids) continue after it.
    pub steps: u32,
    /// How many leading turns are compacted (the last `context_compacted`'s `turns`).
    pub compacted_turns: usize,
    /// Every session of the chain, newest first (the old session first): the history still
    /// names their spilled outputs, which the new session pages back from their spill
    /// directories ([`SessionSettings::earlier_sessions`](crate::SessionSettings)).
    pub chain: Vec<String>,
    /// The last model the chain switched to (`model_changed`), which the new session takes
    /// up again unless the command line names another.
    pub model: Option<ModelSwitch>,
}

/// A `model_changed` record's model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelSwitch {
    pub provider: String,
    pub model: String,
    pub base_url: String,
}

/// Rebuilds the session at `path` for resuming it from `dsh_home`: only a journal in
/// `DSH_HOME/sessions`, named by its session id — the new journal links to it by that id, so
/// the new session can itself be resumed and verified. `point`: the record a `/save` name
/// found ([`crate::sessions::Found`]) — the conversation as it was there, a branch when more
/// followed.
pub fn load_session(
    dsh_home: &Path,
    path: &Path,
    point: Option<u64>,
) -> Result<Resumed, ResumeError> {
    let dir = sessions::sessions_dir(dsh_home);
    let in_dir = path
        .parent()
        .and_then(|p| p.canonicalize().ok())
        .zip(dir.canonicalize().ok())
        .is_some_and(|(a, b)| a == b);
    if !in_dir {
        return Err(ResumeError::Elsewhere {
            path: path.display().to_string(),
            dir: dir.display().to_string(),
        });
    }
    let resumed = load_at(path, point)?;
    if path.file_stem().and_then(|s| s.to_str()) != Some(resumed.session.as_str()) {
        return Err(ResumeError::Misnamed {
            path: path.display().to_string(),
            session: resumed.session,
        });
    }
    Ok(resumed)
}

/// Rebuilds the session at `path`, wherever it is (see [`load_session`]).
pub fn load(path: &Path) -> Result<Resumed, ResumeError> {
    load_at(path, None)
}

/// [`load`] as the conversation stood at record `point` of the file (`None`: its end).
pub fn load_at(path: &Path, point: Option<u64>) -> Result<Resumed, ResumeError> {
    let shown = path.display().to_string();
    if sessions::is_open(path) {
        let id = path
            .file_stem()
            .map_or_else(|| shown.clone(), |s| s.to_string_lossy().into_owned());
        return Err(ResumeError::Open(id));
    }
    if let Ok(Some(what)) = crate::leftovers::crash_artefact(path) {
        return Err(ResumeError::CrashArtefact { path: shown, what });
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
    // One read per file of the chain, newest first, following the links `verify` checked.
    let mut transcripts = Vec::new();
    let mut seen = HashSet::new();
    let mut at = path.to_path_buf();
    // Where the file read next ends: the saved point for the file resumed, then for each
    // older file the record the newer one links to (a branch leaves out what followed).
    let mut cut = point;
    loop {
        let key = at.canonicalize().unwrap_or_else(|_| at.clone());
        if !seen.insert(key) {
            return Err(ResumeError::Unusable {
                path: at.display().to_string(),
                reason: "its resumed_from links form a cycle".to_owned(),
            });
        }
        let mut transcript = read_journal(&at).map_err(|e| ResumeError::Unusable {
            path: at.display().to_string(),
            reason: e.to_string(),
        })?;
        // Arguments stored beside the journal (over 1 MiB) are the model's again in full.
        resolve_blobs(&at, &mut transcript).map_err(|e| ResumeError::Unusable {
            path: at.display().to_string(),
            reason: e.to_string(),
        })?;
        if let Some(end) = cut {
            if !transcript.records.iter().any(|e| e.seq == end) {
                return Err(ResumeError::Unusable {
                    path: at.display().to_string(),
                    reason: format!("the point it is resumed from, record {end}, is not in it"),
                });
            }
            transcript.records.retain(|e| e.seq <= end);
        }
        let older = match transcript.records.first().map(|e| &e.record) {
            Some(Record::SessionStart {
                resumed_from: Some(link),
                ..
            }) => {
                cut = Some(link.seq);
                Some(format!("{}.jsonl", link.session))
            }
            _ => None,
        };
        transcripts.push(transcript);
        match older {
            Some(name) => at = at.parent().unwrap_or(Path::new(".")).join(name),
            None => break,
        }
    }
    let workspace = match transcripts[0].records.first().map(|e| &e.record) {
        Some(Record::SessionStart { workspace, .. }) => Some(workspace.to_path_buf()),
        _ => None,
    };
    let link = transcripts[0]
        .records
        .last()
        .map(|last| ResumedFrom {
            session: last.session.clone().into(),
            seq: last.seq,
            hash: last.hash.clone().into(),
        })
        .ok_or_else(|| ResumeError::Unusable {
            path: shown.clone(),
            reason: "it has no complete record".to_owned(),
        })?;
    let chain: Vec<String> = transcripts
        .iter()
        .filter_map(|t| t.records.first().map(|e| e.session.clone()))
        .collect();
    let entries: Vec<Entry> = transcripts
        .into_iter()
        .rev()
        .flat_map(|t| t.records)
        .collect();
    Ok(Resumed {
        chain,
        workspace,
        ..rebuild(&entries, link).map_err(|reason| ResumeError::Unusable {
            path: shown.clone(),
            reason,
        })?
    })
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
        .find(|p| has_user_message(p))
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

/// The main agent's conversation from a chain's records (their blobs resolved), with the
/// unfinished calls closed.
fn rebuild(entries: &[Entry], link: ResumedFrom<'static>) -> Result<Resumed, String> {
    let mut history: Vec<Message> = Vec::new();
    let mut turn_starts = Vec::new();
    let mut steps = 0;
    // Calls the last assistant message asked for that have no result yet, in order: only
    // their results are the model's (a nested call's, or a `dsh batch` session's, never were).
    let mut open: Vec<(String, String)> = Vec::new();
    let mut started: HashSet<String> = HashSet::new();
    let mut attached: Vec<String> = Vec::new();
    let flush_attached = |history: &mut Vec<Message>, attached: &mut Vec<String>| {
        if !attached.is_empty() {
            history.push(Message::user(attached.join("\n")));
            attached.clear();
        }
    };
    // Calls submitted by other calls: their results were never the model's to see.
    let mut nested: HashSet<String> = HashSet::new();
    let mut compacted_turns = 0;
    let mut model = None;
    for e in entries.iter().filter(|e| e.agent.is_none()) {
        match &e.record {
            Record::ModelChanged {
                provider,
                model: name,
                base_url,
            } => {
                model = Some(ModelSwitch {
                    provider: provider.to_string(),
                    model: name.to_string(),
                    base_url: base_url.to_string(),
                });
            }
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
                let calls = tool_calls
                    .iter()
                    .map(|c| {
                        let arguments = c.arguments.inline().ok_or_else(|| {
                            format!("record {} names a blob that was not read", e.seq)
                        })?;
                        Ok(ToolCallRequest {
                            id: c.id.to_string(),
                            name: c.name.to_string(),
                            arguments: arguments.to_owned(),
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                open = calls
                    .iter()
                    .map(|c| (c.id.clone(), c.name.clone()))
                    .collect();
                started.clear();
                let mut m = Message::assistant(content.as_ref(), calls);
                m.reasoning = reasoning.as_ref().map(ToString::to_string);
                history.push(m);
            }
            Record::ToolCall {
                call_id,
                parent: Some(_),
                ..
            } => {
                nested.insert(call_id.to_string());
            }
            Record::ToolStarted { call_id } => {
                started.insert(call_id.to_string());
            }
            Record::ToolResult(r) => {
                let id = r.call_id();
                let asked = open.iter().position(|(open_id, _)| open_id == id);
                let Some(i) = asked.filter(|_| !nested.contains(id)) else {
                    continue;
                };
                open.remove(i);
                history.push(Message::tool(id, r.content()));
            }
            Record::ContextAttached(a) => attached.push(format!("[from {}] {}", a.policy, a.text)),
            Record::HistoryCleared {} => {
                history.clear();
                turn_starts.clear();
                attached.clear();
                open.clear();
                compacted_turns = 0;
            }
            Record::ContextCompacted { turns, summary, .. } => {
                flush_attached(&mut history, &mut attached);
                let turns = usize::try_from(*turns).unwrap_or(usize::MAX);
                // A journal from before summaries were bounded may hold one far larger than
                // what it replaced: held to today's bound, or left out (the turns stay whole).
                if let Ok(summary) =
                    crate::context::bound_summary(summary, &history, &turn_starts, turns)
                {
                    crate::context::apply_compaction(
                        &mut history,
                        &mut turn_starts,
                        turns,
                        &summary,
                    );
                    compacted_turns = turns;
                }
            }
            _ => {}
        }
    }
    let cut_off: Vec<Arc<FrozenResult>> = open
        .iter()
        .map(|(id, name)| Arc::new(FrozenResult::cut_off(id, name, started.contains(id))))
        .collect();
    let cut_off_children = cut_off::unfinished_calls(entries, &link.session);
    let last_child = entries
        .iter()
        .filter_map(|e| match &e.record {
            Record::SubAgentStart { child, .. } => crate::events::child_number(child),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    for r in &cut_off {
        history.push(Message::tool(r.call_id(), r.content()));
    }
    flush_attached(&mut history, &mut attached);
    Ok(Resumed {
        session: link.session.to_string(),
        workspace: None,
        link,
        history,
        turn_starts,
        cut_off,
        cut_off_children,
        last_child,
        steps,
        compacted_turns,
        chain: Vec::new(),
        model,
    })
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
            mode: None,
            tools_mode: None,
            client: None,
        }
    }

    /// The assistant message of `step` asking for `calls` (id, tool).
    fn asked(step: u32, calls: &[(&str, &str)]) -> Record<'static> {
        Record::AssistantMessage {
            step,
            content: "".into(),
            tool_calls: calls
                .iter()
                .map(|(id, name)| RequestedCall {
                    id: (*id).to_owned().into(),
                    name: (*name).to_owned().into(),
                    arguments: "{}".into(),
                })
                .collect(),
            reasoning: None,
        }
    }

    fn call(id: &str) -> Record<'static> {
        Record::ToolCall {
            call_id: id.to_owned().into(),
            name: "run_shell".into(),
            args: json!({"command": "true"}).into(),
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
            j.append(&asked(1, &[("a", "run_code")])).unwrap();
            j.append(&call("a")).unwrap();
            let nested = Record::ToolCall {
                call_id: "a.0".into(),
                name: "read_file".into(),
                args: json!({}).into(),
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

    /// A journal an older dsh wrote with a 2 MB summary (issue 21): resume holds it to
    /// today's bound instead of sending it with every later request.
    #[test]
    fn an_oversized_journaled_summary_is_held_to_the_bound_on_resume() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        {
            let j = JsonlJournal::create(&path, "s", SyncPolicy::EveryRecord).unwrap();
            j.append(&start()).unwrap();
            for (prompt, answer) in [("go", "x".repeat(40_000)), ("next", "ok".to_owned())] {
                j.append(&Record::UserMessage {
                    text: prompt.into(),
                })
                .unwrap();
                j.append(&Record::AssistantMessage {
                    step: 1,
                    content: answer.into(),
                    tool_calls: Vec::new(),
                    reasoning: None,
                })
                .unwrap();
            }
            j.append(&Record::ContextCompacted {
                replaced: Vec::new(),
                turns: 1,
                summary: "s".repeat(2_000_000).into(),
                tokens_before: 10_000,
                tokens_after: 500_000,
            })
            .unwrap();
        }
        let r = load(&path).unwrap();
        let chars: usize = r.history.iter().map(|m| m.content.chars().count()).sum();
        assert!(chars < 6_000, "{chars} characters of history");
        assert_eq!(r.compacted_turns, 1);
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
                mode: None,
                tools_mode: None,
                client: None,
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
            let shell = "run_shell";
            j.append(&asked(4, &[("a", shell), ("b", shell), ("c", shell)]))
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

    #[test]
    fn a_childs_unfinished_calls_close_in_its_name_and_children_number_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        {
            let j = JsonlJournal::create(&path, "s", SyncPolicy::EveryRecord).unwrap();
            j.append(&start()).unwrap();
            j.append(&Record::UserMessage { text: "go".into() })
                .unwrap();
            j.append(&asked(1, &[("m1", "call_sub_agent")])).unwrap();
            j.append(&call("m1")).unwrap();
            j.append(&Record::ToolStarted {
                call_id: "m1".into(),
            })
            .unwrap();
            j.append(&Record::SubAgentStart {
                child: "sub-3".into(),
                profile: "shell".into(),
                call_id: "m1".into(),
                task: "t".into(),
            })
            .unwrap();
            // The child's `m1` is its own: it finished; its `c2` was running.
            for (id, started) in [("m1", true), ("c2", true)] {
                let child = Record::ToolCall {
                    call_id: id.to_owned().into(),
                    name: "run_shell".into(),
                    args: json!({}).into(),
                    source: CallSource::SubAgent,
                    parent: Some("m1".into()),
                    step: 1,
                };
                j.append_as(Some("sub-3"), &child).unwrap();
                if started {
                    j.append_as(
                        Some("sub-3"),
                        &Record::ToolStarted {
                            call_id: id.to_owned().into(),
                        },
                    )
                    .unwrap();
                }
                if id == "m1" {
                    let done = dsh_core::FrozenResult::cut_off(id, "run_shell", true);
                    j.append_as(
                        Some("sub-3"),
                        &Record::ToolResult(dsh_core::journal::Held::Owned(done)),
                    )
                    .unwrap();
                }
            }
        }
        let r = load(&path).unwrap();
        // The main agent's call closes for the model; the child's, in the child's name.
        let main: Vec<&str> = r.cut_off.iter().map(|c| c.call_id()).collect();
        assert_eq!(main, ["m1"]);
        let children: Vec<(&str, &str, Option<FailureKind>)> = r
            .cut_off_children
            .iter()
            .map(|(a, c)| (a.as_str(), c.call_id(), c.failure_kind()))
            .collect();
        assert_eq!(
            children,
            [("sub-3", "c2", Some(FailureKind::CancelledAfter))]
        );
        assert_eq!(r.last_child, 3);
    }
}
