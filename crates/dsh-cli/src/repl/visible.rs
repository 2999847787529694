//! Text from a model, a tool or a file never reaches the terminal raw: control characters
//! (which could move the cursor, retitle the window or hide what follows) and invisible or
//! direction-changing characters (which make a command read differently from how it runs)
//! are shown as visible escapes.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control and invisible character made visible: C0 controls as `^X`
/// (ESC is `^[`), DEL as `^?`, C1 controls and invisible or bidirectional formatting
/// characters as `\u{…}`. Tabs stay; a newline stays only when `newlines` is set, else it
/// is shown as `⏎`.
pub(crate) fn visible(text: &str, newlines: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| needs_escape(c, newlines)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !needs_escape(c, newlines) {
            out.push(c);
        } else if c == '\n' {
            out.push('⏎');
        } else if (c as u32) < 0x20 {
            out.push('^');
            out.push(char::from(b'@' + c as u8));
        } else if c == '\x7f' {
            out.push_str("^?");
        } else {
            let _ = write!(out, "\\u{{{:04X}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// Whether `text` holds a character [`visible`] would escape (newlines aside).
pub(crate) fn has_hidden(text: &str) -> bool {
    text.chars().any(|c| needs_escape(c, true))
}

fn needs_escape(c: char, newlines: bool) -> bool {
    match c {
        '\t' => false,
        '\n' => !newlines,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        _ => invisible(c),
    }
}

/// Characters that print nothing or reorder what follows.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}'            // soft hyphen
        | '\u{034F}'          // combining grapheme joiner
        | '\u{061C}'          // Arabic letter mark
        | '\u{115F}' | '\u{1160}'
        | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}'
        | '\u{200B}'..='\u{200F}' // zero-width space/joiners, LRM, RLM
        | '\u{2028}'..='\u{202E}' // separators, bidi embeddings and overrides
        | '\u{2060}'..='\u{206F}' // word joiner, invisible operators, bidi isolates
        | '\u{3164}'
        | '\u{FE00}'..='\u{FE0F}' // variation selectors
        | '\u{FEFF}'          // zero-width no-break space (BOM)
        | '\u{FFA0}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{E0000}'..='\u{E007F}' // tags
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_invisible_characters_are_shown() {
        assert_eq!(visible("ls\x1b[2J", false), "ls^[[2J");
        assert_eq!(visible("a\rb\x07", false), "a^Mb^G");
        assert_eq!(visible("x\u{7f}\u{9b}", false), "x^?\\u{009B}");
        assert_eq!(visible("rm\u{202E}txt", false), "rm\\u{202E}txt");
        assert_eq!(visible("a\u{200B}b", false), "a\\u{200B}b");
        assert_eq!(visible("one\ntwo", false), "one⏎two");
        assert_eq!(visible("one\ntwo\tx", true), "one\ntwo\tx");
        assert!(matches!(
            visible("plain text ü 日本", false),
            Cow::Borrowed(_)
        ));
        assert!(has_hidden("a\u{FEFF}"));
        assert!(!has_hidden("a\nb"));
    }
}
