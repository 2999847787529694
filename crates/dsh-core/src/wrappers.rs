//! Gate 4, execution wrappers (SPEC P5): around the tool, not before it. They shape *how* a
//! call runs (deadline, retry, measurement), never *whether* it runs — that was decided by
//! gates 1–3, and no wrapper asks for approval again.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::panic;
use crate::tool::{ExecContext, Tool, ToolError, ToolErrorKind, ToolOutput};

/// A gate-4 layer. The first registered is outermost; the tool is innermost.
///
/// **Lifetime:** one per session, shared by calls that execute at the same time: `wrap` must
/// be reentrant.
///
/// **May:** call `next` zero or more times, replace the cancellation token it passes in (a
/// child of the one it got), turn the outcome into a failure. **May not:** ask for approval or
/// turn a failure into a success it did not observe.
///
/// **On panic:** the call fails as `crashed` at gate `execute`, naming this wrapper.
#[async_trait]
pub trait Wrapper: Send + Sync {
    fn name(&self) -> &str;

    async fn wrap(&self, cx: ExecContext, next: Next<'_>) -> Result<ToolOutput, ToolError>;
}

/// The rest of the chain below a wrapper. Calling [`Next::run`] again re-runs the rest (retry).
#[derive(Clone, Copy)]
pub struct Next<'a> {
    rest: &'a [Arc<dyn Wrapper>],
    tool: &'a dyn Tool,
}

impl<'a> Next<'a> {
    pub(crate) fn new(rest: &'a [Arc<dyn Wrapper>], tool: &'a dyn Tool) -> Self {
        Next { rest, tool }
    }

    /// Runs the remaining wrappers and the tool. Panics below are caught here and become
    /// `crashed` failures attributed to the layer that panicked.
    pub fn run(self, cx: ExecContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            match self.rest.split_first() {
                None => {
                    let args = cx.call.args().clone();
                    let fut = self.tool.run(&args, &cx);
                    match AssertUnwindSafe(fut).catch_unwind().await {
                        Ok(r) => r,
                        Err(p) => Err(ToolError::new(
                            ToolErrorKind::Crashed,
                            format!(
                                "tool `{}` panicked: {}",
                                cx.call.name(),
                                panic::message(p.as_ref())
                            ),
                        )),
                    }
                }
                Some((first, rest)) => {
                    let next = Next::new(rest, self.tool);
                    let fut = first.wrap(cx, next);
                    match AssertUnwindSafe(fut).catch_unwind().await {
                        Ok(r) => r,
                        Err(p) => Err(ToolError::new(
                            ToolErrorKind::Crashed,
                            format!(
                                "wrapper `{}` panicked: {}",
                                first.name(),
                                panic::message(p.as_ref())
                            ),
                        )
                        .by_policy(first.name())),
                    }
                }
            }
        })
    }
}

/// A deadline per call: the tool's own [`crate::ToolSpec::timeout`], else this default.
///
/// When the deadline passes, the tool's cancellation token is cancelled and the tool gets
/// `grace` to stop and release what it holds; then its future is dropped. Either way the call
/// fails as `timeout`, and the scheduler keeps its slot until this has happened.
#[derive(Clone, Debug)]
pub struct Timeout {
    default: Duration,
    grace: Duration,
}

impl Timeout {
    pub fn new(default: Duration) -> Self {
        Timeout {
            default,
            grace: Duration::from_secs(5),
        }
    }

    /// How long a cancelled tool may take to stop before its future is dropped.
    #[must_use]
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }
}

#[async_trait]
impl Wrapper for Timeout {
    fn name(&self) -> &str {
        "timeout"
    }

    async fn wrap(&self, cx: ExecContext, next: Next<'_>) -> Result<ToolOutput, ToolError> {
        let deadline = cx.spec.timeout.unwrap_or(self.default);
        let token = cx.cancel.child_token();
        let inner = ExecContext {
            cancel: token.clone(),
            ..cx
        };
        let mut fut = next.run(inner);
        tokio::select! {
            r = &mut fut => r,
            () = tokio::time::sleep(deadline) => {
                token.cancel();
                let stopped = tokio::time::timeout(self.grace, &mut fut).await.is_ok();
                drop(fut);
                let how = if stopped { "stopped" } else { "was stopped by force" };
                Err(ToolError::new(
                    ToolErrorKind::Timeout,
                    format!("timed out after {} ms and {how}; try a narrower request", deadline.as_millis()),
                )
                .by_policy("timeout"))
            }
        }
    }
}

/// Retries transient failures of idempotent tools only. Non-idempotent tools pass straight
/// through: running them twice could do the work twice. Approval is never asked again — it
/// happened before gate 4.
#[derive(Clone, Debug)]
pub struct Retry {
    max_attempts: u32,
    backoff: Duration,
}

impl Retry {
    /// `max_attempts` counts the first attempt; the wait doubles after each failure.
    pub fn new(max_attempts: u32, backoff: Duration) -> Self {
        Retry {
            max_attempts: max_attempts.max(1),
            backoff,
        }
    }
}

#[async_trait]
impl Wrapper for Retry {
    fn name(&self) -> &str {
        "retry"
    }

    async fn wrap(&self, cx: ExecContext, next: Next<'_>) -> Result<ToolOutput, ToolError> {
        if !cx.spec.idempotent {
            return next.run(cx).await;
        }
        let mut wait = self.backoff;
        let mut attempt = 1;
        loop {
            let this = ExecContext {
                attempt,
                ..cx.clone()
            };
            match next.run(this).await {
                Err(e)
                    if e.transient && attempt < self.max_attempts && !cx.cancel.is_cancelled() =>
                {
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = cx.cancel.cancelled() => return Err(e),
                    }
                    wait = wait.saturating_mul(2);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}
