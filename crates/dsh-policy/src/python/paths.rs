//! What the audit knows about paths: which expressions are `pathlib` paths (so that
//! `p.rename(q)` can be told from `df.rename(columns=…)`), and which file a path expression
//! names, as far as literals show it (so that `shutil.copy(a, "out/x")` can be judged and
//! `open("helper.py", "w")` recognised as writing a module).
//!
//! **Bindings.** Every place a name (or an attribute chain such as `self.out`) is bound is
//! collected once, in one pass over the tree, without regard to scope or order: `x = …`,
//! `x: Path = …`, `x /= …`, `for x in …` (statements and comprehensions), `with … as x`,
//! `(x := …)`, and parameters (`p: Path`, `p=Path(…)`). A name is a path when *any* of its
//! bindings is one, and names a literal file only when *all* of them do: both directions
//! err towards refusing. Tuple unpacking is followed element by element when both sides are
//! written out, and otherwise binds unknown values.
//!
//! **Paths.** `Path(…)`, `PurePath`/`PosixPath`/`WindowsPath`/`Pure*Path(…)`, through any
//! import of `pathlib` (an unimported `Path(…)` is taken as one too); `Path.cwd()`,
//! `Path.home()`; `p / x` and `x / p`; `p.parent`, `p.parents[i]`; `p.with_name(…)`,
//! `.with_stem`, `.with_suffix`, `.resolve()`, `.absolute()`, `.joinpath(…)`,
//! `.expanduser()`, `.relative_to(…)`, `.readlink()`; the elements of `p.iterdir()`,
//! `p.glob(…)`, `p.rglob(…)` and `p.parents` (also through `sorted`/`list`/`reversed`).
//! A path returned by a user function or a library is not recognised: the callers of
//! [`Paths::is_path`] decide what an unknown receiver means.
//!
//! Evaluation is bounded ([`BUDGET`] steps per question, [`TOTAL_BUDGET`] per source): past
//! it the answer is "not known" (not a path, no known value), so the cost of a source stays
//! linear in its size whatever its names do.

use std::cell::Cell;
use std::collections::HashMap;

use tree_sitter::Node;

use super::imports::resolve;
use super::syntax::{
    arguments, chain, field_text, first_argument, is_expression, plain_string, text, unparen,
};

/// The `pathlib` classes whose instances are paths.
pub(super) const PATH_CLASSES: &[&str] = &[
    "Path",
    "PurePath",
    "PosixPath",
    "WindowsPath",
    "PurePosixPath",
    "PureWindowsPath",
];

/// Methods of a path (or of a path class) that return a path.
const PATH_RETURNING: &[&str] = &[
    "with_name",
    "with_stem",
    "with_suffix",
    "resolve",
    "absolute",
    "joinpath",
    "expanduser",
    "relative_to",
    "readlink",
    "with_segments",
    "cwd",
    "home",
];

/// Methods of a path whose elements are paths.
const PATH_ITERATING: &[&str] = &["iterdir", "glob", "rglob"];

/// Functions whose result has the same elements as their first argument.
const SAME_ELEMENTS: &[&str] = &["sorted", "list", "reversed", "tuple", "set", "iter"];

/// How many steps one question may take before the answer is "not known".
const BUDGET: usize = 4096;

/// How many steps all questions about one source may take together.
const TOTAL_BUDGET: usize = 1 << 20;

/// How many distinct values a name may have before it is "not known".
const MAX_VALUES: usize = 16;

/// What one binding assigns.
#[derive(Clone, Copy)]
enum Bound<'t> {
    /// `x = value` (and `with value as x`, `x := value`, a parameter's default).
    Value(Node<'t>),
    /// `for x in value`.
    Element(Node<'t>),
    /// `x: Path` (a parameter or an annotated assignment).
    AnnotatedPath,
    /// `x /= value`: a path stays a path; its value is not followed.
    Joined,
    /// Anything the audit does not follow (unpacking, `x += …`, a parameter's argument).
    Unknown,
}

/// A path as far as literals show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct PathValue {
    /// The known end of the path (all of it when `whole`).
    pub text: String,
    /// The whole path is known (relative paths are relative to the workspace root).
    pub whole: bool,
    /// `text` starts at a path component (`d / "helper.py"`), not inside a name
    /// (`f"{name}.py"`).
    pub at_component: bool,
}

