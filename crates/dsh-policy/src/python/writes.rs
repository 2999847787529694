//! Code written at run time, then loaded: a script that writes `helper.py` and then imports
//! `helper` runs code the audit never read.
//!
//! **Writes of code.** `open(…)` (and `io`/`codecs`/`gzip`/`bz2`/`lzma`/`tarfile.open`) with
//! a mode that writes (`w`, `a`, `x`, `+`, or a mode that is not a literal), a path's
//! `.open(mode)`, `.write_text`, `.write_bytes`, the destination of `shutil.copy`, `copy2`,
//! `copyfile`, `copytree`, `shutil.unpack_archive`, an archive's `.extract`/`.extractall`
//! (when `zipfile` or `tarfile` is imported), `fileinput` in place, `tempfile` files with a
//! `suffix`, and `py_compile`/`compileall`. A write is *of code* when the file's name ends in
//! `.py`, `.pyc`, `.pyo`, `.pyw`, `.pth`, `.so` or `.pyd`, or when its name is not known
//! (a variable, a parameter, `f"{name}"`); a write of `out.txt` or `f"{run}.json"` is not.
//! What paths are known is [`Paths::values`]'s business.
//!
//! **Refused outright:** writing a `.pth` file or `sitecustomize`/`usercustomize` (they run
//! at every later interpreter start, not only in this script), and a module named like a
//! standard one in a directory that may be on `sys.path` (`json.py`: it shadows `json` for
//! every later import, by this script or by a library).
//!
//! **Refused with a later load:** when the script writes code, an import that may run after
//! the write loads what was written without it being audited. An import *may run after*
//! when it sits in a function, a lambda or a loop, or comes after the first write of code in
//! the source. Such an import is refused when the write may have made its module: a write of
//! an unknown name endangers every module, `helper.py` or `helper/…` endangers `helper` (and
//! any dotted name with a `helper` part). An import is safe anyway when the same top-level
//! module was imported earlier, at module level, outside `try`, before any write, and is
//! standard or local (present at audit time): Python then has it cached. Loading tests by
//! name (`loadTestsFromName(s)`, `discover`) counts as importing an unknown module.
//!
//! A local module imported by the script brings its writes and imports along: its writes
//! happen where it is imported, its module-level imports too, and the imports in its
//! functions may run at any later time.

use std::collections::HashSet;

use dsh_core::quote_capped;
use tree_sitter::Node;

use super::imports::resolve;
use super::paths::{PathValue, Paths};
use super::syntax::{Arg, argument, chain, field_text, plain_string, short, text, unparen};
use super::{Auditor, Refusal, lists};

/// File name endings of code Python can load.
const CODE_EXTENSIONS: &[&str] = &["py", "pyc", "pyo", "pyw", "pth", "so", "pyd"];

/// Modules run at interpreter start when found on `sys.path`.
const STARTUP_MODULES: &[&str] = &["sitecustomize", "usercustomize"];

/// Functions that open a file named by their first argument with a mode as their second.
const OPENERS: &[&str] = &[
    "io.open",
    "codecs.open",
    "gzip.open",
    "bz2.open",
    "lzma.open",
    "tarfile.open",
];

/// What a script (with its local modules) writes and imports, for a script importing it.
#[derive(Clone, Debug, Default)]
pub(super) struct Summary {
    /// The first write of code, if any.
    pub write: Option<CodeWrite>,
    /// Imports that may run at any time after the module is imported.
    pub deferred: Vec<Load>,
    /// Imports that run while the module is imported.
    pub eager: Vec<Load>,
}

impl Summary {
    /// What is assumed of a local module still being audited (an import cycle).
    pub(super) fn unknown(top: &str) -> Self {
        Summary {
            write: Some(CodeWrite {
                what: format!(
                    "the local module {top}, which imports the script back",
                    top = quote_capped(top)
                ),
                line: 0,
                names: Endangers::Any,
            }),
            ..Summary::default()
        }
    }
}

/// A write of code.
#[derive(Clone, Debug)]
pub(super) struct CodeWrite {
    /// `` `helper.py` with `open` ``.
    pub what: String,
    pub line: usize,
    pub names: Endangers,
}

