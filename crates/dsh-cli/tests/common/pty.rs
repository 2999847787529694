//! Drives a real program in a pseudo-terminal and reads the screen a person would see.
//!
//! A reader thread feeds everything the child writes into a `vt100` terminal emulator (with
//! scrollback) and keeps the raw byte stream. It answers the terminal queries a real terminal
//! answers and that crossterm/reedline block on: cursor position (`ESC [ 6 n`, asked by
//! `crossterm::cursor::position()` at every prompt), its DEC form (`ESC [ ? 6 n`), device
//! status (`ESC [ 5 n`) and primary device attributes (`ESC [ c`, which crossterm sends after
//! the kitty keyboard query `ESC [ ? u`; that one is left unanswered, meaning "not supported",
//! so keys stay in the legacy encoding the [`key`] constants use).
//!
//! Synchronisation is by condition only: [`Pty::wait_for`] blocks on a condvar signalled at
//! every read until a predicate on the screen holds, or panics at the deadline with the screen
//! and the tail of the raw output. There is deliberately no "wait until quiet".
//!
//! The child gets an explicit environment: nothing is inherited from the test process except
//! `PATH`; `TERM=xterm-256color` and `LANG=C.UTF-8` are set by default (both overridable or
//! removable with [`PtySpec::env_remove`]). Set `HOME` etc. yourself (or build the spec from a
//! prepared `std::process::Command` with [`PtySpec::from_command`]).
//!
//! [`Pty::hang_up`] closes the terminal as closing its window does: the harness holds the
//! master side through descriptors of its own (one read, one written), never through
//! portable-pty's writer, whose drop would type a newline and Ctrl-D first, so closing them
//! all is the whole hang-up.
//!
//! Tips: wait for the first prompt before typing (before the program enters raw mode the line
//! discipline echoes and buffers input). Send a lone [`key::ESC`] in its own `send` and wait
//! for its effect before sending more, or the program may read it together with the next bytes
//! as an Alt- sequence.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::num::NonZeroU16;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use portable_pty::{ChildKiller, CommandBuilder, ExitStatus, MasterPty, PtySize};

/// Default deadline for [`Pty::wait_for`] and [`Pty::wait_exit`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Lines of scrollback kept by the emulator.
pub const SCROLLBACK: usize = 2000;
/// How much of the raw output a timeout message shows.
const RAW_TAIL: usize = 2048;
/// How often the reader looks whether the terminal is being closed, between reads.
const READ_POLL_MS: i32 = 20;

/// Key sequences as a terminal in its default modes sends them.
pub mod key {
    pub const ENTER: &str = "\r";
    pub const ESC: &str = "\x1b";
    pub const TAB: &str = "\t";
    pub const SHIFT_TAB: &str = "\x1b[Z";
    pub const BACKSPACE: &str = "\x7f";
    pub const DELETE: &str = "\x1b[3~";
    pub const ALT_ENTER: &str = "\x1b\r";
    pub const CTRL_A: &str = "\x01";
    pub const CTRL_C: &str = "\x03";
    pub const CTRL_D: &str = "\x04";
    pub const CTRL_E: &str = "\x05";
    pub const CTRL_K: &str = "\x0b";
    pub const CTRL_O: &str = "\x0f";
    pub const CTRL_L: &str = "\x0c";
    pub const CTRL_R: &str = "\x12";
    pub const CTRL_U: &str = "\x15";
    pub const CTRL_W: &str = "\x17";
    pub const CTRL_Z: &str = "\x1a";
    pub const UP: &str = "\x1b[A";
    pub const DOWN: &str = "\x1b[B";
    pub const RIGHT: &str = "\x1b[C";
    pub const LEFT: &str = "\x1b[D";
    pub const HOME: &str = "\x1b[H";
    pub const END: &str = "\x1b[F";
    pub const PAGE_UP: &str = "\x1b[5~";
    pub const PAGE_DOWN: &str = "\x1b[6~";

    /// Ctrl + an ASCII letter (`ctrl('r') == "\x12"`).
    pub fn ctrl(c: char) -> String {
        let b = c.to_ascii_lowercase() as u8;
        assert!(b.is_ascii_lowercase(), "ctrl({c:?}): not a letter");
        char::from(b - b'a' + 1).to_string()
    }

