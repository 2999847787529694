//! The REPL's output. On a terminal, finished lines are printed once and scroll away, and
//! below them a small *live region* — the line still streaming, running tools, a spinner, an
//! approval prompt — is redrawn in place; everything is written in one `write` per flush.
//! Off a terminal (piped), there is no live region and no escape code at all: finished lines
//! and streamed text are written as they come.
//!
//! Lines always end `\r\n` on a terminal: during a turn the terminal is in raw mode, where a
//! bare `\n` would not return the carriage.

use std::io::Write;

use unicode_width::UnicodeWidthChar;

/// Where output goes and how.
pub(crate) struct Screen {
    /// A terminal (live region, cursor movement) or a plain stream.
    terminal: bool,
    /// What to write at the next flush.
    pending: String,
    /// Whether a live region is on screen (the cursor then sits at its first row).
    live_drawn: bool,
    /// The live region's lines (terminal only), laid out at each flush.
    live: Vec<String>,
    live_dirty: bool,
    /// Plain mode: whether the last byte written ended a line.
    at_line_start: bool,
    /// The terminal's size (columns, rows), asked once and again on a resize: asking opens
    /// the terminal, too slow to do at every flush.
    size: (usize, usize),
    out: Box<dyn Write + Send>,
}

impl Screen {
    pub(crate) fn new(terminal: bool) -> Screen {
        Screen::with_writer(terminal, Box::new(std::io::stdout()))
    }

    pub(crate) fn with_writer(terminal: bool, out: Box<dyn Write + Send>) -> Screen {
        Screen {
            terminal,
            pending: String::new(),
            live_drawn: false,
            live: Vec::new(),
            live_dirty: false,
            at_line_start: true,
            size: if terminal { terminal_size() } else { (80, 24) },
            out,
        }
    }

    /// Asks the terminal its size again (after a resize).
    pub(crate) fn refresh_size(&mut self) {
        if self.terminal {
            self.size = terminal_size();
            self.live_dirty = true;
        }
    }

    /// The terminal's width in columns.
    pub(crate) fn cols(&self) -> usize {
        self.size.0
    }

    pub(crate) fn terminal(&self) -> bool {
        self.terminal
    }

    /// A finished line, printed above the live region (it may hold SGR styles, never `\n`).
    pub(crate) fn line(&mut self, text: &str) {
        if !self.terminal && !self.at_line_start {
            self.pending.push('\n');
        }
        self.pending.push_str(text);
        self.pending
            .push_str(if self.terminal { "\r\n" } else { "\n" });
        self.at_line_start = true;
    }

    /// Terminal control text written as it is at the next flush (cursor visibility).
    pub(crate) fn raw(&mut self, text: &str) {
        if self.terminal {
            self.pending.push_str(text);
        }
    }

    /// Plain mode only: text as it streams, without a line end of its own.
    pub(crate) fn stream(&mut self, text: &str) {
        debug_assert!(!self.terminal);
        if text.is_empty() {
            return;
        }
        self.pending.push_str(text);
        self.at_line_start = text.ends_with('\n');
    }

    /// Plain mode: ends a streamed line that has no line end yet.
    pub(crate) fn end_stream_line(&mut self) {
        if !self.terminal && !self.at_line_start {
            self.pending.push('\n');
            self.at_line_start = true;
        }
    }

    /// The live region to show from the next flush on (terminal only; ignored off one).
    /// It is laid out at the flush, at the terminal's width then.
    pub(crate) fn set_live(&mut self, lines: Vec<String>) {
        if !self.terminal || lines == self.live {
            return;
        }
        self.live = lines;
        self.live_dirty = true;
    }

