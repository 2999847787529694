//! The interpreter: one program on a thread of its own, in a QuickJS runtime with a memory
//! limit, a stack limit and an interrupt handler, and nothing of the outside world — no file,
//! network, process, module loading or timer; only `tools.*`, `console.log` and the language.
//! The only file that names the interpreter.
//!
//! The program is the body of an async function. It runs until it finishes or every job it
//! has is waiting on a tool call; then the calls it made since (in the order made) go to the
//! runtime side as one batch ([`Batch`]) — so `Promise.all` over calls submits them together
//! and the scheduler overlaps them as its rules allow — and the thread waits for their
//! results, settles each call's promise (a value, or a `ToolCallError`), and goes on.
//!
//! Every stop is a [`Ending`]: returned, threw (with line and column), a syntax error, out of
//! memory, out of time, cancelled, too many calls, too much output, a value too large, or
//! waiting for nothing. The interrupt handler stops an endless loop (QuickJS raises an
//! uncatchable exception when it says so), so no program outlives its limits.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rquickjs::function::{Opt, Rest};
use rquickjs::promise::PromiseState;
use rquickjs::{Context, Ctx, Exception, Function, Object, Promise, Runtime, Value};

use crate::CodeLimits;
use crate::program::{Batch, Clock, Ending, Failure, Outcome, Request, Settled};

/// The script's name in stack traces; the program starts on its second line.
const SCRIPT: &str = "eval_script";

/// Defined before the program runs: the error a failed call throws.
/// The class lives in a closure: the program may replace the global name, never the class
/// its failed calls throw.
const PRELUDE: &str = r"
(() => {
  class ToolCallError extends Error {
    constructor(kind, gate, policy, reason) {
      super(reason);
      this.name = 'ToolCallError';
      this.kind = kind;
      this.gate = gate;
      this.policy = policy;
      this.reason = reason;
    }
  }
  globalThis.ToolCallError = ToolCallError;
  return (kind, gate, policy, reason) => new ToolCallError(kind, gate, policy, reason);
})()
";

/// Why the interrupt handler stops the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trip {
    Calls,
    Output,
    Arguments,
}

/// Runs `code` with `tools` (the names `tools.*` holds) under `limits` until `clock` says
/// its time is up;
/// `stop` set (the call was cancelled) interrupts it. Calls go out through `batches`.
pub(crate) fn run(
    code: &str,
    tools: &[String],
    limits: &CodeLimits,
    clock: Arc<Clock>,
    stop: Arc<AtomicBool>,
    batches: tokio::sync::mpsc::UnboundedSender<Batch>,
) -> Outcome {
    let halt = Arc::new(AtomicBool::new(false));
    let Ok(rt) = Runtime::new() else {
        return Outcome::ending(Ending::Broken("the interpreter could not start".to_owned()));
    };
    rt.set_memory_limit(limits.memory_bytes);
    rt.set_max_stack_size(limits.stack_bytes);
    {
        let (halt, stop, clock) = (halt.clone(), stop.clone(), clock.clone());
        rt.set_interrupt_handler(Some(Box::new(move || {
            halt.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed) || clock.passed()
        })));
    }
    let Ok(context) = Context::full(&rt) else {
        return Outcome::ending(Ending::Broken(
            "the interpreter's context could not be made".to_owned(),
        ));
    };
    let mut outcome = context.with(|ctx| {
        let state = State::new(limits, halt.clone(), stop.clone(), clock.clone());
        let ending = match drive(&ctx, code, tools, &state, &batches) {
            Ok(ending) => ending,
            Err(e) => Ending::Broken(e.to_string()),
        };
        // No JavaScript value may outlive the context: drop the pending calls' functions.
        state.pending.borrow_mut().clear();
        Outcome {
            ending,
            log: std::mem::take(&mut *state.log.borrow_mut()),
            log_cut: state.log_cut.get(),
            calls: state.made.get(),
        }
    });
    // What stopped it, when the interpreter only saw an interrupt (or found nothing left to
    // run because its jobs were cut off).
    let cut_off = stop.load(Ordering::Relaxed) || clock.passed();
    let unexplained = match outcome.ending {
        Ending::Interrupted => true,
        Ending::Stuck => cut_off,
        _ => false,
    };
    if unexplained {
        outcome.ending = if stop.load(Ordering::Relaxed) {
            Ending::Cancelled
        } else if clock.passed() {
            Ending::TimedOut
        } else {
            Ending::Interrupted
        };
    }
    outcome
}