    /// Alt + a key: ESC then the key, in one write.
    pub fn alt(s: &str) -> String {
        format!("\x1b{s}")
    }
}

/// What to run: program, arguments, environment, working directory, terminal size.
#[derive(Debug, Clone)]
pub struct PtySpec {
    program: OsString,
    args: Vec<OsString>,
    /// `Some` = set, `None` = removed.
    env: BTreeMap<OsString, Option<OsString>>,
    inherit_env: bool,
    cwd: Option<PathBuf>,
    rows: u16,
    cols: u16,
    timeout: Duration,
}

impl PtySpec {
    /// `program` with no arguments, a 24×80 terminal, `PATH` passed through,
    /// `TERM=xterm-256color`, `LANG=C.UTF-8`, and nothing else from the test's environment.
    pub fn new(program: impl AsRef<OsStr>) -> PtySpec {
        let mut env = BTreeMap::new();
        if let Some(path) = std::env::var_os("PATH") {
            env.insert("PATH".into(), Some(path));
        }
        env.insert("TERM".into(), Some("xterm-256color".into()));
        env.insert("LANG".into(), Some("C.UTF-8".into()));
        PtySpec {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env,
            inherit_env: false,
            cwd: None,
            rows: 24,
            cols: 80,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Program, arguments, environment changes (set and removed) and working directory of a
    /// `std::process::Command`, on top of [`PtySpec::new`]'s defaults. (`Command::env_clear`
    /// cannot be observed; the spec starts from a cleared environment anyway.) Stdio settings
    /// are ignored: the PTY is stdin, stdout and stderr.
    pub fn from_command(cmd: &std::process::Command) -> PtySpec {
        let mut spec = PtySpec::new(cmd.get_program());
        spec.args = cmd.get_args().map(OsStr::to_owned).collect();
        for (k, v) in cmd.get_envs() {
            spec.env.insert(k.to_owned(), v.map(OsStr::to_owned));
        }
        spec.cwd = cmd.get_current_dir().map(PathBuf::from);
        spec
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .insert(key.as_ref().to_owned(), Some(value.as_ref().to_owned()));
        self
    }

    /// Makes sure `key` is absent in the child (also when inheriting).
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.env.insert(key.as_ref().to_owned(), None);
        self
    }

    /// Start from the test process's whole environment instead of only `PATH`.
    pub fn inherit_env(mut self, inherit: bool) -> Self {
        self.inherit_env = inherit;
        self
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    pub fn size(mut self, rows: u16, cols: u16) -> Self {
        assert!(rows > 0 && cols > 0, "terminal size must be non-zero");
        self.rows = rows;
        self.cols = cols;
        self
    }

    /// Deadline for each `wait_for`/`wait_exit` (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn spawn(self) -> Pty {
        Pty::spawn(self)
    }

    fn command_builder(&self) -> CommandBuilder {
        let mut cb = CommandBuilder::new(&self.program);
        if !self.inherit_env {
            cb.env_clear();
        }
        cb.args(&self.args);
        for (k, v) in &self.env {
            match v {
                Some(v) => cb.env(k, v),
                None => cb.env_remove(k),
            }
        }
        match &self.cwd {
            Some(dir) => cb.cwd(dir),
            // portable-pty would otherwise default to $HOME.
            None => {
                if let Ok(dir) = std::env::current_dir() {
                    cb.cwd(dir);
                }
            }
        }
        cb
    }
}

/// A position in the raw output stream, from [`Pty::mark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mark(pub usize);

/// Cell attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attrs {
    pub fg: vt100::Color,
    pub bg: vt100::Color,
    pub bold: bool,
    pub dim: bool,
    pub italic: bool,
    pub underline: bool,
    pub inverse: bool,
}

impl Attrs {
    fn of(cell: &vt100::Cell) -> Attrs {
        Attrs {
            fg: cell.fgcolor(),
            bg: cell.bgcolor(),
            bold: cell.bold(),
            dim: cell.dim(),
            italic: cell.italic(),
            underline: cell.underline(),
            inverse: cell.inverse(),
        }
    }
}