impl PathValue {
    fn whole(text: impl Into<String>) -> Self {
        PathValue {
            text: text.into(),
            whole: true,
            at_component: true,
        }
    }

    /// The last component, when it is known whole.
    pub(super) fn file_name(&self) -> Option<&str> {
        match self.text.rsplit_once('/') {
            Some((_, name)) => Some(name),
            None if self.at_component => Some(&self.text),
            None => None,
        }
    }

    /// The components known whole (all but a partial first one).
    pub(super) fn components(&self) -> Vec<&str> {
        let mut parts: Vec<&str> = self.text.split('/').collect();
        if !self.at_component && !parts.is_empty() {
            parts.remove(0);
        }
        parts
            .into_iter()
            .filter(|p| !p.is_empty() && *p != "." && *p != "..")
            .collect()
    }
}

/// Every binding in one source, and the questions asked of them.
pub(super) struct Paths<'a, 't> {
    src: &'a [u8],
    aliases: &'a HashMap<String, Vec<String>>,
    bindings: HashMap<String, Vec<Bound<'t>>>,
    budget: Cell<usize>,
    /// Steps taken by all questions about this source.
    total: Cell<usize>,
}

impl<'a, 't> Paths<'a, 't> {
    /// Collects the bindings of `nodes` (every node of one tree).
    pub(super) fn new(
        nodes: &[Node<'t>],
        src: &'a [u8],
        aliases: &'a HashMap<String, Vec<String>>,
    ) -> Self {
        let mut paths = Paths {
            src,
            aliases,
            bindings: HashMap::new(),
            budget: Cell::new(0),
            total: Cell::new(0),
        };
        for &node in nodes {
            paths.collect(node);
        }
        paths
    }

    fn bind(&mut self, target: Node<'t>, bound: Bound<'t>) {
        let target = unparen(target);
        match target.kind() {
            "identifier" | "attribute" => {
                if let Some(key) = self.key(target) {
                    self.bindings.entry(key).or_default().push(bound);
                }
            }
            "pattern_list" | "tuple_pattern" | "list_pattern" | "tuple" | "list" => {
                let mut c = target.walk();
                let parts: Vec<Node<'t>> = target.named_children(&mut c).collect();
                let values: Option<Vec<Node<'t>>> = match bound {
                    Bound::Value(v) => {
                        let v = unparen(v);
                        matches!(v.kind(), "expression_list" | "tuple" | "list").then(|| {
                            let mut c = v.walk();
                            v.named_children(&mut c).collect()
                        })
                    }
                    _ => None,
                };
                match values {
                    Some(values) if values.len() == parts.len() => {
                        for (p, v) in parts.into_iter().zip(values) {
                            self.bind(p, Bound::Value(v));
                        }
                    }
                    _ => {
                        for p in parts {
                            self.bind(p, Bound::Unknown);
                        }
                    }
                }
            }
            "list_splat_pattern" => {
                if let Some(inner) = target.named_child(0) {
                    self.bind(inner, Bound::Unknown);
                }
            }
            _ => {}
        }
    }

