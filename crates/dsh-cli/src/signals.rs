//! Signals that end a run (DESIGN §4): SIGINT, SIGTERM and SIGHUP all cancel the running
//! calls through one token — each call is recorded as cancelled, then `stop` and
//! `session_end` are written — and the exit code says which one came (130, 143, 129).
//!
//! A second signal while the first is being handled is a person insisting: dsh then exits
//! at most [`INSIST`] later whatever it is waiting for (a reader that does not read its
//! output, say), with the first signal's exit code. The journal is whole up to its last
//! complete line either way. So that nothing dsh waits for can stop that, signals are
//! taken on a thread of their own, never on the async runtime (whose every worker may be
//! the thing stuck), and the exit neither flushes nor waits for the terminal.
//!
//! A terminal that can no longer be read (end of file, a read error: its window closed) is
//! a hang-up wherever that is seen, SIGHUP or not ([`Signals::hang_up`]); as crossterm's
//! reads may never tell, the REPL also watches its terminal for the hang-up
//! ([`Signals::watch_terminal`], `crate::hangup`).
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
    listener: Listener,
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
        let listener = listen(cancel.clone(), first.clone(), count.clone())?;
        Ok(Signals {
            cancel,
            first,
            count,
            listener,
        })
    }

    /// The terminal is gone: the run ends as on SIGHUP, whether one comes or not. Not a
    /// signal itself, so a SIGHUP that does come is not taken for a person insisting.
    pub fn hang_up(&self) {
        hung_up(&self.cancel, &self.first);
    }

    /// Watches stdin, a terminal, from a thread of its own and hangs up ([`Self::hang_up`])
    /// when it does: the reads of the terminal may never tell (`crate::hangup`). Unix only.
    pub fn watch_terminal(&self) -> std::io::Result<()> {
        #[cfg(unix)]
        {
            let (cancel, first) = (self.cancel.clone(), self.first.clone());
            std::thread::Builder::new()
                .name("dsh-hangup".to_owned())
                .spawn(move || {
                    if crate::hangup::wait_for_stdin() {
                        hung_up(&cancel, &first);
                    }
                })?;
        }
        Ok(())
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
        #[cfg(unix)]
        self.listener.close();
        #[cfg(not(unix))]
        self.listener.abort();
    }
}

fn hung_up(cancel: &CancellationToken, first: &AtomicU8) {
    let _ = first.compare_exchange(NONE, HUP, Ordering::SeqCst, Ordering::SeqCst);
    cancel.cancel();
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
type Listener = signal_hook::iterator::Handle;

#[cfg(not(unix))]
type Listener = tokio::task::JoinHandle<()>;

#[cfg(unix)]
fn listen(
    cancel: CancellationToken,
    first: Arc<AtomicU8>,
    count: Arc<AtomicUsize>,
) -> std::io::Result<Listener> {
    use libc::{SIGHUP, SIGINT, SIGTERM, SIGXFSZ};
    // SIGXFSZ is caught and dropped: see the module docs.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGXFSZ])?;
    let handle = signals.handle();
    std::thread::Builder::new()
        .name("dsh-signals".to_owned())
        .spawn(move || {
            for signal in signals.forever() {
                let which = match signal {
                    SIGINT => INT,
                    SIGTERM => TERM,
                    SIGHUP => HUP,
                    _ => continue,
                };
                received(which, &cancel, &first, &count);
            }
        })?;
    Ok(handle)
}

#[cfg(not(unix))]
fn listen(
    cancel: CancellationToken,
    first: Arc<AtomicU8>,
    count: Arc<AtomicUsize>,
) -> std::io::Result<Listener> {
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
                exit_now(code);
            });
    }
    cancel.cancel();
}

/// How long the insisting exit waits for stderr to take its message.
const LAST_WORD: std::time::Duration = std::time::Duration::from_millis(100);

/// Exits with `code` at once: the message goes out only if stderr takes it within
/// [`LAST_WORD`] (a terminal nobody reads blocks writes; a closed one fails them), and
/// nothing is flushed on the way out (`std::process::exit` would flush stdout, and that
/// could block just the same).
fn exit_now(code: u8) -> ! {
    let (said, heard) = std::sync::mpsc::channel();
    let _ = std::thread::Builder::new()
        .name("dsh-last-word".to_owned())
        .spawn(move || {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "dsh: a second signal: exiting without waiting any longer"
            );
            let _ = said.send(());
        });
    let _ = heard.recv_timeout(LAST_WORD);
    immediate_exit(code)
}

#[cfg(unix)]
#[allow(unsafe_code)]
fn immediate_exit(code: u8) -> ! {
    // SAFETY: `_exit` takes a plain integer and ends the process; no Rust state is used
    // after it.
    unsafe { libc::_exit(i32::from(code)) }
}

#[cfg(not(unix))]
fn immediate_exit(code: u8) -> ! {
    std::process::exit(i32::from(code))
}
