//! From a `run_shell` line to what it runs: every simple command anywhere in the tree (with its
//! words after quote removal and the assignments in front of it), every file redirection,
//! every assignment, and every structural finding (a node the parser marks as an error, a
//! construct the policy does not judge, an expansion that evaluates a value).
//!
//! The walk follows the working directory: `cd DIR` changes it for what comes after it in the
//! same shell, and the change ends at subshell, pipeline-stage, background (`&`) and `$(…)`
//! boundaries. Every command and redirection carries the set of directories it may run in:
//! after `a || cd x`, both the old directory and `x` are possible, and every path is judged
//! from both. Whether a `cd` is allowed, and where it leads, is the caller's [`Cd`] to say.

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use dsh_core::quote_capped;
use tree_sitter::{Node, Parser};

use super::Decision;
pub(crate) use super::words::{Reader, Word, short};

/// An index into [`Parsed::dirs`]: the directories (workspace-relative) a part may run in.
pub(crate) type Dirs = usize;

/// Says where `cd ARGS` leads from one directory, or why it is refused.
pub(crate) type Cd<'a> = &'a dyn Fn(&Path, &[Word]) -> Result<PathBuf, String>;

/// An assignment `NAME=VALUE`, in front of a command, on its own, or under `export`/`local`.
#[derive(Debug)]
pub(crate) struct Assign {
    pub name: String,
    pub value: Word,
    /// As written, for messages.
    pub text: String,
}

/// One simple command.
#[derive(Debug)]
pub(crate) struct Command {
    pub words: Vec<Word>,
    /// The assignments in front of it (`X=1 cmd`).
    pub assigns: Vec<Assign>,
    pub dirs: Dirs,
}

/// A redirection to or from a file.
#[derive(Debug)]
pub(crate) struct Redirect {
    pub write: bool,
    pub target: Word,
    /// The redirection as written, for messages.
    pub text: String,
    pub dirs: Dirs,
}

/// A structural decision on part of the line.
#[derive(Debug)]
pub(crate) struct Finding {
    pub decision: Decision,
    pub reason: String,
}

/// What a line runs.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub commands: Vec<Command>,
    /// Assignments not in front of a command (`X=1; …`, `export X=1`).
    pub assigns: Vec<(Assign, Dirs)>,
    pub redirects: Vec<Redirect>,
    pub findings: Vec<Finding>,
    /// The directory sets; `dirs[0]` is where the line starts.
    pub dirs: Vec<Vec<PathBuf>>,
    /// Every variable the line expands (`$X`, `${X…}`), with the expansion as written.
    pub expanded: Vec<(String, String)>,
}

/// How deep the tree is followed; deeper lines are refused.
const MAX_NESTING: usize = 200;

/// How many command substitutions the parser found beneath `node`.
fn substitutions(node: Node) -> usize {
    let mut cursor = node.walk();
    let children: Vec<Node> = node.children(&mut cursor).collect();
    children
        .into_iter()
        .map(|c| usize::from(c.kind() == "command_substitution") + substitutions(c))
        .sum()
}

/// Node kinds whose children are walked in the same directory and which decide nothing
/// themselves.
const TRANSPARENT: &[&str] = &[
    "comment",
    "test_command",
    "variable_assignments",
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

/// Parses `line`, started in each of `start` (workspace-relative directories), and collects
/// what it runs. `Err` when the line does not parse.
pub(crate) fn parse(
    line: &str,
    start: Vec<PathBuf>,
    tmpdir: Option<&str>,
    cd: Cd<'_>,
) -> Result<Parsed, String> {
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
    // A fault anywhere refuses the line, also inside a part the walk reads as text and never
    // descends into (an assignment's value, a word): bash would not run such a line as the
    // walk saw it.
    if tree.root_node().has_error() {
        return Err(does_not_parse(first_fault(tree.root_node())));
    }
    let mut w = Walker {
        r: Reader {
            src: line.as_bytes(),
            tmpdir,
        },
        cd,
        out: Parsed {
            dirs: vec![start],
            ..Parsed::default()
        },
        depth: 0,
        loops: 0,
        error: None,
        arith: Vec::new(),
        tainted: HashSet::new(),
    };
    w.walk(tree.root_node(), 0);
    if let Some(e) = w.error {
        return Err(e);
    }
    w.arithmetic_findings();
    Ok(w.out)
}

/// The first error or missing node under `node`, which has one (else `node` itself).
fn first_fault(mut node: Node) -> Node {
    'down: loop {
        if node.is_error() || node.is_missing() {
            return node;
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            if child.has_error() {
                node = child;
                continue 'down;
            }
        }
        return node;
    }
}