/// What the program's functions share.
struct State<'js> {
    limits: CodeLimits,
    halt: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    clock: Arc<Clock>,
    /// Bytes of arguments the program's calls have carried out of the interpreter.
    args_bytes: Cell<usize>,
    trip: Cell<Option<Trip>>,
    made: Cell<usize>,
    log: RefCell<String>,
    log_cut: Cell<bool>,
    /// Calls made since the last batch went out, with their promise's settling functions.
    pending: RefCell<Vec<(Request, Function<'js>, Function<'js>)>>,
}

impl<'js> State<'js> {
    fn new(
        limits: &CodeLimits,
        halt: Arc<AtomicBool>,
        stop: Arc<AtomicBool>,
        clock: Arc<Clock>,
    ) -> Rc<Self> {
        Rc::new(State {
            limits: limits.clone(),
            halt,
            stop,
            clock,
            args_bytes: Cell::new(0),
            trip: Cell::new(None),
            made: Cell::new(0),
            log: RefCell::new(String::new()),
            log_cut: Cell::new(false),
            pending: RefCell::new(Vec::new()),
        })
    }

    /// Whether the program must stop now: a limit tripped, the call cancelled, or its time
    /// up. Checked between jobs and by every function the program calls, since the
    /// interpreter asks its interrupt handler only every so many steps and never inside a
    /// built-in.
    fn stopped(&self) -> bool {
        self.halt.load(Ordering::Relaxed)
            || self.stop.load(Ordering::Relaxed)
            || self.clock.passed()
    }

    /// How a stopped program ended: the limit it tripped, or an interrupt (cancellation or
    /// its time, told apart by [`run`]).
    fn stopped_ending(&self) -> Ending {
        match self.trip.get() {
            Some(Trip::Calls) => Ending::TooManyCalls,
            Some(Trip::Output) => Ending::TooMuchOutput,
            Some(Trip::Arguments) => Ending::OutOfMemory,
            None => Ending::Interrupted,
        }
    }

    fn trip(&self, why: Trip) {
        self.trip.set(Some(why));
        self.halt.store(true, Ordering::Relaxed);
    }
}

fn drive<'js>(
    ctx: &Ctx<'js>,
    code: &str,
    tools: &[String],
    state: &Rc<State<'js>>,
    batches: &tokio::sync::mpsc::UnboundedSender<Batch>,
) -> rquickjs::Result<Ending> {
    let fail: Function = ctx.eval(PRELUDE)?;
    install(ctx, tools, state)?;
    let wrapped = format!("(async () => {{\n{code}\n}})()");
    let program: Promise = match ctx.eval(wrapped) {
        Ok(p) => p,
        Err(rquickjs::Error::Exception) => return Ok(thrown(ctx, ctx.catch(), state, true)),
        // The text closed the function it is wrapped in: the program's doing.
        Err(rquickjs::Error::FromJs { .. }) => {
            return Ok(Ending::Threw {
                syntax: true,
                name: "SyntaxError".to_owned(),
                message: "the program closes the async function it is the body of".to_owned(),
                line: None,
                column: None,
                failure: None,
            });
        }
        Err(e) => return Err(e),
    };
    loop {
        while !state.stopped() && ctx.execute_pending_job() {}
        if state.stopped() {
            return Ok(state.stopped_ending());
        }
        match program.state() {
            PromiseState::Resolved => {
                let value: Value = program
                    .result()
                    .unwrap_or(Ok(Value::new_undefined(ctx.clone())))?;
                return Ok(returned(ctx, value, state));
            }
            PromiseState::Rejected => {
                let caught = match program.result::<Value>() {
                    Some(Err(rquickjs::Error::Exception)) | None => ctx.catch(),
                    Some(Err(e)) => return Err(e),
                    Some(Ok(v)) => v,
                };
                return Ok(thrown(ctx, caught, state, false));
            }
            PromiseState::Pending => {}
        }
        let calls: Vec<_> = state.pending.borrow_mut().drain(..).collect();
        if calls.is_empty() {
            return Ok(Ending::Stuck);
        }
        let (reply, results) = std::sync::mpsc::channel();
        let requests = calls.iter().map(|(r, _, _)| r.clone()).collect();
        if batches.send(Batch { requests, reply }).is_err() {
            return Ok(Ending::Interrupted);
        }
        let Ok(settled) = results.recv() else {
            return Ok(Ending::Interrupted);
        };
        for ((_, resolve, reject), result) in calls.into_iter().zip(settled) {
            match result {
                Settled::Value(v) => {
                    let value = ctx.json_parse(v.to_string())?;
                    resolve.call::<_, ()>((value,))?;
                }
                Settled::Failed(f) => {
                    let error: Value = fail.call((
                        f.kind.as_str(),
                        f.gate.as_str(),
                        f.policy.clone(),
                        f.reason.as_str(),
                    ))?;
                    reject.call::<_, ()>((error,))?;
                }
            }
        }
    }
}

