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
    /// The live region as drawn: its rows on screen.
    live_rows: usize,
    /// The live region to draw at the next flush (terminal only).
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
            live_rows: 0,
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
    /// Tabs become spaces (their width depends on the column); a region taller than the
    /// terminal keeps its first lines and its last two (a question's keys), the middle said
    /// to be cut, so it can always be erased again.
    pub(crate) fn set_live(&mut self, lines: Vec<String>) {
        if !self.terminal {
            return;
        }
        let mut lines: Vec<String> = lines
            .into_iter()
            .map(|l| {
                if l.contains('\t') {
                    l.replace('\t', "    ")
                } else {
                    l
                }
            })
            .collect();
        let (cols, rows) = self.size;
        let max = rows.saturating_sub(2).max(4);
        let height = |ls: &[String]| ls.iter().map(|l| rows_of(l, cols)).sum::<usize>();
        if height(&lines) > max {
            let tail = lines.split_off(lines.len().saturating_sub(2));
            let mut head = Vec::new();
            let mut used = height(&tail) + 1;
            for l in lines.iter() {
                let r = rows_of(l, cols);
                if used + r > max {
                    break;
                }
                used += r;
                head.push(l.clone());
            }
            let cut = lines.len() - head.len();
            head.push(fit(
                &format!(
                    "\x1b[2m… {cut} more lines (the terminal is too small to show them)\x1b[0m"
                ),
                cols,
            ));
            head.extend(tail.into_iter().map(|l| fit(&l, cols)));
            lines = head;
        }
        if lines == self.live {
            return;
        }
        self.live = lines;
        self.live_dirty = true;
    }

    /// Writes what is pending: erases the live region, prints the finished lines, draws the
    /// live region again — one write.
    pub(crate) fn flush(&mut self) {
        if self.pending.is_empty() && !self.live_dirty {
            return;
        }
        let mut out = String::with_capacity(self.pending.len() + 256);
        if self.terminal {
            let redraw = self.live_dirty || !self.pending.is_empty();
            if redraw {
                erase(&mut out, self.live_rows);
            }
            out.push_str(&self.pending);
            if redraw {
                let cols = self.size.0;
                let mut rows = 0;
                for (i, l) in self.live.iter().enumerate() {
                    if i > 0 {
                        out.push_str("\r\n");
                    }
                    out.push_str(l);
                    rows += rows_of(l, cols);
                }
                self.live_rows = rows;
            }
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

/// Moves to the first row of a live region of `rows` rows and clears to the end of the
/// screen.
fn erase(out: &mut String, rows: usize) {
    if rows == 0 {
        return;
    }
    out.push('\r');
    if rows > 1 {
        out.push_str(&format!("\x1b[{}A", rows - 1));
    }
    out.push_str("\x1b[J");
}

fn terminal_size() -> (usize, usize) {
    crossterm::terminal::size().map_or((80, 24), |(c, r)| {
        (usize::from(c.max(1)), usize::from(r.max(1)))
    })
}

/// The rows `line` takes on a terminal `cols` wide (at least one).
pub(crate) fn rows_of(line: &str, cols: usize) -> usize {
    visible_width(line).div_ceil(cols.max(1)).max(1)
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
        assert_eq!(rows_of("", 80), 1);
        assert_eq!(rows_of(&"x".repeat(80), 80), 1);
        assert_eq!(rows_of(&"x".repeat(81), 80), 2);
    }

    #[test]
    fn fit_cuts_to_the_width_and_resets_the_style() {
        let cut = fit("\x1b[2mabcdefgh\x1b[0m", 5);
        assert_eq!(visible_width(&cut), 5);
        assert!(cut.ends_with("…\x1b[0m"));
        assert_eq!(fit("abc", 5), "abc");
    }
}
