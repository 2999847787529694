//! Words after quote removal: what a command's name and arguments are before the line runs,
//! or that they are known only at run time.

use tree_sitter::Node;

/// One word of a command after quote removal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    /// Known before the line runs, up to pathname and brace expansion: `glob` when it holds an
    /// unquoted `*`, `?`, `[` or `{`.
    Lit { text: String, glob: bool },
    /// Holds an expansion, a substitution or an ANSI-C string: its value is only known when
    /// the line runs. The text is the source, for messages.
    Dyn(String),
}

impl Word {
    pub(crate) fn lit(text: &str) -> Word {
        Word::Lit {
            text: text.to_owned(),
            glob: false,
        }
    }

    /// The literal value, if the word has one.
    pub(crate) fn literal(&self) -> Option<&str> {
        match self {
            Word::Lit { text, .. } => Some(text),
            Word::Dyn(_) => None,
        }
    }

    /// The literal value when it holds no glob or brace either: exactly what the program gets.
    pub(crate) fn exact(&self) -> Option<&str> {
        match self {
            Word::Lit { text, glob: false } => Some(text),
            _ => None,
        }
    }

    pub(crate) fn text(&self) -> &str {
        match self {
            Word::Lit { text, .. } | Word::Dyn(text) => text,
        }
    }
}

/// How words are read: the source, and the one expansion whose value dsh knows ahead of the
/// run (`$TMPDIR`, the session's private temporary directory).
pub(crate) struct Reader<'a> {
    pub src: &'a [u8],
    pub tmpdir: Option<&'a str>,
}

impl Reader<'_> {
    pub(crate) fn text(&self, node: Node) -> String {
        String::from_utf8_lossy(&self.src[node.byte_range()]).into_owned()
    }

    /// A word node after quote removal.
    pub(crate) fn word(&self, node: Node) -> Word {
        let text = self.text(node);
        match node.kind() {
            "word" => {
                let glob = has_unquoted_glob(&text);
                Word::Lit {
                    text: unescape(&text),
                    glob,
                }
            }
            "number" => Word::lit(&text),
            "raw_string" => Word::lit(text.trim_start_matches('\'').trim_end_matches('\'')),
            "simple_expansion" | "expansion" => match (self.tmpdir, text.as_str()) {
                (Some(tmp), "$TMPDIR" | "${TMPDIR}") => Word::lit(tmp),
                _ => Word::Dyn(text),
            },
            "string" => {
                // The raw text between the quotes, with `$TMPDIR` put in where it appears;
                // any other expansion makes the word dynamic.
                let (start, end) = (node.start_byte() + 1, node.end_byte().saturating_sub(1));
                if end < start {
                    return Word::Dyn(text);
                }
                let mut out = String::new();
                let mut at = start;
                let mut cursor = node.walk();
                for part in node.named_children(&mut cursor) {
                    if part.kind() == "string_content" {
                        continue;
                    }
                    let Word::Lit { text: value, .. } = self.word(part) else {
                        return Word::Dyn(text);
                    };
                    if !matches!(part.kind(), "simple_expansion" | "expansion") {
                        return Word::Dyn(text);
                    }
                    out.push_str(&unescape_double(&String::from_utf8_lossy(
                        &self.src[at..part.start_byte()],
                    )));
                    out.push_str(&value);
                    at = part.end_byte();
                }
                out.push_str(&unescape_double(&String::from_utf8_lossy(
                    &self.src[at..end],
                )));
                Word::lit(&out)
            }
            "concatenation" => {
                let mut out = String::new();
                let mut glob = false;
                let mut cursor = node.walk();
                for part in node.children(&mut cursor) {
                    match self.word(part) {
                        Word::Lit { text: t, glob: g } => {
                            out.push_str(&t);
                            glob |= g;
                        }
                        Word::Dyn(_) => return Word::Dyn(text),
                    }
                }
                Word::Lit { text: out, glob }
            }
            _ => Word::Dyn(text),
        }
    }
}

/// At most 80 characters of `s`, on one line, for messages.
pub(crate) fn short(s: &str) -> String {
    let one: String = s.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    if one.chars().count() > 80 {
        let cut: String = one.chars().take(77).collect();
        format!("{cut}...")
    } else {
        one
    }
}

fn has_unquoted_glob(s: &str) -> bool {
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if matches!(c, '*' | '?' | '[' | '{') {
            return true;
        }
    }
    false
}

/// Removes the backslashes of an unquoted word (`\;` → `;`, `\<newline>` → nothing).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(n) => out.push(n),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Removes the backslashes that are special inside double quotes.
fn unescape_double(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('\n') => {
                    chars.next();
                }
                Some(&n) if matches!(n, '"' | '\\' | '$' | '`') => {
                    out.push(n);
                    chars.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}