    /// Writes what is pending: erases the live region, prints the finished lines, draws the
    /// live region again — one write.
    ///
    /// The cursor is left at the live region's first row, column 0, so erasing it is "clear
    /// to the end of the screen" from there, whatever happened to its rows since: a terminal
    /// that re-wraps its lines on a resize (tmux, most emulators) moves the cursor with the
    /// text, one that cuts them (xterm) leaves it in place — neither leaves a copy behind.
    /// Counting rows up from the region's end, as drawn at the old width, cannot know which.
    pub(crate) fn flush(&mut self) {
        if self.pending.is_empty() && !self.live_dirty {
            return;
        }
        let mut out = String::with_capacity(self.pending.len() + 256);
        if self.terminal {
            if self.live_drawn {
                out.push_str("\r\x1b[J");
            }
            out.push_str(&self.pending);
            let rows = layout(&self.live, self.size);
            for (i, row) in rows.iter().enumerate() {
                if i > 0 {
                    out.push_str("\r\n");
                }
                out.push_str(row);
            }
            out.push('\r');
            if rows.len() > 1 {
                out.push_str(&format!("\x1b[{}A", rows.len() - 1));
            }
            self.live_drawn = !rows.is_empty();
        } else {
            out.push_str(&self.pending);
        }
        self.pending.clear();
        self.live_dirty = false;
        // A gone terminal is noticed by the input side; output errors are not fatal here.
        let _ = self.out.write_all(out.as_bytes());
        let _ = self.out.flush();
    }

    /// Removes the live region (before the prompt takes over the terminal).
    pub(crate) fn clear_live(&mut self) {
        self.set_live(Vec::new());
        self.flush();
    }
}

fn terminal_size() -> (usize, usize) {
    crossterm::terminal::size().map_or((80, 24), |(c, r)| {
        (usize::from(c.max(1)), usize::from(r.max(1)))
    })
}

/// The live region's lines as terminal rows at `size` (columns, rows): tabs as spaces, each
/// line cut into rows no wider than the terminal (so each takes exactly one row, wherever
/// the terminal would have wrapped it), and a region taller than the terminal keeps its
/// first rows and its last two (a question's keys), the middle said to be cut — so all of
/// it can always be erased again.
fn layout(lines: &[String], (cols, rows): (usize, usize)) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in lines {
        let l = if l.contains('\t') {
            l.replace('\t', "    ")
        } else {
            l.clone()
        };
        out.extend(wrap_rows(&l, cols));
    }
    let max = rows.saturating_sub(2).max(4);
    if out.len() <= max {
        return out;
    }
    let tail = out.split_off(out.len() - 2);
    let keep = max.saturating_sub(3);
    let cut = out.len() - keep;
    out.truncate(keep);
    out.push(fit(
        &format!("\x1b[2m… {cut} more lines (the terminal is too small to show them)\x1b[0m"),
        cols,
    ));
    out.extend(tail);
    out
}

/// `line` cut into pieces at most `cols` columns wide. The SGR styles in force where a piece
/// ends are reset there and set again at the start of the next, so each piece stands alone.
pub(crate) fn wrap_rows(line: &str, cols: usize) -> Vec<String> {
    let cols = cols.max(1);
    if visible_width(line) <= cols {
        return vec![line.to_owned()];
    }
    let mut pieces = Vec::new();
    let mut piece = String::new();
    let mut width = 0;
    // The SGR sequences since the last reset: the style in force.
    let mut style = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            let mut seq = String::from(c);
            if chars.peek() == Some(&'[') {
                seq.push('[');
                chars.next();
                for c in chars.by_ref() {
                    seq.push(c);
                    if ('\x40'..='\x7e').contains(&c) {
                        break;
                    }
                }
            }
            if seq == "\x1b[0m" || seq == "\x1b[m" {
                style.clear();
            } else if seq.ends_with('m') {
                style.push_str(&seq);
            }
            piece.push_str(&seq);
            continue;
        }
        let w = c.width().unwrap_or(0);
        if width + w > cols && width > 0 {
            if !style.is_empty() {
                piece.push_str("\x1b[0m");
            }
            pieces.push(std::mem::take(&mut piece));
            piece.push_str(&style);
            width = 0;
        }
        width += w;
        piece.push(c);
    }
    pieces.push(piece);
    pieces
}

