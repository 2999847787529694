//! Maps byte offsets to dotted key paths and back, over a spanned `toml_edit` document.
//! This is how serde errors (which carry a span) get a key, and how validation
//! errors and origins (which know a key) get a line.

use std::fmt::Write as _;
use std::ops::Range;

use toml_edit::{Document, InlineTable, Item, Table, Value};

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

impl From<&str> for Seg {
    fn from(s: &str) -> Self {
        Seg::Key(s.to_string())
    }
}

impl From<usize> for Seg {
    fn from(i: usize) -> Self {
        Seg::Index(i)
    }
}

/// `permissions.allow[1]`, `mcp.servers."my server".url`.
pub(crate) fn dotted(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                let bare = !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if bare {
                    out.push_str(k);
                } else {
                    let _ = write!(out, "{k:?}");
                }
            }
            Seg::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    out
}

fn contains(span: Option<Range<usize>>, offset: usize) -> bool {
    span.is_some_and(|s| s.start <= offset && (offset < s.end || s.start == s.end))
}

/// The key path of the innermost key or value whose span contains `offset`.
pub(crate) fn path_at(doc: &Document<&str>, offset: usize) -> Vec<Seg> {
    let mut path = Vec::new();
    if walk_table(doc.as_table(), offset, &mut path) {
        path
    } else {
        Vec::new()
    }
}

fn walk_table(table: &Table, offset: usize, path: &mut Vec<Seg>) -> bool {
    for (name, item) in table.iter() {
        path.push(Seg::from(name));
        if contains(table.key(name).and_then(|k| k.span()), offset) || walk_item(item, offset, path)
        {
            return true;
        }
        path.pop();
    }
    false
}

fn walk_item(item: &Item, offset: usize, path: &mut Vec<Seg>) -> bool {
    match item {
        Item::None => false,
        Item::Value(v) => walk_value(v, offset, path),
        Item::Table(t) => walk_table(t, offset, path) || contains(t.span(), offset),
        Item::ArrayOfTables(tables) => {
            for (i, t) in tables.iter().enumerate() {
                path.push(Seg::Index(i));
                if walk_table(t, offset, path) || contains(t.span(), offset) {
                    return true;
                }
                path.pop();
            }
            false
        }
    }
}

fn walk_inline(table: &InlineTable, offset: usize, path: &mut Vec<Seg>) -> bool {
    for (name, value) in table.iter() {
        path.push(Seg::from(name));
        if contains(table.key(name).and_then(|k| k.span()), offset)
            || walk_value(value, offset, path)
        {
            return true;
        }
        path.pop();
    }
    false
}

fn walk_value(value: &Value, offset: usize, path: &mut Vec<Seg>) -> bool {
    let inner = match value {
        Value::Array(array) => {
            let mut found = false;
            for (i, v) in array.iter().enumerate() {
                path.push(Seg::Index(i));
                if walk_value(v, offset, path) {
                    found = true;
                    break;
                }
                path.pop();
            }
            found
        }
        Value::InlineTable(t) => walk_inline(t, offset, path),
        _ => false,
    };
    inner || contains(value.span(), offset)
}

/// The span of the value (or table header, or key) at `path`; when the path goes
/// deeper than the document, the span of the deepest part that exists.
pub(crate) fn span_of(doc: &Document<&str>, path: &[Seg]) -> Option<Range<usize>> {
    let mut best = None;
    item_span(doc.as_item(), path, &mut best);
    best
}

fn set(best: &mut Option<Range<usize>>, span: Option<Range<usize>>) {
    if span.is_some() {
        *best = span;
    }
}

fn item_span(item: &Item, path: &[Seg], best: &mut Option<Range<usize>>) {
    if let Item::Value(v) = item {
        return value_span(v, path, best);
    }
    set(best, item.span());
    let Some((seg, rest)) = path.split_first() else {
        return;
    };
    match (item, seg) {
        (Item::Table(t), Seg::Key(k)) => table_span(t, k, rest, best),
        (Item::ArrayOfTables(a), Seg::Index(i)) => {
            if let Some(t) = a.get(*i) {
                set(best, t.span());
                if let Some((Seg::Key(k), rest)) = rest.split_first() {
                    table_span(t, k, rest, best);
                }
            }
        }
        _ => {}
    }
}

fn table_span(table: &Table, key: &str, rest: &[Seg], best: &mut Option<Range<usize>>) {
    if let Some((k, item)) = table.get_key_value(key) {
        set(best, k.span());
        item_span(item, rest, best);
    }
}

fn value_span(value: &Value, path: &[Seg], best: &mut Option<Range<usize>>) {
    set(best, value.span());
    let Some((seg, rest)) = path.split_first() else {
        return;
    };
    match (value, seg) {
        (Value::Array(a), Seg::Index(i)) => {
            if let Some(v) = a.get(*i) {
                value_span(v, rest, best);
            }
        }
        (Value::InlineTable(t), Seg::Key(k)) => {
            if let Some((key, item)) = t.get_key_value(k) {
                set(best, key.span());
                if let Some(v) = item.as_value() {
                    value_span(v, rest, best);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::line_of;

    const TEXT: &str = "[shell]\nsafe = [\n  \"ls\",\n  \"cat\",\n]\n\n[[hooks.PreToolUse]]\ncommand = \"a\"\n\n[[hooks.PreToolUse]]\ncommand = \"b\"\n[mcp.servers.x]\nenv = { A = \"1\" }\n";

    fn doc() -> Document<&'static str> {
        Document::parse(TEXT).unwrap()
    }

    fn line(path: &[Seg]) -> Option<usize> {
        span_of(&doc(), path).map(|s| line_of(TEXT, s.start))
    }

    #[test]
    fn dotted_paths_render_indices_and_quote_odd_keys() {
        let p = vec![
            Seg::from("mcp"),
            Seg::from("servers"),
            Seg::from("my server"),
            Seg::from(0),
        ];
        assert_eq!(dotted(&p), "mcp.servers.\"my server\"[0]");
    }

    #[test]
    fn span_of_finds_array_elements_and_array_of_tables() {
        assert_eq!(line(&["shell".into(), "safe".into(), 1.into()]), Some(4));
        assert_eq!(
            line(&[
                "hooks".into(),
                "PreToolUse".into(),
                1.into(),
                "command".into()
            ]),
            Some(11)
        );
        assert_eq!(
            line(&[
                "mcp".into(),
                "servers".into(),
                "x".into(),
                "env".into(),
                "A".into()
            ]),
            Some(13)
        );
        // Deeper than the document: the deepest existing part.
        assert_eq!(line(&["shell".into(), "safe".into(), 9.into()]), Some(2));
    }

    #[test]
    fn path_at_inverts_span_of() {
        let d = doc();
        for path in [
            vec![Seg::from("shell"), Seg::from("safe"), Seg::from(1)],
            vec![
                Seg::from("hooks"),
                Seg::from("PreToolUse"),
                Seg::from(1),
                Seg::from("command"),
            ],
            vec![
                Seg::from("mcp"),
                Seg::from("servers"),
                Seg::from("x"),
                Seg::from("env"),
                Seg::from("A"),
            ],
        ] {
            let span = span_of(&d, &path).unwrap();
            assert_eq!(path_at(&d, span.start), path);
        }
    }
}
