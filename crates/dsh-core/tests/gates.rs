//! Gates 1–7 through the public API: each test names the rule it proves (SPEC P2–P9, P12).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_core::journal::MemoryJournal;
use dsh_core::{
    Action, ApprovalOutcome, ApprovalRequest, Approver, CancellationToken, Candidate, Decision,
    Denial, Disposition, ExecContext, FailureKind, Gate, Guard, Next, PipelineBuilder,
    PipelineConfig, PolicyContext, RegisterError, Registry, Retry, Tier, Timeout, Tool, ToolCall,
    ToolError, ToolOutput, ToolSpec, Vote, Wrapper, async_trait,
};
use dsh_core::{FrozenResult, Pipeline};
use dsh_testkit::{FnPolicy, FnTool, Recorder, ScriptedApprover, kinds, ok_output};
use serde_json::{Value, json};

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall::new(id, name, json!({}))
}

fn counted(name: &str, runs: &Arc<AtomicUsize>) -> FnTool {
    let runs = runs.clone();
    FnTool::new(name, move |_, _| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(ok_output(1))
        }
    })
}

fn read_only(tool: FnTool) -> FnTool {
    tool.spec(|s| s.read_only(true))
}

fn builder(tools: Vec<FnTool>) -> (PipelineBuilder, Arc<MemoryJournal>) {
    let mut registry = Registry::new();
    for t in tools {
        registry.register(t).unwrap();
    }
    let journal = Arc::new(MemoryJournal::new("test"));
    (Pipeline::builder(registry, journal.clone()), journal)
}

async fn run(p: &Pipeline, calls: Vec<ToolCall>) -> Vec<Arc<FrozenResult>> {
    p.run_batch(calls, &CancellationToken::new())
        .await
        .unwrap()
        .results
}

async fn run_one(p: &Pipeline, c: ToolCall) -> Arc<FrozenResult> {
    run(p, vec![c]).await.remove(0)
}

fn voter(name: &str, vote: Vote) -> FnPolicy {
    FnPolicy::new(name, move |_, _| vote.clone())
}

// ---------------------------------------------------------------- registry (P9)

#[test]
fn registration_refuses_a_tool_without_output_schema() {
    let mut r = Registry::new();
    let tool = FnTool::new("t", |_, _| async { Ok(ok_output(1)) }).spec(|mut s| {
        s.output_schema = None;
        s
    });
    assert_eq!(
        r.register(tool),
        Err(RegisterError::MissingOutputSchema("t".to_owned()))
    );
    assert!(r.is_empty());
}

#[test]
fn registration_refuses_a_schema_that_declares_nothing() {
    let mut r = Registry::new();
    let tool =
        FnTool::new("t", |_, _| async { Ok(ok_output(1)) }).spec(|s| s.output_schema(json!({})));
    assert!(matches!(
        r.register(tool),
        Err(RegisterError::BadSchema {
            which: "output",
            ..
        })
    ));
    let tool =
        FnTool::new("t", |_, _| async { Ok(ok_output(1)) }).spec(|s| s.output_schema(json!(true)));
    assert!(matches!(
        r.register(tool),
        Err(RegisterError::BadSchema { .. })
    ));
}

#[test]
fn registration_refuses_bad_names_and_duplicates() {
    let mut r = Registry::new();
    let ok = || FnTool::new("read_file", |_, _| async { Ok(ok_output(1)) });
    r.register(ok()).unwrap();
    assert_eq!(
        r.register(ok()),
        Err(RegisterError::Duplicate("read_file".to_owned()))
    );
    let bad = FnTool::new("rm -rf", |_, _| async { Ok(ok_output(1)) });
    assert!(matches!(r.register(bad), Err(RegisterError::BadName(_))));
}

#[test]
fn reserved_tool_cannot_be_removed() {
    let mut r = Registry::new();
    r.register(
        FnTool::new("run_code", |_, _| async { Ok(ok_output(1)) }).spec(|s| s.reserved(true)),
    )
    .unwrap();
    r.register(FnTool::new("other", |_, _| async { Ok(ok_output(1)) }))
        .unwrap();
    assert_eq!(
        r.remove("run_code"),
        Err(RegisterError::Reserved("run_code".to_owned()))
    );
    assert_eq!(r.remove("other"), Ok(()));
    assert_eq!(r.len(), 1);
}

#[tokio::test]
async fn unknown_tool_fails_at_registry_before_any_policy() {
    let asked = Arc::new(AtomicUsize::new(0));
    let a = asked.clone();
    let (b, journal) = builder(vec![]);
    let p = b
        .pre_policy(FnPolicy::new("counting", move |_, _| {
            a.fetch_add(1, Ordering::SeqCst);
            Vote::abstain()
        }))
        .build();
    let r = run_one(&p, call("1", "nope")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::UnknownTool));
    assert_eq!(r.decided_by().gate, Gate::Registry);
    assert_eq!(asked.load(Ordering::SeqCst), 0);
    // Still journaled first (P1): the call and its result are on record.
    assert_eq!(kinds(&journal.lines()), ["tool_call", "tool_result"]);
    // A made-up name is quoted capped, however long it is.
    let r = run_one(&p, call("2", &"n".repeat(1 << 20))).await;
    assert!(r.decided_by().reason.contains("(1048576 bytes)"));
    assert!(r.decided_by().reason.len() < 500);
}