    fn collect(&mut self, node: Node<'t>) {
        let field = |f: &str| node.child_by_field_name(f);
        match node.kind() {
            "assignment" => {
                let Some(left) = field("left") else { return };
                if field("type").is_some_and(|t| self.names_path(t)) {
                    self.bind(left, Bound::AnnotatedPath);
                }
                if let Some(right) = field("right") {
                    // `a = b = v`: the inner assignment binds `b`; `a` gets the same value.
                    let mut value = right;
                    while value.kind() == "assignment" {
                        match value.child_by_field_name("right") {
                            Some(r) => value = r,
                            None => break,
                        }
                    }
                    self.bind(left, Bound::Value(value));
                }
            }
            "augmented_assignment" => {
                let Some(left) = field("left") else { return };
                let op = field("operator").map(|o| text(o, self.src));
                match (op.as_deref(), field("right")) {
                    (Some("/="), Some(_)) => self.bind(left, Bound::Joined),
                    _ => self.bind(left, Bound::Unknown),
                }
            }
            "for_statement" | "for_in_clause" => {
                if let (Some(left), Some(right)) = (field("left"), field("right")) {
                    match left.kind() {
                        "identifier" | "attribute" => self.bind(left, Bound::Element(right)),
                        _ => self.bind(left, Bound::Unknown),
                    }
                }
            }
            "as_pattern" => {
                let in_with = node.parent().is_some_and(|p| p.kind() == "with_item");
                let alias = field("alias").and_then(|a| a.named_child(0));
                if let (true, Some(alias), Some(value)) = (in_with, alias, node.named_child(0)) {
                    self.bind(alias, Bound::Value(value));
                }
            }
            "named_expression" => {
                if let (Some(name), Some(value)) = (field("name"), field("value")) {
                    self.bind(name, Bound::Value(value));
                }
            }
            "typed_parameter" => {
                let typed_path = field("type").is_some_and(|t| self.names_path(t));
                let mut c = node.walk();
                let name = node
                    .named_children(&mut c)
                    .find(|n| n.kind() == "identifier");
                if let Some(name) = name {
                    self.bind(name, Bound::Unknown);
                    if typed_path {
                        self.bind(name, Bound::AnnotatedPath);
                    }
                }
            }
            "typed_default_parameter" | "default_parameter" => {
                let Some(name) = field("name") else { return };
                self.bind(name, Bound::Unknown);
                if field("type").is_some_and(|t| self.names_path(t)) {
                    self.bind(name, Bound::AnnotatedPath);
                }
                if let Some(value) = field("value") {
                    self.bind(name, Bound::Value(value));
                }
            }
            _ => {}
        }
    }

    /// The binding key of a name or an attribute chain (`self.out`).
    fn key(&self, node: Node) -> Option<String> {
        chain(unparen(node), self.src)
            .ok()
            .flatten()
            .map(|c| c.join("."))
    }