/// `tools.*` and `console.log`.
fn install<'js>(ctx: &Ctx<'js>, tools: &[String], state: &Rc<State<'js>>) -> rquickjs::Result<()> {
    let globals = ctx.globals();
    let console = Object::new(ctx.clone())?;
    let s = state.clone();
    console.set(
        "log",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, values: Rest<Value<'js>>| {
                if s.stopped() {
                    return Err(Exception::throw_internal(&ctx, "the program is stopped"));
                }
                let room = s.limits.max_log_bytes.saturating_sub(s.log.borrow().len());
                let mut line = String::new();
                for (i, v) in values.0.iter().enumerate() {
                    if i > 0 {
                        line.push(' ');
                    }
                    line.push_str(&shown(&ctx, v));
                    // Past the room left, the rest is not shown anyway.
                    if line.len() > room {
                        break;
                    }
                }
                line.push('\n');
                let mut log = s.log.borrow_mut();
                let room = s.limits.max_log_bytes.saturating_sub(log.len());
                if line.len() > room {
                    let mut cut = room;
                    while !line.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    log.push_str(&line[..cut]);
                    s.log_cut.set(true);
                    s.trip(Trip::Output);
                    return Err(Exception::throw_internal(
                        &ctx,
                        "the program printed more than its output limit",
                    ));
                }
                log.push_str(&line);
                Ok(())
            },
        )?,
    )?;
    globals.set("console", console)?;
    let object = Object::new(ctx.clone())?;
    for name in tools {
        let s = state.clone();
        let tool = name.clone();
        object.set(
            name.as_str(),
            Function::new(ctx.clone(), move |ctx: Ctx<'js>, args: Opt<Value<'js>>| {
                if s.stopped() {
                    return Err(Exception::throw_internal(&ctx, "the program is stopped"));
                }
                if s.made.get() >= s.limits.max_calls {
                    s.trip(Trip::Calls);
                    return Err(Exception::throw_internal(
                        &ctx,
                        "the program made more tool calls than its limit",
                    ));
                }
                let args = match args.0 {
                    None => serde_json::json!({}),
                    Some(v) if v.is_undefined() => serde_json::json!({}),
                    Some(v) => {
                        let text = ctx
                            .json_stringify(v)?
                            .map(|s| s.to_string())
                            .transpose()?
                            .unwrap_or_else(|| "null".to_owned());
                        serde_json::from_str(&text).map_err(|e| {
                            Exception::throw_type(
                                &ctx,
                                &format!("tools.{tool}: arguments are not JSON: {e}"),
                            )
                        })?
                    }
                };
                // Arguments leave the interpreter's heap: they count against its memory
                // limit all the same.
                let bytes = s.args_bytes.get() + args.to_string().len();
                if bytes > s.limits.memory_bytes {
                    s.trip(Trip::Arguments);
                    return Err(Exception::throw_internal(
                        &ctx,
                        "the program's tool calls carried more bytes of arguments than its memory limit",
                    ));
                }
                s.args_bytes.set(bytes);
                s.made.set(s.made.get() + 1);
                let (promise, resolve, reject) = ctx.promise()?;
                s.pending.borrow_mut().push((
                    Request {
                        name: tool.clone(),
                        args,
                    },
                    resolve,
                    reject,
                ));
                Ok(promise)
            })?,
        )?;
    }
    globals.set("tools", object)?;
    let _: Value = ctx.eval("Object.freeze(tools); Object.freeze(console);")?;
    Ok(())
}