#[tokio::test]
async fn arguments_not_matching_the_input_schema_fail_before_any_policy() {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = counted("t", &runs).spec(|s| {
        s.input_schema(
            json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}),
        )
    });
    let (b, _) = builder(vec![tool]);
    let p = b
        .pre_policy(voter("allow", Vote::allow(Tier::Rule, "ok")))
        .build();
    let r = run_one(&p, ToolCall::new("1", "t", json!({"path": 5}))).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::InvalidArgs));
    assert_eq!(r.decided_by().gate, Gate::Registry);
    assert!(r.content().contains("/path"), "{}", r.content());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_declared_path_longer_than_path_max_is_invalid_args_before_any_policy() {
    let runs = Arc::new(AtomicUsize::new(0));
    let asked = Arc::new(AtomicUsize::new(0));
    let a = asked.clone();
    let tool = counted("t", &runs).accesses(|args| {
        let path = args["path"].as_str().unwrap_or_default().into();
        vec![dsh_core::Access::Write { path }]
    });
    let (b, _) = builder(vec![tool]);
    let p = b
        .pre_policy(FnPolicy::new("counting", move |_, _| {
            a.fetch_add(1, Ordering::SeqCst);
            Vote::allow(Tier::Rule, "ok")
        }))
        .build();
    let path = "a/".repeat(5_000_000);
    let r = run_one(&p, ToolCall::new("1", "t", json!({ "path": path }))).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::InvalidArgs));
    assert_eq!(r.decided_by().gate, Gate::Registry);
    let reason = &r.decided_by().reason;
    assert!(reason.contains("(10000000 bytes)"), "{reason}");
    assert!(reason.len() < 500, "{} bytes", reason.len());
    assert_eq!(
        (asked.load(Ordering::SeqCst), runs.load(Ordering::SeqCst)),
        (0, 0)
    );
    // `dsh check` answers the same.
    let report = p
        .check(&ToolCall::new(
            "2",
            "t",
            json!({ "path": "a/".repeat(dsh_core::PATH_MAX / 2 + 1) }),
        ))
        .await;
    assert_eq!(
        (report.decision, report.gate),
        (Decision::Deny, Gate::Registry)
    );
    // At the limit, the call goes on to the policies.
    let r = run_one(
        &p,
        ToolCall::new(
            "3",
            "t",
            json!({ "path": "a/".repeat(dsh_core::PATH_MAX / 2) }),
        ),
    )
    .await;
    assert!(r.ok(), "{}", r.content());
}

// ---------------------------------------------------------------- gate 1 (P2)

#[tokio::test]
async fn rule_allow_lifts_a_default_ask() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (b, _) = builder(vec![counted("t", &runs)]);
    let p = b
        .pre_policy(voter(
            "defaults",
            Vote::ask(Tier::Default, "not on the safe list"),
        ))
        .pre_policy(voter("rules", Vote::allow(Tier::Rule, "allowed by t(*)")))
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert!(r.ok(), "{r:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(r.decided_by().gate, Gate::PrePolicy);
    assert_eq!(r.decided_by().policy.as_deref(), Some("rules"));
    assert_eq!(r.decided_by().reason, "allowed by t(*)");
}

#[tokio::test]
async fn default_deny_is_not_lifted_by_anything() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (b, _) = builder(vec![counted("t", &runs)]);
    let p = b
        .pre_policy(voter(
            "defaults",
            Vote::deny(Tier::Default, "not on any list"),
        ))
        .pre_policy(voter("rules", Vote::allow(Tier::Rule, "allowed by t(*)")))
        .approver(ScriptedApprover::answering(ApprovalOutcome::AllowedOnce))
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Denied));
    assert_eq!(r.decided_by().policy.as_deref(), Some("defaults"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn rule_ask_beats_rule_allow() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (b, _) = builder(vec![counted("t", &runs)]);
    let p = b
        .pre_policy(voter("allow-rule", Vote::allow(Tier::Rule, "allow t(*)")))
        .pre_policy(voter("ask-rule", Vote::ask(Tier::Rule, "ask t(push *)")))
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Unavailable));
    assert_eq!(r.decided_by().gate, Gate::Approval);
    assert!(r.content().contains("ask t(push *)"), "{}", r.content());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn without_votes_the_tools_default_applies() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (b, _) = builder(vec![
        read_only(counted("reader", &runs)),
        counted("writer", &runs),
    ]);
    let p = b.build();
    let rs = run(&p, vec![call("1", "reader"), call("2", "writer")]).await;
    assert!(rs[0].ok());
    assert_eq!(rs[0].decided_by().policy, None);
    assert_eq!(rs[1].failure_kind(), Some(FailureKind::Unavailable));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_panicking_listener_refuses_the_call_as_crashed_and_the_batch_goes_on() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (b, _) = builder(vec![read_only(counted("t", &runs))]);
    let p = b
        .pre_policy(FnPolicy::new("fragile", |c, _| {
            if c.id() == "1" {
                panic!("listener bug");
            }
            Vote::abstain()
        }))
        .pre_policy(voter(
            "permissive",
            Vote::allow(Tier::Rule, "everything goes"),
        ))
        .build();
    let rs = run(&p, vec![call("1", "t"), call("2", "t")]).await;
    assert_eq!(rs[0].failure_kind(), Some(FailureKind::Crashed));
    assert_eq!(rs[0].decided_by().gate, Gate::PrePolicy);
    assert_eq!(rs[0].decided_by().policy.as_deref(), Some("fragile"));
    assert!(rs[0].content().contains("listener bug"));
    assert!(rs[1].ok());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------- gate 2 (P3)

