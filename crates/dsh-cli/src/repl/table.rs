//! Markdown pipe tables as aligned columns. A streamed answer's table rows are gathered
//! until the first line that is not a row, then laid out together: every cell of a column
//! as wide as the column's widest, aligned as the delimiter row says (`:--`, `:-:`, `--:`),
//! the delimiter row drawn as a rule. Rows without a delimiter row under the first are no
//! table and come back as written.
//!
//! Cells keep their text as the model wrote it (inline Markdown is not rendered inside a
//! table); control and invisible characters are made visible like everywhere else.

use unicode_width::UnicodeWidthStr;

use super::visible::visible;

/// Whether `line` is a row of a pipe table: its first non-blank character is `|`.
pub(crate) fn is_row(line: &str) -> bool {
    line.trim_start_matches([' ', '\t']).starts_with('|')
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Align {
    Left,
    Center,
    Right,
}

/// A row's cells: split on `|` outside inline code and not escaped, the outer pipes
/// dropped, each cell trimmed.
fn cells(line: &str) -> Vec<String> {
    let row = line.trim();
    let row = row.strip_prefix('|').unwrap_or(row);
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut code = false;
    let mut chars = row.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cell.push(c);
                if let Some(next) = chars.next() {
                    cell.push(next);
                }
            }
            '`' => {
                code = !code;
                cell.push(c);
            }
            '|' if !code => cells.push(std::mem::take(&mut cell).trim().to_owned()),
            _ => cell.push(c),
        }
    }
    // What follows the last pipe is a cell only when it holds something.
    if !cell.trim().is_empty() {
        cells.push(cell.trim().to_owned());
    }
    cells
}

/// The delimiter row's alignments, or `None` when `cells` is not one.
fn delimiter(cells: &[String]) -> Option<Vec<Align>> {
    if cells.is_empty() {
        return None;
    }
    cells
        .iter()
        .map(|c| {
            let left = c.starts_with(':');
            let right = c.ends_with(':');
            let dashes = c.trim_matches(':');
            if dashes.is_empty() || !dashes.chars().all(|d| d == '-') {
                return None;
            }
            Some(match (left, right) {
                (true, true) => Align::Center,
                (false, true) => Align::Right,
                _ => Align::Left,
            })
        })
        .collect()
}

/// `rows` (each a line [`is_row`] accepted, in order) laid out: aligned when they form a
/// table, else each as written. Every returned line is plain text; `rule` styles the
/// delimiter rule and the column bars.
pub(crate) fn layout(rows: &[String], rule: impl Fn(&str) -> String) -> Vec<String> {
    let parsed: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            cells(r)
                .iter()
                .map(|c| visible(c, false).into_owned())
                .collect()
        })
        .collect();
    let aligns = match parsed.get(1).and_then(|d| delimiter(d)) {
        Some(a) if parsed[0].len() == a.len() => a,
        _ => {
            return rows
                .iter()
                .map(|r| visible(r, false).into_owned())
                .collect();
        }
    };
    let indent: String = rows[0]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect();
    let columns = aligns.len();
    let mut widths = vec![3; columns];
    for (_, row) in parsed.iter().enumerate().filter(|(i, _)| *i != 1) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(UnicodeWidthStr::width(cell.as_str()));
        }
    }
    let bar = rule("│");
    let mut out = Vec::with_capacity(rows.len());
    for (i, row) in parsed.iter().enumerate() {
        if i == 1 {
            let line: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            out.push(format!("{indent}{}", rule(&line.join("┼"))));
            continue;
        }
        let mut line = indent.clone();
        for (c, (w, align)) in widths.iter().zip(&aligns).enumerate() {
            // A row with fewer cells is filled with empty ones; extra cells are dropped, as
            // a Markdown renderer does.
            let cell = row.get(c).map_or("", String::as_str);
            let pad = w - UnicodeWidthStr::width(cell).min(*w);
            let (before, after) = match align {
                Align::Left => (0, pad),
                Align::Right => (pad, 0),
                Align::Center => (pad / 2, pad - pad / 2),
            };
            if c > 0 {
                line.push_str(&bar);
            }
            line.push(' ');
            line.push_str(&" ".repeat(before));
            line.push_str(cell);
            line.push_str(&" ".repeat(after));
            line.push(' ');
        }
        out.push(line.trim_end().to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(rows: &[&str]) -> Vec<String> {
        let rows: Vec<String> = rows.iter().map(|r| (*r).to_owned()).collect();
        layout(&rows, str::to_owned)
    }

    #[test]
    fn a_table_is_laid_out_in_aligned_columns() {
        let out = plain(&[
            "| name | size | kind |",
            "|:-----|-----:|:----:|",
            "| main.rs | 12 | source |",
            "| a | 1234567 | x |",
        ]);
        assert_eq!(
            out,
            [
                " name    │    size │  kind",
                "─────────┼─────────┼────────",
                " main.rs │      12 │ source",
                " a       │ 1234567 │   x",
            ]
        );
    }

    #[test]
    fn pipes_in_code_and_escaped_pipes_stay_in_their_cell_and_wide_characters_count_twice() {
        let out = plain(&["| a | b |", "|---|---|", "| `x|y` | \\| |", "| 日本 | z |"]);
        assert_eq!(
            out,
            [" a     │ b", "───────┼─────", " `x|y` │ \\|", " 日本  │ z",]
        );
    }

    #[test]
    fn rows_without_a_delimiter_row_are_no_table_and_stay_as_written() {
        let rows = ["| just | pipes |", "| more | text |"];
        assert_eq!(plain(&rows), rows);
        // Control characters are made visible even so.
        assert_eq!(plain(&["| a\x1b[2J |"]), ["| a^[[2J |"]);
    }

    #[test]
    fn short_rows_are_filled_and_long_ones_cut_to_the_header() {
        let out = plain(&["| a | b |", "|---|---|", "| 1 |", "| 1 | 2 | 3 |"]);
        assert_eq!(out, [" a   │ b", "─────┼─────", " 1   │", " 1   │ 2"]);
    }
}
