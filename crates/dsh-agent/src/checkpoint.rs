//! Checkpoints for `/undo` (DESIGN §2): which files each turn changed through the file seam.
//!
//! The seam keeps each change's pre-image and the pipeline journals a `checkpoint` record per
//! change; this log sees every frozen result (an observer of the pipeline) and files the
//! changes made while a turn runs — by the main agent, its sub-agents or the turn's verify
//! round — under that turn. Changes made between turns (the person's own calls, an undo
//! itself) belong to no turn.
//!
//! `/undo N` takes the last N turns that changed files and plans, for each file they changed,
//! one `restore_file` call: back to the content before the first of those changes, only if
//! the file still holds what the last of them left. A file changed in between by something
//! else (a command, an editor), so that one change's result is not the next one's start, is
//! named and left alone. What commands changed is not covered: nothing records it.
//!
//! A restore that was refused or failed (not one left alone) is put back in the log, so a
//! later `/undo` tries it again. The log lives in this process: a resumed session's earlier
//! turns are not in it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use dsh_core::{FileChange, FrozenResult, Observer};

/// The files one turn changed, in order.
#[derive(Clone, Debug, Default)]
pub struct TurnChanges {
    /// The turn's prompt.
    pub prompt: String,
    pub changes: Vec<FileChange>,
}

#[derive(Debug, Default)]
struct Log {
    /// Whether a turn is running (its changes go to the last entry).
    open: bool,
    turns: Vec<TurnChanges>,
}

/// The session's checkpoint log.
#[derive(Debug, Default)]
pub(crate) struct Checkpoints {
    log: Mutex<Log>,
}

impl Observer for Checkpoints {
    fn observe(&self, result: &Arc<FrozenResult>) {
        if result.changes().is_empty() {
            return;
        }
        let mut log = lock(&self.log);
        if log.open
            && let Some(turn) = log.turns.last_mut()
        {
            turn.changes.extend(result.changes().iter().cloned());
        }
    }
}

impl Checkpoints {
    /// A turn on `prompt` starts: what changes from now on is its.
    pub(crate) fn begin(&self, prompt: &str) {
        let mut log = lock(&self.log);
        log.turns.push(TurnChanges {
            prompt: prompt.to_owned(),
            changes: Vec::new(),
        });
        log.open = true;
    }

    /// The turn ended.
    pub(crate) fn end(&self) {
        let mut log = lock(&self.log);
        log.open = false;
        // A turn that changed no file is nothing to undo.
        if log.turns.last().is_some_and(|t| t.changes.is_empty()) {
            log.turns.pop();
        }
    }

    /// Takes the last `n` turns that changed files out of the log, oldest first.
    pub(crate) fn take_last(&self, n: usize) -> Vec<TurnChanges> {
        let mut log = lock(&self.log);
        let keep = log.turns.len().saturating_sub(n);
        log.turns.split_off(keep)
    }

    /// Puts back, as the last turns, what [`Checkpoints::take_last`] took and could not be
    /// undone (each turn's changes to the files `left`), so a later `/undo` tries it again.
    pub(crate) fn put_back(&self, taken: &[TurnChanges], left: &[&str]) {
        let mut log = lock(&self.log);
        for turn in taken {
            let changes: Vec<FileChange> = turn
                .changes
                .iter()
                .filter(|c| left.contains(&c.path.as_str()))
                .cloned()
                .collect();
            if !changes.is_empty() {
                log.turns.push(TurnChanges {
                    prompt: turn.prompt.clone(),
                    changes,
                });
            }
        }
    }
}

/// What an undo does to one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Put it back: `to` the pre-image's digest (`None`: remove it), if it holds `expect`.
    Restore {
        path: String,
        to: Option<String>,
        expect: String,
    },
    /// Left alone, and why.
    LeftAlone { path: String, why: String },
}

/// For each file `turns` changed (oldest turn first), in the order first changed: the step
/// that undoes all of their changes to it.
pub(crate) fn plan(turns: &[TurnChanges]) -> Vec<Step> {
    let mut order: Vec<&str> = Vec::new();
    let mut by_path: BTreeMap<&str, Vec<&FileChange>> = BTreeMap::new();
    for change in turns.iter().flat_map(|t| &t.changes) {
        let entry = by_path.entry(change.path.as_str()).or_default();
        if entry.is_empty() {
            order.push(change.path.as_str());
        }
        entry.push(change);
    }
    let mut steps = Vec::new();
    for path in order {
        let changes = &by_path[path];
        let (first, last) = (changes[0], changes[changes.len() - 1]);
        let unbroken = changes.windows(2).all(|w| w[0].after == w[1].before);
        let left = |why: &str| Step::LeftAlone {
            path: path.to_owned(),
            why: why.to_owned(),
        };
        if !unbroken {
            steps.push(left(
                "it was changed by something else between the changes being undone (a command?)",
            ));
            continue;
        }
        let Some(expect) = last.after.clone() else {
            steps.push(left("the last change removed it"));
            continue;
        };
        if first.before.as_deref() == Some(expect.as_str()) {
            // Changed and changed back: nothing to undo.
            continue;
        }
        steps.push(Step::Restore {
            path: path.to_owned(),
            to: first.before.clone(),
            expect,
        });
    }
    steps
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl crate::Session {
    /// The content a file had before a change, by the digest its `checkpoint` record (or
    /// a result's [`FileChange::before`]) names: what a front end shows as a diff's old
    /// side. `None` when the pre-image is not kept (or no longer matches its digest).
    pub fn pre_image(&self, digest: &str) -> Option<Vec<u8>> {
        dsh_tools::PreImages::new(self.settings.dsh_home.join("checkpoints").join(&self.id))
            .get(digest)
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &str, before: Option<&str>, after: &str) -> FileChange {
        FileChange {
            path: path.into(),
            before: before.map(Into::into),
            after: Some(after.into()),
        }
    }

    fn turn(changes: Vec<FileChange>) -> TurnChanges {
        TurnChanges {
            prompt: "p".into(),
            changes,
        }
    }

    #[test]
    fn a_file_goes_back_to_before_its_first_change_if_it_holds_its_last() {
        let steps = plan(&[
            turn(vec![
                change("a", Some("A0"), "A1"),
                change("new", None, "N1"),
            ]),
            turn(vec![change("a", Some("A1"), "A2")]),
        ]);
        assert_eq!(
            steps,
            vec![
                Step::Restore {
                    path: "a".into(),
                    to: Some("A0".into()),
                    expect: "A2".into()
                },
                Step::Restore {
                    path: "new".into(),
                    to: None,
                    expect: "N1".into()
                },
            ]
        );
    }

    #[test]
    fn a_chain_broken_by_another_writer_is_left_alone_and_a_round_trip_is_nothing() {
        let steps = plan(&[turn(vec![
            change("a", Some("A0"), "A1"),
            change("a", Some("X"), "A2"),
            change("b", Some("B0"), "B1"),
            change("b", Some("B1"), "B0"),
        ])]);
        assert_eq!(steps.len(), 1);
        assert!(matches!(&steps[0], Step::LeftAlone { path, .. } if path == "a"));
    }

    #[test]
    fn only_changes_made_while_a_turn_runs_are_filed_and_empty_turns_are_dropped() {
        let log = Checkpoints::default();
        log.begin("one");
        log.end();
        log.begin("two");
        log.end();
        assert!(
            log.take_last(5).is_empty(),
            "turns without changes are no undo steps"
        );
    }
}
