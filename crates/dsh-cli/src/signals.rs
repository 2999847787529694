//! Signals that end a run (DESIGN §4): SIGINT, SIGTERM and SIGHUP all cancel the running
//! calls through one token — each call is recorded as cancelled, then `stop` and
//! `session_end` are written — and the exit code says which one came (130, 143, 129).
//!
//! A second signal while the first is being handled is a person insisting: dsh then exits
//! at most [`INSIST`] later whatever it is waiting for (a reader that does not read its
//! output, say), with the first signal's exit code. The journal is whole up to its last
//! complete line either way.
//!
//! SIGXFSZ (a write past `ulimit -f`) is caught and ignored, so the write fails with `EFBIG`
//! and the journal reports it like a full disk, instead of the signal killing dsh without a
//! word. A caught signal, unlike an ignored one, is reset to its default by `execve`, so the
//! commands dsh runs keep the usual behaviour.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use dsh_agent::Ending;
use dsh_core::CancellationToken;

/// The installed handlers: a token cancelled by the first signal, and what came.
#[derive(Debug)]
pub(crate) struct Signals {
    cancel: CancellationToken,
    first: Arc<AtomicU8>,
    count: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

/// How long a second signal lets the orderly end go on before dsh exits anyway.
const INSIST: std::time::Duration = std::time::Duration::from_secs(2);

const NONE: u8 = 0;
const INT: u8 = 1;
const TERM: u8 = 2;
const HUP: u8 = 3;

impl Signals {
    /// Installs the handlers; call inside the runtime.
    pub fn install() -> std::io::Result<Signals> {
        let cancel = CancellationToken::new();
        let first = Arc::new(AtomicU8::new(NONE));
        let count = Arc::new(AtomicUsize::new(0));
        let task = listen(cancel.clone(), first.clone(), count.clone())?;
        Ok(Signals {
            cancel,
            first,
            count,
            task,
        })
    }

    /// Cancelled by the first signal.
    pub fn token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// How the run ends: by the first signal that came, else as `otherwise`. An error
    /// stays an error.
    pub fn ending(&self, otherwise: Ending) -> Ending {
        if otherwise == Ending::Error {
            return otherwise;
        }
        ending_of(self.first.load(Ordering::SeqCst)).unwrap_or(otherwise)
    }

    /// How many signals came so far.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The ending a received signal stands for.
fn ending_of(signal: u8) -> Option<Ending> {
    match signal {
        INT => Some(Ending::Interrupted),
        TERM => Some(Ending::Terminated),
        HUP => Some(Ending::HungUp),
        _ => None,
    }
}

/// The exit code of a run that ended so.
pub(crate) fn exit_code(ending: Ending) -> Option<u8> {
    match ending {
        Ending::Interrupted => Some(crate::exit::INTERRUPTED),
        Ending::Terminated => Some(crate::exit::TERMINATED),
        Ending::HungUp => Some(crate::exit::HUNG_UP),
        Ending::Finished | Ending::Error => None,
    }
}

#[cfg(unix)]
fn listen(
    cancel: CancellationToken,
    first: Arc<AtomicU8>,
    count: Arc<AtomicUsize>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    // Caught and dropped: see the module docs.
    let mut xfsz = signal(SignalKind::from_raw(libc::SIGXFSZ))?;
    Ok(tokio::spawn(async move {
        loop {
            let which = tokio::select! {
                _ = int.recv() => INT,
                _ = term.recv() => TERM,
                _ = hup.recv() => HUP,
                _ = xfsz.recv() => continue,
            };
            received(which, &cancel, &first, &count);
        }
    }))
}

#[cfg(not(unix))]
fn listen(
    cancel: CancellationToken,
    first: Arc<AtomicU8>,
    count: Arc<AtomicUsize>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    Ok(tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            received(INT, &cancel, &first, &count);
        }
    }))
}

fn received(which: u8, cancel: &CancellationToken, first: &AtomicU8, count: &AtomicUsize) {
    let _ = first.compare_exchange(NONE, which, Ordering::SeqCst, Ordering::SeqCst);
    if count.fetch_add(1, Ordering::SeqCst) == 1 {
        let code = ending_of(first.load(Ordering::SeqCst))
            .and_then(exit_code)
            .unwrap_or(crate::exit::INTERRUPTED);
        // A thread, not a task: the runtime itself may be what is stuck.
        let _ = std::thread::Builder::new()
            .name("dsh-insist".to_owned())
            .spawn(move || {
                std::thread::sleep(INSIST);
                eprintln!("dsh: a second signal: exiting without waiting any longer");
                std::process::exit(i32::from(code));
            });
    }
    cancel.cancel();
}
