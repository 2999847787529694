//! What a tool declares and returns. Tools declare; policies decide (DESIGN §2): a policy
//! learns what a call touches from [`Tool::accesses`], never by knowing the tool.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::call::ToolCall;
use crate::result::{FailureKind, SandboxState};

/// The static declaration of a tool, read once at registration.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    /// The name the model calls it by: `[A-Za-z0-9_-]{1,64}`.
    pub name: String,
    /// What the model reads to decide when to call it.
    pub description: String,
    /// JSON Schema of the arguments; calls that do not match fail as `invalid_args` before
    /// any policy sees them.
    pub input_schema: Value,
    /// JSON Schema of [`ToolOutput::value`]. Required (SPEC P9): [`crate::Registry::register`]
    /// refuses a tool without one, and an output that does not match it becomes
    /// `invalid_output`.
    pub output_schema: Option<Value>,
    /// The tool changes nothing outside itself. With no policy voting, read-only tools are
    /// allowed and others are asked about.
    pub read_only: bool,
    /// Running it twice has the effect of running it once. Only idempotent tools are retried.
    pub idempotent: bool,
    /// Cannot be removed from the registry (the Code Mode entry, SPEC P11).
    pub reserved: bool,
    /// Overrides the [`crate::Timeout`] wrapper's default deadline for this tool.
    pub timeout: Option<Duration>,
    /// Whether its calls may overlap other parallel-safe calls (DESIGN §3, "Scheduling").
    pub parallel: Parallel,
}

/// Whether a tool's calls may overlap others: a declaration, read by the scheduler (and by
/// whoever must know it without a call, such as a sub-agent's profile or `/tools`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Parallel {
    /// Every call is exclusive.
    Never,
    /// Every call is parallel-safe.
    Always,
    /// Each call's arguments decide, through [`Tool::parallel_safe`] (whose default says
    /// exclusive).
    #[default]
    PerCall,
}

impl Parallel {
    pub fn as_str(self) -> &'static str {
        match self {
            Parallel::Never => "never",
            Parallel::Always => "always",
            Parallel::PerCall => "per call",
        }
    }
}

impl ToolSpec {
    /// A spec with empty schemas-to-be-filled: not read-only, not idempotent, not reserved.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            read_only: false,
            idempotent: false,
            reserved: false,
            timeout: None,
            parallel: Parallel::PerCall,
        }
    }

    #[must_use]
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }

    #[must_use]
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    #[must_use]
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    #[must_use]
    pub fn idempotent(mut self, yes: bool) -> Self {
        self.idempotent = yes;
        self
    }

    #[must_use]
    pub fn reserved(mut self, yes: bool) -> Self {
        self.reserved = yes;
        self
    }

    #[must_use]
    pub fn parallel(mut self, parallel: Parallel) -> Self {
        self.parallel = parallel;
        self
    }

    #[must_use]
    pub fn timeout(mut self, deadline: Duration) -> Self {
        self.timeout = Some(deadline);
        self
    }
}

/// Something a call would touch, as the tool declares it for policies to judge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Access {
    /// Reads this path (as given, relative to the workspace unless absolute).
    Read { path: PathBuf },
    /// Creates, changes or deletes this path.
    Write { path: PathBuf },
    /// Runs this command line.
    Execute { command: String },
    /// Opens a network connection to this target.
    Network { target: String },
    /// Hands the call to a program or service dsh does not confine (an MCP server): what it
    /// does there is that service's. `claims_read_only` is the service's own word that the
    /// call only reads (MCP's `readOnlyHint`): a claim, never proof.
    Remote {
        service: String,
        claims_read_only: bool,
    },
}

/// What a tool returns on success.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// What the model sees.
    pub content: String,
    /// The structured output; must match the tool's declared output schema.
    pub value: Value,
    /// A command's exit code; a non-zero exit is still a successful call.
    pub exit_code: Option<i32>,
    /// Whether the work ran inside an OS sandbox, for tools that run commands.
    pub sandbox: Option<SandboxState>,
    /// The files the call changed through the file seam, each with its pre-image kept.
    pub changes: Vec<crate::FileChange>,
}

impl ToolOutput {
    pub fn new(content: impl Into<String>, value: Value) -> Self {
        ToolOutput {
            content: content.into(),
            value,
            exit_code: None,
            sandbox: None,
            changes: Vec::new(),
        }
    }

    #[must_use]
    pub fn with_exit_code(mut self, code: i32) -> Self {
        self.exit_code = Some(code);
        self
    }

    #[must_use]
    pub fn with_sandbox(mut self, sandbox: SandboxState) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// The call changed a file (through the file seam, which kept its pre-image).
    #[must_use]
    pub fn with_change(mut self, change: crate::FileChange) -> Self {
        self.changes.push(change);
        self
    }
}

/// The ways a tool (or a wrapper around it) can fail. Each maps to one [`FailureKind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// The tool's own ordinary failure (an edit whose text is not found): `tool_error`.
    Failed,
    /// The arguments are well-formed but unusable: `invalid_args`.
    InvalidArgs,
    /// The target does not exist: `not_found`.
    NotFound,
    /// The file changed since the session observed it: `stale_version`.
    StaleVersion,
    /// The session never observed the file it wants to replace: `not_observed`.
    NotObserved,
    /// The tool's own re-check refused the target (e.g. confinement at open): `denied`.
    Denied,
    /// A deadline passed: `timeout`.
    Timeout,
    /// A panic, caught by the pipeline: `crashed`.
    Crashed,
}