/// A snapshot of the terminal.
#[derive(Clone)]
pub struct Screen {
    screen: vt100::Screen,
    raw_len: usize,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.dump())
    }
}

impl Screen {
    /// The visible rows, each with trailing spaces trimmed, joined by `\n`, trailing empty
    /// rows dropped.
    pub fn contents(&self) -> String {
        let mut s = self.rows().join("\n");
        s.truncate(s.trim_end().len());
        s
    }

    /// The visible rows, trailing spaces trimmed (always `rows` entries).
    pub fn rows(&self) -> Vec<String> {
        let (_, cols) = self.size();
        self.screen
            .rows(0, cols)
            .map(|r| r.trim_end().to_owned())
            .collect()
    }

    /// One visible row (0-based), trailing spaces trimmed.
    pub fn row(&self, row: u16) -> String {
        self.rows()
            .get(usize::from(row))
            .cloned()
            .unwrap_or_default()
    }

    /// (rows, cols).
    pub fn size(&self) -> (u16, u16) {
        let (r, c) = self.screen.size();
        (r.get(), c.get())
    }

    /// Cursor (row, col), 0-based.
    pub fn cursor(&self) -> (u16, u16) {
        self.screen.cursor_position()
    }

    /// Whether the visible screen contains `needle` on one row.
    pub fn contains(&self, needle: &str) -> bool {
        self.find(needle).is_some()
    }

    /// Number of occurrences of `needle` on the visible screen (per row, non-overlapping).
    pub fn count(&self, needle: &str) -> usize {
        self.rows().iter().map(|r| r.matches(needle).count()).sum()
    }

    /// Everything that scrolled off the top (up to [`SCROLLBACK`] lines) followed by the
    /// visible screen, trailing spaces and trailing empty lines trimmed. Only what scrolled off
    /// the *full-screen* scroll region reaches the scrollback; a clear-screen discards.
    pub fn all_text(&self) -> String {
        let mut lines = self.scrollback_lines();
        lines.extend(self.rows());
        let mut s = lines.join("\n");
        s.truncate(s.trim_end().len());
        s
    }

    /// The lines in the scrollback (oldest first), without the visible screen.
    pub fn scrollback_lines(&self) -> Vec<String> {
        let mut scr = self.screen.clone();
        let (rows, cols) = self.size();
        scr.set_scrollback(usize::MAX);
        let total = scr.scrollback();
        let mut left = total;
        let mut out = Vec::with_capacity(total);
        while left > 0 {
            scr.set_scrollback(left);
            let take = left.min(usize::from(rows));
            out.extend(
                scr.rows(0, cols)
                    .take(take)
                    .map(|r| r.trim_end().to_owned()),
            );
            left -= take;
        }
        out
    }

    /// First occurrence of `needle` on the visible screen as (row, col) of its first cell,
    /// 0-based; columns count cells (a wide character takes two).
    pub fn find(&self, needle: &str) -> Option<(u16, u16)> {
        self.find_cells(needle).map(|(row, cols)| (row, cols[0]))
    }

    /// Row and the cell columns (one per character) of the first occurrence of `needle`.
    fn find_cells(&self, needle: &str) -> Option<(u16, Vec<u16>)> {
        if needle.is_empty() {
            return None;
        }
        let (rows, cols) = self.size();
        for row in 0..rows {
            // The row's text with, for each byte of it, the column of the cell it came from.
            let mut text = String::new();
            let mut col_of_byte: Vec<u16> = Vec::new();
            for col in 0..cols {
                let Some(cell) = self.screen.cell(row, col) else {
                    continue;
                };
                if cell.is_wide_continuation() {
                    continue;
                }
                let c = if cell.has_contents() {
                    cell.contents()
                } else {
                    " "
                };
                text.push_str(c);
                col_of_byte.extend(std::iter::repeat_n(col, c.len()));
            }
            if let Some(start) = text.find(needle) {
                let cells = text[start..start + needle.len()]
                    .char_indices()
                    .map(|(i, _)| col_of_byte[start + i])
                    .collect::<Vec<_>>();
                let mut cells = cells;
                cells.dedup();
                return Some((row, cells));
            }
        }
        None
    }