    /// Whether a type annotation mentions a path class (`Path`, `Optional[Path]`,
    /// `pathlib.Path | None`).
    fn names_path(&self, annotation: Node) -> bool {
        let t = text(annotation, self.src);
        t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|word| PATH_CLASSES.contains(&word))
    }

    /// Whether `node` names a path class: `Path`, `pathlib.Path`, `from pathlib import Path
    /// as P` then `P`.
    pub(super) fn is_path_class(&self, node: Node) -> bool {
        let Some(names) = chain(unparen(node), self.src).ok().flatten() else {
            return false;
        };
        let resolved = resolve(self.aliases, &names);
        if resolved.is_empty() {
            return names.len() == 1 && PATH_CLASSES.contains(&names[0].as_str());
        }
        resolved.iter().any(|r| {
            r.strip_prefix("pathlib.")
                .is_some_and(|class| PATH_CLASSES.contains(&class))
        })
    }

    /// Whether the script imports anything from `pathlib`.
    pub(super) fn uses_pathlib(&self) -> bool {
        self.aliases
            .values()
            .flatten()
            .any(|t| t == "pathlib" || t.starts_with("pathlib."))
    }

    fn step(&self) -> bool {
        let (used, total) = (self.budget.get(), self.total.get());
        self.budget.set(used + 1);
        self.total.set(total + 1);
        used < BUDGET && total < TOTAL_BUDGET
    }

    /// Whether `node` is known to be a `pathlib` path (see the module docs).
    pub(super) fn is_path(&self, node: Node<'t>) -> bool {
        self.budget.set(0);
        self.path(node, &mut Vec::new())
    }

    fn path(&self, node: Node<'t>, visiting: &mut Vec<String>) -> bool {
        if !self.step() {
            return false;
        }
        let node = unparen(node);
        let field = |f: &str| node.child_by_field_name(f);
        match node.kind() {
            "identifier" | "attribute" => {
                if node.kind() == "attribute"
                    && field_text(node, "attribute", self.src) == "parent"
                    && field("object").is_some_and(|o| self.path(o, visiting))
                {
                    return true;
                }
                let Some(key) = self.key(node) else {
                    return false;
                };
                if visiting.contains(&key) {
                    return false;
                }
                let Some(bound) = self.bindings.get(&key) else {
                    return false;
                };
                visiting.push(key);
                let found = bound.iter().any(|b| match *b {
                    Bound::Value(v) => self.path(v, visiting),
                    Bound::Element(v) => self.elements_are_paths(v, visiting),
                    Bound::AnnotatedPath => true,
                    Bound::Joined | Bound::Unknown => false,
                });
                visiting.pop();
                found
            }
            "call" => {
                let Some(function) = field("function").map(unparen) else {
                    return false;
                };
                if self.is_path_class(function) {
                    return true;
                }
                if function.kind() != "attribute" {
                    return false;
                }
                let method = field_text(function, "attribute", self.src);
                let Some(object) = function.child_by_field_name("object") else {
                    return false;
                };
                PATH_RETURNING.contains(&method.as_str())
                    && (self.is_path_class(object) || self.path(object, visiting))
            }
            "binary_operator" => {
                field("operator").is_some_and(|o| o.kind() == "/")
                    && (field("left").is_some_and(|l| self.path(l, visiting))
                        || field("right").is_some_and(|r| self.path(r, visiting)))
            }
            "subscript" => field("value").is_some_and(|v| {
                let v = unparen(v);
                v.kind() == "attribute"
                    && field_text(v, "attribute", self.src) == "parents"
                    && v.child_by_field_name("object")
                        .is_some_and(|o| self.path(o, visiting))
            }),
            "conditional_expression" | "boolean_operator" => {
                let mut c = node.walk();
                let children: Vec<Node<'t>> = node.named_children(&mut c).collect();
                children.into_iter().any(|n| self.path(n, visiting))
            }
            "named_expression" => field("value").is_some_and(|v| self.path(v, visiting)),
            _ => false,
        }
    }

    fn elements_are_paths(&self, node: Node<'t>, visiting: &mut Vec<String>) -> bool {
        if !self.step() {
            return false;
        }
        let node = unparen(node);
        match node.kind() {
            "call" => {
                let Some(function) = node.child_by_field_name("function").map(unparen) else {
                    return false;
                };
                let first = first_argument(node);
                match function.kind() {
                    "identifier" => {
                        SAME_ELEMENTS.contains(&text(function, self.src).as_str())
                            && first.is_some_and(|a| self.elements_are_paths(a, visiting))
                    }
                    "attribute" => {
                        let method = field_text(function, "attribute", self.src);
                        PATH_ITERATING.contains(&method.as_str())
                            && function
                                .child_by_field_name("object")
                                .is_some_and(|o| self.path(o, visiting))
                    }
                    _ => false,
                }
            }
            "attribute" => {
                field_text(node, "attribute", self.src) == "parents"
                    && node
                        .child_by_field_name("object")
                        .is_some_and(|o| self.path(o, visiting))
            }
            "list" | "tuple" | "set" => {
                let mut c = node.walk();
                let children: Vec<Node<'t>> = node.named_children(&mut c).collect();
                children.into_iter().any(|n| self.path(n, visiting))
            }
            _ => false,
        }
    }

    /// What path `node` may hold: `None` when some value it may hold is not known (a computed
    /// name, a parameter, a function's result), else every value it may hold.
    pub(super) fn values(&self, node: Node<'t>) -> Option<Vec<PathValue>> {
        self.budget.set(0);
        self.value(node, &mut Vec::new())
    }

    fn value(&self, node: Node<'t>, visiting: &mut Vec<String>) -> Option<Vec<PathValue>> {
        if !self.step() {
            return None;
        }
        let node = unparen(node);
        let field = |f: &str| node.child_by_field_name(f);
        let out = match node.kind() {
            "string" => vec![string_value(node, self.src)?],
            "concatenated_string" => {
                let mut c = node.walk();
                let parts: Vec<Node> = node.named_children(&mut c).collect();
                let mut joined = String::new();
                for p in &parts {
                    joined.push_str(&plain_string(*p, self.src)?);
                }
                vec![PathValue::whole(joined)]
            }
            "identifier" | "attribute" => {
                if node.kind() == "attribute" {
                    let attr = field_text(node, "attribute", self.src);
                    let object = field("object")?;
                    if attr == "parent" {
                        return self.map(object, visiting, parent_of);
                    }
                    if attr == "name" && self.path(object, visiting) {
                        return self.map(object, visiting, |v| {
                            Some(PathValue {
                                text: v.file_name()?.to_owned(),
                                whole: false,
                                at_component: true,
                            })
                        });
                    }
                }
                let key = self.key(node)?;
                if visiting.contains(&key) {
                    return None;
                }
                let bound = self.bindings.get(&key)?;
                visiting.push(key);
                let mut all = Vec::new();
                for b in bound {
                    let found = match *b {
                        Bound::Value(v) => self.value(v, visiting),
                        Bound::AnnotatedPath => continue,
                        _ => None,
                    };
                    match found {
                        Some(found) => all.extend(found),
                        None => {
                            visiting.pop();
                            return None;
                        }
                    }
                }
                visiting.pop();
                if all.is_empty() {
                    return None;
                }
                all
            }
            "binary_operator" => {
                let op = field("operator")?.kind();
                let left = self.value(field("left")?, visiting)?;
                let right = self.value(field("right")?, visiting)?;
                match op {
                    "/" => join_all(&left, &right)?,
                    "+" => concat_all(&left, &right)?,
                    _ => return None,
                }
            }
            "call" => self.call_value(node, visiting)?,
            _ => return None,
        };
        (out.len() <= MAX_VALUES).then_some(out)
    }

    fn map(
        &self,
        node: Node<'t>,
        visiting: &mut Vec<String>,
        f: impl Fn(&PathValue) -> Option<PathValue>,
    ) -> Option<Vec<PathValue>> {
        self.value(node, visiting)?.iter().map(f).collect()
    }

    fn call_value(&self, node: Node<'t>, visiting: &mut Vec<String>) -> Option<Vec<PathValue>> {
        let function = unparen(node.child_by_field_name("function")?);
        let args = arguments(node);
        if args
            .iter()
            .any(|a| a.kind() != "string" && !is_expression(*a))
        {
            // Splats and keywords: not followed.
            return None;
        }
        let joined = |visiting: &mut Vec<String>, args: &[Node<'t>]| {
            let mut acc = vec![PathValue::whole(".")];
            for a in args {
                acc = join_all(&acc, &self.value(*a, visiting)?)?;
            }
            Some(acc)
        };
        if self.is_path_class(function) {
            return joined(visiting, &args);
        }
        let names = chain(function, self.src).ok().flatten();
        let resolved = names
            .as_ref()
            .map(|n| resolve(self.aliases, n))
            .unwrap_or_default();
        let is = |dotted: &str| resolved.iter().any(|r| r == dotted);
        if is("os.path.join") || is("posixpath.join") {
            return joined(visiting, &args);
        }
        let identity = [
            "os.path.abspath",
            "os.path.normpath",
            "os.path.realpath",
            "os.fspath",
        ];
        let bare = names
            .as_ref()
            .filter(|n| n.len() == 1 && resolved.is_empty())
            .map(|n| n[0].as_str());
        if identity.iter().any(|d| is(d)) || bare == Some("str") {
            return match args.as_slice() {
                [one] => self.value(*one, visiting),
                _ => None,
            };
        }
        if function.kind() != "attribute" {
            return None;
        }
        let method = field_text(function, "attribute", self.src);
        let object = function.child_by_field_name("object")?;
        if !(self.is_path_class(object) || self.path(object, visiting)) {
            return None;
        }
        match (method.as_str(), args.as_slice()) {
            ("joinpath", _) => {
                let base = self.value(object, visiting)?;
                let rest = joined(visiting, &args)?;
                join_all(&base, &rest)
            }
            ("resolve" | "absolute", []) => self.value(object, visiting),
            ("with_name", [name]) => {
                let name = self.value(*name, visiting)?;
                let base = self.map(object, visiting, parent_of).unwrap_or_else(|| {
                    vec![PathValue {
                        text: String::new(),
                        whole: false,
                        at_component: false,
                    }]
                });
                join_all(&base, &name)
            }
            ("with_suffix", [suffix]) => {
                let suffix = self.value(*suffix, visiting)?;
                let base = self.value(object, visiting);
                let mut out = Vec::new();
                for s in &suffix {
                    match &base {
                        Some(base) => {
                            for b in base {
                                out.push(with_suffix(b, &s.text));
                            }
                        }
                        None => out.push(PathValue {
                            text: s.text.clone(),
                            whole: false,
                            at_component: false,
                        }),
                    }
                }
                Some(out)
            }
            _ => None,
        }
    }
}

