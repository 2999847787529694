//! From a `run_shell` line to what it runs: every simple command anywhere in the tree (with its
//! words after quote removal), every file redirection, and every structural finding (a node the
//! parser marks as an error, a construct the policy does not judge, a dangerous assignment).

use std::cell::RefCell;

use tree_sitter::{Node, Parser};

use super::Verdict;

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

    pub(crate) fn text(&self) -> &str {
        match self {
            Word::Lit { text, .. } | Word::Dyn(text) => text,
        }
    }
}

/// A redirection to or from a file.
#[derive(Debug)]
pub(crate) struct Redirect {
    pub write: bool,
    pub target: Word,
    /// The redirection as written, for messages.
    pub text: String,
}

/// A structural verdict on part of the line.
#[derive(Debug)]
pub(crate) struct Finding {
    pub verdict: Verdict,
    pub reason: String,
}

/// What a line runs.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub commands: Vec<Vec<Word>>,
    pub redirects: Vec<Redirect>,
    pub findings: Vec<Finding>,
}

/// Assignments that change how commands are found or what a shell runs on its own.
pub(crate) const DANGEROUS_VARS: &[&str] = &[
    "PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "IFS",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "PROMPT_COMMAND",
    "CDPATH",
    "GLOBIGNORE",
    "BASH_LOADABLES_PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "NODE_OPTIONS",
    "PERL5OPT",
    "RUBYOPT",
    "GIT_EXEC_PATH",
    "GIT_SSH_COMMAND",
    "GIT_CONFIG_GLOBAL",
];

/// Whether assigning `name` changes how commands resolve or run.
pub(crate) fn dangerous_var(name: &str) -> bool {
    DANGEROUS_VARS.contains(&name)
        || name.starts_with("LD_")
        || name.starts_with("DYLD_")
        || name.starts_with("BASH_FUNC_")
}

/// Node kinds whose children are walked and which decide nothing themselves.
const TRANSPARENT: &[&str] = &[
    "program",
    "list",
    "pipeline",
    "subshell",
    "compound_statement",
    "redirected_statement",
    "negated_command",
    "comment",
    "do_group",
    "if_statement",
    "elif_clause",
    "else_clause",
    "while_statement",
    "for_statement",
    "case_statement",
    "case_item",
    "test_command",
    "variable_assignments",
    // Parts of words and expressions: the commands inside them are found by the walk.
    "command_name",
    "word",
    "number",
    "string",
    "string_content",
    "raw_string",
    "ansi_c_string",
    "translated_string",
    "concatenation",
    "simple_expansion",
    "expansion",
    "command_substitution",
    "process_substitution",
    "arithmetic_expansion",
    "brace_expression",
    "variable_name",
    "special_variable_name",
    "subscript",
    "array",
    "binary_expression",
    "unary_expression",
    "ternary_expression",
    "parenthesized_expression",
    "postfix_expression",
    "test_operator",
    "regex",
    "extglob_pattern",
    "file_descriptor",
    "heredoc_redirect",
    "heredoc_body",
    "heredoc_content",
    "heredoc_start",
    "heredoc_end",
    "herestring_redirect",
];

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Parses `line` and collects what it runs. `Err` when the line does not parse.
pub(crate) fn parse(line: &str) -> Result<Parsed, String> {
    let tree = PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .map_err(|e| format!("the bash grammar failed to load: {e}"))?;
            *slot = Some(parser);
        }
        slot.as_mut()
            .and_then(|p| p.parse(line, None))
            .ok_or_else(|| "the bash parser gave up on the line".to_owned())
    })?;
    let src = line.as_bytes();
    let mut out = Parsed::default();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.is_error() || node.is_missing() {
            let at = node.start_position();
            return Err(format!(
                "the line does not parse as shell (near line {}, column {})",
                at.row + 1,
                at.column + 1
            ));
        }
        let mut cursor = node.walk();
        // Children in reverse so they are visited in source order.
        let children: Vec<Node> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
        if !node.is_named() {
            continue;
        }
        match node.kind() {
            "command" => out.commands.push(command_words(node, src)),
            "declaration_command" | "unset_command" => {
                // `export X=1`, `local`, `unset`: judged by the lists under their keyword.
                let mut words = Vec::new();
                let mut c = node.walk();
                for (i, child) in node.children(&mut c).enumerate() {
                    let text = node_text(child, src);
                    words.push(if i == 0 {
                        Word::lit(&text)
                    } else {
                        Word::Dyn(text)
                    });
                }
                out.commands.push(words);
            }
            "file_redirect" => out.redirects.push(redirect(node, src)),
            "variable_assignment" => {
                let name = node
                    .child_by_field_name("name")
                    .map(|n| node_text(n, src))
                    .unwrap_or_default();
                let name = name.split('[').next().unwrap_or_default();
                if dangerous_var(name) {
                    out.findings.push(Finding {
                        verdict: Verdict::Deny,
                        reason: format!(
                            "`{}` assigns {name}, which changes how commands are found or run",
                            short(&node_text(node, src))
                        ),
                    });
                }
            }
            "function_definition" | "c_style_for_statement" => out.findings.push(Finding {
                verdict: Verdict::Ask,
                reason: format!(
                    "`{}`: the shell policy does not judge a {}",
                    short(&node_text(node, src)),
                    node.kind().replace('_', " ")
                ),
            }),
            "arithmetic_expansion"
            | "subscript"
            | "expansion"
            | "test_command"
            | "compound_statement"
                if arithmetic_risk(node, src) =>
            {
                out.findings.push(Finding {
                    verdict: Verdict::Ask,
                    reason: format!(
                        "`{}` evaluates a variable's value (arithmetic, indirection or prompt expansion), which can run code hidden in it",
                        short(&node_text(node, src))
                    ),
                });
            }
            kind if TRANSPARENT.contains(&kind) => {}
            kind => out.findings.push(Finding {
                verdict: Verdict::Ask,
                reason: format!(
                    "`{}` is a shell construct ({kind}) the policy does not know",
                    short(&node_text(node, src))
                ),
            }),
        }
    }
    Ok(out)
}

