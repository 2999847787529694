//! A listener or guard that could not decide because of an OS error on the way
//! (`Vote::failed`, `Denial::failed`; issue 21 item 4): the call does not run, nobody is
//! asked, and its result is `tool_error` naming the error at the gate that met it — never
//! `denied` (DESIGN §4). A real denial by another listener or guard is named before it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_core::journal::MemoryJournal;
use dsh_core::{
    ApprovalOutcome, CancellationToken, Denial, FailureKind, FrozenResult, Gate, Guard, Pipeline,
    PipelineBuilder, PolicyContext, Registry, Tier, ToolCall, Vote,
};
use dsh_testkit::{FnPolicy, FnTool, ScriptedApprover, ok_output};
use serde_json::json;

const EMFILE: &str = "`src`: Too many open files (os error 24)";

fn setup() -> (PipelineBuilder, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let tool = FnTool::new("t", move |_, _| {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(ok_output(1))
        }
    });
    let mut registry = Registry::new();
    registry.register(tool).unwrap();
    let journal = Arc::new(MemoryJournal::new("test"));
    (Pipeline::builder(registry, journal), runs)
}

async fn run_one(p: &Pipeline) -> Arc<FrozenResult> {
    p.run_batch(
        vec![ToolCall::new("1", "t", json!({}))],
        &CancellationToken::new(),
    )
    .await
    .unwrap()
    .results
    .remove(0)
}

fn voter(name: &str, vote: Vote) -> FnPolicy {
    FnPolicy::new(name, move |_, _| vote.clone())
}

struct Fixed(&'static str, Option<Denial>);

impl Guard for Fixed {
    fn name(&self) -> &str {
        self.0
    }
    fn refuses(&self, _: &ToolCall, _: &PolicyContext<'_>) -> Option<Denial> {
        self.1.clone()
    }
}

#[tokio::test]
async fn a_failed_vote_refuses_the_call_as_a_tool_error_not_a_denial() {
    let (b, runs) = setup();
    let approver = ScriptedApprover::answering(ApprovalOutcome::AllowedOnce);
    let p = b
        .pre_policy(voter("yes", Vote::allow(Tier::Rule, "fine")))
        .pre_policy(voter("asks", Vote::ask(Tier::Rule, "ask a person")))
        .pre_policy(voter("confinement", Vote::failed(EMFILE)))
        .approver(approver.clone())
        .build();
    let r = run_one(&p).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::ToolError));
    assert_eq!(r.decided_by().gate, Gate::PrePolicy);
    assert_eq!(r.decided_by().policy.as_deref(), Some("confinement"));
    assert_eq!(r.decided_by().reason, EMFILE);
    assert_eq!(r.content(), EMFILE, "not worded as a denial");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(approver.asked().is_empty(), "nobody is asked about it");
}

#[tokio::test]
async fn a_real_denial_is_named_before_a_failed_vote() {
    let (b, _) = setup();
    let p = b
        .pre_policy(voter("confinement", Vote::failed(EMFILE)))
        .pre_policy(voter("rules", Vote::deny(Tier::Rule, "deny rule `t`")))
        .build();
    let r = run_one(&p).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Denied));
    assert_eq!(r.decided_by().policy.as_deref(), Some("rules"));
}

#[tokio::test]
async fn a_failed_guard_refuses_as_a_tool_error_and_a_real_guard_denial_wins() {
    let (b, runs) = setup();
    let p = b
        .pre_policy(voter("yes", Vote::allow(Tier::Rule, "fine")))
        .guard(Fixed("confinement", Some(Denial::failed(EMFILE))))
        .guard(Fixed("quiet", None))
        .build();
    let r = run_one(&p).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::ToolError));
    assert_eq!(r.decided_by().gate, Gate::Guard);
    assert_eq!(r.decided_by().policy.as_deref(), Some("confinement"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    let (b, _) = setup();
    let p = b
        .pre_policy(voter("yes", Vote::allow(Tier::Rule, "fine")))
        .guard(Fixed("confinement", Some(Denial::failed(EMFILE))))
        .guard(Fixed(
            "red-line",
            Some(Denial::new("never touch production")),
        ))
        .build();
    let r = run_one(&p).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Denied));
    assert_eq!(r.decided_by().policy.as_deref(), Some("red-line"));
}
