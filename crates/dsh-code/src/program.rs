//! What passes between the interpreter's thread and the runtime side: the calls a program
//! makes, their results, and how the program ended.

use serde_json::Value;

/// One `tools.NAME(args)` call.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub name: String,
    pub args: Value,
}

/// The calls a program made since its last batch, and where their results go (in order).
#[derive(Debug)]
pub(crate) struct Batch {
    pub requests: Vec<Request>,
    pub reply: std::sync::mpsc::Sender<Vec<Settled>>,
}

/// A call's result as the program sees it.
#[derive(Clone, Debug)]
pub(crate) enum Settled {
    /// The tool's declared output value.
    Value(Value),
    /// Refused or failed: thrown as a `ToolCallError`.
    Failed(Failure),
}

/// Why a call did not succeed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    pub kind: String,
    pub gate: String,
    pub policy: Option<String>,
    pub reason: String,
}

/// How a program stopped.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ending {
    /// It returned this value (JSON; `null` for nothing).
    Returned(Value),
    /// It threw (or did not parse: `syntax`), at this line and column of the program.
    Threw {
        syntax: bool,
        name: String,
        message: String,
        line: Option<u32>,
        column: Option<u32>,
        /// When what it threw was a failed call's `ToolCallError`.
        failure: Option<Failure>,
    },
    OutOfMemory,
    TimedOut,
    /// The call was cancelled (an interrupt, a parent's timeout).
    Cancelled,
    /// Stopped for another reason (should not happen; said as it is).
    Interrupted,
    TooManyCalls,
    TooMuchOutput,
    /// The returned value's JSON had this many bytes, more than allowed.
    ValueTooLarge(usize),
    /// It waited for something no call will ever settle.
    Stuck,
    /// The interpreter itself failed.
    Broken(String),
    /// The interpreter is not built into this dsh.
    #[cfg_attr(feature = "interpreter", allow(dead_code))]
    NotBuiltIn,
}

/// A program's ending with what it printed and how many calls it made.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    pub ending: Ending,
    pub log: String,
    pub log_cut: bool,
    pub calls: usize,
}

impl Outcome {
    pub(crate) fn ending(ending: Ending) -> Self {
        Outcome {
            ending,
            log: String::new(),
            log_cut: false,
            calls: 0,
        }
    }
}

/// A program's time: its wall-time limit runs while it computes and while its calls run,
/// and stands still while one of its calls waits for a person's answer.
#[derive(Debug)]
pub(crate) struct Clock {
    start: std::time::Instant,
    wall: std::time::Duration,
    waits: std::sync::Mutex<Waits>,
}

#[derive(Debug, Default)]
struct Waits {
    /// Time spent waiting for a person, finished waits.
    past: std::time::Duration,
    /// Calls waiting now, and since when the first of them has.
    now: usize,
    since: Option<std::time::Instant>,
}

impl Clock {
    pub(crate) fn new(wall: std::time::Duration) -> Self {
        Clock {
            start: std::time::Instant::now(),
            wall,
            waits: std::sync::Mutex::new(Waits::default()),
        }
    }

    fn waits(&self) -> std::sync::MutexGuard<'_, Waits> {
        self.waits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// When the program's time is up, as things stand (later while a person is asked).
    pub(crate) fn deadline(&self) -> std::time::Instant {
        let w = self.waits();
        let waiting = w.since.map_or(std::time::Duration::ZERO, |s| s.elapsed());
        self.start + self.wall + w.past + waiting
    }

    pub(crate) fn passed(&self) -> bool {
        std::time::Instant::now() >= self.deadline()
    }

    /// A call starts (`true`) or stops (`false`) waiting for a person.
    pub(crate) fn person(&self, waiting: bool) {
        let mut w = self.waits();
        if waiting {
            if w.now == 0 {
                w.since = Some(std::time::Instant::now());
            }
            w.now += 1;
        } else if w.now > 0 {
            w.now -= 1;
            if w.now == 0
                && let Some(since) = w.since.take()
            {
                w.past += since.elapsed();
            }
        }
    }
}
