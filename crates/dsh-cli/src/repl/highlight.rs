//! Syntax highlighting of fenced code blocks, for [`super::markdown`].
//!
//! syntect's bundled Sublime syntaxes do the parsing (pure-Rust `fancy-regex`, no oniguruma; DESIGN
//! §7's budget was measured: about 1 MB and a few seconds of clean build on top of the regex crates
//! the binary already has). syntect's themes are not used: they speak 24-bit colour, which not every
//! terminal has, and ignore the user's palette. Instead the innermost scope of each piece of text is
//! mapped to one of a handful of the 16 ANSI colours ([`CLASSES`]), so code looks at home in any
//! terminal theme.
//!
//! The syntax set is loaded once, lazily, on the first fence with a known language (under a
//! millisecond; each syntax then compiles its regexes on first use, ~20 ms for Rust). State (open
//! block comments, multi-line strings) is carried from line to line by syntect's parse state.

use std::sync::OnceLock;

use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxSet};

use super::markdown::push_clean;

/// Longer lines (minified code, data) are not highlighted: syntect with fancy-regex does about
/// 0.3 MB/s, so this bounds one line's cost to ~15 ms.
const MAX_LINE: usize = 4096;

/// Scope prefixes, most specific first, and the SGR colour of text under them.
const CLASSES: &[(&str, &str)] = &[
    ("comment", "90"),
    ("punctuation.definition.comment", "90"),
    ("string", "32"),
    ("constant.character.escape", "36"),
    ("constant.numeric", "36"),
    ("constant.language", "36"),
    ("constant.character", "32"),
    ("keyword.operator", ""),
    ("keyword", "35"),
    ("storage.type", "35"),
    ("storage.modifier", "35"),
    ("storage", "35"),
    ("entity.name.function", "34"),
    ("support.function", "34"),
    ("variable.function", "34"),
    ("entity.name.tag", "34"),
    ("entity.other.attribute-name", "33"),
    ("entity.name", "33"),
    ("support.type", "33"),
    ("support.class", "33"),
    ("meta.mapping.key", "34"),
    ("markup.inserted", "32"),
    ("markup.deleted", "31"),
    ("meta.diff.range", "36"),
    ("meta.diff.header", "1"),
];

struct Syntaxes {
    set: SyntaxSet,
    classes: Vec<(Scope, &'static str)>,
}

fn syntaxes() -> &'static Syntaxes {
    static SYNTAXES: OnceLock<Syntaxes> = OnceLock::new();
    SYNTAXES.get_or_init(|| Syntaxes {
        set: SyntaxSet::load_defaults_newlines(),
        classes: CLASSES
            .iter()
            .filter_map(|&(name, sgr)| Scope::new(name).ok().map(|s| (s, sgr)))
            .collect(),
    })
}

/// The syntect name for a fence's language token, where the bundled set knows it under another.
fn alias(token: &str) -> &str {
    match token {
        "ts" | "typescript" | "tsx" | "jsx" | "mjs" | "cjs" | "node" => "js",
        "shell" | "console" | "shellsession" | "zsh" | "sh" => "bash",
        "jsonc" | "json5" => "json",
        "c++" | "cxx" | "hpp" => "cpp",
        "golang" => "go",
        "py3" | "python3" => "py",
        "patch" => "diff",
        "yml" => "yaml",
        other => other,
    }
}

/// Highlights the lines of one fenced code block.
pub(crate) struct Highlighter {
    parse: ParseState,
    stack: ScopeStack,
}

impl Highlighter {
    /// A highlighter for a fence's info string (` ```rust title="x" ` → `rust`), if the language is
    /// known. `{.python}` and `lang=python`-free forms are taken as their first word.
    pub(crate) fn for_info(info: &str) -> Option<Highlighter> {
        let token = info
            .split(|c: char| c.is_whitespace() || c == ',' || c == '{' || c == '}')
            .find(|t| !t.is_empty())?
            .trim_start_matches('.')
            .to_ascii_lowercase();
        if token.is_empty() || token.len() > 32 {
            return None;
        }
        let syn = syntaxes();
        let syntax = syn.set.find_syntax_by_token(alias(&token))?;
        Some(Highlighter {
            parse: ParseState::new(syntax),
            stack: ScopeStack::new(),
        })
    }

