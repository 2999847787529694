//! Streaming Markdown → terminal rendering of assistant answers.
//!
//! The answer streams, so rendering is line by line: a line is committed when its `'\n'` arrives and
//! is rendered once, from the line itself plus a little state carried between lines (inside which
//! fenced code block, and that block's highlighter). Block structure is recognised by hand, by the
//! line's own prefix (heading, quote bars, list marker, rule, fence) with its indentation kept as
//! written; the inline rest is parsed by pulldown-cmark as a one-line document, and if that document
//! is not a single paragraph (a link reference definition, a block inside a list item) the text is
//! shown literally rather than guessed at. Pipe tables are gathered and laid out in aligned
//! columns when they end ([`super::table`]); HTML passes through unchanged.
//!
//! Model text never reaches the terminal raw: control and invisible characters (C0 but TAB, DEL,
//! C1, bidi controls) are made visible by [`super::visible`] in both modes, so an answer cannot move the cursor, retitle the
//! window or smuggle escape sequences. Styling is SGR only, and every styled line ends with a reset.

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};

use super::highlight::Highlighter;
use super::table;
use super::visible::visible;

const RESET: &str = "\x1b[0m";
const DIM: &str = "2";
/// Heading colours by level (bold always).
const HEADING: [&str; 6] = ["1;4;35", "1;35", "1;34", "1;36", "1;32", "1"];
const INLINE_CODE: &str = "36";
const LINK: &str = "34";
const MARKER: &str = "33";
const TASK_DONE: &str = "1;32";
/// Width of a horizontal rule: fixed, the renderer knows nothing of the terminal.
const RULE_WIDTH: usize = 40;

/// Renders an assistant answer that arrives line by line.
pub(crate) struct Markdown {
    color: bool,
    fence: Option<Fence>,
    /// The stream outpaced the screen: no code is highlighted until the answer ends.
    plain_code: bool,
    /// The rows of a pipe table still gathering (raw).
    table: Vec<String>,
}

/// An open fenced code block.
struct Fence {
    /// `` ` `` or `~`.
    marker: char,
    /// How many markers opened it; a close needs at least as many.
    len: usize,
    /// The opening line's indentation, for the closing line [`Markdown::end`] supplies.
    indent: String,
    /// None: unknown language, or syntect failed on an earlier line.
    highlighter: Option<Highlighter>,
}

impl Markdown {
    /// `color`: ANSI styling (SGR escape codes only, never cursor movement); without it every
    /// line comes back exactly as given (plain text: stdout is not a terminal or NO_COLOR), except
    /// that control and invisible characters are made visible.
    pub(crate) fn new(color: bool) -> Markdown {
        Markdown {
            color,
            fence: None,
            plain_code: false,
            table: Vec::new(),
        }
    }

    /// One complete line of the answer: the lines to show now. None while a table's rows
    /// gather; the table comes out whole, aligned, before its first line that is not a row.
    pub(crate) fn lines(&mut self, line: &str) -> Vec<String> {
        if self.fence.is_none() && table::is_row(line) {
            self.table.push(line.to_owned());
            return Vec::new();
        }
        let mut out = self.take_table();
        out.push(self.line(line));
        out
    }

    /// The table rows gathered so far, laid out as they stand (for the live region).
    pub(crate) fn pending(&self) -> Vec<String> {
        self.table_lines(&self.table)
    }

    fn take_table(&mut self) -> Vec<String> {
        let rows = std::mem::take(&mut self.table);
        self.table_lines(&rows)
    }

    fn table_lines(&self, rows: &[String]) -> Vec<String> {
        if rows.is_empty() {
            return Vec::new();
        }
        let color = self.color;
        table::layout(rows, |t| {
            if color {
                let mut out = String::new();
                styled(&mut out, DIM, t);
                out
            } else {
                t.to_owned()
            }
        })
    }

    /// With `behind` (the stream outpaces the screen), code is no longer highlighted until
    /// the answer ends: syntect is the slow part of rendering.
    pub(crate) fn keep_up(&mut self, behind: bool) {
        if behind {
            self.plain_code = true;
            if let Some(f) = &mut self.fence {
                f.highlighter = None;
            }
        }
    }