/// The columns `text` takes, ANSI escape sequences excluded.
pub(crate) fn visible_width(text: &str) -> usize {
    let mut width = 0;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ params final-byte (0x40..=0x7e).
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('\x40'..='\x7e').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        width += c.width().unwrap_or(0);
    }
    width
}

/// `text` cut to at most `cols` visible columns (escape sequences kept, a reset added when
/// cut), so a live line never wraps.
pub(crate) fn fit(text: &str, cols: usize) -> String {
    if visible_width(text) <= cols {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut width = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            out.push(c);
            if chars.peek() == Some(&'[') {
                out.push('[');
                chars.next();
                for c in chars.by_ref() {
                    out.push(c);
                    if ('\x40'..='\x7e').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        let w = c.width().unwrap_or(0);
        if width + w > cols.saturating_sub(1) {
            out.push('…');
            break;
        }
        width += w;
        out.push(c);
    }
    out.push_str("\x1b[0m");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_skip_escape_sequences_and_count_wide_characters() {
        assert_eq!(visible_width("\x1b[1;32mok\x1b[0m"), 2);
        assert_eq!(visible_width("日本"), 4);
    }

    #[test]
    fn long_lines_are_cut_into_rows_that_each_carry_their_style() {
        let rows = wrap_rows("\x1b[1mabcdefgh\x1b[0m tail", 5);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert!(rows.iter().all(|r| visible_width(r) <= 5), "{rows:?}");
        assert_eq!(rows[0], "\x1b[1mabcde\x1b[0m");
        assert_eq!(rows[1], "\x1b[1mfgh\x1b[0m t");
        assert_eq!(rows[2], "ail");
        // A wide character that would straddle the edge starts the next row.
        let rows = wrap_rows("ab日本", 3);
        assert_eq!(rows, vec!["ab", "日", "本"]);
    }

    /// A terminal that re-wraps its lines when its width changes, as tmux and most
    /// emulators do (the vt100 emulator of the PTY tests cuts them, as xterm does): logical
    /// lines of visible characters and a cursor inside one of them. It understands what the
    /// screen writes: text, `\r`, `\n`, cursor up, clear to the end, and ignores styles.
    struct Reflowing {
        lines: Vec<Vec<char>>,
        line: usize,
        offset: usize,
        cols: usize,
    }

    impl Reflowing {
        fn new(cols: usize) -> Self {
            Reflowing {
                lines: vec![Vec::new()],
                line: 0,
                offset: 0,
                cols,
            }
        }

        /// The row of the cursor inside its line; after the last column of a full row it
        /// is still on that row (the wrap is pending).
        fn row(&self) -> usize {
            let len = self.lines[self.line].len();
            if self.offset > 0 && self.offset.is_multiple_of(self.cols) && self.offset >= len {
                self.offset / self.cols - 1
            } else {
                self.offset / self.cols
            }
        }

        fn rows(&self, line: usize) -> usize {
            self.lines[line].len().div_ceil(self.cols).max(1)
        }

        fn write(&mut self, text: &str) {
            let mut chars = text.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\x1b' => {
                        let mut params = String::new();
                        if chars.next() != Some('[') {
                            continue;
                        }
                        for c in chars.by_ref() {
                            if ('\x40'..='\x7e').contains(&c) {
                                self.control(c, &params);
                                break;
                            }
                            params.push(c);
                        }
                    }
                    '\r' => self.offset = self.row() * self.cols,
                    '\n' => {
                        let col = self.offset - self.row() * self.cols;
                        if (self.row() + 1) < self.rows(self.line) {
                            self.offset = (self.row() + 1) * self.cols + col;
                        } else {
                            self.line += 1;
                            if self.line == self.lines.len() {
                                self.lines.push(Vec::new());
                            }
                            self.offset = col;
                        }
                    }
                    c => {
                        let line = &mut self.lines[self.line];
                        if line.len() < self.offset {
                            line.resize(self.offset, ' ');
                        }
                        if self.offset < line.len() {
                            line[self.offset] = c;
                        } else {
                            line.push(c);
                        }
                        self.offset += 1;
                    }
                }
            }
        }

        fn control(&mut self, last: char, params: &str) {
            match last {
                'A' => {
                    let n: usize = params.parse().unwrap_or(1);
                    let col = self.offset - self.row() * self.cols;
                    let mut row = (0..self.line).map(|l| self.rows(l)).sum::<usize>() + self.row();
                    row = row.saturating_sub(n);
                    let mut line = 0;
                    while row >= self.rows(line) {
                        row -= self.rows(line);
                        line += 1;
                    }
                    self.line = line;
                    self.offset = row * self.cols + col;
                }
                'J' => {
                    self.lines[self.line].truncate(self.offset);
                    self.lines.truncate(self.line + 1);
                }
                _ => {}
            }
        }

        fn text(&self) -> Vec<String> {
            let mut out: Vec<String> = self
                .lines
                .iter()
                .map(|l| l.iter().collect::<String>().trim_end().to_owned())
                .collect();
            while out.last().is_some_and(String::is_empty) {
                out.pop();
            }
            out
        }
    }

    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Shared {
        fn take(&self) -> String {
            let mut bytes = self.0.lock().unwrap_or_else(|e| e.into_inner());
            String::from_utf8(std::mem::take(&mut *bytes)).unwrap_or_default()
        }
    }

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_terminal_that_rewraps_on_resize_is_left_with_no_copy_of_the_live_region() {
        let out = Shared::default();
        let mut term = Reflowing::new(120);
        let mut screen = Screen::with_writer(true, Box::new(out.clone()));
        screen.size = (120, 40);
        let long = format!("LONG-{}-END", "abcdefghij".repeat(10));
        let live = |n: usize| vec![long.clone(), format!("⠋ thinking {n}s")];
        screen.line("header");
        screen.set_live(live(1));
        screen.flush();
        term.write(&out.take());
        // Narrowed, then widened, a frame drawn after each (the terminal re-wraps first).
        for (i, cols) in [40, 100, 30, 120].into_iter().enumerate() {
            term.cols = cols;
            screen.size = (cols, 40);
            screen.live_dirty = true;
            screen.set_live(live(i + 2));
            screen.flush();
            term.write(&out.take());
            assert_eq!(term.text()[0], "header", "{:?}", term.text());
            assert_eq!(
                term.text()
                    .iter()
                    .filter(|l| l.contains("thinking"))
                    .count(),
                1,
                "at {cols} columns: {:?}",
                term.text()
            );
        }
        screen.line("done");
        screen.set_live(Vec::new());
        screen.flush();
        term.write(&out.take());
        assert_eq!(term.text(), vec!["header", "done"]);
    }

    #[test]
    fn the_cursor_is_left_at_the_live_regions_first_row_and_erasing_clears_below_it() {
        let out = Shared::default();
        let mut screen = Screen::with_writer(true, Box::new(out.clone()));
        screen.size = (10, 24);
        screen.set_live(vec!["x".repeat(25), "y".into()]);
        screen.flush();
        screen.line("done");
        screen.set_live(Vec::new());
        screen.flush();
        let text = out.take();
        // Four rows drawn (25 columns at 10 wide, then `y`), the cursor taken back up three;
        // then cleared from there and the finished line printed in their place.
        assert_eq!(
            text,
            format!(
                "{}\r\n{}\r\n{}\r\ny\r\x1b[3A\r\x1b[Jdone\r\n\r",
                "x".repeat(10),
                "x".repeat(10),
                "x".repeat(5)
            )
        );
    }

    #[test]
    fn fit_cuts_to_the_width_and_resets_the_style() {
        let cut = fit("\x1b[2mabcdefgh\x1b[0m", 5);
        assert_eq!(visible_width(&cut), 5);
        assert!(cut.ends_with("…\x1b[0m"));
        assert_eq!(fit("abc", 5), "abc");
    }
}