#[tokio::test]
async fn approval_is_asked_exactly_once_even_when_the_wrapper_retries() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let a = attempts.clone();
    let flaky = FnTool::new("flaky", move |_, _| {
        let a = a.clone();
        async move {
            if a.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(ToolError::failed("connection reset").transient())
            } else {
                Ok(ok_output(3))
            }
        }
    })
    .spec(|s| s.idempotent(true));
    let approver = ScriptedApprover::answering(ApprovalOutcome::AllowedOnce);
    let (b, journal) = builder(vec![flaky]);
    let p = b
        .approver(approver.clone())
        .wrapper(Retry::new(5, Duration::from_millis(1)))
        .build();
    let r = run_one(&p, call("c1", "flaky")).await;
    assert!(r.ok(), "{r:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert_eq!(approver.asked(), ["c1"]);
    assert_eq!(r.decided_by().gate, Gate::Approval);
    let k = kinds(&journal.lines());
    assert_eq!(k.iter().filter(|k| *k == "approval").count(), 1);
}

#[tokio::test]
async fn retry_never_repeats_a_tool_that_is_not_idempotent() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let a = attempts.clone();
    let tool = FnTool::new("append", move |_, _| {
        let a = a.clone();
        async move {
            a.fetch_add(1, Ordering::SeqCst);
            Err(ToolError::failed("disk busy").transient())
        }
    });
    let (b, _) = builder(vec![tool]);
    let p = b
        .pre_policy(voter("rules", Vote::allow(Tier::Rule, "ok")))
        .wrapper(Retry::new(5, Duration::from_millis(1)))
        .build();
    let r = run_one(&p, call("1", "append")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::ToolError));
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn only_allowed_once_proceeds() {
    let cases = [
        (ApprovalOutcome::Rejected, FailureKind::Rejected),
        (ApprovalOutcome::Cancelled, FailureKind::CancelledBefore),
        (ApprovalOutcome::Unavailable, FailureKind::Unavailable),
    ];
    for (outcome, kind) in cases {
        let runs = Arc::new(AtomicUsize::new(0));
        let (b, journal) = builder(vec![counted("t", &runs)]);
        let p = b.approver(ScriptedApprover::answering(outcome)).build();
        let r = run_one(&p, call("1", "t")).await;
        assert_eq!(r.failure_kind(), Some(kind), "{outcome:?}");
        assert_eq!(r.decided_by().gate, Gate::Approval);
        assert_eq!(runs.load(Ordering::SeqCst), 0, "{outcome:?} ran the tool");
        assert_eq!(
            kinds(&journal.lines()),
            ["tool_call", "approval", "tool_result"]
        );
    }
}

#[tokio::test]
async fn no_approver_means_unavailable_with_a_hint() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (b, _) = builder(vec![counted("t", &runs)]);
    let p = b
        .config(PipelineConfig {
            unavailable_hint: dsh_core::UnavailableHint::fixed(
                "add an allow rule or run with --yolo",
            ),
            ..PipelineConfig::default()
        })
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Unavailable));
    assert!(r.content().contains("--yolo"), "{}", r.content());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

struct PanickingApprover;

#[async_trait]
impl Approver for PanickingApprover {
    fn name(&self) -> &str {
        "broken"
    }
    async fn approve(
        &self,
        _: &ApprovalRequest<'_>,
    ) -> Result<dsh_core::ApprovalAnswer, dsh_core::ApprovalError> {
        panic!("approver bug")
    }
}

#[tokio::test]
async fn an_approver_that_errs_or_panics_is_unavailable() {
    let approvers: [Arc<dyn Approver>; 2] =
        [ScriptedApprover::failing(), Arc::new(PanickingApprover)];
    for approver in approvers {
        let runs = Arc::new(AtomicUsize::new(0));
        let (b, _) = builder(vec![counted("t", &runs)]);
        let p = b.approver(approver).build();
        let r = run_one(&p, call("1", "t")).await;
        assert_eq!(r.failure_kind(), Some(FailureKind::Unavailable));
        assert_eq!(runs.load(Ordering::SeqCst), 0);
    }
}

// ---------------------------------------------------------------- gate 3 (P4)

struct DenyAll(&'static str);

impl Guard for DenyAll {
    fn name(&self) -> &str {
        self.0
    }
    fn refuses(&self, _: &ToolCall, _: &PolicyContext<'_>) -> Option<Denial> {
        Some(Denial::new("never touch production"))
    }
}

#[tokio::test]
async fn guard_denial_survives_an_allow_everything_listener_registered_after_it() {
    let runs = Arc::new(AtomicUsize::new(0));
    let approver = ScriptedApprover::answering(ApprovalOutcome::AllowedOnce);
    let (b, _) = builder(vec![counted("t", &runs)]);
    let p = b
        .guard(DenyAll("red-line"))
        .pre_policy(voter(
            "yes-to-all",
            Vote::allow(Tier::Rule, "everything is fine"),
        ))
        .approver(approver.clone())
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Denied));
    assert_eq!(r.decided_by().gate, Gate::Guard);
    assert_eq!(r.decided_by().policy.as_deref(), Some("red-line"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_call_a_guard_refuses_is_never_sent_to_a_person() {
    let runs = Arc::new(AtomicUsize::new(0));
    let approver = ScriptedApprover::answering(ApprovalOutcome::AllowedOnce);
    let (b, _) = builder(vec![counted("t", &runs)]);
    let p = b
        .guard(DenyAll("red-line"))
        .approver(approver.clone())
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Denied));
    assert_eq!(r.decided_by().gate, Gate::Guard);
    assert!(approver.asked().is_empty());
}