/// The modules a write of code may have made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Endangers {
    Any,
    /// Module names (every part of the path, without extensions).
    Names(Vec<String>),
}

/// An import.
#[derive(Clone, Debug)]
pub(super) struct Load {
    /// The dotted module name; `None` when it is computed (tests loaded by name).
    pub module: Option<String>,
    /// `` imports `helper` ``.
    pub what: String,
    pub line: usize,
}

/// A written path: its values (`None`: not known) and how the source writes it.
type Target = (Option<Vec<PathValue>>, String);

struct Site<T> {
    item: T,
    pos: usize,
    /// In a function, a lambda or a loop.
    nested: bool,
    in_try: bool,
}

impl Auditor<'_> {
    /// Refuses code written then loaded (see the module docs); else what this source writes
    /// and imports, for a script that imports it.
    pub(super) fn writes_then_loads(
        &self,
        nodes: &[Node],
        src: &[u8],
        paths: &Paths<'_, '_>,
    ) -> Result<Summary, Refusal> {
        let mut loads: Vec<Site<Load>> = Vec::new();
        let mut writes: Vec<Site<CodeWrite>> = Vec::new();
        let uses = |module: &str| {
            self.aliases
                .values()
                .flatten()
                .any(|t| t == module || t.starts_with(&format!("{module}.")))
        };
        let (archives, unittest) = (uses("zipfile") || uses("tarfile"), uses("unittest"));
        for &node in nodes {
            let line = node.start_position().row + 1;
            let pos = node.start_byte();
            match node.kind() {
                "import_statement" | "import_from_statement" => {
                    let (nested, in_try) = context(node);
                    for module in imported(node, src) {
                        loads.push(site(
                            node,
                            Load {
                                what: format!("imports {module}", module = quote_capped(&module)),
                                module: Some(module),
                                line,
                            },
                        ));
                    }
                    for (top, summary) in self.locals.get(&pos).into_iter().flatten() {
                        let within = |w: &str, l: usize| {
                            format!(
                                "{w} (in the local module {top}, its line {l})",
                                top = quote_capped(top)
                            )
                        };
                        if let Some(w) = &summary.write {
                            writes.push(site(
                                node,
                                CodeWrite {
                                    what: within(&w.what, w.line),
                                    line,
                                    names: w.names.clone(),
                                },
                            ));
                        }
                        for (l, later) in summary
                            .eager
                            .iter()
                            .map(|l| (l, false))
                            .chain(summary.deferred.iter().map(|l| (l, true)))
                        {
                            loads.push(Site {
                                item: Load {
                                    module: l.module.clone(),
                                    what: within(&l.what, l.line),
                                    line,
                                },
                                pos,
                                nested: nested || later,
                                in_try,
                            });
                        }
                    }
                }
                "call" => {
                    if let Some(w) = self.code_write(node, src, paths, archives)? {
                        writes.push(site(node, w));
                    }
                    if unittest && loads_by_name(node, src) {
                        loads.push(site(
                            node,
                            Load {
                                module: None,
                                what: format!(
                                    "loads tests by name with `{}`",
                                    short(&text(node, src))
                                ),
                                line,
                            },
                        ));
                    }
                }
                _ => {}
            }
        }
        let Some(first) = writes.iter().map(|w| w.pos).min() else {
            return Ok(summary(None, loads));
        };
        let cached: HashSet<&str> = loads
            .iter()
            .filter(|l| !l.nested && !l.in_try && l.pos < first)
            .filter_map(|l| l.item.module.as_deref())
            .map(top)
            .filter(|t| lists::STDLIB.contains(t) || self.local_found.contains(*t))
            .collect();
        for l in &loads {
            if !(l.nested || l.pos > first) {
                continue;
            }
            if l.item
                .module
                .as_deref()
                .is_some_and(|m| cached.contains(top(m)))
            {
                continue;
            }
            for w in &writes {
                let hit = match (&w.item.names, &l.item.module) {
                    (Endangers::Any, _) | (_, None) => true,
                    (Endangers::Names(names), Some(m)) => {
                        m.split('.').any(|part| names.iter().any(|n| n == part))
                    }
                };
                if hit {
                    return Err(Refusal::at(
                        l.item.line,
                        format!(
                            "the script writes {} (line {}) and then {} (line {}): code written at run time would be loaded without being audited; import what it needs at the top of the script, before anything is written",
                            w.item.what, w.item.line, l.item.what, l.item.line
                        ),
                    ));
                }
            }
        }
        let first = writes.into_iter().min_by_key(|w| w.pos).map(|w| w.item);
        Ok(summary(first, loads))
    }

    /// A write of code `call` makes; `Err` for one refused outright.
    fn code_write(
        &self,
        call: Node,
        src: &[u8],
        paths: &Paths<'_, '_>,
        archives: bool,
    ) -> Result<Option<CodeWrite>, Refusal> {
        let line = call.start_position().row + 1;
        let Some(function) = call.child_by_field_name("function").map(unparen) else {
            return Ok(None);
        };
        let names = chain(function, src).ok().flatten().unwrap_or_default();
        let resolved = resolve(&self.aliases, &names);
        let is = |dotted: &str| resolved.iter().any(|r| r == dotted);
        let module = |m: &str| resolved.iter().any(|r| r.starts_with(&format!("{m}.")));
        let method = if function.kind() == "attribute" {
            field_text(function, "attribute", src)
        } else {
            String::new()
        };
        let object = function.child_by_field_name("object");
        let values = |arg: Arg| match arg {
            Arg::Given(n) => Some((paths.values(n), short(&text(n, src)))),
            Arg::Absent => None,
            Arg::Splat => Some((None, "*args".to_owned())),
        };
        // (the API, what is written: its values and how it is written).
        let (api, targets): (String, Vec<Target>) =
            if (names.len() == 1 && names[0] == "open" && resolved.is_empty())
                || OPENERS.iter().any(|o| is(o))
            {
                if !writes_mode(argument(call, 1, "mode", src), src, false) {
                    return Ok(None);
                }
                let file = match argument(call, 0, "file", src) {
                    Arg::Absent => argument(call, 0, "filename", src),
                    given => given,
                };
                (
                    short(&text(function, src)),
                    values(file).into_iter().collect(),
                )
            } else if let Some(f) = resolved.iter().find_map(|r| r.strip_prefix("shutil.")) {
                let dst = argument(call, 1, "dst", src);
                match f {
                    "copy" | "copy2" => {
                        let mut t: Vec<_> = values(dst).into_iter().collect();
                        // Into a directory, the file keeps the source's name.
                        if let Some(s) = values(argument(call, 0, "src", src)) {
                            t.push(s);
                        }
                        (format!("shutil.{f}"), t)
                    }
                    "copyfile" => (format!("shutil.{f}"), values(dst).into_iter().collect()),
                    "copytree" | "unpack_archive" => {
                        // What a tree or an archive holds is not known.
                        let into = match f {
                            "copytree" => values(dst),
                            _ => values(argument(call, 1, "extract_dir", src)),
                        };
                        let what = into.map(|(_, w)| w).unwrap_or_else(|| ".".to_owned());
                        return Ok(Some(CodeWrite {
                            what: format!(
                                "files into {what} with `shutil.{f}`",
                                what = quote_capped(&what)
                            ),
                            line,
                            names: Endangers::Any,
                        }));
                    }
                    _ => return Ok(None),
                }
            } else if module("py_compile") || module("compileall") {
                return Ok(Some(CodeWrite {
                    what: format!("compiled modules with `{}`", short(&text(function, src))),
                    line,
                    names: Endangers::Any,
                }));
            } else if is("fileinput.input") || is("fileinput.FileInput") {
                if matches!(argument(call, usize::MAX, "inplace", src), Arg::Absent) {
                    return Ok(None);
                }
                let files = values(argument(call, 0, "files", src));
                (short(&text(function, src)), files.into_iter().collect())
            } else if let Some(f) = resolved.iter().find_map(|r| r.strip_prefix("tempfile.")) {
                let at = match f {
                    "mkstemp" => 0,
                    "NamedTemporaryFile" => 4,
                    _ => return Ok(None),
                };
                let suffix = match argument(call, at, "suffix", src) {
                    Arg::Absent => return Ok(None),
                    Arg::Given(s) => plain_string(s, src),
                    Arg::Splat => None,
                };
                let value = suffix.map(|s| {
                    vec![PathValue {
                        text: s,
                        whole: false,
                        at_component: false,
                    }]
                });
                (
                    format!("tempfile.{f}"),
                    vec![(value, "a temporary file".to_owned())],
                )
            } else if archives && matches!(method.as_str(), "extract" | "extractall") {
                return Ok(Some(CodeWrite {
                    what: format!("an archive's files with `{}`", short(&text(function, src))),
                    line,
                    names: Endangers::Any,
                }));
            } else if matches!(method.as_str(), "write_text" | "write_bytes" | "open") {
                let Some(object) = object else {
                    return Ok(None);
                };
                if method == "open" {
                    let path = paths.is_path(object) || paths.is_path_class(object);
                    if !writes_mode(argument(call, 0, "mode", src), src, !path) {
                        return Ok(None);
                    }
                }
                let target = (paths.values(object), short(&text(object, src)));
                (format!(".{method}"), vec![target])
            } else {
                return Ok(None);
            };
        let mut endangers: Option<Endangers> = None;
        let mut what = String::new();
        for (values, written) in targets {
            let found = match &values {
                None => Some(Endangers::Any),
                Some(values) => {
                    let mut found = None;
                    for v in values {
                        if let Some(e) = classify(v, &written, &api, line)? {
                            found = Some(merge(found, e));
                        }
                    }
                    found
                }
            };
            if let Some(found) = found {
                if what.is_empty() {
                    what = match values.as_deref() {
                        None => format!(
                            "{written} (a name the audit cannot read) with `{api}`",
                            written = quote_capped(&written)
                        ),
                        Some([v]) => {
                            let shown = match (v.whole, v.at_component) {
                                (true, _) => v.text.clone(),
                                (false, true) => format!(".../{}", v.text),
                                (false, false) => format!("...{}", v.text),
                            };
                            if written.starts_with(['\'', '"']) && v.whole {
                                format!("{shown} with `{api}`", shown = quote_capped(&shown))
                            } else {
                                format!(
                                    "{written} ({shown}) with `{api}`",
                                    written = quote_capped(&written),
                                    shown = quote_capped(&shown)
                                )
                            }
                        }
                        Some(_) => {
                            format!("{written} with `{api}`", written = quote_capped(&written))
                        }
                    };
                }
                endangers = Some(merge(endangers, found));
            }
        }
        Ok(endangers.map(|names| CodeWrite { what, line, names }))
    }
}

