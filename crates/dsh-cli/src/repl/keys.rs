//! Keys during a turn. The terminal is in raw mode while a turn runs, so Esc and Ctrl-C
//! arrive as keys (not as SIGINT) and interrupt the turn, an approval prompt reads single
//! keys, and what else is typed is kept for the next prompt. All through crossterm.
//!
//! One thread reads the terminal, polling so it can be told to stop: it is stopped and
//! joined before the line editor reads again, so the two never read at once (the editor's
//! cursor-position query would lose its answer to this reader). Once the session is over
//! (a signal, the terminal hung up) it is told to stop but not waited for: on a hung-up
//! terminal crossterm's read never returns (`crate::hangup`), and nothing reads after it. It also drains on request:
//! everything typed before the request was made comes back marked as such, which is how an
//! approval question discards keys typed before it appeared.

use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use dsh_core::CancellationToken;
use tokio::sync::mpsc;

/// How often the reader looks for a request between keys.
const POLL: Duration = Duration::from_millis(20);

/// How long a drain waits for the terminal to say it holds nothing more.
const DRAIN_POLL: Duration = Duration::from_millis(1);

/// A key, as the turn understands it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Key {
    /// Ctrl-C.
    Interrupt,
    Escape,
    Enter,
    Backspace,
    Char(char),
    /// Pasted text.
    Paste(String),
    /// The terminal changed size.
    Resize,
    /// Anything else (arrows, function keys…).
    Other,
}

/// What the reader reports.
#[derive(Debug)]
pub(crate) enum Report {
    Key(Key),
    /// Every key typed before drain request `n` has been reported.
    Drained(u64),
    /// The terminal cannot be read any more.
    Gone,
}

enum Request {
    Drain(u64),
    Stop,
}

/// Raw mode and the reader thread, for as long as a turn runs.
pub(crate) struct TurnKeys {
    reports: mpsc::UnboundedReceiver<Report>,
    requests: std_mpsc::Sender<Request>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Disconnected once the reader has returned.
    finished: std_mpsc::Receiver<()>,
    /// The session's token: once cancelled, the reader is not waited for.
    session: CancellationToken,
    next_drain: u64,
}

impl TurnKeys {
    /// Enters raw mode and starts reading keys; `session` is the session's token.
    pub(crate) fn start(session: CancellationToken) -> std::io::Result<TurnKeys> {
        crossterm::terminal::enable_raw_mode()?;
        let (tx, reports) = mpsc::unbounded_channel();
        let (requests, rx) = std_mpsc::channel();
        let (done, finished) = std_mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("dsh-keys".to_owned())
            .spawn(move || {
                let _done = done;
                read_keys(&tx, &rx);
            });
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                let _ = crossterm::terminal::disable_raw_mode();
                return Err(e);
            }
        };
        Ok(TurnKeys {
            reports,
            requests,
            thread: Some(thread),
            finished,
            session,
            next_drain: 0,
        })
    }

    /// The next report; `Gone` when the reader stopped.
    pub(crate) async fn next(&mut self) -> Report {
        self.reports.recv().await.unwrap_or(Report::Gone)
    }

    /// Asks for everything typed until now; a [`Report::Drained`] with the returned number
    /// follows the last of it.
    pub(crate) fn drain(&mut self) -> u64 {
        self.next_drain += 1;
        let _ = self.requests.send(Request::Drain(self.next_drain));
        self.next_drain
    }

    /// Stops the reader and leaves raw mode; the keys it read and nobody took yet.
    pub(crate) fn stop(mut self) -> Vec<Key> {
        self.halt();
        let mut left = Vec::new();
        while let Ok(r) = self.reports.try_recv() {
            if let Report::Key(k) = r {
                left.push(k);
            }
        }
        left
    }

    fn halt(&mut self) {
        let _ = self.requests.send(Request::Stop);
        // A live reader returns within `POLL`; one spinning on a hung-up terminal never
        // does, and is left behind once the session is over (see the module docs).
        let finished = loop {
            match self.finished.recv_timeout(POLL) {
                Err(std_mpsc::RecvTimeoutError::Timeout) if !self.session.is_cancelled() => {}
                Err(std_mpsc::RecvTimeoutError::Timeout) => break false,
                _ => break true,
            }
        };
        if let Some(t) = self.thread.take()
            && finished
        {
            let _ = t.join();
        }
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

impl Drop for TurnKeys {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The reader: keys as they come, drains on request, until told to stop.
fn read_keys(tx: &mpsc::UnboundedSender<Report>, requests: &std_mpsc::Receiver<Request>) {
    use crossterm::event::{poll, read};
    let send_key = |event: Event| {
        if let Some(k) = key_of(event) {
            let _ = tx.send(Report::Key(k));
        }
    };
    loop {
        match requests.try_recv() {
            Ok(Request::Stop) | Err(std_mpsc::TryRecvError::Disconnected) => return,
            Ok(Request::Drain(n)) => {
                // Not a zero timeout: crossterm's tty source (`use-dev-tty`, level-triggered,
                // so a key typed as the terminal resizes is not left unread) does not look
                // at the terminal at all for one.
                while matches!(poll(DRAIN_POLL), Ok(true)) {
                    match read() {
                        Ok(e) => send_key(e),
                        Err(_) => {
                            let _ = tx.send(Report::Gone);
                            return;
                        }
                    }
                }
                let _ = tx.send(Report::Drained(n));
            }
            Err(std_mpsc::TryRecvError::Empty) => {}
        }
        match poll(POLL) {
            Ok(true) => match read() {
                Ok(e) => send_key(e),
                Err(_) => {
                    let _ = tx.send(Report::Gone);
                    return;
                }
            },
            Ok(false) => {}
            Err(_) => {
                let _ = tx.send(Report::Gone);
                return;
            }
        }
    }
}

fn key_of(event: Event) -> Option<Key> {
    match event {
        Event::Key(KeyEvent {
            code,
            modifiers,
            kind,
            ..
        }) => {
            if kind == KeyEventKind::Release {
                return None;
            }
            let ctrl = modifiers.contains(KeyModifiers::CONTROL);
            Some(match code {
                KeyCode::Char('c') if ctrl => Key::Interrupt,
                // A line typed before raw mode began ends in `\n`, which reads as Ctrl-J.
                KeyCode::Char('j') if ctrl => Key::Enter,
                KeyCode::Esc => Key::Escape,
                KeyCode::Enter => Key::Enter,
                KeyCode::Backspace => Key::Backspace,
                KeyCode::Char(c) if !ctrl => Key::Char(c),
                _ => Key::Other,
            })
        }
        Event::Paste(text) => Some(Key::Paste(text)),
        Event::Resize(..) => Some(Key::Resize),
        _ => None,
    }
}