    /// Attributes of the cell at (row, col), 0-based.
    pub fn attrs(&self, row: u16, col: u16) -> Option<Attrs> {
        self.screen.cell(row, col).map(Attrs::of)
    }

    /// Attributes of the first cell of the first occurrence of `needle`.
    pub fn attrs_at(&self, needle: &str) -> Option<Attrs> {
        let (row, col) = self.find(needle)?;
        self.attrs(row, col)
    }

    /// Attributes of every non-blank cell of the first occurrence of `needle`; panics (with
    /// the screen) if it is not on screen.
    pub fn attrs_of(&self, needle: &str) -> Vec<Attrs> {
        let Some((row, cols)) = self.find_cells(needle) else {
            panic!("{needle:?} is not on the screen:\n{}", self.dump())
        };
        cols.into_iter()
            .filter_map(|col| self.screen.cell(row, col))
            .filter(|cell| cell.has_contents() && !cell.contents().trim().is_empty())
            .map(Attrs::of)
            .collect()
    }

    /// Whether every non-blank cell of the first occurrence of `needle` is bold; panics if
    /// `needle` is not on screen.
    pub fn is_bold_at(&self, needle: &str) -> bool {
        self.attrs_of(needle).iter().all(|a| a.bold)
    }

    /// Foreground colour of the first cell of the first occurrence of `needle`; panics if
    /// `needle` is not on screen.
    pub fn fg_color_at(&self, needle: &str) -> vt100::Color {
        self.attrs_of(needle)
            .first()
            .map(|a| a.fg)
            .unwrap_or(vt100::Color::Default)
    }

    /// Whether any cell on the visible screen has a non-default colour or is bold, dim,
    /// italic, underlined or inverse (e.g. to check `NO_COLOR`).
    pub fn has_any_styling(&self) -> bool {
        let (rows, cols) = self.size();
        (0..rows).any(|r| {
            (0..cols).any(|c| {
                self.screen.cell(r, c).is_some_and(|cell| {
                    cell.fgcolor() != vt100::Color::Default
                        || cell.bgcolor() != vt100::Color::Default
                        || cell.bold()
                        || cell.dim()
                        || cell.italic()
                        || cell.underline()
                        || cell.inverse()
                })
            })
        })
    }

    /// The raw output length when this snapshot was taken.
    pub fn mark(&self) -> Mark {
        Mark(self.raw_len)
    }

    /// The underlying emulator screen, for anything not wrapped here.
    pub fn vt(&self) -> &vt100::Screen {
        &self.screen
    }

    /// Numbered rows, cursor and size, for failure messages.
    pub fn dump(&self) -> String {
        let (rows, cols) = self.size();
        let (cr, cc) = self.cursor();
        let mut s = format!("--- screen {rows}x{cols}, cursor (row {cr}, col {cc}) ---\n");
        for (i, row) in self.rows().iter().enumerate() {
            s.push_str(&format!("{i:>3}|{row}\n"));
        }
        s.push_str("--- end of screen ---");
        s
    }
}

struct State {
    parser: vt100::Parser,
    raw: Vec<u8>,
    /// The reader saw end of output (the PTY's slave side is closed everywhere).
    eof: bool,
    exit: Option<ExitStatus>,
    /// Terminal queries answered so far, in order (for debugging).
    answered: Vec<&'static str>,
}

struct Shared {
    state: Mutex<State>,
    cond: Condvar,
    /// [`Pty::hang_up`] asked the reader to close its descriptor and stop.
    closing: AtomicBool,
    /// [`Pty::stop_reading`]: the output is left unread.
    frozen: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The master side, for writing; `None` once the terminal is closed.
type Writer = Arc<Mutex<Option<File>>>;

/// A program running in a pseudo-terminal.
pub struct Pty {
    shared: Arc<Shared>,
    writer: Writer,
    /// `None` once the terminal is closed.
    master: Option<Box<dyn MasterPty + Send>>,
    reader: Option<std::thread::JoinHandle<()>>,
    killer: Box<dyn ChildKiller + Send + Sync>,
    pid: Option<u32>,
    timeout: Duration,
    program: String,
}

impl std::fmt::Debug for Pty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pty")
            .field("program", &self.program)
            .field("pid", &self.pid)
            .finish()
    }
}

