//! Attacks on checkpoints (issue 24, stage d) at the pipeline: a call that changed a file
//! and then failed after the change — its output does not match its schema, or a
//! disposition crashes on its result — must still journal its `checkpoint` and hand the
//! change to the observers (`/undo`'s log), since the file changed either way. Only the
//! pipeline can show the second: no disposition the binary registers can be made to panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_core::journal::MemoryJournal;
use dsh_core::{
    Action, CancellationToken, Candidate, Disposition, FailureKind, FileChange, FrozenResult,
    Pipeline, Registry, ToolCall, ToolOutput, async_trait,
};
use dsh_testkit::FnTool;
use serde_json::{Value, json};

fn change() -> FileChange {
    FileChange {
        path: "notes.txt".into(),
        before: Some("a".repeat(64)),
        after: Some("b".repeat(64)),
    }
}

/// A tool that changed `notes.txt` and returns `value` as its output.
fn changing(value: Value) -> FnTool {
    FnTool::new("changer", move |_, _| {
        let value = value.clone();
        async move { Ok(ToolOutput::new("changed notes.txt", value).with_change(change())) }
    })
    .spec(|s| s.read_only(true))
}

struct Crashing;

#[async_trait]
impl Disposition for Crashing {
    fn name(&self) -> &str {
        "crashing"
    }
    async fn dispose(&self, _: &ToolCall, _: &Candidate) -> Action {
        panic!("redactor bug")
    }
}

async fn run(tool: FnTool, crash: bool) -> (Arc<FrozenResult>, Vec<Value>) {
    let mut registry = Registry::new();
    registry.register(tool).unwrap();
    let journal = Arc::new(MemoryJournal::new("test"));
    let mut b = Pipeline::builder(registry, journal.clone());
    if crash {
        b = b.disposition(Crashing);
    }
    let p = b.build();
    let r = p
        .run_batch(
            vec![ToolCall::new("1", "changer", json!({}))],
            &CancellationToken::new(),
        )
        .await
        .unwrap()
        .results
        .remove(0);
    let lines = journal
        .lines()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (r, lines)
}

fn checkpoints(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|r| r["kind"] == "checkpoint").collect()
}

/// Invalid output after the change: the result fails `invalid_output`, and the change is
/// still journaled (before the result) and reported.
#[tokio::test]
async fn a_change_whose_output_is_invalid_keeps_its_checkpoint() {
    let (r, lines) = run(changing(json!({"not": "the schema"})), false).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::InvalidOutput));
    assert_eq!(r.changes(), [change()]);
    let cps = checkpoints(&lines);
    assert_eq!(cps.len(), 1, "{lines:#?}");
    assert_eq!(cps[0]["path"], "notes.txt");
    let at = |kind: &str| lines.iter().position(|r| r["kind"] == kind).unwrap();
    assert!(at("checkpoint") < at("tool_result"));
}

/// A disposition that crashes on the result of a change withholds the result — and must not
/// withhold the change: the file changed, so `/undo` must know it.
#[tokio::test]
async fn a_change_whose_disposition_crashes_keeps_its_checkpoint() {
    let (r, lines) = run(changing(json!({"n": 1})), true).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Crashed));
    assert_eq!(r.changes(), [change()], "the change reaches the observers");
    assert_eq!(checkpoints(&lines).len(), 1, "{lines:#?}");
}