/// A value as `console.log` shows it: strings as they are, the rest as JSON where it can be.
fn shown<'js>(ctx: &Ctx<'js>, v: &Value<'js>) -> String {
    if let Some(s) = v.as_string() {
        return s.to_string().unwrap_or_default();
    }
    if v.is_undefined() {
        return "undefined".to_owned();
    }
    if let Some(e) = v
        .as_object()
        .and_then(|o| Exception::from_object(o.clone()))
    {
        return e
            .message()
            .map_or_else(|| "Error".to_owned(), |m| format!("Error: {m}"));
    }
    match ctx.json_stringify(v.clone()) {
        Ok(Some(s)) => s.to_string().unwrap_or_default(),
        _ => "[unprintable]".to_owned(),
    }
}

fn returned<'js>(ctx: &Ctx<'js>, value: Value<'js>, state: &State<'js>) -> Ending {
    let text = match ctx.json_stringify(value) {
        Ok(Some(s)) => s.to_string().unwrap_or_else(|_| "null".to_owned()),
        Ok(None) => "null".to_owned(),
        Err(_) => {
            let e = ctx.catch();
            return thrown(ctx, e, state, false);
        }
    };
    if text.len() > state.limits.max_value_bytes {
        return Ending::ValueTooLarge(text.len());
    }
    match serde_json::from_str(&text) {
        Ok(v) => Ending::Returned(v),
        Err(e) => Ending::Threw {
            syntax: false,
            name: "RangeError".to_owned(),
            message: format!("the returned value cannot be read as JSON: {e}"),
            line: None,
            column: None,
            failure: None,
        },
    }
}

/// What a thrown value says, with the program's line and column.
fn thrown<'js>(ctx: &Ctx<'js>, value: Value<'js>, state: &State<'js>, syntax: bool) -> Ending {
    if state.stopped() {
        return state.stopped_ending();
    }
    // No room left even for the error object: the heap is full.
    if value.is_null() {
        return Ending::OutOfMemory;
    }
    let (name, message, stack) = match value.as_object() {
        Some(o) => {
            let name: Option<String> = o.get("name").ok();
            let message: Option<String> = o.get("message").ok();
            let stack: Option<String> = o.get("stack").ok();
            match message {
                Some(m) => (
                    name.unwrap_or_else(|| "Error".to_owned()),
                    m,
                    stack.unwrap_or_default(),
                ),
                None => ("thrown".to_owned(), shown(ctx, &value), String::new()),
            }
        }
        None => ("thrown".to_owned(), shown(ctx, &value), String::new()),
    };
    if message == "out of memory" || name == "InternalError" && message.contains("out of memory") {
        return Ending::OutOfMemory;
    }
    if name == "InternalError" && message == "interrupted" {
        return Ending::Interrupted;
    }
    let (line, column) = position(&stack);
    let failure = Failure::from_thrown(&value);
    Ending::Threw {
        syntax: syntax || name == "SyntaxError",
        name,
        message,
        line,
        column,
        failure,
    }
}

/// The program's line and column in a stack trace (the first frame in the program), counted
/// from the program's first line.
fn position(stack: &str) -> (Option<u32>, Option<u32>) {
    let Some(at) = stack.find(&format!("{SCRIPT}:")) else {
        return (None, None);
    };
    let rest = &stack[at + SCRIPT.len() + 1..];
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    let line = parts.next().and_then(|l| l.parse::<u32>().ok());
    let column = parts.next().and_then(|c| c.parse::<u32>().ok());
    // The wrapper's first line comes before the program's.
    (line.map(|l| l.saturating_sub(1).max(1)), column)
}

impl Failure {
    /// The fields of a `ToolCallError` the program let escape, so the result says what
    /// failed; `None` for any other thrown value.
    fn from_thrown(value: &Value<'_>) -> Option<Failure> {
        let o = value.as_object()?;
        let name: String = o.get("name").ok()?;
        if name != "ToolCallError" {
            return None;
        }
        Some(Failure {
            kind: o.get("kind").ok()?,
            gate: o.get("gate").ok()?,
            policy: o.get("policy").ok().flatten(),
            reason: o.get("reason").ok()?,
        })
    }
}