/// A string literal: plain (`"a/b"`) or an f-string whose end after its last interpolation
/// is known.
fn string_value(node: Node, src: &[u8]) -> Option<PathValue> {
    if let Some(s) = plain_string(node, src) {
        return Some(PathValue::whole(s));
    }
    let mut cursor = node.walk();
    let mut tail = String::new();
    let mut interpolated = false;
    for child in node.children(&mut cursor) {
        match child.kind() {
            "interpolation" => {
                interpolated = true;
                tail.clear();
            }
            "string_content" => {
                let mut c = child.walk();
                if child.named_children(&mut c).next().is_some() {
                    return None;
                }
                tail.push_str(&text(child, src));
            }
            "string_start" | "string_end" => {}
            _ => return None,
        }
    }
    if !interpolated {
        return None;
    }
    Some(match tail.rsplit_once('/') {
        Some((_, name)) => PathValue {
            text: name.to_owned(),
            whole: false,
            at_component: true,
        },
        None => PathValue {
            text: tail,
            whole: false,
            at_component: false,
        },
    })
}

fn join(left: &PathValue, right: &PathValue) -> PathValue {
    if right.whole && right.text.starts_with('/') {
        return right.clone();
    }
    if !right.whole {
        return right.clone();
    }
    if left.whole {
        let text = match (left.text.as_str(), right.text.as_str()) {
            (".", r) => r.to_owned(),
            (l, r) if l.ends_with('/') => format!("{l}{r}"),
            (l, r) => format!("{l}/{r}"),
        };
        return PathValue::whole(text);
    }
    PathValue {
        text: right.text.clone(),
        whole: false,
        at_component: true,
    }
}