    /// One complete line of the answer (no trailing newline) as it should be shown. The result
    /// never contains '\n' or '\r'. It may depend on earlier lines (fences, highlighting state).
    pub(crate) fn line(&mut self, line: &str) -> String {
        let mut out = String::with_capacity(line.len() + 16);
        // Fences are followed in both modes (a table row inside one is code).
        let dim = |out: &mut String, line: &str| {
            if self.color {
                styled(out, DIM, line);
            } else {
                push_clean(out, line);
            }
        };
        if let Some(fence) = &mut self.fence {
            if closes(line, fence) {
                dim(&mut out, line);
                self.fence = None;
            } else {
                let ok = match &mut fence.highlighter {
                    Some(h) => h.line(line, &mut out),
                    None => false,
                };
                if !ok {
                    fence.highlighter = None;
                    push_clean(&mut out, line);
                }
            }
        } else if let Some(mut fence) = opens(line) {
            dim(&mut out, line);
            if self.plain_code || !self.color {
                fence.highlighter = None;
            }
            self.fence = Some(fence);
        } else if self.color {
            block(line, &mut out);
        } else {
            push_clean(&mut out, line);
        }
        finish(out)
    }

    /// A line still arriving (not yet ended by '\n'), as it should show meanwhile; no state
    /// change, O(len): inside a code fence the raw code (dim if it may be the closing fence),
    /// elsewhere the raw text (a fence opening dim).
    pub(crate) fn partial(&self, line: &str) -> String {
        let mut out = String::with_capacity(line.len() + 16);
        if !self.color {
            push_clean(&mut out, line);
            return out;
        }
        let trimmed = line.trim_start_matches([' ', '\t']);
        let fence_like = match &self.fence {
            Some(f) => trimmed.starts_with(f.marker),
            None => trimmed.starts_with("```") || trimmed.starts_with("~~~"),
        };
        if fence_like {
            styled(&mut out, DIM, line);
        } else {
            push_clean(&mut out, line);
        }
        finish(out)
    }

    /// The answer ended: a gathering table comes out, an unclosed fence is closed (with a dim
    /// closing fence line, when colouring); state is reset for the next answer. Returns the
    /// lines to print.
    pub(crate) fn end(&mut self) -> Vec<String> {
        self.plain_code = false;
        let mut out = self.take_table();
        out.extend(self.close_fence());
        out
    }

    fn close_fence(&mut self) -> Option<String> {
        let fence = self.fence.take()?;
        if !self.color {
            return None;
        }
        let mut out = String::new();
        let mut close = fence.indent;
        close.extend(std::iter::repeat_n(fence.marker, fence.len));
        styled(&mut out, DIM, &close);
        Some(finish(out))
    }
}

/// Appends `text` to `out` with every control or invisible character made visible
/// ([`super::visible`]: `^[` for ESC, `^?` for DEL, `\u{9B}`-style for C1 and bidi controls).
pub(crate) fn push_clean(out: &mut String, text: &str) {
    out.push_str(&visible(text, false));
}

fn styled(out: &mut String, sgr: &str, text: &str) {
    out.push_str("\x1b[");
    out.push_str(sgr);
    out.push('m');
    push_clean(out, text);
    out.push_str(RESET);
}

/// A styled line ends with a reset (ESC in `out` is always ours: model text is cleaned).
fn finish(mut out: String) -> String {
    if out.contains('\x1b') && !out.ends_with(RESET) {
        out.push_str(RESET);
    }
    out
}

fn split_indent(line: &str) -> (&str, &str) {
    let rest = line.trim_start_matches([' ', '\t']);
    (&line[..line.len() - rest.len()], rest)
}

/// A fence opening: ``` or ~~~ (three or more), any indentation (models indent fences inside list
/// items), an info string that for backticks holds no backtick.
fn opens(line: &str) -> Option<Fence> {
    let (indent, rest) = split_indent(line);
    let marker = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = rest.len() - rest.trim_start_matches(marker).len();
    if len < 3 {
        return None;
    }
    let info = rest[len..].trim();
    if marker == '`' && info.contains('`') {
        return None;
    }
    Some(Fence {
        marker,
        len,
        indent: indent.to_owned(),
        highlighter: Highlighter::for_info(info),
    })
}

fn closes(line: &str, fence: &Fence) -> bool {
    let (_, rest) = split_indent(line);
    let len = rest.len() - rest.trim_start_matches(fence.marker).len();
    len >= fence.len && rest[len..].trim().is_empty()
}

