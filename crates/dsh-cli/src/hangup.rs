//! Seeing the REPL's terminal hang up (its window closed) without reading it.
//!
//! crossterm 0.29, which reedline and the turn's key reader read the terminal through,
//! takes a hung-up terminal's end of file for "no event yet" and reads it again at once,
//! forever (upstream crossterm#793): its reads neither return nor fail, so nothing that
//! waits on them learns the terminal is gone. A terminal that hangs up is reported by
//! `poll(2)` as `POLLHUP` (or `POLLERR`, `POLLNVAL`) even to a caller that asks for no event
//! at all, so one thread waits in `poll` on fd 0 with `events = 0`: it sleeps, reads
//! nothing (the line editor's and the key reader's input stays theirs), and wakes only when
//! the terminal is gone. Checked on Linux, where a pseudo-terminal's slave reports
//! `POLLHUP` once its master closes (tests/hangup.rs closes one at every point a person
//! can). Unix only: other systems keep what crossterm reports.
//!
//! Between the hang-up and dsh's exit (milliseconds: cancelled calls, `stop` and
//! `session_end` are written, then the process exits without waiting for them), crossterm's
//! reader threads still spin on the dead terminal.

/// Blocks until stdin, a terminal, hangs up: `true` then; `false` if it cannot be watched
/// (`poll` fails otherwise than by an interruption), which leaves today's behaviour.
#[cfg(unix)]
#[allow(unsafe_code)]
pub(crate) fn wait_for_stdin() -> bool {
    let gone = libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: 0,
        revents: 0,
    };
    loop {
        // SAFETY: `fd` is one valid, exclusively borrowed `pollfd` and the count is 1; a
        // timeout of -1 waits for as long as it takes.
        let n = unsafe { libc::poll(&raw mut fd, 1, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        // With no event asked for, nothing else can wake it; were something else to, it is
        // not waited for again in a loop that would spin.
        return fd.revents & gone != 0;
    }
}