/// Why a line with a fault at `node` is refused.
fn does_not_parse(node: Node) -> String {
    let at = node.start_position();
    format!(
        "the line does not parse as shell (near line {}, column {})",
        at.row + 1,
        at.column + 1
    )
}

struct Walker<'a> {
    r: Reader<'a>,
    cd: Cd<'a>,
    out: Parsed,
    depth: usize,
    /// How many loops the walk is inside.
    loops: usize,
    error: Option<String>,
    /// Variables evaluated as arithmetic, with the expression as written.
    arith: Vec<(String, String)>,
    /// Variables the line sets from something it does not spell out (input, file names,
    /// substitutions).
    tainted: HashSet<String>,
}

impl Walker<'_> {
    fn walk(&mut self, node: Node, d: Dirs) -> Dirs {
        if self.error.is_some() {
            return d;
        }
        if node.is_error() || node.is_missing() {
            self.error = Some(does_not_parse(node));
            return d;
        }
        if self.depth >= MAX_NESTING {
            self.error = Some(format!(
                "the line nests constructs more than {MAX_NESTING} deep"
            ));
            return d;
        }
        self.depth += 1;
        let after = self.walk_kind(node, d);
        self.depth -= 1;
        after
    }

    fn walk_kind(&mut self, node: Node, d: Dirs) -> Dirs {
        match node.kind() {
            "program" | "do_group" => self.sequence(node, d),
            "compound_statement" => {
                if self.text(node).starts_with("((") {
                    self.arithmetic(node);
                }
                self.sequence(node, d)
            }
            "list" => self.list(node, d),
            "pipeline" | "subshell" | "command_substitution" | "process_substitution" => {
                // Backquotes inside backquotes (`` `echo \`cmd\`` ``) run a substitution
                // the parser reads as an escaped character.
                let text = self.text(node);
                if text.starts_with('`') && text.contains("\\`") {
                    self.finding(
                        Decision::Ask,
                        format!(
                            "`{}` nests backquotes, which run a command the policy cannot see; use $(…)",
                            short(&text)
                        ),
                    );
                }
                // Each stage (and each substitution) is a subshell: its `cd` ends with it.
                self.children(node, d);
                d
            }
            "heredoc_body" => {
                // bash expands `$(…)` and backquotes in an unquoted here-document however
                // the body is laid out; the parser does not always see them (an indented
                // line): a body that holds more than it parsed asks.
                let text = self.text(node);
                let written = text.matches("$(").count() + text.matches('`').count() / 2;
                if written > substitutions(node) {
                    self.finding(
                        Decision::Ask,
                        format!(
                            "the here-document `{}` holds a command substitution the policy cannot see",
                            short(&text)
                        ),
                    );
                }
                self.children(node, d);
                d
            }
            "if_statement" | "elif_clause" | "else_clause" | "case_statement" | "case_item" => {
                self.maybe(node, d)
            }
            "while_statement" | "for_statement" | "c_style_for_statement" => {
                if node.kind() == "for_statement" {
                    self.for_variable(node, d);
                }
                if node.kind() == "c_style_for_statement" {
                    self.finding(
                        Decision::Ask,
                        format!(
                            "`{}`: the shell policy does not judge a C-style for loop",
                            short(&self.text(node))
                        ),
                    );
                }
                self.loops += 1;
                let after = self.maybe(node, d);
                self.loops -= 1;
                after
            }
            "redirected_statement" => {
                let end = match node.child_by_field_name("body") {
                    Some(body) => self.walk(body, d),
                    None => d,
                };
                // A trailing redirection binds to the last command of a list, which may run
                // in the directory the list ends in.
                let both = self.union(&[d, end]);
                let mut cursor = node.walk();
                let redirects: Vec<Node> = node
                    .children_by_field_name("redirect", &mut cursor)
                    .collect();
                for r in redirects {
                    self.walk(r, both);
                }
                end
            }
            "negated_command" => self.sequence(node, d),
            "command" => self.command(node, d),
            "variable_assignment" => {
                if let Some(a) = self.assignment(node, d) {
                    self.out.assigns.push((a, d));
                }
                d
            }
            "declaration_command" | "unset_command" => {
                // `export X=1`, `local`, `unset`: judged by the lists under their keyword.
                let mut words = Vec::new();
                let mut cursor = node.walk();
                let children: Vec<Node> = node.children(&mut cursor).collect();
                for (i, child) in children.iter().enumerate() {
                    let text = self.text(*child);
                    words.push(if i == 0 {
                        Word::lit(&text)
                    } else {
                        Word::Dyn(text)
                    });
                }
                self.out.commands.push(Command {
                    words,
                    assigns: Vec::new(),
                    dirs: d,
                });
                self.children(node, d);
                d
            }
            "file_redirect" => {
                let r = self.redirect(node, d);
                self.out.redirects.push(r);
                self.children(node, d);
                d
            }
            "function_definition" => {
                self.finding(
                    Decision::Ask,
                    format!(
                        "`{}`: the shell policy does not judge a function definition",
                        short(&self.text(node))
                    ),
                );
                self.children(node, d);
                d
            }
            "simple_expansion" | "expansion" => {
                self.expansion(node);
                self.children(node, d);
                d
            }
            "arithmetic_expansion" | "subscript" => {
                self.arithmetic(node);
                self.children(node, d);
                d
            }
            "test_command" => {
                let text = self.text(node);
                if [" -eq ", " -ne ", " -lt ", " -le ", " -gt ", " -ge ", "-v "]
                    .iter()
                    .any(|op| text.contains(op))
                {
                    self.arithmetic(node);
                }
                self.children(node, d);
                d
            }
            kind if TRANSPARENT.contains(&kind) || !node.is_named() => {
                self.children(node, d);
                d
            }
            kind => {
                self.finding(
                    Decision::Ask,
                    format!(
                        "`{}` is a shell construct ({kind}) the policy does not know",
                        short(&self.text(node))
                    ),
                );
                self.children(node, d);
                d
            }
        }
    }

    /// Every child from `d`; what they change is dropped.
    fn children(&mut self, node: Node, d: Dirs) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        for child in children {
            self.walk(child, d);
        }
    }

    /// Statements one after another: each from every directory the ones before may have
    /// left (a failed `cd` changes nothing); one sent to the background (`&`) changes nothing.
    fn sequence(&mut self, node: Node, d: Dirs) -> Dirs {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        let mut cur = d;
        for (i, child) in children.iter().enumerate() {
            let background = children.get(i + 1).is_some_and(|n| n.kind() == "&");
            let after = self.walk(*child, cur);
            // A `cd` that fails leaves the shell where it was, and `;` goes on from there.
            if !background && after != cur {
                cur = self.union(&[cur, after]);
            }
        }
        cur
    }

    /// `a && b`, `a || b`: `b` runs after `a` succeeded (`&&`) or failed (`||`, so from
    /// anywhere `a` may have left off, its start included).
    fn list(&mut self, node: Node, d: Dirs) -> Dirs {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        let mut cur = d;
        let mut seen = vec![d];
        let mut or = false;
        for child in children {
            match child.kind() {
                "&&" => or = false,
                "||" => or = true,
                _ if child.is_named() => {
                    let from = if or { self.union(&seen) } else { cur };
                    cur = self.walk(child, from);
                    seen.push(cur);
                }
                _ => {}
            }
        }
        self.union(&seen[1..])
    }

    /// Parts that may or may not run (branches, loop bodies): each starts from every
    /// directory possible so far, and so does what follows.
    fn maybe(&mut self, node: Node, d: Dirs) -> Dirs {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        let mut cur = d;
        for child in children {
            let after = self.walk(child, cur);
            if after != cur {
                cur = self.union(&[cur, after]);
            }
        }
        cur
    }

    fn command(&mut self, node: Node, d: Dirs) -> Dirs {
        let mut assigns = Vec::new();
        let mut words = Vec::new();
        let mut cursor = node.walk();
        let arguments: HashSet<usize> = node
            .children_by_field_name("argument", &mut cursor)
            .map(|a| a.id())
            .collect();
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        for child in children {
            match child.kind() {
                "variable_assignment" => {
                    if let Some(a) = self.assignment(child, d) {
                        assigns.push(a);
                    }
                }
                "command_name" => {
                    let inner = child.named_child(0).unwrap_or(child);
                    // A glob or a leading `~` in the name position is resolved at run time.
                    words.push(match self.r.word(inner) {
                        Word::Lit { text, glob } if glob || text.starts_with('~') => {
                            Word::Dyn(text)
                        }
                        other => other,
                    });
                    self.walk(child, d);
                }
                _ => {
                    if !words.is_empty() && arguments.contains(&child.id()) {
                        words.push(self.r.word(child));
                    }
                    self.walk(child, d);
                }
            }
        }
        self.taint_from(&words);
        let after = self.cd_from(&words, d);
        if !words.is_empty() || !assigns.is_empty() {
            self.out.commands.push(Command {
                words,
                assigns,
                dirs: d,
            });
        }
        after
    }

    /// Where the shell is after `words` when they are a `cd`.
    fn cd_from(&mut self, words: &[Word], d: Dirs) -> Dirs {
        if words.first().and_then(Word::exact) != Some("cd") {
            return d;
        }
        if self.loops > 0 {
            self.finding(
                Decision::Deny,
                "`cd` inside a loop is refused: the directory it leaves depends on how often the loop ran".to_owned(),
            );
            return d;
        }
        let mut next = Vec::new();
        for dir in self.out.dirs[d].clone() {
            match (self.cd)(&dir, &words[1..]) {
                Ok(to) => {
                    if !next.contains(&to) {
                        next.push(to);
                    }
                }
                Err(why) => {
                    self.finding(Decision::Deny, why);
                    return d;
                }
            }
        }
        self.intern(next)
    }

    fn assignment(&mut self, node: Node, d: Dirs) -> Option<Assign> {
        let name = node
            .child_by_field_name("name")
            .map(|n| self.text(n))
            .unwrap_or_default();
        let name = name.split('[').next().unwrap_or_default().to_owned();
        let value = match node.child_by_field_name("value") {
            Some(v) => {
                self.walk(v, d);
                self.r.word(v)
            }
            None => Word::lit(""),
        };
        if value.exact().is_none_or(|v| v.contains('[')) {
            self.tainted.insert(name.clone());
        }
        Some(Assign {
            name,
            value,
            text: self.text(node),
        })
    }

    fn redirect(&mut self, node: Node, d: Dirs) -> Redirect {
        let text = self.text(node);
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
            .map_or_else(|| Word::Dyn(String::new()), |t| self.r.word(t));
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
                        dirs: d,
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
            dirs: d,
        }
    }

    /// `$X` and `${…}`: the variable is recorded; indirection and prompt or escape
    /// expansion evaluate its value and are refused.
    fn expansion(&mut self, node: Node) {
        let text = self.text(node);
        let inner = text
            .strip_prefix("${")
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or_else(|| text.trim_start_matches('$'));
        let name: String = inner
            .trim_start_matches(['!', '#'])
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            self.out.expanded.push((name.clone(), text.clone()));
        }
        if node.kind() != "expansion" {
            return;
        }
        let after = &inner[inner
            .len()
            .min(inner.find(&*name).map_or(0, |at| at + name.len()))..];
        // `${!arr[@]}`, `${!prefix*}`, `${!prefix@}` list keys or names; any other `${!x}`
        // takes the value of the variable named by x's value.
        let lists_names = matches!(after, "[@]" | "[*]" | "*" | "@");
        if inner.starts_with('!') && !lists_names {
            self.finding(
                Decision::Deny,
                format!(
                    "`{}` is indirection: it expands the variable named by {name}'s value, which can run code hidden in it",
                    short(&text),
                    name = quote_capped(&name)
                ),
            );
        } else if let Some(op) = ["@P", "@E"].iter().find(|op| after.starts_with(**op)) {
            self.finding(
                Decision::Deny,
                format!(
                    "`{}` expands {name}'s value as a {} (`{op}`), which evaluates what it holds",
                    short(&text),
                    if *op == "@P" {
                        "prompt"
                    } else {
                        "string with escapes"
                    },
                    name = quote_capped(&name)
                ),
            );
        } else if let Some(rest) = after.strip_prefix(':')
            && !rest.starts_with(['-', '=', '?', '+'])
        {
            // `${x:offset:length}`: offset and length are arithmetic.
            self.arithmetic(node);
        }
    }

    /// Notes the variables an arithmetic context evaluates.
    fn arithmetic(&mut self, node: Node) {
        if node.kind() == "subscript" {
            match node.child_by_field_name("index") {
                Some(index) => return self.arithmetic(index),
                None => return,
            }
        }
        let expr = short(&self.text(node));
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            let mut cursor = n.walk();
            stack.extend(n.children(&mut cursor));
            let t = self.text(n);
            let is_name = n.kind() == "variable_name"
                || (n.kind() == "word"
                    && t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            if is_name {
                self.arith.push((t, expr.clone()));
            }
        }
    }

    /// A variable set from input, a file name or a substitution may hold `a[$(cmd)]`, which
    /// arithmetic evaluation would run: such an evaluation asks.
    fn arithmetic_findings(&mut self) {
        let mut seen = HashSet::new();
        for (name, expr) in std::mem::take(&mut self.arith) {
            if self.tainted.contains(&name) && seen.insert(name.clone()) {
                self.finding(
                    Decision::Ask,
                    format!(
                        "{expr} evaluates {name} as arithmetic, and the line sets {name} from a value it does not spell out; a value like `a[$(cmd)]` would run cmd",
                        expr = quote_capped(&expr),
                        name = quote_capped(&name)
                    ),
                );
            }
        }
    }

    /// `for x in …`: x is tainted unless every value is a plain literal.
    fn for_variable(&mut self, node: Node, d: Dirs) {
        let Some(var) = node.child_by_field_name("variable") else {
            return;
        };
        let mut cursor = node.walk();
        let plain = node
            .children_by_field_name("value", &mut cursor)
            .all(|v| self.r.word(v).exact().is_some_and(|t| !t.contains('[')));
        let values = node.child_by_field_name("value").is_some();
        let name = self.text(var);
        if !plain || !values {
            self.tainted.insert(name.clone());
        }
        // The loop assigns its variable like `NAME=VALUE` would (`for PATH in /tmp`).
        self.out.assigns.push((
            Assign {
                value: Word::Dyn(format!("${name}")),
                text: format!("for {name} in …"),
                name,
            },
            d,
        ));
    }

    /// `read`, `mapfile`, `printf -v`, `getopts` set variables from input.
    fn taint_from(&mut self, words: &[Word]) {
        let Some(name) = words.first().and_then(Word::exact) else {
            return;
        };
        if !matches!(
            name,
            "read" | "mapfile" | "readarray" | "printf" | "getopts" | "select"
        ) {
            return;
        }
        for implicit in ["REPLY", "MAPFILE", "OPTARG"] {
            self.tainted.insert(implicit.to_owned());
        }
        for w in &words[1..] {
            if let Some(t) = w.literal()
                && t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            {
                self.tainted.insert(t.to_owned());
            }
        }
    }

    fn finding(&mut self, decision: Decision, reason: String) {
        self.out.findings.push(Finding { decision, reason });
    }

    fn text(&self, node: Node) -> String {
        self.r.text(node)
    }

    fn intern(&mut self, dirs: Vec<PathBuf>) -> Dirs {
        match self.out.dirs.iter().position(|s| *s == dirs) {
            Some(at) => at,
            None => {
                self.out.dirs.push(dirs);
                self.out.dirs.len() - 1
            }
        }
    }

    fn union(&mut self, sets: &[Dirs]) -> Dirs {
        match sets {
            [] => 0,
            [one] => *one,
            _ if sets.iter().all(|s| *s == sets[0]) => sets[0],
            _ => {
                let mut all: Vec<PathBuf> = Vec::new();
                for s in sets {
                    for dir in &self.out.dirs[*s] {
                        if !all.contains(dir) {
                            all.push(dir.clone());
                        }
                    }
                }
                self.intern(all)
            }
        }
    }
}