fn join_all(left: &[PathValue], right: &[PathValue]) -> Option<Vec<PathValue>> {
    if left.len() * right.len() > MAX_VALUES {
        return None;
    }
    Some(
        left.iter()
            .flat_map(|l| right.iter().map(move |r| join(l, r)))
            .collect(),
    )
}

fn concat_all(left: &[PathValue], right: &[PathValue]) -> Option<Vec<PathValue>> {
    if left.len() * right.len() > MAX_VALUES {
        return None;
    }
    Some(
        left.iter()
            .flat_map(|l| {
                right.iter().map(move |r| {
                    if r.whole {
                        PathValue {
                            text: format!("{}{}", l.text, r.text),
                            whole: l.whole,
                            at_component: l.at_component,
                        }
                    } else {
                        r.clone()
                    }
                })
            })
            .collect(),
    )
}

fn parent_of(v: &PathValue) -> Option<PathValue> {
    if !v.whole {
        return None;
    }
    Some(match v.text.rsplit_once('/') {
        Some(("", _)) => PathValue::whole("/"),
        Some((dir, _)) => PathValue::whole(dir),
        None => PathValue::whole("."),
    })
}

fn with_suffix(base: &PathValue, suffix: &str) -> PathValue {
    let (dir, name) = match base.text.rsplit_once('/') {
        Some((d, n)) => (Some(d), n),
        None => (None, base.text.as_str()),
    };
    let stem = match name.rsplit_once('.') {
        Some((s, _)) if !s.is_empty() => s,
        _ => name,
    };
    let text = match dir {
        Some(d) => format!("{d}/{stem}{suffix}"),
        None => format!("{stem}{suffix}"),
    };
    PathValue {
        text,
        whole: base.whole,
        at_component: base.at_component,
    }
}
