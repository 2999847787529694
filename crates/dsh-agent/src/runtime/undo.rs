//! `/undo N`: the file changes of the last N turns that changed files, put back through the
//! pipeline as the person's own `restore_file` calls (typing `/undo` is their approval; deny
//! rules, the protected paths and confinement still hold), then told to the model, whose
//! picture of those files is now out of date.

use dsh_core::{CallSource, CancellationToken, FailureKind, ToolCall};
use serde_json::json;

use crate::Agent;
use crate::checkpoint::{self, Step};

/// What `/undo` did.
#[derive(Clone, Debug, Default)]
pub struct UndoReport {
    /// The prompts of the turns undone, oldest first (empty: nothing to undo).
    pub turns: Vec<String>,
    /// Each file those turns changed, and what became of it.
    pub files: Vec<(String, Undone)>,
    /// The model could not be told (the journal refused the note).
    pub note_error: Option<String>,
}

/// What became of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undone {
    /// Put back as it was before the turns.
    Restored,
    /// The turns created it; it is removed.
    Removed,
    /// Changed since by something else: left as it is.
    LeftAlone(String),
    /// The restore was refused or failed (its call's line says why).
    NotRun(String),
}

pub(super) async fn undo(
    agent: &mut Agent,
    turns: usize,
    source: CallSource,
    cancel: &CancellationToken,
) -> Result<UndoReport, String> {
    let session = agent.session().clone();
    let taken = session.checkpoints.take_last(turns.max(1));
    let mut report = UndoReport {
        turns: taken.iter().map(|t| t.prompt.clone()).collect(),
        ..UndoReport::default()
    };
    let id = crate::new_session_id();
    let mut calls = Vec::new();
    let mut paths = Vec::new();
    for step in checkpoint::plan(&taken) {
        match step {
            Step::Restore { path, to, expect } => {
                calls.push(ToolCall::new(
                    format!("undo-{id}-{}", calls.len()),
                    dsh_tools::RESTORE_FILE,
                    json!({"path": path, "to": to, "expect": expect}),
                ));
                paths.push(path);
            }
            Step::LeftAlone { path, why } => report.files.push((path, Undone::LeftAlone(why))),
        }
    }
    if calls.is_empty() {
        return Ok(report);
    }
    let first_id = calls[0].id().to_owned();
    let outcome = match session.run_own_calls(calls, source, cancel).await {
        Ok(outcome) => outcome,
        Err(e) => {
            let all: Vec<&str> = paths.iter().map(String::as_str).collect();
            session.checkpoints.put_back(&taken, &all);
            return Err(e.to_string());
        }
    };
    for (path, result) in paths.into_iter().zip(&outcome.results) {
        let undone = match result.failure_kind() {
            None if result.value().and_then(|v| v["removed"].as_bool()) == Some(true) => {
                Undone::Removed
            }
            None => Undone::Restored,
            Some(FailureKind::StaleVersion) => {
                Undone::LeftAlone("it was changed since by something else".to_owned())
            }
            Some(_) => Undone::NotRun(result.decided_by().reason.clone()),
        };
        report.files.push((path, undone));
    }
    // What was refused or failed stays to undo; what was left alone does not.
    let not_run: Vec<&str> = report
        .files
        .iter()
        .filter(|(_, u)| matches!(u, Undone::NotRun(_)))
        .map(|(p, _)| p.as_str())
        .collect();
    session.checkpoints.put_back(&taken, &not_run);
    if let Some(note) = note(&report) {
        report.note_error = agent
            .attach_note(&first_id, &note)
            .err()
            .map(|e| e.to_string());
    }
    Ok(report)
}

/// What the model is told, when anything was put back.
fn note(report: &UndoReport) -> Option<String> {
    let mut back = Vec::new();
    let mut alone = Vec::new();
    for (path, undone) in &report.files {
        match undone {
            Undone::Restored => back.push(format!("restored {path}")),
            Undone::Removed => back.push(format!("removed {path}")),
            Undone::LeftAlone(_) | Undone::NotRun(_) => alone.push(path.as_str()),
        }
    }
    if back.is_empty() {
        return None;
    }
    let n = report.turns.len();
    let turns = if n == 1 {
        "the last turn".to_owned()
    } else {
        format!("the last {n} turns")
    };
    let mut text = format!(
        "I undid the file changes of {turns} (/undo): {}.",
        back.join(", ")
    );
    if !alone.is_empty() {
        text.push_str(&format!(" Left as they are: {}.", alone.join(", ")));
    }
    text.push_str(" Those files are not what you last saw: read them again before changing them.");
    Some(text)
}
