//! Test-only building blocks for dsh: scripted tools, policies, approvers, observers and a
//! journal that fails on demand. They script *content* (what a tool returns, what a policy
//! votes); the pipeline they plug into is the real one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod model_server;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use dsh_core::journal::{self, Journal, JournalError, MemoryJournal};
use dsh_core::{
    Access, ApprovalError, ApprovalOutcome, ApprovalRequest, Approver, ExecContext, FrozenResult,
    Observer, PolicyContext, PrePolicy, Tool, ToolCall, ToolError, ToolOutput, ToolSpec, Vote,
};
use serde_json::{Value, json};

/// How many cases a property test runs: `PROPTEST_CASES` when set (a longer hunt), else the
/// test's own bounded default. (An explicit count in a test's config would hide the variable.)
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The output schema of the scripted tools: `{"n": integer}`.
pub fn counter_schema() -> Value {
    json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false})
}

type Body = dyn Fn(Value, ExecContext) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send>>
    + Send
    + Sync;

type Classifier = dyn Fn(&Value) -> Result<bool, String> + Send + Sync;
type Declarer = dyn Fn(&Value) -> Vec<Access> + Send + Sync;
type Voter = dyn Fn(&ToolCall, &PolicyContext<'_>) -> Vote + Send + Sync;

/// A tool whose body is a closure. Parallel-safety and accesses are scripted too.
pub struct FnTool {
    spec: ToolSpec,
    parallel: Arc<Classifier>,
    accesses: Arc<Declarer>,
    body: Arc<Body>,
}

impl FnTool {
    /// A tool named `name` with the [`counter_schema`] output and a body.
    pub fn new<F, Fut>(name: &str, body: F) -> Self
    where
        F: Fn(Value, ExecContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        FnTool {
            spec: ToolSpec::new(name, format!("scripted tool {name}"))
                .input_schema(json!({"type": "object"}))
                .output_schema(counter_schema()),
            parallel: Arc::new(|_| Ok(false)),
            accesses: Arc::new(|_| Vec::new()),
            body: Arc::new(move |args, cx| Box::pin(body(args, cx))),
        }
    }

    /// Replaces the declaration (keep an output schema, or registration fails).
    pub fn spec(mut self, f: impl FnOnce(ToolSpec) -> ToolSpec) -> Self {
        self.spec = f(self.spec);
        self
    }

    pub fn parallel(
        mut self,
        f: impl Fn(&Value) -> Result<bool, String> + Send + Sync + 'static,
    ) -> Self {
        self.parallel = Arc::new(f);
        self
    }

    pub fn accesses(mut self, f: impl Fn(&Value) -> Vec<Access> + Send + Sync + 'static) -> Self {
        self.accesses = Arc::new(f);
        self
    }
}

#[async_trait]
impl Tool for FnTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }
    fn parallel_safe(&self, args: &Value) -> Result<bool, String> {
        (self.parallel)(args)
    }
    fn accesses(&self, args: &Value) -> Vec<Access> {
        (self.accesses)(args)
    }
    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        (self.body)(args.clone(), cx.clone()).await
    }
}

/// A successful output matching [`counter_schema`].
pub fn ok_output(n: i64) -> ToolOutput {
    ToolOutput::new(format!("n={n}"), json!({"n": n}))
}

/// A gate-1 listener whose vote is a function of the call.
pub struct FnPolicy {
    name: String,
    vote: Arc<Voter>,
}

impl FnPolicy {
    pub fn new(
        name: &str,
        vote: impl Fn(&ToolCall, &PolicyContext<'_>) -> Vote + Send + Sync + 'static,
    ) -> Self {
        FnPolicy {
            name: name.to_owned(),
            vote: Arc::new(vote),
        }
    }
}

#[async_trait]
impl PrePolicy for FnPolicy {
    fn name(&self) -> &str {
        &self.name
    }
    async fn vote(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        (self.vote)(call, cx)
    }
}

/// An approver that answers every request with one outcome and counts the requests per call.
pub struct ScriptedApprover {
    outcome: ApprovalOutcome,
    asked: Mutex<Vec<String>>,
    fail: bool,
}

impl ScriptedApprover {
    pub fn answering(outcome: ApprovalOutcome) -> Arc<Self> {
        Arc::new(ScriptedApprover {
            outcome,
            asked: Mutex::new(Vec::new()),
            fail: false,
        })
    }

    /// An approver whose channel errs on every request.
    pub fn failing() -> Arc<Self> {
        Arc::new(ScriptedApprover {
            outcome: ApprovalOutcome::AllowedOnce,
            asked: Mutex::new(Vec::new()),
            fail: true,
        })
    }

    /// The call ids asked about, in order (one entry per question).
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl Approver for ScriptedApprover {
    fn name(&self) -> &str {
        "scripted"
    }
    async fn approve(
        &self,
        request: &ApprovalRequest<'_>,
    ) -> Result<dsh_core::ApprovalAnswer, ApprovalError> {
        self.asked
            .lock()
            .unwrap()
            .push(request.call.id().to_owned());
        if self.fail {
            return Err("channel closed".into());
        }
        Ok(self.outcome.into())
    }
}

/// An observer that keeps every result it sees.
#[derive(Default)]
pub struct Recorder {
    seen: Mutex<Vec<Arc<FrozenResult>>>,
}

impl Recorder {
    pub fn new() -> Arc<Self> {
        Arc::new(Recorder::default())
    }
    pub fn seen(&self) -> Vec<Arc<FrozenResult>> {
        self.seen.lock().unwrap().clone()
    }
}

impl Observer for Recorder {
    fn observe(&self, result: &Arc<FrozenResult>) {
        self.seen.lock().unwrap().push(result.clone());
    }
}

/// A journal that records in memory and fails every append from the `fail_from`-th on
/// (1-based), or every append of one kind.
pub struct FaultyJournal {
    inner: MemoryJournal,
    appends: AtomicUsize,
    fail_from: Option<usize>,
    fail_kind: Option<String>,
}

impl FaultyJournal {
    pub fn failing_from(n: usize) -> Arc<Self> {
        Arc::new(FaultyJournal {
            inner: MemoryJournal::new("faulty"),
            appends: AtomicUsize::new(0),
            fail_from: Some(n),
            fail_kind: None,
        })
    }

    pub fn failing_kind(kind: &str) -> Arc<Self> {
        Arc::new(FaultyJournal {
            inner: MemoryJournal::new("faulty"),
            appends: AtomicUsize::new(0),
            fail_from: None,
            fail_kind: Some(kind.to_owned()),
        })
    }

    pub fn lines(&self) -> Vec<String> {
        self.inner.lines()
    }
}

impl Journal for FaultyJournal {
    fn write(&self, body: &journal::Body, closing: bool) -> Result<u64, JournalError> {
        let n = self.appends.fetch_add(1, Ordering::SeqCst) + 1;
        let by_count = self.fail_from.is_some_and(|f| n >= f);
        let by_kind = self.fail_kind.as_deref() == Some(body.kind());
        if by_count || by_kind {
            return Err(JournalError::Io {
                path: "faulty".to_owned(),
                source: std::io::Error::other("injected: no space left on device"),
            });
        }
        self.inner.write(body, closing)
    }
    fn sync(&self) -> Result<(), JournalError> {
        Ok(())
    }
    fn session(&self) -> &str {
        self.inner.session()
    }
}

/// The `kind` of each journal line.
pub fn kinds(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["kind"].as_str().unwrap().to_owned()
        })
        .collect()
}