/// Whether a mode argument writes. `strict`: only a literal mode counts (an unknown
/// object's `.open(x)` may take anything but a mode).
fn writes_mode(mode: Arg, src: &[u8], strict: bool) -> bool {
    match mode {
        Arg::Absent => false,
        Arg::Splat => !strict,
        Arg::Given(m) => match plain_string(m, src) {
            Some(m) => {
                let mode_like = !m.is_empty() && m.chars().all(|c| "rwxabtU+".contains(c));
                mode_like && m.chars().any(|c| "wax+".contains(c))
            }
            None => !strict,
        },
    }
}

/// Whether one written path is code: `Ok(None)` when it is not, `Err` when it is refused
/// outright.
fn classify(
    v: &PathValue,
    written: &str,
    api: &str,
    line: usize,
) -> Result<Option<Endangers>, Refusal> {
    let (name, whole_name) = match v.file_name() {
        Some(name) => (name, true),
        None => (v.text.as_str(), false),
    };
    let Some((stem, ext)) = name.rsplit_once('.') else {
        // No extension: not importable when the name is known, anything when it is not.
        return Ok((!whole_name).then_some(Endangers::Any));
    };
    if !CODE_EXTENSIONS.contains(&ext) {
        return Ok(None);
    }
    let stem = stem.split('.').next().unwrap_or(stem);
    if ext == "pth" {
        return Err(Refusal::at(
            line,
            format!(
                "the script writes {written} with `{api}`: a `.pth` file runs code at every later interpreter start, unaudited; it is refused",
                written = quote_capped(written)
            ),
        ));
    }
    if !whole_name || stem.is_empty() {
        return Ok(Some(Endangers::Any));
    }
    if STARTUP_MODULES.contains(&stem) {
        return Err(Refusal::at(
            line,
            format!(
                "the script writes {written} with `{api}`: `{stem}` runs at every later interpreter start, unaudited; it is refused",
                written = quote_capped(written)
            ),
        ));
    }
    let parts = v.components();
    if parts.len() == 1 && lists::STDLIB.contains(&stem) {
        return Err(Refusal::at(
            line,
            format!(
                "the script writes {written} with `{api}`, which would shadow the standard module `{stem}` for every later import; it is refused",
                written = quote_capped(written)
            ),
        ));
    }
    let mut names: Vec<String> = parts
        .iter()
        .map(|p| p.split('.').next().unwrap_or(p).to_owned())
        .filter(|n| !n.is_empty() && n != "__pycache__")
        .collect();
    if stem == "__init__" {
        names.retain(|n| n != "__init__");
        if names.is_empty() {
            // A package whose directory is not known.
            return Ok(Some(Endangers::Any));
        }
    }
    Ok(Some(Endangers::Names(names)))
}