struct PanickingGuard;

impl Guard for PanickingGuard {
    fn name(&self) -> &str {
        "fragile-guard"
    }
    fn refuses(&self, _: &ToolCall, _: &PolicyContext<'_>) -> Option<Denial> {
        panic!("guard bug")
    }
}

#[tokio::test]
async fn a_panicking_guard_fails_closed() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (b, _) = builder(vec![read_only(counted("t", &runs))]);
    let p = b.guard(PanickingGuard).build();
    let r = run_one(&p, call("1", "t")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Crashed));
    assert_eq!(r.decided_by().gate, Gate::Guard);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

// ---------------------------------------------------------------- gate 4 (P5)

#[tokio::test]
async fn a_panicking_tool_yields_crashed_while_the_batch_goes_on() {
    let runs = Arc::new(AtomicUsize::new(0));
    let boom = read_only(FnTool::new("boom", |_, _| async { panic!("tool bug") }));
    let (b, _) = builder(vec![boom, read_only(counted("fine", &runs))]);
    let p = b.build();
    let rs = run(&p, vec![call("1", "boom"), call("2", "fine")]).await;
    assert_eq!(rs[0].failure_kind(), Some(FailureKind::Crashed));
    assert_eq!(rs[0].decided_by().gate, Gate::Execute);
    assert!(rs[0].content().contains("tool bug"));
    assert!(rs[1].ok());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

struct PanickingWrapper;

#[async_trait]
impl Wrapper for PanickingWrapper {
    fn name(&self) -> &str {
        "metrics"
    }
    async fn wrap(&self, _: ExecContext, _: Next<'_>) -> Result<ToolOutput, ToolError> {
        panic!("wrapper bug")
    }
}

#[tokio::test]
async fn a_panicking_wrapper_yields_crashed_naming_it() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (b, _) = builder(vec![read_only(counted("t", &runs))]);
    let p = b.wrapper(PanickingWrapper).build();
    let r = run_one(&p, call("1", "t")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Crashed));
    assert_eq!(r.decided_by().gate, Gate::Execute);
    assert_eq!(r.decided_by().policy.as_deref(), Some("metrics"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_tool_past_its_deadline_times_out() {
    let slow = read_only(FnTool::new("slow", |_, _| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(ok_output(1))
    }));
    let (b, _) = builder(vec![slow]);
    let p = b
        .wrapper(Timeout::new(Duration::from_millis(50)).with_grace(Duration::from_millis(50)))
        .build();
    let r = run_one(&p, call("1", "slow")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Timeout));
    assert_eq!(r.decided_by().gate, Gate::Execute);
    assert_eq!(r.decided_by().policy.as_deref(), Some("timeout"));
    assert!(r.elapsed_ms() < 5_000);
}

#[tokio::test]
async fn a_tools_own_timeout_overrides_the_default() {
    let quick = read_only(FnTool::new("quick", |_, _| async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(ok_output(1))
    }))
    .spec(|s| s.timeout(Duration::from_secs(10)));
    let (b, _) = builder(vec![quick]);
    let p = b.wrapper(Timeout::new(Duration::from_millis(20))).build();
    assert!(run_one(&p, call("1", "quick")).await.ok());
}

// ---------------------------------------------------------------- normalization (P7)

#[tokio::test]
async fn output_violating_the_declared_schema_is_invalid_output() {
    let liar = read_only(FnTool::new("liar", |_, _| async {
        Ok(ToolOutput::new(
            "trust me",
            json!({"n": "not a number", "extra": true}),
        ))
    }));
    let (b, _) = builder(vec![liar]);
    let p = b.build();
    let r = run_one(&p, call("1", "liar")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::InvalidOutput));
    assert_eq!(r.decided_by().gate, Gate::Normalize);
    assert!(!r.content().contains("trust me"));
    assert_eq!(r.value(), None);
    // The withheld value is not quoted in the reason either (it could carry a secret in a form
    // redaction misses), but where it broke the schema is.
    assert!(!r.content().contains("not a number"), "{}", r.content());
    assert!(!r.decided_by().reason.contains("not a number"));
    assert!(r.content().contains("/n"), "{}", r.content());
}