/// Renders one line outside code fences.
fn block(line: &str, out: &mut String) {
    let (indent, rest) = split_indent(line);
    if rest.is_empty() {
        out.push_str(line);
        return;
    }
    out.push_str(indent);
    // Quote bars, any depth: `> > x` and `>> x`.
    let mut rest = rest;
    let mut quoted = false;
    while let Some(after) = rest.strip_prefix('>') {
        quoted = true;
        styled(out, DIM, "│ ");
        rest = after
            .strip_prefix(' ')
            .unwrap_or(after)
            .trim_start_matches([' ', '\t']);
    }
    if quoted && rest.is_empty() {
        return;
    }
    if is_rule(rest) {
        styled(out, DIM, &"─".repeat(RULE_WIDTH));
    } else if let Some((level, text)) = heading(rest) {
        inline(text, HEADING[level - 1], out);
    } else if rest.starts_with('|') || is_html(rest) {
        push_clean(out, rest);
    } else if let Some((marker, gap, text)) = list_item(rest) {
        if marker == "-" || marker == "*" || marker == "+" {
            styled(out, MARKER, "•");
        } else {
            styled(out, MARKER, marker);
        }
        out.push_str(gap);
        let text = match task(text) {
            Some((done, gap, text)) => {
                if done {
                    styled(out, TASK_DONE, "[x]");
                } else {
                    styled(out, DIM, "[ ]");
                }
                out.push_str(gap);
                text
            }
            None => text,
        };
        inline(text, "", out);
    } else {
        inline(rest, "", out);
    }
}

/// `***`, `---`, `___` (three or more, spaces between allowed).
fn is_rule(text: &str) -> bool {
    let Some(c) = text.chars().next().filter(|c| matches!(c, '-' | '*' | '_')) else {
        return false;
    };
    let mut n = 0;
    for ch in text.chars() {
        if ch == c {
            n += 1;
        } else if ch != ' ' && ch != '\t' {
            return false;
        }
    }
    n >= 3
}

/// An ATX heading: level and text (closing `#`s dropped).
fn heading(text: &str) -> Option<(usize, &str)> {
    let level = text.len() - text.trim_start_matches('#').len();
    if !(1..=6).contains(&level) {
        return None;
    }
    let after = &text[level..];
    if !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    let mut body = after.trim();
    let closing = body.trim_end_matches('#');
    if closing.is_empty() {
        body = closing;
    } else if closing.ends_with([' ', '\t']) {
        body = closing.trim_end();
    }
    Some((level, body))
}

/// An HTML block's start: `<tag`, `</tag`, `<!`, `<?` (not an autolink like `<https://x>`).
fn is_html(text: &str) -> bool {
    let Some(t) = text.strip_prefix('<') else {
        return false;
    };
    if t.starts_with(['!', '?']) {
        return true;
    }
    let t = t.strip_prefix('/').unwrap_or(t);
    let name = t.len()
        - t.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '-')
            .len();
    name > 0
        && t.starts_with(|c: char| c.is_ascii_alphabetic())
        && (t.len() == name || t[name..].starts_with([' ', '\t', '>', '/']))
}

/// A list item: marker (`-`, `*`, `+`, `12.`, `3)`), the whitespace after it, the content.
fn list_item(text: &str) -> Option<(&str, &str, &str)> {
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let marker_len = if digits == 0 {
        if text.starts_with(['-', '*', '+']) {
            1
        } else {
            return None;
        }
    } else if digits <= 9 && text[digits..].starts_with(['.', ')']) {
        digits + 1
    } else {
        return None;
    };
    let after = &text[marker_len..];
    let content = after.trim_start_matches([' ', '\t']);
    if content.len() == after.len() && !after.is_empty() {
        return None;
    }
    Some((
        &text[..marker_len],
        &after[..after.len() - content.len()],
        content,
    ))
}

/// A task marker at the start of a list item's content: done, the gap after it, the rest.
fn task(text: &str) -> Option<(bool, &str, &str)> {
    let done = match text.get(..3)? {
        "[ ]" => false,
        "[x]" | "[X]" => true,
        _ => return None,
    };
    let after = &text[3..];
    let content = after.trim_start_matches([' ', '\t']);
    if content.len() == after.len() && !after.is_empty() {
        return None;
    }
    Some((done, &after[..after.len() - content.len()], content))
}