impl ToolErrorKind {
    pub(crate) fn failure_kind(self) -> FailureKind {
        match self {
            ToolErrorKind::Failed => FailureKind::ToolError,
            ToolErrorKind::InvalidArgs => FailureKind::InvalidArgs,
            ToolErrorKind::NotFound => FailureKind::NotFound,
            ToolErrorKind::StaleVersion => FailureKind::StaleVersion,
            ToolErrorKind::NotObserved => FailureKind::NotObserved,
            ToolErrorKind::Denied => FailureKind::Denied,
            ToolErrorKind::Timeout => FailureKind::Timeout,
            ToolErrorKind::Crashed => FailureKind::Crashed,
        }
    }
}

/// A failed execution. Its message is what the model reads: say what went wrong and what to do
/// instead.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolError {
    pub kind: ToolErrorKind,
    pub message: String,
    /// Worth retrying (for idempotent tools, by [`crate::Retry`]).
    pub transient: bool,
    /// The wrapper that produced the failure, if not the tool itself.
    pub policy: Option<String>,
    pub exit_code: Option<i32>,
}

impl ToolError {
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        ToolError {
            kind,
            message: message.into(),
            transient: false,
            policy: None,
            exit_code: None,
        }
    }

    /// An ordinary failure of the tool (`tool_error`).
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::new(ToolErrorKind::Failed, message)
    }

    /// Marks the failure as worth retrying.
    #[must_use]
    pub fn transient(mut self) -> Self {
        self.transient = true;
        self
    }

    /// Attributes the failure to a wrapper.
    #[must_use]
    pub fn by_policy(mut self, policy: impl Into<String>) -> Self {
        self.policy = Some(policy.into());
        self
    }

    #[must_use]
    pub fn with_exit_code(mut self, code: i32) -> Self {
        self.exit_code = Some(code);
        self
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

/// What the innermost layer of gate 4 hands a tool: the call, its spec, and the cancellation
/// token of this attempt.
#[derive(Clone, Debug)]
pub struct ExecContext {
    pub call: ToolCall,
    pub spec: Arc<ToolSpec>,
    /// Cancelled on user interrupt or when a wrapper's deadline passes. A tool holding
    /// resources beyond its future (a child process, a blocking thread) must watch it and
    /// must not return before those are released: the scheduler keeps the call's slot until
    /// the tool returns, so an exclusive call never overlaps a zombie (DESIGN §3).
    pub cancel: CancellationToken,
    /// 1 for the first attempt; [`crate::Retry`] increments it.
    pub attempt: u32,
    /// The handle through which this call submits calls of its own into the session
    /// (DESIGN §3, "Nested calls"); `None` outside a pipeline (a tool's own unit tests).
    pub dispatch: Option<crate::Dispatch>,
    /// What gates 1 and 2 cleared the call to do: a tool that confines its work applies the
    /// matching profile (a command in the read-only sandbox, DESIGN §4).
    pub clearance: crate::Clearance,
}

impl ExecContext {
    /// Submits `calls` as a batch of their own in this call's scope, cancelled with this
    /// call ([`crate::Dispatch::submit`]). Outside a pipeline every call fails as a harness
    /// fault would, without running.
    pub async fn submit(
        &self,
        source: crate::CallSource,
        calls: Vec<ToolCall>,
    ) -> Result<crate::BatchOutcome, SubmitError> {
        match &self.dispatch {
            Some(d) => Ok(d.submit(source, calls, &self.cancel).await?),
            None => Err(SubmitError::Detached),
        }
    }

    /// Reports the latest lines of what the call is printing as it runs (a command's
    /// output), for a front end's live view. A report only: nothing is recorded or changed by
    /// it, and outside a pipeline it goes nowhere.
    pub fn report_output(&self, text: &str) {
        if let Some(d) = &self.dispatch {
            d.report_output(text);
        }
    }
}

/// A submission that could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    #[error("this call runs outside a pipeline and cannot submit calls")]
    Detached,
    #[error(transparent)]
    Batch(#[from] crate::BatchError),
}

/// A tool: its declaration and its body.
///
/// The pipeline calls [`Tool::spec`] once, at registration. `parallel_safe` and `accesses`
/// are called once per call, before gate 1, and must be pure functions of the arguments.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    fn spec(&self) -> ToolSpec;

    /// Whether this call may execute alongside other parallel-safe calls (SPEC P10).
    /// When in doubt, say `false`: an `Err` or a panic here also means exclusive.
    fn parallel_safe(&self, _args: &Value) -> Result<bool, String> {
        Ok(false)
    }

    /// The paths this call reads or writes and the commands it runs, for policies to judge.
    /// Declare honestly and completely: a policy cannot see what is not declared.
    fn accesses(&self, _args: &Value) -> Vec<Access> {
        Vec::new()
    }

    /// What this call would change, for a person deciding whether to approve it (gate 2):
    /// for a file change, the unified diff it would apply. Computed from the arguments and
    /// the workspace as it is now, changing nothing; `None` when there is nothing to show or
    /// it cannot be known (an unreadable file). Only a display: no decision reads it, and a
    /// panic here shows nothing.
    fn preview(&self, _args: &Value) -> Option<String> {
        None
    }

    /// The tool body, innermost in gate 4. The arguments already match the input schema.
    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError>;
}
