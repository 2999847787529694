//! The redaction disposition through a real pipeline: what the result, the journal and the
//! spill store hold afterwards, and what it never changes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_core::journal::MemoryJournal;
use dsh_core::{
    CancellationToken, FailureKind, FrozenResult, Gate, Pipeline, Registry, SpillStore, ToolCall,
    ToolError, ToolOutput,
};
use dsh_policy::{Redact, Spill};
use dsh_testkit::FnTool;
use serde_json::json;

const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
const KEY: &str = "local-key-Zq8XvT41mNw";

/// `leak` prints both secrets (content and value), `fail` fails quoting them, `clean` prints
/// nothing secret, `big` prints `n` characters with the secrets in the middle.
fn tools() -> Registry {
    let mut r = Registry::new();
    let open = |s: dsh_core::ToolSpec| s.read_only(true).output_schema(json!({"type": "object"}));
    let leak = FnTool::new("leak", |_, _| async {
        Ok(ToolOutput::new(
            format!("token={TOKEN}\nkey={KEY}\n"),
            json!({"stdout": format!("token={TOKEN}"), "env": [{"OPENAI_API_KEY": KEY}]}),
        ))
    })
    .spec(open);
    let fail = FnTool::new("fail", |_, _| async {
        Err(ToolError::failed(format!("push refused for {TOKEN}")))
    })
    .spec(open);
    let clean = FnTool::new("clean", |_, _| async {
        Ok(ToolOutput::new("commit 9a71a7f3c2d4e5f6", json!({"n": 1})))
    })
    .spec(open);
    let big = FnTool::new("big", |args, _| async move {
        let n = args["n"].as_u64().unwrap() as usize;
        let half = "x".repeat(n / 2);
        Ok(ToolOutput::new(
            format!("{half}\n{TOKEN} {KEY}\n{half}"),
            json!({"n": 1}),
        ))
    })
    .spec(open);
    for t in [leak, fail, clean, big] {
        r.register(t).unwrap();
    }
    r
}

struct World {
    pipeline: Arc<Pipeline>,
    journal: Arc<MemoryJournal>,
    _spill_dir: tempfile::TempDir,
    spill: Arc<SpillStore>,
}

/// Redaction, then spill, the store scrubbed by the same redactor (as a session has them).
fn world() -> World {
    world_with(true, true)
}

/// `scrub`: the spill store passes what it saves through the redactor; `redact_first`:
/// redaction is registered before the spill.
fn world_with(scrub: bool, redact_first: bool) -> World {
    let dir = tempfile::tempdir().unwrap();
    let redact = Redact::new([("OPENAI_API_KEY".to_owned(), KEY.to_owned())]);
    let mut store = SpillStore::new(dir.path().join("s"));
    if scrub {
        store = store.with_scrub(redact.scrubber());
    }
    let spill = Arc::new(store);
    let journal = Arc::new(MemoryJournal::new("t"));
    let builder = Pipeline::builder(tools(), journal.clone());
    let pipeline = if redact_first {
        builder
            .disposition(redact)
            .disposition(Spill::new(spill.clone(), 2_000))
    } else {
        builder
            .disposition(Spill::new(spill.clone(), 2_000))
            .disposition(redact)
    }
    .build();
    World {
        pipeline,
        journal,
        _spill_dir: dir,
        spill,
    }
}

async fn run(p: &Pipeline, name: &str, args: serde_json::Value) -> Arc<FrozenResult> {
    p.run_batch(
        vec![ToolCall::new("c1", name, args)],
        &CancellationToken::new(),
    )
    .await
    .unwrap()
    .results
    .remove(0)
}

fn assert_secret_free(what: &str, text: &str) {
    for secret in [TOKEN, KEY, "ghp_0123456789"] {
        assert!(!text.contains(secret), "{what} holds {secret:?}: {text}");
    }
}

#[tokio::test]
async fn content_value_and_journal_hold_markers_not_secrets() {
    let w = world();
    let r = run(&w.pipeline, "leak", json!({})).await;
    assert!(r.ok(), "redaction never changes ok: {r:?}");
    assert_eq!(
        r.content(),
        "token=[redacted: GitHub token]\nkey=[redacted: OPENAI_API_KEY]\n"
    );
    assert_eq!(
        r.value().unwrap(),
        &json!({"stdout": "token=[redacted: GitHub token]",
                "env": [{"OPENAI_API_KEY": "[redacted: OPENAI_API_KEY]"}]})
    );
    // Who let the call run is still named: redaction rewrites, it does not decide.
    assert_ne!(r.decided_by().policy.as_deref(), Some("redact"));
    assert_ne!(r.decided_by().gate, Gate::Disposition);
    assert_secret_free("the result", &r.to_json());
    assert_secret_free("the journal", &w.journal.lines().join("\n"));
}

#[tokio::test]
async fn a_failures_reason_is_redacted_and_it_stays_a_failure() {
    let w = world();
    let r = run(&w.pipeline, "fail", json!({})).await;
    assert!(!r.ok());
    assert_eq!(r.failure_kind(), Some(FailureKind::ToolError));
    assert_eq!(r.decided_by().gate, Gate::Execute);
    assert!(
        r.decided_by()
            .reason
            .contains("push refused for [redacted: GitHub token]"),
        "{:?}",
        r.decided_by()
    );
    assert!(r.content().contains("[redacted: GitHub token]"), "{r:?}");
    assert_secret_free("the result", &r.to_json());
    assert_secret_free("the journal", &w.journal.lines().join("\n"));
}

#[tokio::test]
async fn a_clean_result_passes_unchanged() {
    let w = world();
    let r = run(&w.pipeline, "clean", json!({})).await;
    let bare = Pipeline::builder(tools(), Arc::new(MemoryJournal::new("t"))).build();
    let unredacted = run(&bare, "clean", json!({})).await;
    assert_eq!(r.content(), unredacted.content());
    assert_eq!(r.value(), unredacted.value());
    assert_eq!(r.decided_by(), unredacted.decided_by());
}

/// Either of the two keeps secrets out of the spill store — redaction registered before the
/// spill, or a store that scrubs what it saves (what a tool spills on its own before gate 5
/// meets only the second): the spilled file and every page read back hold the markers.
#[tokio::test]
async fn a_spilled_output_is_redacted_before_it_is_saved() {
    for (scrub, redact_first) in [(false, true), (true, false)] {
        spilled_output_is_redacted(world_with(scrub, redact_first)).await;
    }
}

async fn spilled_output_is_redacted(w: World) {
    let r = run(&w.pipeline, "big", json!({"n": 50_000})).await;
    assert!(r.ok());
    let id = r.content().split('`').nth(1).expect("spilled: a locator");
    let page = w.spill.read(id, 0, 100_000).unwrap();
    assert!(
        page.text
            .contains("[redacted: GitHub token] [redacted: OPENAI_API_KEY]"),
        "{}",
        &page.text[24_990..25_080]
    );
    assert_secret_free("the spilled page", &page.text);
    for file in std::fs::read_dir(w.spill.dir()).unwrap() {
        let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
        assert_secret_free("a spill file", &text);
    }
    assert_secret_free("the journal", &w.journal.lines().join("\n"));
}