fn merge(a: Option<Endangers>, b: Endangers) -> Endangers {
    match (a, b) {
        (Some(Endangers::Names(mut a)), Endangers::Names(b)) => {
            a.extend(b);
            Endangers::Names(a)
        }
        (None, b) => b,
        _ => Endangers::Any,
    }
}

fn summary(write: Option<CodeWrite>, loads: Vec<Site<Load>>) -> Summary {
    let (deferred, eager): (Vec<_>, Vec<_>) = loads.into_iter().partition(|l| l.nested);
    Summary {
        write,
        deferred: deferred.into_iter().map(|l| l.item).collect(),
        eager: eager.into_iter().map(|l| l.item).collect(),
    }
}

fn top(module: &str) -> &str {
    module.split('.').next().unwrap_or(module)
}

/// The dotted modules an import statement may load (`from a import b` may load `a.b`).
fn imported(node: Node, src: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor = node.walk();
    let names: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
    let dotted = |n: Node| match n.kind() {
        "aliased_import" => field_text(n, "name", src),
        _ => text(n, src),
    };
    match node.kind() {
        "import_statement" => out.extend(names.into_iter().map(dotted)),
        _ => {
            let module = field_text(node, "module_name", src);
            out.push(module.clone());
            out.extend(names.into_iter().map(|n| format!("{module}.{}", dotted(n))));
        }
    }
    out
}

fn site<T>(node: Node, item: T) -> Site<T> {
    let (nested, in_try) = context(node);
    Site {
        item,
        pos: node.start_byte(),
        nested,
        in_try,
    }
}

/// Whether `node` sits in a function, a lambda or a loop (so it may run more than once, or
/// later than its place in the source), and whether it sits in a `try`.
fn context(node: Node) -> (bool, bool) {
    let (mut nested, mut in_try) = (false, false);
    let mut at = node.parent();
    while let Some(n) = at {
        match n.kind() {
            "function_definition" | "lambda" | "for_statement" | "while_statement" => {
                nested = true;
            }
            "try_statement" => in_try = true,
            _ => {}
        }
        at = n.parent();
    }
    (nested, in_try)
}

/// `loader.loadTestsFromName(…)`, `.loadTestsFromNames(…)`, `.discover(…)`.
fn loads_by_name(call: Node, src: &[u8]) -> bool {
    call.child_by_field_name("function")
        .map(unparen)
        .filter(|f| f.kind() == "attribute")
        .is_some_and(|f| {
            matches!(
                field_text(f, "attribute", src).as_str(),
                "loadTestsFromName" | "loadTestsFromNames" | "discover"
            )
        })
}