#[tokio::test]
async fn tool_error_kinds_map_to_failure_kinds() {
    use dsh_core::ToolErrorKind as K;
    let cases = [
        (K::Failed, FailureKind::ToolError),
        (K::NotFound, FailureKind::NotFound),
        (K::StaleVersion, FailureKind::StaleVersion),
        (K::NotObserved, FailureKind::NotObserved),
        (K::InvalidArgs, FailureKind::InvalidArgs),
        (K::Denied, FailureKind::Denied),
    ];
    for (kind, expected) in cases {
        let t = read_only(FnTool::new("t", move |_, _| async move {
            Err(ToolError::new(kind, "nope").with_exit_code(3))
        }));
        let (b, _) = builder(vec![t]);
        let r = run_one(&b.build(), call("1", "t")).await;
        assert_eq!(r.failure_kind(), Some(expected));
        assert_eq!(r.decided_by().gate, Gate::Execute);
        assert_eq!(r.exit_code(), Some(3));
    }
}

#[tokio::test]
async fn a_cancelled_batch_records_cancelled_before_for_calls_not_started() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (b, journal) = builder(vec![read_only(counted("t", &runs))]);
    let p = b.build();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let out = p
        .run_batch(vec![call("1", "t"), call("2", "t")], &cancel)
        .await
        .unwrap();
    for r in &out.results {
        assert_eq!(r.failure_kind(), Some(FailureKind::CancelledBefore));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        kinds(&journal.lines()),
        ["tool_call", "tool_result", "tool_call", "tool_result"]
    );
}

#[tokio::test]
async fn cancelling_a_running_call_records_cancelled_after() {
    let started = Arc::new(tokio::sync::Notify::new());
    let s = started.clone();
    let waits = read_only(FnTool::new("waits", move |_, cx: ExecContext| {
        let s = s.clone();
        async move {
            s.notify_one();
            cx.cancel.cancelled().await;
            Err(ToolError::failed("interrupted"))
        }
    }));
    let (b, journal) = builder(vec![waits]);
    let p = b.build();
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        started.notified().await;
        c2.cancel();
    });
    let out = p
        .run_batch(vec![call("1", "waits")], &cancel)
        .await
        .unwrap();
    assert_eq!(
        out.results[0].failure_kind(),
        Some(FailureKind::CancelledAfter)
    );
    assert_eq!(out.results[0].decided_by().gate, Gate::Execute);
    assert_eq!(
        kinds(&journal.lines()),
        ["tool_call", "tool_started", "tool_result"]
    );
}

// ---------------------------------------------------------------- gate 5 (P6)

struct Scripted {
    name: &'static str,
    action: Box<dyn Fn(&Candidate) -> Action + Send + Sync>,
}

#[async_trait]
impl Disposition for Scripted {
    fn name(&self) -> &str {
        self.name
    }
    async fn dispose(&self, _: &ToolCall, c: &Candidate) -> Action {
        (self.action)(c)
    }
}

fn disposition(
    name: &'static str,
    action: impl Fn(&Candidate) -> Action + Send + Sync + 'static,
) -> Scripted {
    Scripted {
        name,
        action: Box::new(action),
    }
}

#[tokio::test]
async fn a_disposition_cannot_turn_a_failure_into_success() {
    let failing = read_only(FnTool::new("t", |_, _| async {
        Err(ToolError::failed("text not found"))
    }));
    let (b, _) = builder(vec![failing]);
    let p = b
        .disposition(disposition("optimist", |_| {
            Action::Replace("all good".to_owned())
        }))
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert!(!r.ok());
    assert_eq!(r.failure_kind(), Some(FailureKind::ToolError));
    assert_eq!(r.content(), "all good");
}

/// Normalization (gate 6) runs before the dispositions (gate 5): a disposition sees a tool's
/// panic already turned into a failure kind, never a raw panic or a half-made result.
#[tokio::test]
async fn a_disposition_sees_a_normalized_result() {
    let crashing = read_only(FnTool::new("t", |_, _| async {
        if true {
            panic!("tool bug");
        }
        Ok(ToolOutput::new("never", json!({})))
    }));
    let seen = Arc::new(std::sync::Mutex::new(None));
    let s = seen.clone();
    let (b, _) = builder(vec![crashing]);
    let p = b
        .disposition(disposition("observer", move |c| {
            *s.lock().unwrap() = Some((c.ok(), c.failure_kind()));
            Action::Accept
        }))
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Crashed));
    assert_eq!(
        *seen.lock().unwrap(),
        Some((false, Some(FailureKind::Crashed))),
        "the disposition saw the normalized failure"
    );
}

#[tokio::test]
async fn a_panicking_disposition_withholds_the_content() {
    let secret = read_only(FnTool::new("t", |_, _| async {
        Ok(ToolOutput::new("AKIA-SECRET-KEY", json!({"n": 1})))
    }));
    let seen_after = Arc::new(AtomicUsize::new(0));
    let s = seen_after.clone();
    let (b, _) = builder(vec![secret]);
    let p = b
        .disposition(disposition("redactor", |_| panic!("redactor bug")))
        .disposition(disposition("later", move |_| {
            s.fetch_add(1, Ordering::SeqCst);
            Action::Accept
        }))
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert!(!r.ok());
    assert_eq!(r.failure_kind(), Some(FailureKind::Crashed));
    assert_eq!(r.decided_by().gate, Gate::Disposition);
    assert_eq!(r.decided_by().policy.as_deref(), Some("redactor"));
    assert!(!r.content().contains("AKIA"), "{}", r.content());
    assert!(!r.to_json().contains("AKIA"));
    assert_eq!(r.value(), None);
}