    /// Appends `code` (one line, no newline) highlighted to `out`, carrying state to the next line.
    /// Returns false (and appends nothing) when syntect fails or the line is longer than
    /// [`MAX_LINE`]; the parse state is then lost, and the caller stops highlighting this block.
    pub(crate) fn line(&mut self, code: &str, out: &mut String) -> bool {
        if code.len() > MAX_LINE {
            return false;
        }
        let syn = syntaxes();
        let mut with_newline = String::with_capacity(code.len() + 1);
        with_newline.push_str(code);
        with_newline.push('\n');
        let Ok(ops) = self.parse.parse_line(&with_newline, &syn.set) else {
            return false;
        };
        let start = out.len();
        let mut pen = Pen { current: "" };
        let mut pos = 0;
        let mut sgr = classify(&self.stack, &syn.classes);
        for (offset, op) in &ops {
            let offset = (*offset).min(code.len());
            if offset > pos {
                pen.write(out, sgr, &code[pos..offset]);
                pos = offset;
            }
            if self.stack.apply(op).is_err() {
                out.truncate(start);
                return false;
            }
            sgr = classify(&self.stack, &syn.classes);
        }
        if pos < code.len() {
            pen.write(out, sgr, &code[pos..]);
        }
        pen.write(out, "", "");
        true
    }
}

/// Writes pieces of text, switching colour only where it changes.
struct Pen {
    current: &'static str,
}

impl Pen {
    fn write(&mut self, out: &mut String, sgr: &'static str, text: &str) {
        if sgr != self.current {
            if !self.current.is_empty() {
                out.push_str("\x1b[0m");
            }
            if !sgr.is_empty() {
                out.push_str("\x1b[");
                out.push_str(sgr);
                out.push('m');
            }
            self.current = sgr;
        }
        push_clean(out, text);
    }
}

/// The colour of text under `stack`: the innermost scope that a class claims.
fn classify(stack: &ScopeStack, classes: &[(Scope, &'static str)]) -> &'static str {
    for scope in stack.as_slice().iter().rev() {
        if let Some((_, sgr)) = classes
            .iter()
            .find(|(prefix, _)| prefix.is_prefix_of(*scope))
        {
            return sgr;
        }
    }
    ""
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn hl(h: &mut Highlighter, code: &str) -> String {
        let mut out = String::new();
        assert!(h.line(code, &mut out));
        out
    }

    #[test]
    fn rust_keywords_strings_comments_are_coloured() {
        let mut h = Highlighter::for_info("rust").unwrap();
        let out = hl(&mut h, r#"    let x = "hi"; // note"#);
        assert!(out.starts_with("    "), "indentation kept: {out:?}");
        assert!(out.contains("\x1b[35mlet\x1b[0m"), "{out:?}");
        assert!(out.contains("\x1b[32m"), "{out:?}");
        assert!(out.contains("\x1b[90m"), "{out:?}");
    }

    #[test]
    fn block_comment_state_carries_across_lines() {
        let mut h = Highlighter::for_info("c").unwrap();
        hl(&mut h, "/* start");
        let out = hl(&mut h, "int still_comment");
        assert!(out.starts_with("\x1b[90m"), "{out:?}");
        assert!(!out.contains("\x1b[35m"), "{out:?}");
    }

    #[test]
    fn overlong_line_is_refused() {
        let mut h = Highlighter::for_info("json").unwrap();
        let mut out = String::new();
        assert!(!h.line(&"1,".repeat(MAX_LINE), &mut out));
        assert!(out.is_empty());
    }

    #[test]
    fn info_string_forms_and_aliases() {
        for info in [
            "rust",
            "Rust",
            "rs",
            "{.python}",
            "python title=x",
            "ts",
            "sh",
            "yml",
            "json",
        ] {
            assert!(Highlighter::for_info(info).is_some(), "{info}");
        }
        assert!(Highlighter::for_info("no-such-language").is_none());
        assert!(Highlighter::for_info("").is_none());
    }

    #[test]
    fn control_characters_in_code_are_made_visible() {
        let mut h = Highlighter::for_info("py").unwrap();
        let out = hl(&mut h, "x = '\x1b]0;pwned\x07'");
        assert!(!out.contains("\x1b]"), "{out:?}");
        assert!(!out.contains('\x07'), "{out:?}");
    }
}