/// SGR attributes in effect for a piece of inline text.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct Style {
    bold: u8,
    italic: u8,
    strike: u8,
    underline: u8,
    dim: u8,
    fg: Option<&'static str>,
}

/// Writes inline Markdown `text` on a `base` SGR (a heading's, or none).
fn inline(text: &str, base: &'static str, out: &mut String) {
    let start = out.len();
    // A stray CR or LF would be a line break to pulldown-cmark: show it as `^M`/`^J` instead.
    if text.contains(['\r', '\n']) || !inline_events(text, base, out) {
        out.truncate(start);
        if base.is_empty() {
            push_clean(out, text);
        } else {
            styled(out, base, text);
        }
    }
}

/// False if `text` is not one paragraph of inline content (the caller then shows it literally).
fn inline_events(text: &str, base: &'static str, out: &mut String) -> bool {
    let mut style = Style::default();
    let mut fgs: Vec<&'static str> = Vec::new();
    // What the terminal has: plain after the reset that ends every styled piece before.
    let mut written: Option<Style> = base.is_empty().then(Style::default);
    // Each open link's URL, None when the text already shows it (autolinks).
    let mut links: Vec<Option<String>> = Vec::new();
    let mut paragraphs = 0;
    let write = |out: &mut String, written: &mut Option<Style>, style: Style, text: &str| {
        if text.is_empty() {
            return;
        }
        if *written != Some(style) {
            sgr(out, base, style);
            *written = Some(style);
        }
        push_clean(out, text);
    };
    for event in Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Start(Tag::Paragraph) => paragraphs += 1,
            Event::End(TagEnd::Paragraph) => {}
            Event::Start(Tag::Emphasis) => style.italic += 1,
            Event::End(TagEnd::Emphasis) => style.italic = style.italic.saturating_sub(1),
            Event::Start(Tag::Strong) => style.bold += 1,
            Event::End(TagEnd::Strong) => style.bold = style.bold.saturating_sub(1),
            Event::Start(Tag::Strikethrough) => style.strike += 1,
            Event::End(TagEnd::Strikethrough) => style.strike = style.strike.saturating_sub(1),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                ..
            }) => {
                let auto = matches!(link_type, LinkType::Autolink | LinkType::Email);
                links.push((!auto && !dest_url.is_empty()).then(|| dest_url.into_string()));
                style.underline += 1;
                fgs.push(LINK);
                style.fg = Some(LINK);
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                links.push((!dest_url.is_empty()).then(|| dest_url.into_string()));
                let mut label = style;
                label.dim += 1;
                write(out, &mut written, label, "image: ");
                style.underline += 1;
                fgs.push(LINK);
                style.fg = Some(LINK);
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                style.underline = style.underline.saturating_sub(1);
                fgs.pop();
                style.fg = fgs.last().copied();
                if let Some(url) = links.pop().flatten() {
                    let dim = Style {
                        dim: 1,
                        ..Style::default()
                    };
                    write(out, &mut written, dim, " (");
                    write(out, &mut written, dim, &url);
                    write(out, &mut written, dim, ")");
                }
            }
            Event::Text(t) | Event::InlineHtml(t) | Event::Html(t) => {
                write(out, &mut written, style, &t);
            }
            Event::Code(t) => {
                let code = Style {
                    fg: Some(INLINE_CODE),
                    ..style
                };
                write(out, &mut written, code, &t);
            }
            Event::SoftBreak | Event::HardBreak => write(out, &mut written, style, " "),
            _ => return false,
        }
    }
    paragraphs == 1
}