/// Whether bash evaluates a variable's value as arithmetic here: a value like `a[$(cmd)]`
/// then runs `cmd` (array subscripts are expanded when evaluated).
fn arithmetic_risk(node: Node, src: &[u8]) -> bool {
    let text = node_text(node, src);
    let names_a_variable = |s: &str| {
        s.bytes()
            .any(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'$')
    };
    match node.kind() {
        "arithmetic_expansion" => names_a_variable(text.trim_start_matches("$((")),
        "compound_statement" => text.starts_with("((") && names_a_variable(&text),
        "subscript" => node.child_by_field_name("index").is_some_and(|i| {
            !node_text(i, src)
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b'@' || b == b'*')
        }),
        "expansion" => {
            let inner = text
                .strip_prefix("${")
                .and_then(|t| t.strip_suffix('}'))
                .unwrap_or(&text);
            // `${!x}` (indirection) and `${x@P}` (prompt expansion) evaluate the value.
            if inner.starts_with('!') || inner.contains("@P") {
                return true;
            }
            let inner = inner.trim_start_matches('#');
            let rest = inner.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
            // `${x:offset}` / `${x:offset:length}` (but not `${x:-w}`, `:=`, `:?`, `:+`).
            rest.starts_with(':') && !rest[1..].starts_with(['-', '=', '?', '+'])
        }
        "test_command" => [
            " -eq ", " -ne ", " -lt ", " -le ", " -gt ", " -ge ", "-v ", "((",
        ]
        .iter()
        .any(|op| text.contains(op)),
        _ => false,
    }
}

fn node_text(node: Node, src: &[u8]) -> String {
    String::from_utf8_lossy(&src[node.byte_range()]).into_owned()
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

fn command_words(node: Node, src: &[u8]) -> Vec<Word> {
    let mut words = Vec::new();
    if let Some(name) = node.child_by_field_name("name") {
        let inner = name.named_child(0).unwrap_or(name);
        let w = word(inner, src);
        // A glob or a leading `~` in the name position is resolved at run time.
        words.push(match w {
            Word::Lit { text, glob } if glob || text.starts_with('~') => Word::Dyn(text),
            other => other,
        });
    } else {
        return words;
    }
    let mut cursor = node.walk();
    for arg in node.children_by_field_name("argument", &mut cursor) {
        words.push(word(arg, src));
    }
    words
}

/// A word node after quote removal.
pub(crate) fn word(node: Node, src: &[u8]) -> Word {
    let text = node_text(node, src);
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
        "string" => {
            let mut cursor = node.walk();
            let plain = node
                .named_children(&mut cursor)
                .all(|c| c.kind() == "string_content");
            if plain && text.len() >= 2 {
                Word::lit(&unescape_double(&text[1..text.len() - 1]))
            } else {
                Word::Dyn(text)
            }
        }
        "concatenation" => {
            let mut out = String::new();
            let mut glob = false;
            let mut cursor = node.walk();
            for part in node.children(&mut cursor) {
                match word(part, src) {
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

fn redirect(node: Node, src: &[u8]) -> Redirect {
    let text = node_text(node, src);
    let mut op = String::new();
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        if !child.is_named() {
            op = child.kind().to_owned();
            break;
        }
    }
    let target = node
        .child_by_field_name("destination")
        .map_or_else(|| Word::Dyn(String::new()), |d| word(d, src));
    let write = match op.as_str() {
        "<" => false,
        // `>&2`, `<&0`, `>&-`: duplicating or closing a descriptor writes no file.
        ">&" | "<&" | ">&-" | "<&-" => {
            let fd = target
                .literal()
                .is_some_and(|t| t == "-" || t.bytes().all(|b| b.is_ascii_digit()));
            if fd {
                return Redirect {
                    write: false,
                    target: Word::lit("/dev/null"),
                    text,
                };
            }
            op != "<&"
        }
        _ => true,
    };
    Redirect {
        write,
        target,
        text,
    }
}
