//! How a session's journal ends: every run, however it ends — a final answer, a stop line, an
//! interrupt or a signal, a model or journal fault — writes `stop` and then `session_end`,
//! both carrying the session's totals (DESIGN §6), so a reader of the last line knows them.
//! Both are closing records: they are tried even after a journal write failed, as long as
//! the file still ends with a whole record.

use std::borrow::Cow;

pub use dsh_core::journal::Totals;
use dsh_core::journal::{JournalError, Record};

use crate::Session;

/// Why a session ended, for `session_end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The run reached its stop line (whatever it was).
    Finished,
    /// SIGINT (Ctrl-C).
    Interrupted,
    /// SIGTERM.
    Terminated,
    /// SIGHUP: the terminal went away.
    HungUp,
    /// A harness fault (the model failed for good, the journal could not record).
    Error,
}

impl Ending {
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Finished => "finished",
            Ending::Interrupted => "interrupted",
            Ending::Terminated => "terminated",
            Ending::HungUp => "hung_up",
            Ending::Error => "error",
        }
    }

    /// The signal behind it, by name.
    pub fn signal(self) -> Option<&'static str> {
        match self {
            Ending::Interrupted => Some("SIGINT"),
            Ending::Terminated => Some("SIGTERM"),
            Ending::HungUp => Some("SIGHUP"),
            Ending::Finished | Ending::Error => None,
        }
    }
}

impl Session {
    /// Writes `stop` (why the loop or batch stopped; `error` for a fault) with the totals.
    pub fn record_stop(
        &self,
        reason: &str,
        error: Option<&str>,
        totals: Totals,
    ) -> Result<u64, JournalError> {
        self.pipeline.journal().append_closing(&Record::Stop {
            reason: reason.into(),
            error: error.map(Cow::Borrowed),
            totals,
        })
    }

    /// Writes `session_end` with the totals and makes the journal durable.
    pub fn finish(&self, ending: Ending, totals: Totals) -> Result<(), JournalError> {
        self.stop_extensions();
        let sweeper = self.sweeper.lock().map_or(None, |mut s| s.take());
        if let Some(sweeper) = sweeper {
            let _ = sweeper.join();
        }
        let journal = self.pipeline.journal();
        journal.append_closing(&Record::SessionEnd {
            reason: ending.as_str().into(),
            signal: ending.signal().map(Cow::Borrowed),
            totals,
        })?;
        journal.sync()
    }
}