fn sgr(out: &mut String, base: &str, style: Style) {
    out.push_str("\x1b[0");
    if !base.is_empty() {
        out.push(';');
        out.push_str(base);
    }
    for (on, code) in [
        (style.bold, ";1"),
        (style.dim, ";2"),
        (style.italic, ";3"),
        (style.underline, ";4"),
        (style.strike, ";9"),
    ] {
        if on > 0 {
            out.push_str(code);
        }
    }
    if let Some(fg) = style.fg {
        out.push(';');
        out.push_str(fg);
    }
    out.push('m');
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// What a person sees: the text without our SGR sequences (model ESC is never raw).
    fn visible(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                assert_eq!(chars.next(), Some('['), "only SGR: {s:?}");
                for c in chars.by_ref() {
                    if c == 'm' {
                        break;
                    }
                    assert!(c.is_ascii_digit() || c == ';', "only SGR: {s:?}");
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    fn render(lines: &[&str]) -> Vec<String> {
        let mut md = Markdown::new(true);
        let mut out: Vec<String> = lines.iter().flat_map(|l| md.lines(l)).collect();
        out.extend(md.end());
        for line in &out {
            assert!(!line.contains(['\n', '\r']), "{line:?}");
            if line.contains('\x1b') {
                assert!(line.ends_with(RESET), "style leaks: {line:?}");
            }
        }
        out
    }

    fn one(line: &str) -> String {
        render(&[line]).remove(0)
    }

    #[test]
    fn plain_mode_returns_lines_exactly() {
        let mut md = Markdown::new(false);
        for line in [
            "# Title",
            "**bold** and `code`",
            "```rust",
            "  - item",
            "> quote",
            "x\ty",
        ] {
            assert_eq!(md.line(line), line);
            assert_eq!(md.partial(line), line);
        }
        assert!(md.end().is_empty());
    }

    #[test]
    fn control_characters_are_visible_in_both_modes() {
        let evil = "a\x1b]0;title\x07b\x1b[2Jc\u{9b}d\x7fe\rf\ng";
        let want = "a^[]0;title^Gb^[[2Jc\\u{009B}d^?e^Mf⏎g";
        assert_eq!(Markdown::new(false).line(evil), want);
        assert_eq!(Markdown::new(false).partial(evil), want);
        assert_eq!(visible(&one(evil)), want);
        assert_eq!(visible(&Markdown::new(true).partial(evil)), want);
        let code = render(&["```sh", evil, "```"]);
        assert_eq!(visible(&code[1]), want);
    }

    #[test]
    fn headings_drop_markers_and_are_bold_per_level() {
        let h1 = one("# Title");
        assert_eq!(visible(&h1), "Title");
        assert!(h1.contains("\x1b[0;1;4;35m"), "{h1:?}");
        let h2 = one("## Sub *it* ##");
        assert_eq!(visible(&h2), "Sub it");
        assert!(h2.contains("\x1b[0;1;35;3m"), "{h2:?}");
        assert_eq!(visible(&one("#hashtag")), "#hashtag");
        assert_eq!(visible(&one("####### seven")), "####### seven");
    }

    #[test]
    fn inline_styles() {
        let s = one("a *em* **strong** `code` ~~gone~~");
        assert_eq!(visible(&s), "a em strong code gone");
        for sgr in ["\x1b[0;3m", "\x1b[0;1m", "\x1b[0;36m", "\x1b[0;9m"] {
            assert!(s.contains(sgr), "{sgr:?} in {s:?}");
        }
    }

    #[test]
    fn unclosed_delimiters_are_literal() {
        for line in [
            "2 * 3 = 6",
            "snake_case_name and *half",
            "a_b_c.py",
            "a ` b",
            "~one",
        ] {
            assert_eq!(visible(&one(line)), line);
        }
    }

    #[test]
    fn links_show_text_then_dim_url() {
        let s = one("see [docs](https://x.dev/a) now");
        assert_eq!(visible(&s), "see docs (https://x.dev/a) now");
        assert!(s.contains("\x1b[0;2m ("), "{s:?}");
        assert_eq!(visible(&one("<https://x.dev>")), "https://x.dev");
        assert_eq!(visible(&one("![logo](l.png)")), "image: logo (l.png)");
    }

    #[test]
    fn lists_keep_indentation_numbers_and_tasks() {
        assert_eq!(visible(&one("- item")), "• item");
        assert_eq!(visible(&one("    * nested **b**")), "    • nested b");
        assert_eq!(visible(&one("10. tenth")), "10. tenth");
        assert_eq!(visible(&one("  3) third")), "  3) third");
        assert_eq!(visible(&one("- [ ] todo")), "• [ ] todo");
        let done = one("- [x] done");
        assert_eq!(visible(&done), "• [x] done");
        assert!(done.contains("\x1b[1;32m[x]"), "{done:?}");
        assert_eq!(visible(&one("-not a list")), "-not a list");
        assert_eq!(visible(&one("2024. was a year")), "2024. was a year");
        // A block inside an item is shown literally, not parsed as one.
        assert_eq!(visible(&one("- # not a heading")), "• # not a heading");
    }

    #[test]
    fn quotes_rules_tables_html() {
        assert_eq!(visible(&one("> > deep *x*")), "│ │ deep x");
        assert_eq!(visible(&one(">> - item")), "│ │ • item");
        assert_eq!(visible(&one(">")), "│ ");
        assert_eq!(visible(&one("---")), "─".repeat(RULE_WIDTH));
        assert_eq!(
            visible(&one(" * * *")),
            format!(" {}", "─".repeat(RULE_WIDTH))
        );
        for line in [
            "| a | *b* |",
            "|---|---|",
            "<div class=\"x\">",
            "</p>",
            "<br/>",
            "[ref]: https://x",
        ] {
            assert_eq!(one(line), line);
        }
    }

    #[test]
    fn a_table_gathers_until_its_end_and_comes_out_aligned_but_not_inside_a_fence() {
        let mut md = Markdown::new(false);
        assert!(md.lines("| a | bb |").is_empty());
        assert!(md.lines("|---|---|").is_empty());
        assert!(md.lines("| ccc | d |").is_empty());
        assert_eq!(md.pending().len(), 3);
        assert_eq!(
            md.lines("after"),
            [" a   │ bb", "─────┼─────", " ccc │ d", "after"]
        );
        assert!(md.pending().is_empty());
        // At the answer's end, a table still gathering comes out.
        md.lines("| x |");
        assert_eq!(md.end(), ["| x |"]);
        // Inside a fence, a row is code.
        md.lines("```");
        assert_eq!(md.lines("| a | b |"), ["| a | b |"]);
    }

    #[test]
    fn fences_are_dim_and_code_is_highlighted_verbatim() {
        let out = render(&[
            "  ```rust",
            "  fn main() {",
            "\t// *not* markdown",
            "  ```",
            "*after*",
        ]);
        assert_eq!(out[0], "\x1b[2m  ```rust\x1b[0m");
        assert_eq!(visible(&out[1]), "  fn main() {");
        assert!(out[1].contains("\x1b[35mfn"), "{:?}", out[1]);
        assert_eq!(visible(&out[2]), "\t// *not* markdown");
        assert_eq!(out[3], "\x1b[2m  ```\x1b[0m");
        assert_eq!(visible(&out[4]), "after");
        assert_eq!(out.len(), 5, "closed fence: end adds nothing");
    }

    #[test]
    fn fence_closes_only_with_its_own_marker() {
        let out = render(&["~~~~", "```", "~~~", "# still code", "~~~~~"]);
        assert_eq!(visible(&out[1]), "```");
        assert_eq!(visible(&out[3]), "# still code");
        assert!(
            !out[3].contains("\x1b[0;1"),
            "no heading in code: {:?}",
            out[3]
        );
        assert_eq!(out[4], "\x1b[2m~~~~~\x1b[0m");
        // A line too long to highlight ends highlighting for the block, verbatim from there.
        let long = "x".repeat(5000);
        let out = render(&["```rust", &long, "let x", "```"]);
        assert_eq!(out[1], long);
        assert_eq!(out[2], "let x");
        // Unknown language: verbatim, no colour.
        assert_eq!(render(&["```nolang", "**x**", "```"])[1], "**x**");
        // Backticks in a backtick fence's info string: not a fence.
        assert_eq!(visible(&one("```a`b```")), "a`b");
    }

    #[test]
    fn end_closes_an_open_fence_and_resets() {
        let mut md = Markdown::new(true);
        md.line("    ```python");
        md.line("x = 1");
        assert_eq!(md.end(), ["\x1b[2m    ```\x1b[0m"]);
        assert!(md.end().is_empty());
        assert_eq!(visible(&md.line("# next")), "next");
    }

    #[test]
    fn partial_changes_no_state() {
        let mut md = Markdown::new(true);
        assert_eq!(md.partial("```rust"), "\x1b[2m```rust\x1b[0m");
        assert_eq!(visible(&md.line("**a**")), "a");
        md.line("```rust");
        assert_eq!(md.partial("let *x*"), "let *x*");
        assert_eq!(md.partial("``"), "\x1b[2m``\x1b[0m");
        assert!(md.line("let y").contains("\x1b[35mlet"));
        assert!(md.line("```").starts_with("\x1b[2m"));
    }

    #[test]
    fn empty_and_blank_lines() {
        assert_eq!(one(""), "");
        assert_eq!(one("   "), "   ");
    }
}