fn nz(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).expect("terminal size must be non-zero")
}

impl Pty {
    /// Shorthand for `PtySpec::new(program)`.
    pub fn command(program: impl AsRef<OsStr>) -> PtySpec {
        PtySpec::new(program)
    }

    /// Opens a PTY of the spec's size and starts the program on it as session leader with
    /// the PTY as controlling terminal and stdin/stdout/stderr.
    pub fn spawn(spec: PtySpec) -> Pty {
        let pair = portable_pty::native_pty_system()
            .openpty(PtySize {
                rows: spec.rows,
                cols: spec.cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let child = pair
            .slave
            .spawn_command(spec.command_builder())
            .unwrap_or_else(|e| panic!("spawning {:?} in a pty: {e:#}", spec.program));
        // Our copy of the slave must go, or the reader never sees end of output.
        drop(pair.slave);
        let reader = dup_master(pair.master.as_ref());
        let writer: Writer = Arc::new(Mutex::new(Some(dup_master(pair.master.as_ref()))));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                parser: vt100::Parser::new(nz(spec.rows), nz(spec.cols), SCROLLBACK),
                raw: Vec::new(),
                eof: false,
                exit: None,
                answered: Vec::new(),
            }),
            cond: Condvar::new(),
            closing: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
        });
        let killer = child.clone_killer();
        let pid = child.process_id();

        let reader = {
            let shared = Arc::clone(&shared);
            let writer = Arc::clone(&writer);
            std::thread::Builder::new()
                .name("pty-reader".into())
                .spawn(move || read_loop(reader, &shared, &writer))
                .expect("spawn pty reader thread")
        };
        {
            let shared = Arc::clone(&shared);
            let mut child = child;
            std::thread::Builder::new()
                .name("pty-waiter".into())
                .spawn(move || {
                    let status = child
                        .wait()
                        .unwrap_or_else(|e| ExitStatus::with_signal(&format!("wait failed: {e}")));
                    shared.lock().exit = Some(status);
                    shared.cond.notify_all();
                })
                .expect("spawn pty waiter thread");
        }

        Pty {
            shared,
            writer,
            master: Some(pair.master),
            reader: Some(reader),
            killer,
            pid,
            timeout: spec.timeout,
            program: spec.program.to_string_lossy().into_owned(),
        }
    }

    /// Changes the deadline of later waits.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Types `text` (one write; use [`key`] for special keys).
    pub fn send(&self, text: &str) {
        self.send_bytes(text.as_bytes());
    }

    pub fn send_bytes(&self, bytes: &[u8]) {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let Some(w) = writer.as_mut() else {
            panic!(
                "writing {:?} to the pty: the terminal was closed (hang_up)",
                String::from_utf8_lossy(bytes)
            );
        };
        let written = w.write_all(bytes).and_then(|()| w.flush());
        drop(writer);
        if let Err(e) = written {
            panic!(
                "writing {:?} to the pty: {e}\n{}",
                String::from_utf8_lossy(bytes),
                self.report()
            );
        }
    }

    /// Types `line` and Enter.
    pub fn send_line(&self, line: &str) {
        self.send(&format!("{line}\r"));
    }

    /// Resizes the terminal (the emulator first, then the PTY, which sends SIGWINCH).
    pub fn resize(&self, rows: u16, cols: u16) {
        self.shared.lock().parser.set_size(nz(rows), nz(cols));
        self.master
            .as_ref()
            .expect("resizing a terminal that was closed (hang_up)")
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("resize pty");
    }

    /// Closes the terminal, as closing its window does: every descriptor of the master side
    /// is closed, so the kernel hangs the program's terminal up (SIGHUP to its session,
    /// end-of-file to every read of it). What the program writes afterwards is lost; the
    /// waits still see it exit. Returns when the master side is closed.
    pub fn hang_up(&mut self) {
        self.shared.closing.store(true, Ordering::SeqCst);
        drop(self.writer.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the pty reader panicked");
        }
        drop(self.master.take());
    }

    /// Stops reading the program's output, as a terminal that does not keep up: once the
    /// kernel's buffer is full, the program's writes to the terminal block. Terminal queries
    /// go unanswered meanwhile.
    pub fn stop_reading(&self) {
        self.shared.frozen.store(true, Ordering::SeqCst);
    }

    /// A snapshot of the screen now.
    pub fn screen(&self) -> Screen {
        snapshot(&self.shared.lock())
    }

    /// Everything the program wrote so far, escape sequences included.
    pub fn raw_output(&self) -> Vec<u8> {
        self.shared.lock().raw.clone()
    }

    /// The current end of the raw output, to look only at what comes after an action.
    pub fn mark(&self) -> Mark {
        Mark(self.shared.lock().raw.len())
    }

    pub fn raw_since(&self, mark: Mark) -> Vec<u8> {
        let st = self.shared.lock();
        st.raw.get(mark.0..).unwrap_or_default().to_vec()
    }

    /// Raw output since `mark` with escape sequences and control characters (except `\n`
    /// and `\t`) removed; `\r\n` becomes `\n`. Repaints make this noisy: good for "did X
    /// get printed", not for layout.
    pub fn text_since(&self, mark: Mark) -> String {
        strip_ansi(&self.raw_since(mark))
    }

    /// The queries the harness has answered so far (`"DSR"`, `"DA1"`, …).
    pub fn answered_queries(&self) -> Vec<&'static str> {
        self.shared.lock().answered.clone()
    }

    /// Waits until `pred` holds for the screen, re-checking after every read of output.
    /// Panics at the deadline, or as soon as the output has ended without `pred` holding,
    /// with `what`, the screen and the tail of the raw output.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&Screen) -> bool) -> Screen {
        let deadline = Instant::now() + self.timeout;
        let mut st = self.shared.lock();
        let mut seen = usize::MAX;
        loop {
            // Every change of screen goes with new raw bytes, except resize (checked anyway).
            if st.raw.len() != seen || st.eof {
                seen = st.raw.len();
                let screen = snapshot(&st);
                let ended = st.eof;
                drop(st);
                if pred(&screen) {
                    return screen;
                }
                if ended {
                    self.fail(&format!("waiting for {what}: the program's output ended"));
                }
                st = self.shared.lock();
                if st.raw.len() != seen {
                    continue;
                }
            }
            let now = Instant::now();
            if now >= deadline {
                drop(st);
                self.fail(&format!(
                    "timed out after {:?} waiting for {what}",
                    self.timeout
                ));
            }
            st = self
                .shared
                .cond
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits until `needle` is on the visible screen.
    pub fn wait_for_text(&self, needle: &str) -> Screen {
        self.wait_for(&format!("{needle:?} on screen"), |s| s.contains(needle))
    }

    /// Waits until `needle` is on the visible screen `n` or more times (e.g. the second
    /// prompt).
    pub fn wait_for_count(&self, needle: &str, n: usize) -> Screen {
        self.wait_for(&format!("{n}× {needle:?} on screen"), |s| {
            s.count(needle) >= n
        })
    }

    /// Waits until `needle` is in the scrollback or on screen.
    pub fn wait_for_all_text(&self, needle: &str) -> Screen {
        self.wait_for(&format!("{needle:?} in scrollback or on screen"), |s| {
            s.all_text().contains(needle)
        })
    }

    /// Waits until `needle` appears in [`Pty::text_since`]`(mark)`.
    pub fn wait_for_text_since(&self, mark: Mark, needle: &str) -> Screen {
        self.wait_for_raw(&format!("{needle:?} in output after {mark:?}"), |raw| {
            strip_ansi(raw.get(mark.0..).unwrap_or_default()).contains(needle)
        })
    }

    /// Like [`Pty::wait_for`], with a predicate on the whole raw output.
    pub fn wait_for_raw(&self, what: &str, pred: impl Fn(&[u8]) -> bool) -> Screen {
        self.wait_for(what, |_| pred(&self.shared.lock().raw))
    }

    /// Waits for the program to exit (and its output to be read) and returns its status.
    /// At the deadline kills it and panics with the screen.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + self.timeout;
        let mut st = self.shared.lock();
        loop {
            if st.exit.is_some() && st.eof {
                return st.exit.clone().unwrap();
            }
            let now = Instant::now();
            if now >= deadline {
                if let Some(status) = st.exit.clone() {
                    // Exited, but something else still holds the terminal open.
                    return status;
                }
                drop(st);
                let report = self.report();
                self.kill();
                panic!(
                    "timed out after {:?} waiting for {} to exit (killed it)\n{report}",
                    self.timeout, self.program
                );
            }
            st = self
                .shared
                .cond
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The exit status if the program has exited.
    pub fn try_exit_status(&self) -> Option<ExitStatus> {
        self.shared.lock().exit.clone()
    }

    /// SIGHUP, then SIGKILL if it has not exited within 2 s; waits up to 5 s more.
    pub fn kill(&mut self) {
        if self.try_exit_status().is_some() {
            return;
        }
        let _ = self.killer.kill();
        if self.wait_exited_for(Duration::from_secs(2)) {
            return;
        }
        if let Some(pid) = self.pid {
            // No `unsafe` allowed here for kill(2): use the shell's builtin `kill`.
            let _ = std::process::Command::new("sh")
                .args(["-c", "kill -KILL \"$1\"", "sh", &pid.to_string()])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
        self.wait_exited_for(Duration::from_secs(5));
    }

    fn wait_exited_for(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut st = self.shared.lock();
        while st.exit.is_none() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = self
                .shared
                .cond
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// Screen dump, exit status and the escaped tail of the raw output.
    pub fn report(&self) -> String {
        let st = self.shared.lock();
        let screen = snapshot(&st);
        let start = st.raw.len().saturating_sub(RAW_TAIL);
        let tail = String::from_utf8_lossy(&st.raw[start..])
            .escape_debug()
            .to_string();
        format!(
            "program: {}\nexit: {}\noutput ended: {}\nqueries answered: {:?}\n{}\n--- last {} of {} raw bytes ---\n{tail}\n--- end of raw ---",
            self.program,
            st.exit
                .as_ref()
                .map_or_else(|| "still running".to_owned(), |s| format!("{s:?}")),
            st.eof,
            st.answered,
            screen.dump(),
            st.raw.len() - start,
            st.raw.len(),
        )
    }

    fn fail(&self, msg: &str) -> ! {
        panic!("{msg}\n{}", self.report())
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        self.kill();
    }
}

fn snapshot(st: &State) -> Screen {
    Screen {
        screen: st.parser.screen().clone(),
        raw_len: st.raw.len(),
    }
}

/// Terminal queries the reader answers.
#[derive(Clone, Copy)]
enum Query {
    /// `CSI 6 n` → `CSI row ; col R`.
    CursorPosition,
    /// `CSI ? 6 n` → `CSI ? row ; col R`.
    DecCursorPosition,
    /// `CSI 5 n` → `CSI 0 n`.
    Status,
    /// `CSI c` / `CSI 0 c` → `CSI ? 1 ; 2 c` (VT100 with advanced video).
    PrimaryAttributes,
}

const QUERIES: &[(&[u8], Query)] = &[
    (b"\x1b[6n", Query::CursorPosition),
    (b"\x1b[?6n", Query::DecCursorPosition),
    (b"\x1b[5n", Query::Status),
    (b"\x1b[c", Query::PrimaryAttributes),
    (b"\x1b[0c", Query::PrimaryAttributes),
];

enum Scan {
    Query(Query, usize),
    /// Could still become a query: wait for more bytes.
    Partial,
    No,
}

fn scan(bytes: &[u8]) -> Scan {
    let mut partial = false;
    for (q, kind) in QUERIES {
        if bytes.starts_with(q) {
            return Scan::Query(*kind, q.len());
        }
        if q.starts_with(bytes) {
            partial = true;
        }
    }
    if partial { Scan::Partial } else { Scan::No }
}

fn answer(q: Query, screen: &vt100::Screen) -> (&'static str, Vec<u8>) {
    let (row, col) = screen.cursor_position();
    let (_, cols) = screen.size();
    let col = col.min(cols.get() - 1);
    match q {
        Query::CursorPosition => ("DSR", format!("\x1b[{};{}R", row + 1, col + 1).into_bytes()),
        Query::DecCursorPosition => (
            "DECXCPR",
            format!("\x1b[?{};{}R", row + 1, col + 1).into_bytes(),
        ),
        Query::Status => ("status", b"\x1b[0n".to_vec()),
        Query::PrimaryAttributes => ("DA1", b"\x1b[?1;2c".to_vec()),
    }
}

/// A descriptor of the master side of its own (close-on-exec, like portable-pty's).
fn dup_master(master: &dyn MasterPty) -> File {
    let raw = master.as_raw_fd().expect("the pty master's descriptor");
    #[allow(unsafe_code)]
    // SAFETY: `raw` is the master's descriptor, open for as long as `master` is borrowed.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(raw) };
    File::from(fd.try_clone_to_owned().expect("duplicating the pty master"))
}

/// Whether `file` has something to read (or an error, or end of output) within `ms`.
fn readable(file: &File, ms: i32) -> bool {
    let mut fds = [libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    #[allow(unsafe_code)]
    // SAFETY: one pollfd, valid for the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) };
    n > 0
}

fn read_loop(mut reader: File, shared: &Shared, writer: &Writer) {
    let mut buf = vec![0u8; 8192];
    // Bytes not yet given to the parser: the start of what may be a query split across reads.
    let mut pending: Vec<u8> = Vec::new();
    loop {
        // Waits in poll, not in read, so a hang-up can close this descriptor too.
        if shared.closing.load(Ordering::SeqCst) {
            break;
        }
        if shared.frozen.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(
                READ_POLL_MS.unsigned_abs().into(),
            ));
            continue;
        }
        if !readable(&reader, READ_POLL_MS) {
            continue;
        }
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // EIO once the slave side is closed everywhere.
            Err(_) => break,
        };
        pending.extend_from_slice(&buf[..n]);
        let mut replies: Vec<Vec<u8>> = Vec::new();
        {
            let mut st = shared.lock();
            st.raw.extend_from_slice(&buf[..n]);
            let (mut start, mut i) = (0, 0);
            while i < pending.len() {
                if pending[i] == 0x1b {
                    match scan(&pending[i..]) {
                        Scan::Query(q, len) => {
                            st.parser.process(&pending[start..i]);
                            let (name, reply) = answer(q, st.parser.screen());
                            st.answered.push(name);
                            replies.push(reply);
                            i += len;
                            start = i;
                            continue;
                        }
                        Scan::Partial => break,
                        Scan::No => {}
                    }
                }
                i += 1;
            }
            st.parser.process(&pending[start..i]);
            pending.drain(..i);
        }
        if !replies.is_empty()
            && let Some(w) = writer.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
        {
            for r in &replies {
                let _ = w.write_all(r);
            }
            let _ = w.flush();
        }
        shared.cond.notify_all();
    }
    let mut st = shared.lock();
    st.parser.process(&pending);
    st.eof = true;
    drop(st);
    shared.cond.notify_all();
}

/// Removes escape sequences (CSI, OSC, DCS/APC/PM/SOS strings, two-byte escapes) and
/// control characters other than `\n` and `\t`; `\r\n` → `\n`, lone `\r` dropped.
pub fn strip_ansi(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                Some('[') => {
                    // Parameters and intermediates, then one final byte in @..~.
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']' | 'P' | '_' | '^' | 'X') => {
                    // String until BEL or ST (ESC \).
                    while let Some(c) = chars.next() {
                        if c == '\x07' {
                            break;
                        }
                        if c == '\x1b' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                Some('(' | ')' | '*' | '+' | '#' | '%') => {
                    chars.next();
                }
                _ => {}
            },
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}
