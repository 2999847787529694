//! `run_code{code, description}`: the reserved tool that runs a program (SPEC P11). The
//! program runs on a thread of its own ([`crate::engine`]); this side submits each batch of
//! its calls through the call's dispatch handle — so every sub-call is a real `ToolCall`
//! (`source = code`, this call as `parent`) through every gate, within the tools of the agent
//! that runs the program — and turns how the program ended into the result.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use dsh_core::{
    CallSource, ExecContext, Parallel, Tool, ToolCall, ToolError, ToolErrorKind, ToolOutput,
    ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::CodeLimits;
use crate::program::{Batch, Clock, Ending, Failure, Outcome, Settled};

/// How long past its deadline a program's thread gets to notice it before the call ends
/// without it.
const THREAD_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Sets the program's stop flag when dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The longest a `run_code` call may take, waits for a person included.
const OVERALL_CAP: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// Reports a program's calls to its agent's listener as they go, and stops the program's
/// clock while one waits for a person.
struct PersonClock {
    inner: Arc<dyn dsh_core::CallEvents>,
    clock: Arc<Clock>,
}

impl dsh_core::CallEvents for PersonClock {
    fn proposed(&self, call: &ToolCall) {
        self.inner.proposed(call);
    }
    fn started(&self, call: &ToolCall) {
        self.inner.started(call);
    }
    fn output(&self, call: &ToolCall, text: &str) {
        self.inner.output(call, text);
    }
    fn person(&self, call: &ToolCall, waiting: bool) {
        self.clock.person(waiting);
        self.inner.person(call, waiting);
    }
    fn finished(&self, call: &ToolCall, result: &Arc<dsh_core::FrozenResult>) {
        self.inner.finished(call, result);
    }
}

/// The reserved tool's name.
pub const RUN_CODE: &str = "run_code";

/// The `run_code` tool.
#[derive(Debug, Default)]
pub struct RunCode {
    limits: CodeLimits,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    code: String,
    description: String,
}

impl RunCode {
    pub fn new(limits: CodeLimits) -> Self {
        RunCode { limits }
    }
}

/// How the program's calls went, by outcome.
#[derive(Default)]
struct Counts {
    ok: usize,
    failed: BTreeMap<String, usize>,
}

