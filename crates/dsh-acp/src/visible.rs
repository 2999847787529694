//! Text a model or a repository chose, made safe to show in an editor's dialog: control
//! characters and the invisible marks that reorder or hide text (bidirectional overrides
//! and isolates, zero-width characters) are written as `\u{…}` escapes, so a label says
//! what the call is and nothing can disguise it.

/// `s` with every control, bidirectional-control and zero-width character escaped.
pub(crate) fn visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_hides_or_reorders_text_is_escaped() {
        assert_eq!(visible("src/a.rs"), "src/a.rs");
        assert_eq!(
            visible("a\nb\u{202e}c\u{200b}"),
            "a\\u{a}b\\u{202e}c\\u{200b}"
        );
        assert_eq!(visible("\u{1b}[2J"), "\\u{1b}[2J");
    }
}