#[tokio::test]
async fn dispositions_chain_in_registration_order() {
    let (b, _) = builder(vec![read_only(FnTool::new("t", |_, _| async {
        Ok(ok_output(7))
    }))]);
    let p = b
        .disposition(disposition("first", |c| {
            Action::Replace(format!("{}+first", c.content()))
        }))
        .disposition(disposition("second", |c| {
            Action::Replace(format!("{}+second", c.content()))
        }))
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert!(r.ok());
    assert_eq!(r.content(), "n=7+first+second");
    assert_eq!(r.value(), None, "a rewrite clears the structured value");
}

#[tokio::test]
async fn a_block_withholds_content_but_keeps_ok() {
    let (b, _) = builder(vec![read_only(FnTool::new("t", |_, _| async {
        Ok(ToolOutput::new("password=hunter2", json!({"n": 1})))
    }))]);
    let p = b
        .disposition(disposition("secrets", |c| {
            if c.content().contains("password") {
                Action::Block("output withheld: it contains a credential".to_owned())
            } else {
                Action::Accept
            }
        }))
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert!(r.ok());
    assert_eq!(r.content(), "output withheld: it contains a credential");
    assert_eq!(r.decided_by().gate, Gate::Disposition);
    assert_eq!(r.decided_by().policy.as_deref(), Some("secrets"));
}

#[tokio::test]
async fn denied_calls_pass_dispositions_and_stay_denied() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let (b, _) = builder(vec![read_only(FnTool::new("t", |_, _| async {
        Ok(ok_output(1))
    }))]);
    let p = b
        .pre_policy(voter("no", Vote::deny(Tier::Rule, "deny t(*)")))
        .disposition(disposition("observer", move |c| {
            s.lock().unwrap().push(c.failure_kind());
            Action::Replace("it worked".to_owned())
        }))
        .build();
    let r = run_one(&p, call("1", "t")).await;
    assert_eq!(*seen.lock().unwrap(), [Some(FailureKind::Denied)]);
    assert_eq!(r.failure_kind(), Some(FailureKind::Denied));
    assert_eq!(r.decided_by().gate, Gate::PrePolicy);
}

// ---------------------------------------------------------------- freeze (P8, P12)

#[tokio::test]
async fn every_observer_receives_the_same_frozen_allocation() {
    let one = Recorder::new();
    let two = Recorder::new();
    let (b, _) = builder(vec![read_only(FnTool::new("t", |_, _| async {
        Ok(ok_output(1))
    }))]);
    let p = b.observer(one.clone()).observer(two.clone()).build();
    let r = run_one(&p, call("1", "t")).await;
    assert!(Arc::ptr_eq(&r, &one.seen()[0]));
    assert!(Arc::ptr_eq(&r, &two.seen()[0]));
}

#[tokio::test]
async fn the_result_object_has_exactly_the_contract_fields() {
    let (b, journal) = builder(vec![read_only(FnTool::new("t", |_, _| async {
        Ok(ok_output(2).with_exit_code(0))
    }))]);
    let p = b.build();
    let r = run_one(&p, call("c9", "t")).await;
    let v: Value = serde_json::from_str(&r.to_json()).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let mut expected = [
        "call_id",
        "tool",
        "ok",
        "failure_kind",
        "decided_by",
        "content",
        "value",
        "elapsed_ms",
        "exit_code",
        "sandbox",
    ];
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    assert_eq!(v["call_id"], "c9");
    assert_eq!(v["ok"], true);
    assert_eq!(v["failure_kind"], Value::Null);
    assert_eq!(v["decided_by"]["gate"], "pre_policy");
    assert_eq!(v["value"], json!({"n": 2}));
    assert_eq!(v["exit_code"], 0);
    // The journal's tool_result carries the same object.
    let last: Value = serde_json::from_str(journal.lines().last().unwrap()).unwrap();
    for k in expected {
        assert_eq!(last[k], v[k], "{k}");
    }
}

// ---------------------------------------------------------------- dsh check

#[tokio::test]
async fn check_agrees_with_the_batch() {
    // Each row: the votes, a guard or not, and what check and batch (without approver) say.
    type Row = (Vec<Vote>, bool, Decision, Option<FailureKind>);
    let rows: Vec<Row> = vec![
        (
            vec![Vote::allow(Tier::Rule, "r")],
            false,
            Decision::Allow,
            None,
        ),
        (
            vec![Vote::ask(Tier::Default, "d")],
            false,
            Decision::Ask,
            Some(FailureKind::Unavailable),
        ),
        (
            vec![Vote::deny(Tier::Rule, "x")],
            false,
            Decision::Deny,
            Some(FailureKind::Denied),
        ),
        (
            vec![Vote::allow(Tier::Rule, "r")],
            true,
            Decision::Deny,
            Some(FailureKind::Denied),
        ),
        (
            vec![Vote::ask(Tier::Rule, "q")],
            true,
            Decision::Deny,
            Some(FailureKind::Denied),
        ),
        (vec![], false, Decision::Ask, Some(FailureKind::Unavailable)),
    ];
    for (votes, guarded, decision, batch) in rows {
        let mk = |approver: bool| {
            let (mut b, _) = builder(vec![FnTool::new("t", |_, _| async { Ok(ok_output(1)) })]);
            for (i, v) in votes.iter().enumerate() {
                b = b.pre_policy(voter(&format!("p{i}"), v.clone()));
            }
            if guarded {
                b = b.guard(DenyAll("g"));
            }
            if approver {
                b = b.approver(ScriptedApprover::answering(ApprovalOutcome::AllowedOnce));
            }
            b.build()
        };
        let report = mk(false).check(&call("1", "t")).await;
        assert_eq!(report.decision, decision, "{votes:?} guarded={guarded}");
        assert_eq!(report.votes.len(), votes.len());
        let r = run_one(&mk(false), call("1", "t")).await;
        assert_eq!(r.failure_kind(), batch, "{votes:?} guarded={guarded}");
        // With an approver that says yes to everything (--yolo): ask runs, deny stays denied.
        let yolo = run_one(&mk(true), call("1", "t")).await;
        match decision {
            Decision::Deny => assert_eq!(yolo.failure_kind(), Some(FailureKind::Denied)),
            _ => assert!(yolo.ok(), "{yolo:?}"),
        }
    }
}