#[async_trait]
impl Tool for RunCode {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            RUN_CODE,
            "Run a JavaScript program that calls tools: the code is the body of an async \
             function, `await tools.NAME(args)` returns the tool's output value (see the \
             declarations), `Promise.all` runs calls together, a refused or failed call throws \
             a ToolCallError, `console.log` is returned with the result, and `return` gives \
             the result's value. No files, network or timers except through tools.",
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The program: the body of an async function."},
                "description": {"type": "string", "description": "What the program does, in a sentence, for the person who may be asked about its calls."}
            },
            "required": ["code", "description"],
            "additionalProperties": false
        }))
        .output_schema(json!({
            "type": "object",
            "properties": {
                "value": {"description": "What the program returned (JSON; null for nothing)."},
                "log": {"type": "string"},
                "log_truncated": {"type": "boolean"},
                "calls": {
                    "type": "object",
                    "properties": {
                        "total": {"type": "integer", "minimum": 0},
                        "ok": {"type": "integer", "minimum": 0},
                        "failed": {"type": "object", "additionalProperties": {"type": "integer"}}
                    },
                    "required": ["total", "ok", "failed"],
                    "additionalProperties": false
                }
            },
            "required": ["value", "log", "log_truncated", "calls"],
            "additionalProperties": false
        }))
        // It changes nothing itself: each of its calls is judged on its own.
        .read_only(true)
        .reserved(true)
        .parallel(Parallel::Never)
        // The overall cap, past any waits for a person; the program's own limit is its clock.
        .timeout(self.limits.wall.max(OVERALL_CAP))
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = serde_json::from_value(args.clone()).map_err(|e| {
            ToolError::new(
                ToolErrorKind::InvalidArgs,
                format!("run_code: unusable arguments: {e}"),
            )
        })?;
        let _ = &args.description;
        let Some(dispatch) = cx.dispatch.clone() else {
            return Err(ToolError::failed(
                "run_code runs only inside a session's pipeline",
            ));
        };
        let names: Vec<String> = dispatch
            .tool_specs()
            .iter()
            .filter(|s| !s.reserved)
            .map(|s| s.name.clone())
            .collect();
        let clock = Arc::new(Clock::new(self.limits.wall));
        // The program's calls go out in its agent's scope, with their waits for a person
        // stopping the program's clock.
        let scope = dsh_core::Scope {
            events: Arc::new(PersonClock {
                inner: dispatch.scope().events.clone(),
                clock: clock.clone(),
            }),
            ..dispatch.scope().clone()
        };
        let stop = Arc::new(AtomicBool::new(false));
        // However this call ends — returned, failed, or dropped by a timeout — its program
        // is told to stop.
        let _stop_on_drop = StopOnDrop(stop.clone());
        let (batches, mut incoming) = tokio::sync::mpsc::unbounded_channel::<Batch>();
        let (done_tx, done) = tokio::sync::oneshot::channel::<Outcome>();
        start(
            args.code,
            names,
            self.limits.clone(),
            clock.clone(),
            stop.clone(),
            batches,
            done_tx,
        )?;

        let mut counts = Counts::default();
        let mut n = 0usize;
        let parent = cx.call.id().to_owned();
        let mut done = std::pin::pin!(done);
        let outcome = loop {
            tokio::select! {
                outcome = &mut done => break outcome.unwrap_or_else(|_| {
                    Outcome::ending(Ending::Broken("the interpreter's thread ended without a word".to_owned()))
                }),
                // The interpreter asks whether to stop only every so many steps and never
                // inside a built-in: past the deadline and a grace, the call ends without
                // waiting for it (its thread is told to stop and does at its next check).
                () = tokio::time::sleep_until((clock.deadline() + THREAD_GRACE).into()) => {
                    if clock.passed() && Instant::now() >= clock.deadline() + THREAD_GRACE {
                        stop.store(true, Ordering::Relaxed);
                        break Outcome::ending(Ending::TimedOut);
                    }
                }
                batch = incoming.recv() => {
                    let Some(batch) = batch else { continue };
                    let calls: Vec<ToolCall> = batch.requests.iter().map(|r| {
                        n += 1;
                        ToolCall::new(format!("{parent}.{n}"), r.name.as_str(), r.args.clone())
                    }).collect();
                    // The program's time runs while its calls do: past the deadline they are
                    // cancelled, and the program stops.
                    let sub = cx.cancel.child_token();
                    let submitted = dispatch.submit_in(&scope, CallSource::Code, calls, &sub);
                    let mut submitted = std::pin::pin!(submitted);
                    let result = loop {
                        tokio::select! {
                            r = &mut submitted => break r,
                            () = tokio::time::sleep_until(clock.deadline().into()) => {
                                // The deadline moves while a person is asked.
                                if clock.passed() {
                                    sub.cancel();
                                    break submitted.await;
                                }
                            }
                        }
                    };
                    let settled = match result {
                        Ok(outcome) => outcome.results.iter().map(|r| {
                            match r.failure_kind() {
                                None => {
                                    counts.ok += 1;
                                    Settled::Value(with_text(r.value(), r.content()))
                                }
                                Some(kind) => {
                                    *counts.failed.entry(kind.as_str().to_owned()).or_default() += 1;
                                    let d = r.decided_by();
                                    Settled::Failed(Failure {
                                        kind: kind.as_str().to_owned(),
                                        gate: d.gate.as_str().to_owned(),
                                        policy: d.policy.clone(),
                                        reason: d.reason.clone(),
                                    })
                                }
                            }
                        }).collect(),
                        Err(e) => {
                            // The journal failed: nothing more may run.
                            stop.store(true, Ordering::Relaxed);
                            return Err(ToolError::failed(format!(
                                "the program's calls could not be recorded, so it was stopped: {e}"
                            )));
                        }
                    };
                    let _ = batch.reply.send(settled);
                }
                () = cx.cancel.cancelled(), if !stop.load(Ordering::Relaxed) => {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        };
        finish(outcome, counts)
    }
}

/// What a program gets from a call that succeeded: the tool's output value, with the result's
/// text (what a model would see: a file's lines, a command's output) as `content` when the
/// value is an object without one.
fn with_text(value: Option<&Value>, content: &str) -> Value {
    match value {
        Some(Value::Object(map)) => {
            let mut map = map.clone();
            map.entry("content")
                .or_insert_with(|| Value::String(content.to_owned()));
            Value::Object(map)
        }
        Some(v) => v.clone(),
        None => Value::Null,
    }
}

/// Starts the program's thread; its outcome comes on `done`.
#[cfg(feature = "interpreter")]
fn start(
    code: String,
    names: Vec<String>,
    limits: CodeLimits,
    clock: Arc<Clock>,
    stop: Arc<AtomicBool>,
    batches: tokio::sync::mpsc::UnboundedSender<Batch>,
    done: tokio::sync::oneshot::Sender<Outcome>,
) -> Result<(), ToolError> {
    std::thread::Builder::new()
        .name("dsh-run-code".to_owned())
        .spawn(move || {
            let outcome = crate::engine::run(&code, &names, &limits, clock, stop, batches);
            let _ = done.send(outcome);
        })
        .map(|_| ())
        .map_err(|e| ToolError::failed(format!("cannot start the program's thread: {e}")))
}