/// The check⇔batch invariant (DESIGN §4) over a table of calls, each run by `dsh check` and
/// by batches with every kind of approver: `allow` ⇔ the batch runs it and asks nobody; `ask`
/// ⇔ without an approver (or with one that errs or panics) the batch answers `unavailable`,
/// and an approver's answer is final; `deny` ⇔ refused at the gate `check` names, whatever the
/// approver, which is never asked. Fails if the two paths ever diverge.
#[tokio::test]
async fn check_and_batch_never_diverge() {
    struct Row {
        what: &'static str,
        tool: &'static str,
        votes: Vec<Vote>,
        guarded: bool,
        decision: Decision,
        gate: Gate,
    }
    let row = |what, tool, votes, guarded, decision, gate| Row {
        what,
        tool,
        votes,
        guarded,
        decision,
        gate,
    };
    let rows = vec![
        row(
            "rule allow",
            "t",
            vec![Vote::allow(Tier::Rule, "r")],
            false,
            Decision::Allow,
            Gate::PrePolicy,
        ),
        row(
            "no votes, read-only",
            "ro",
            vec![],
            false,
            Decision::Allow,
            Gate::PrePolicy,
        ),
        row(
            "default ask",
            "t",
            vec![Vote::ask(Tier::Default, "d")],
            false,
            Decision::Ask,
            Gate::PrePolicy,
        ),
        row(
            "no votes, writes",
            "t",
            vec![],
            false,
            Decision::Ask,
            Gate::PrePolicy,
        ),
        row(
            "rule ask over allow",
            "t",
            vec![Vote::allow(Tier::Rule, "a"), Vote::ask(Tier::Rule, "q")],
            false,
            Decision::Ask,
            Gate::PrePolicy,
        ),
        row(
            "gate-1 deny",
            "t",
            vec![Vote::allow(Tier::Rule, "a"), Vote::deny(Tier::Default, "x")],
            false,
            Decision::Deny,
            Gate::PrePolicy,
        ),
        row(
            "guard deny after allow",
            "t",
            vec![Vote::allow(Tier::Rule, "r")],
            true,
            Decision::Deny,
            Gate::Guard,
        ),
        row(
            "guard deny after ask",
            "t",
            vec![Vote::ask(Tier::Rule, "q")],
            true,
            Decision::Deny,
            Gate::Guard,
        ),
        row(
            "unknown tool",
            "nope",
            vec![Vote::allow(Tier::Rule, "r")],
            false,
            Decision::Deny,
            Gate::Registry,
        ),
    ];
    // The approvers a batch may run with, and what an `ask` then ends as (None: it runs).
    type MkApprover = fn() -> Option<Arc<ScriptedApprover>>;
    let approvers: [(&str, MkApprover, Option<FailureKind>); 4] = [
        ("none", || None, Some(FailureKind::Unavailable)),
        (
            "yes",
            || Some(ScriptedApprover::answering(ApprovalOutcome::AllowedOnce)),
            None,
        ),
        (
            "no",
            || Some(ScriptedApprover::answering(ApprovalOutcome::Rejected)),
            Some(FailureKind::Rejected),
        ),
        (
            "erring",
            || Some(ScriptedApprover::failing()),
            Some(FailureKind::Unavailable),
        ),
    ];
    for r in &rows {
        let mk = |approver: Option<Arc<dyn Approver>>| {
            let tools = vec![
                FnTool::new("t", |_, _| async { Ok(ok_output(1)) }),
                read_only(FnTool::new("ro", |_, _| async { Ok(ok_output(1)) })),
            ];
            let (mut b, journal) = builder(tools);
            for (i, v) in r.votes.iter().enumerate() {
                b = b.pre_policy(voter(&format!("p{i}"), v.clone()));
            }
            if r.guarded {
                b = b.guard(DenyAll("g"));
            }
            if let Some(a) = approver {
                b = b.approver(a);
            }
            (b.build(), journal)
        };
        let (p, journal) = mk(None);
        let report = p.check(&call("1", r.tool)).await;
        assert_eq!(
            (report.decision, report.gate),
            (r.decision, r.gate),
            "{}",
            r.what
        );
        assert!(
            journal.lines().is_empty(),
            "{}: check journals nothing",
            r.what
        );
        let refused = run_one(&p, call("1", r.tool)).await;
        for (name, approver, on_ask) in &approvers {
            let scripted = approver();
            let (p, _) = mk(scripted.clone().map(|a| a as Arc<dyn Approver>));
            let case = format!("{} / approver {name}", r.what);
            // `check` never asks, so the approver changes nothing in its answer.
            assert_eq!(p.check(&call("1", r.tool)).await, report, "{case}");
            let res = run_one(&p, call("1", r.tool)).await;
            let asked = scripted.as_ref().map_or(0, |a| a.asked().len());
            match report.decision {
                Decision::Allow => {
                    assert!(res.ok(), "{case}: {res:?}");
                    assert_eq!(
                        (res.decided_by().gate, &res.decided_by().policy),
                        (report.gate, &report.policy),
                        "{case}"
                    );
                    assert_eq!(asked, 0, "{case}");
                }
                Decision::Ask => {
                    assert_eq!(res.failure_kind(), *on_ask, "{case}: {res:?}");
                    assert_eq!(asked, usize::from(scripted.is_some()), "{case}");
                }
                Decision::Deny => {
                    assert!(!res.ok(), "{case}");
                    assert_eq!(res.failure_kind(), refused.failure_kind(), "{case}");
                    assert_ne!(res.failure_kind(), Some(FailureKind::Unavailable), "{case}");
                    assert_eq!(
                        (res.decided_by().gate, &res.decided_by().policy),
                        (report.gate, &report.policy),
                        "{case}"
                    );
                    assert_eq!(asked, 0, "{case}");
                }
            }
        }
        // A panicking approver is an approver error too: `ask` ends as `unavailable`.
        let (p, _) = mk(Some(Arc::new(PanickingApprover)));
        let res = run_one(&p, call("1", r.tool)).await;
        match report.decision {
            Decision::Allow => assert!(res.ok(), "{}", r.what),
            Decision::Ask => {
                assert_eq!(
                    res.failure_kind(),
                    Some(FailureKind::Unavailable),
                    "{}",
                    r.what
                );
            }
            Decision::Deny => assert_eq!(res.failure_kind(), refused.failure_kind(), "{}", r.what),
        }
    }
}