#[cfg(not(feature = "interpreter"))]
fn start(
    _code: String,
    _names: Vec<String>,
    _limits: CodeLimits,
    _clock: Arc<Clock>,
    _stop: Arc<AtomicBool>,
    _batches: tokio::sync::mpsc::UnboundedSender<Batch>,
    done: tokio::sync::oneshot::Sender<Outcome>,
) -> Result<(), ToolError> {
    let _ = done.send(Outcome::ending(Ending::NotBuiltIn));
    Ok(())
}

/// The result: what the program returned, its log and its calls — or why it stopped.
fn finish(outcome: Outcome, counts: Counts) -> Result<ToolOutput, ToolError> {
    let Outcome {
        ending,
        log,
        log_cut,
        calls,
    } = outcome;
    let mut tally = format!("{calls} tool call{}", if calls == 1 { "" } else { "s" });
    if calls > 0 {
        tally.push_str(&format!(": {} ok", counts.ok));
        for (kind, n) in &counts.failed {
            tally.push_str(&format!(", {n} {}", kind.replace('_', " ")));
        }
    }
    let with_log = |head: String| {
        let mut text = head;
        if !log.is_empty() {
            text.push_str("\nlog:\n");
            text.push_str(log.trim_end());
            if log_cut {
                text.push_str("\n[… the log was cut at its limit]");
            }
        }
        text.push_str(&format!("\n[{tally}]"));
        text
    };
    let fail = |kind: ToolErrorKind, head: String| Err(ToolError::new(kind, with_log(head)));
    match ending {
        Ending::Returned(value) => {
            let shown = serde_json::to_string_pretty(&value).unwrap_or_default();
            Ok(ToolOutput::new(
                with_log(format!("returned: {shown}")),
                json!({
                    "value": value,
                    "log": log,
                    "log_truncated": log_cut,
                    "calls": {"total": calls, "ok": counts.ok, "failed": counts.failed},
                }),
            ))
        }
        Ending::Threw {
            syntax,
            name,
            message,
            line,
            column,
            failure,
        } => {
            let at = match (line, column) {
                (Some(l), Some(c)) => format!(" at line {l}, column {c}"),
                (Some(l), None) => format!(" at line {l}"),
                _ => String::new(),
            };
            let head = if syntax {
                format!("the program does not parse{at}: {name}: {message}")
            } else if let Some(f) = failure {
                format!(
                    "the program stopped{at}: a tool call it did not catch failed ({}, at {}{}): {}",
                    f.kind,
                    f.gate,
                    f.policy.map(|p| format!(" by {p}")).unwrap_or_default(),
                    f.reason
                )
            } else {
                format!("the program threw{at}: {name}: {message}")
            };
            let kind = if syntax {
                ToolErrorKind::InvalidArgs
            } else {
                ToolErrorKind::Failed
            };
            fail(kind, head)
        }
        Ending::OutOfMemory => fail(
            ToolErrorKind::Failed,
            "the program ran out of memory (its limit is the interpreter's heap); it was stopped"
                .to_owned(),
        ),
        Ending::TimedOut => fail(
            ToolErrorKind::Timeout,
            "the program ran past its time limit (counting the time its tool calls took); it was stopped"
                .to_owned(),
        ),
        Ending::Cancelled => Err(ToolError::new(
            ToolErrorKind::Failed,
            with_log("the program was cancelled".to_owned()),
        )),
        Ending::Interrupted => fail(
            ToolErrorKind::Failed,
            "the program was stopped by the interpreter".to_owned(),
        ),
        Ending::TooManyCalls => fail(
            ToolErrorKind::Failed,
            format!("the program tried to make more tool calls than its limit ({calls} made); it was stopped"),
        ),
        Ending::TooMuchOutput => fail(
            ToolErrorKind::Failed,
            "the program printed more than its output limit; it was stopped".to_owned(),
        ),
        Ending::ValueTooLarge(bytes) => fail(
            ToolErrorKind::Failed,
            format!("the program returned {bytes} bytes of JSON, more than a result may hold; return less (or write it to a file with a tool)"),
        ),
        Ending::Stuck => fail(
            ToolErrorKind::Failed,
            "the program waits for something that never comes (a promise no tool call settles)"
                .to_owned(),
        ),
        Ending::Broken(why) => fail(ToolErrorKind::Failed, format!("the interpreter failed: {why}")),
        Ending::NotBuiltIn => fail(
            ToolErrorKind::Failed,
            "Code Mode is not built into this dsh (built without the dsh-code `interpreter` feature): not implemented in this build".to_owned(),
        ),
    }
}