#[tokio::test]
async fn check_reports_every_vote_as_json() {
    let (b, journal) = builder(vec![FnTool::new("t", |_, _| async { Ok(ok_output(1)) })]);
    let p = b
        .pre_policy(voter(
            "defaults",
            Vote::ask(Tier::Default, "not on the safe list"),
        ))
        .pre_policy(voter("rules", Vote::allow(Tier::Rule, "allow t(*)")))
        .pre_policy(voter("hooks", Vote::abstain()))
        .build();
    let report = p.check(&call("1", "t")).await;
    let v = serde_json::to_value(&report).unwrap();
    assert_eq!(
        v,
        json!({"tool":"t","decision":"allow","gate":"pre_policy","policy":"rules","reason":"allow t(*)",
               "votes":[{"policy":"defaults","tier":"default","vote":"ask","reason":"not on the safe list"},
                        {"policy":"rules","tier":"rule","vote":"allow","reason":"allow t(*)"},
                        {"policy":"hooks","tier":"default","vote":"abstain","reason":""}]})
    );
    assert!(journal.lines().is_empty(), "check journals nothing");
    let unknown = p.check(&call("1", "nope")).await;
    assert_eq!(
        (unknown.decision, unknown.gate),
        (Decision::Deny, Gate::Registry)
    );
    assert_eq!(report.votes[0].vote, Some(Decision::Ask));
}

#[test]
fn tool_trait_defaults_are_conservative() {
    struct Bare;
    #[async_trait]
    impl Tool for Bare {
        fn spec(&self) -> ToolSpec {
            ToolSpec::new("bare", "")
        }
        async fn run(&self, _: &Value, _: &ExecContext) -> Result<ToolOutput, ToolError> {
            Ok(ok_output(0))
        }
    }
    assert_eq!(Bare.parallel_safe(&json!({})), Ok(false));
    assert!(Bare.accesses(&json!({})).is_empty());
    let spec = Bare.spec();
    assert!(!spec.read_only && !spec.idempotent && !spec.reserved);
}

/// Refuses every call with a message for the model.
struct RefusingWithMessage;

#[async_trait]
impl Approver for RefusingWithMessage {
    fn name(&self) -> &str {
        "person"
    }
    async fn approve(
        &self,
        _: &ApprovalRequest<'_>,
    ) -> Result<dsh_core::ApprovalAnswer, dsh_core::ApprovalError> {
        Ok(dsh_core::ApprovalAnswer::rejected_with(
            "use notes.md instead",
        ))
    }
}

#[tokio::test]
async fn a_refusal_with_a_message_gives_the_message_to_the_model_and_the_journal() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (b, journal) = builder(vec![counted("t", &runs)]);
    let p = b.approver(Arc::new(RefusingWithMessage)).build();
    let r = run_one(&p, call("1", "t")).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Rejected));
    assert!(
        r.content().contains("use notes.md instead"),
        "{}",
        r.content()
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let approval = journal
        .lines()
        .into_iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(&l).unwrap())
        .find(|r| r["kind"] == "approval")
        .unwrap();
    assert_eq!(approval["outcome"], "rejected");
    assert_eq!(approval["message"], "use notes.md instead");
}
