//! The Python audit (stage 3 of the shell policy): `python script.py` and `python -c CODE` are
//! parsed as Python with tree-sitter-python and refused when they reach a destructive or
//! opaque API, before they run.
//!
//! **What it is for.** The audit keeps a *trace*: a script that ran stays explainable from
//! the session's journal, because it cannot start other programs, delete or move files out
//! of sight, open sockets or run code built at run time. It is **not a sandbox**: Python can
//! do anything through a library the lists do not name (a third-party package's internals are
//! not audited), and the file can change between the last check and the moment Python opens
//! it. The OS sandbox of `run_shell` carries the security; the audit keeps what ran legible.
//!
//! **What is refused** (each with the line it was found on):
//! - source that does not parse (any ERROR or MISSING node), Python 2 `print`/`exec`
//!   statements, a source encoding other than UTF-8 (`# coding: unicode_escape` would make
//!   Python read different code than the audit did), a NUL byte, files over 1 MiB;
//! - any non-ASCII identifier: Python NFKC-normalizes identifiers (`ｅｖａｌ` and `𝐞𝐯𝐚𝐥`
//!   are `eval`), so instead of normalizing, the audit refuses them outright;
//! - importing a refused module (`lists::DENIED_MODULES`: `subprocess`, `socket`, `pty`,
//!   `ctypes`, `importlib`, `builtins`, `pickle`, `inspect`, `gc`, …), under any alias or as
//!   a submodule; a relative import; `from M import *` unless `M` is known to export nothing
//!   refused; an import of a local module (`X.py` or `X/` beside the script or in the
//!   workspace root) named like a standard one (a shadow), or a local package; other local
//!   modules are audited as part of the script;
//! - a refused attribute of a partially allowed module (`os.system`, `os.remove`, `os.exec*`,
//!   `os.chdir`, `os.link`, `os.symlink`, `shutil.rmtree`, `shutil.move`, `sys.modules`,
//!   `sys.path`, `asyncio.open_connection`, …), found through
//!   `import x as y`, `from x import y as z`, a private re-export (`tempfile._os.system`) or
//!   any chain of attributes from an imported name (`import http` then `http.client.…`
//!   reaches the refused `http.client`); using an imported module as a value (`m = os`,
//!   `f(json)`), since what happens to it next cannot be followed by name;
//! - method names that destroy, link, start processes or open connections on *any* object
//!   (`Path(p).unlink()`, `.rmdir`, `.symlink_to`, `.hardlink_to`, `.lchmod`, `x.system()`,
//!   `.rmtree`, `.Popen`, an event loop's `.create_connection`/`.create_server`/
//!   `.create_datagram_endpoint`/`.sock_connect`, logging's `SocketHandler`/`HTTPHandler`, …)
//!   and names that walk into interpreter internals (`__class__`, `__subclasses__`,
//!   `__globals__`, `__dict__`, `__builtins__`, frames, …). Network modules are refused at the
//!   import whichever way they are named (`socket`, `ssl`, `http.client`, `urllib.request`,
//!   `ftplib`, `smtplib`, `telnetlib`, `imaplib`, `poplib`, `xmlrpc`, …);
//! - `Path.rename`, `Path.replace` and `Path.chmod` on what is known to be a path, and on an
//!   object of unknown type called with `Path`'s shape in a script that uses `pathlib`; `os.open`
//!   with write, create or truncate flags; the `shutil` copy family to a destination that is
//!   not a literal path inside the workspace (see `fileops.rs` and, for what a path is,
//!   `paths.rs`);
//! - code written at run time, then loaded: writing a `.pth` file, `sitecustomize`, or a
//!   module named like a standard one; writing code (`.py`, `.pyc`, `.so`, …, or a file whose
//!   name the audit cannot read) and then importing, later in the source or from a function
//!   or a loop, a module that write may have made (see `writes.rs`);
//! - the builtins `eval`, `exec`, `compile`, `__import__`, `globals`, `locals`, `vars`,
//!   `breakpoint` wherever named (called, passed, used as a decorator or rebound: a top-level
//!   `def eval` is refused too, since its calls cannot be told from the builtin's); a method
//!   a class defines under such a name (`def eval(self)`) and attributes (`model.eval()`,
//!   `self.exec()`, `re.compile`) are not the builtin and pass; `os.exec*` stays refused
//!   through `os`; `getattr`/`setattr`/`delattr` unless called directly with a plain string
//!   literal that no list refuses;
//! - opaque calls: calling the result of a call or a subscript (`f()()`, `table[k]()`), or of
//!   any expression that is not a name, an attribute chain or a parenthesized lambda.
//!
//! **The command** (`command.rs`, hooked into the shell policy): `-c CODE` audits CODE (a literal
//! word; code computed at run time is refused); `SCRIPT [args]` resolves SCRIPT in the
//! workspace (outside, `~`, missing, a symlink out or a hard link: refused) and audits the
//! file; `-m MODULE` is refused (the module's code is not in the workspace to read — run
//! `pytest` or `pip`, which are on the confirm list, directly); `python` alone, `python -`,
//! `-i` and a heredoc (standard input) are refused; the flags `-u -B -E -s -S -I -O -q -b -d
//! -R -P` are accepted and any other refused; `-V`/`--help` run nothing. Interpreters are
//! recognised by name (`python`, `pythonX`, `pythonX.Y`, any directory): a copy or link under
//! another name is not audited, and with the default lists such a name is refused anyway.
//!
//! **Just before it runs** ([`PythonAuditGuard`], gate 3): after approval, the scripts the
//! line names are audited again on their current content, so a file changed since gate 1
//! (whose SHA-256 [`audit_file`] recorded) is judged on what it holds now. The window between
//! that check and Python opening the file remains, as do `__pycache__` entries forged to
//! match a source's stamp and `.pth`/`sitecustomize` files in a virtualenv: the audit keeps
//! the trace, the sandbox carries the security.
//!
//! `open()` is allowed, for reading and writing: what a script writes is the sandbox's
//! business (its writes are confined to the workspace), not the trace's — unless it writes
//! code that it then loads.
//!
//! **What the audit still misses** (it keeps a trace; the sandbox carries the security):
//! - a path the audit does not see as one: from a library or a fixture (`tmp_path`) in a
//!   script that never imports `pathlib`, in a container (`paths[0].rename(q)` is caught only
//!   through the unknown-receiver rule), or renamed through a library's own API; in a script
//!   that imports `pathlib`, the unknown-receiver rule refuses `series.rename("total")` too;
//! - writes by third-party libraries (`df.to_csv("helper.py")`), writes of a file whose name
//!   looks harmless but which a later program runs (`.git/hooks/…`, `conftest.py` for the
//!   next `pytest`, `.pth` files written under a computed name into a workspace virtualenv),
//!   and imports a library makes lazily (a library importing an optional dependency after the
//!   script wrote a module of that name, when the name was not known);
//! - `unittest.main()` loading tests named on the command line, and `xml.sax` fetching an
//!   external entity by URL; third-party network clients (`requests`, `httpx`, …);
//! - the over-blocking that soundness costs: an import placed after a function that writes
//!   a file of unknown name is refused even when the function runs later — import at the top.

mod fileops;
mod imports;
mod lists;
mod paths;
mod syntax;
mod writes;

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use dsh_core::{PathError, Workspace, quote_capped};
use sha2::{Digest, Sha256};
use tree_sitter::{Node, Parser};

use paths::Paths;
use syntax::{
    MAX_CHAIN, all_nodes, chain, field_text, is_field, plain_string, short, text, unparen,
};

/// Scripts bigger than this are refused.
pub const MAX_SCRIPT_BYTES: u64 = 1024 * 1024;
/// How deep local modules importing local modules are followed.
const MAX_LOCAL_DEPTH: usize = 4;
/// The prefix of every shell-policy reason that comes from the audit.
pub(crate) const TAG: &str = "python audit: ";

/// Why a script was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: String,
    /// 1-based line in the audited source (or the local module the reason names).
    pub line: Option<usize>,
}

impl Refusal {
    fn at(line: usize, reason: impl Into<String>) -> Self {
        Refusal {
            reason: reason.into(),
            line: Some(line),
        }
    }

    fn whole(reason: impl Into<String>) -> Self {
        Refusal {
            reason: reason.into(),
            line: None,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

/// A script that passed the audit: where it is and the SHA-256 of the content audited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditedFile {
    pub abs: PathBuf,
    /// Relative to the workspace root.
    pub rel: PathBuf,
    /// Lowercase hex.
    pub sha256: String,
}

/// Audits Python source on its own: no local module can be looked for.
pub fn audit_source(src: &str) -> Result<(), Refusal> {
    Auditor::new(&[], 0, &mut Shared::default())
        .audit(src)
        .map(drop)
}

/// Audits `python -c CODE` run in the workspace root (local modules are looked for there).
pub fn audit_code(ws: &Workspace, code: &str) -> Result<(), Refusal> {
    let dirs = [ws.root().to_path_buf()];
    let mut shared = Shared::default();
    let mut auditor = Auditor::new(&dirs, 0, &mut shared);
    // Copies are judged against the workspace; local modules stay refused for `-c`.
    auditor.root = Some(ws);
    auditor.audit(code).map(drop)
}

/// [`audit_code`] for code run in `dir` (absolute, inside the workspace), with the
/// directories `path` (`PYTHONPATH`) searched for local modules too.
pub fn audit_code_in(
    ws: &Workspace,
    dir: &Path,
    path: &[PathBuf],
    code: &str,
) -> Result<(), Refusal> {
    let mut dirs = vec![dir.to_path_buf()];
    dirs.extend(path.iter().cloned());
    let mut shared = Shared::default();
    let mut auditor = Auditor::new(&dirs, 0, &mut shared);
    auditor.root = Some(ws);
    auditor.audit(code).map(drop)
}

/// [`audit_file`], with the directories `path` (`PYTHONPATH`) searched for local modules too.
pub fn audit_file_in(
    ws: &Workspace,
    script: &str,
    path: &[PathBuf],
) -> Result<AuditedFile, Refusal> {
    audit_file_at(ws, script, path, 0, &mut Shared::default())
}

/// Audits the script `path` (relative to the workspace root, or absolute inside it): it
/// must exist, be a regular file inside the workspace, and pass [`audit_source`] with local
/// modules looked for beside it and in the workspace root.
pub fn audit_file(ws: &Workspace, path: &str) -> Result<AuditedFile, Refusal> {
    audit_file_at(ws, path, &[], 0, &mut Shared::default())
}

/// What the audits of one script and its local modules share.
#[derive(Default)]
struct Shared {
    /// Files audited or being audited.
    seen: HashSet<PathBuf>,
    /// What each audited local module writes and imports (see `writes.rs`).
    summaries: HashMap<PathBuf, writes::Summary>,
}

fn audit_file_at(
    ws: &Workspace,
    path: &str,
    extra: &[PathBuf],
    depth: usize,
    shared: &mut Shared,
) -> Result<AuditedFile, Refusal> {
    let (src, resolved, sha256) = read_script(ws, path)?;
    shared.seen.insert(resolved.abs.clone());
    let mut dirs = Vec::new();
    if let Some(parent) = resolved.abs.parent() {
        dirs.push(parent.to_path_buf());
    }
    for d in extra
        .iter()
        .chain(std::iter::once(&ws.root().to_path_buf()))
    {
        if !dirs.contains(d) {
            dirs.push(d.clone());
        }
    }
    let summary = Auditor::new(&dirs, depth, shared)
        .with_workspace(ws)
        .audit(&src)?;
    shared.summaries.insert(resolved.abs.clone(), summary);
    Ok(AuditedFile {
        abs: resolved.abs,
        rel: resolved.rel,
        sha256,
    })
}

fn read_script(
    ws: &Workspace,
    path: &str,
) -> Result<(String, dsh_core::ResolvedPath, String), Refusal> {
    let (file, resolved) = ws.open_read(path).map_err(|e| match e {
        PathError::NotFound { .. } => Refusal::whole(format!(
            "the script {path} does not exist, so it cannot be audited",
            path = quote_capped(path)
        )),
        other => Refusal::whole(format!("the script cannot be audited: {other}")),
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_SCRIPT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            Refusal::whole(format!(
                "the script {path} cannot be read: {e}",
                path = quote_capped(path)
            ))
        })?;
    if bytes.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(Refusal::whole(format!(
            "the script {path} is over {MAX_SCRIPT_BYTES} bytes; it is refused",
            path = quote_capped(path)
        )));
    }
    let sha256 = hex(&Sha256::digest(&bytes));
    let src = String::from_utf8(bytes).map_err(|_| {
        Refusal::whole(format!(
            "the script {path} is not UTF-8, so what Python reads may differ from what was audited",
            path = quote_capped(path)
        ))
    })?;
    Ok((src, resolved, sha256))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

struct Auditor<'a> {
    /// Where a local module would be found (script dir, workspace root).
    dirs: &'a [PathBuf],
    /// Set when auditing a file: its local modules are audited in it.
    ws: Option<&'a Workspace>,
    /// Where relative paths are resolved (copy destinations), when known.
    root: Option<&'a Workspace>,
    depth: usize,
    shared: &'a mut Shared,
    /// Name bound by an import → the dotted names it may stand for.
    aliases: HashMap<String, Vec<String>>,
    /// Names bound by `import` (always modules).
    modules: HashSet<String>,
    /// The import statement being read (its first byte).
    statement: usize,
    /// Local modules found, by top-level name.
    local_found: HashSet<String>,
    /// What the local modules an import statement (keyed by its first byte) loads write
    /// and import.
    locals: HashMap<usize, Vec<(String, writes::Summary)>>,
}

impl<'a> Auditor<'a> {
    fn new(dirs: &'a [PathBuf], depth: usize, shared: &'a mut Shared) -> Self {
        Auditor {
            dirs,
            ws: None,
            root: None,
            depth,
            shared,
            aliases: HashMap::new(),
            modules: HashSet::new(),
            statement: 0,
            local_found: HashSet::new(),
            locals: HashMap::new(),
        }
    }

    fn with_workspace(mut self, ws: &'a Workspace) -> Self {
        self.ws = Some(ws);
        self.root = Some(ws);
        self
    }

    fn audit(&mut self, src: &str) -> Result<writes::Summary, Refusal> {
        if src.contains('\0') {
            return Err(Refusal::whole("the source holds a NUL byte"));
        }
        if let Some((row, c)) = src.lines().enumerate().find_map(|(row, l)| {
            l.chars()
                .find(|&c| c.is_control() && !matches!(c, '\t' | '\r' | '\x0c'))
                .map(|c| (row, c))
        }) {
            return Err(Refusal::at(
                row + 1,
                format!(
                    "the source holds the control character U+{:04X}, which is refused",
                    u32::from(c)
                ),
            ));
        }
        // Python reads `\r\n` and a lone `\r` as line ends (tree-sitter would keep a lone `\r`
        // inside a comment, hiding the code after it): parse what Python reads.
        let normalized = src.replace("\r\n", "\n").replace('\r', "\n");
        let src = normalized.as_str();
        check_encoding(src)?;
        let mut parser = Parser::new();
        parser
            .set_language(&tree_sitter_python::LANGUAGE.into())
            .map_err(|e| Refusal::whole(format!("the Python grammar failed to load: {e}")))?;
        let tree = parser
            .parse(src, None)
            .ok_or_else(|| Refusal::whole("the Python parser gave up on the source"))?;
        let bytes = src.as_bytes();
        let nodes = all_nodes(tree.root_node());
        // Pass 1: the source parses, its identifiers are ASCII, its imports are acceptable.
        for &node in &nodes {
            let line = node.start_position().row + 1;
            if node.is_error() || node.is_missing() {
                return Err(Refusal::at(
                    line,
                    "the source does not parse as Python, so it cannot be audited",
                ));
            }
            match node.kind() {
                "print_statement" | "exec_statement" => {
                    return Err(Refusal::at(
                        line,
                        "Python 2 `print`/`exec` statement syntax is refused",
                    ));
                }
                kind if kind.contains("identifier") && !text(node, bytes).is_ascii() => {
                    return Err(Refusal::at(
                        line,
                        format!(
                            "the identifier {} is not ASCII; Python normalizes identifiers (NFKC), so non-ASCII ones are refused",
                            quote_capped(&text(node, bytes))
                        ),
                    ));
                }
                "import_statement" => self.import(node, bytes)?,
                "import_from_statement" => self.import_from(node, bytes)?,
                _ => {}
            }
        }
        // Pass 2: every name, attribute and call.
        let paths = Paths::new(&nodes, bytes, &self.aliases);
        for &node in &nodes {
            match node.kind() {
                "identifier" => {
                    self.identifier(node, bytes)?;
                    self.judged_value(node, bytes)?;
                }
                "attribute" => {
                    self.path_method(node, bytes, &paths)?;
                    self.attribute(node, bytes)?;
                    self.judged_value(node, bytes)?;
                }
                "call" => {
                    self.call(node, bytes)?;
                    self.file_call(node, bytes, &paths)?;
                }
                _ => {}
            }
        }
        // Pass 3: code written at run time, then loaded.
        self.writes_then_loads(&nodes, bytes, &paths)
    }

    /// A bare name (not an attribute's field, a keyword or part of an import).
    fn identifier(&self, node: Node, src: &[u8]) -> Result<(), Refusal> {
        let line = node.start_position().row + 1;
        let name = text(node, src);
        let parent = node.parent();
        let parent_kind = parent.map(|p| p.kind()).unwrap_or_default();
        if matches!(
            parent_kind,
            "dotted_name" | "aliased_import" | "import_statement" | "import_from_statement"
        ) {
            return Ok(());
        }
        if let Some(p) = parent {
            if p.kind() == "attribute" && is_field(p, "attribute", node) {
                // Judged with the attribute.
                return Ok(());
            }
            if p.kind() == "keyword_argument" && is_field(p, "name", node) {
                return Ok(());
            }
        }
        if lists::DENIED_BUILTINS.contains(&name.as_str()) {
            if defined_in_class(node) {
                // A class's own `eval` (a method, reached as `self.eval()`) is not the builtin.
                return Ok(());
            }
            return Err(Refusal::at(line, builtin_refused(&name, parent_kind)));
        }
        if lists::DENIED_INTERNALS.contains(&name.as_str()) {
            return Err(Refusal::at(
                line,
                format!("{name} is refused", name = quote_capped(&name)),
            ));
        }
        let callee = parent.is_some_and(|p| p.kind() == "call" && is_field(p, "function", node));
        if lists::ATTR_BUILTINS.contains(&name.as_str()) && !callee {
            return Err(Refusal::at(
                line,
                format!(
                    "{name} used other than as a direct call is refused",
                    name = quote_capped(&name)
                ),
            ));
        }
        let object_of_attribute =
            parent.is_some_and(|p| p.kind() == "attribute" && is_field(p, "object", node));
        if !object_of_attribute {
            if self.modules.contains(&name) {
                return Err(Refusal::at(
                    line,
                    format!(
                        "the module {name} is used as a value; only its attributes may be used, so what is done with it can be followed",
                        name = quote_capped(&name)
                    ),
                ));
            }
            for target in self.aliases.get(&name).into_iter().flatten() {
                let last = target.rsplit('.').next().unwrap_or(target);
                let last = last.trim_start_matches('_');
                if lists::partial(target).is_some()
                    || lists::partial(last).is_some()
                    || lists::module_denied(last)
                {
                    return Err(Refusal::at(
                        line,
                        format!(
                            "the module {target} is used as a value ({name}); only its attributes may be used, so what is done with it can be followed",
                            target = quote_capped(target),
                            name = quote_capped(&name)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// `a.b.c`: the name is refused anywhere, or the chain resolves to a refused attribute.
    fn attribute(&self, node: Node, src: &[u8]) -> Result<(), Refusal> {
        let line = node.start_position().row + 1;
        let attr = field_text(node, "attribute", src);
        let anywhere = || {
            if lists::name_denied_anywhere(&attr) {
                Err(Refusal::at(
                    line,
                    format!("`.{attr}` is refused on any object"),
                ))
            } else {
                Ok(())
            }
        };
        let Ok(chain) = chain(node, src) else {
            return Err(Refusal::at(
                line,
                format!("an attribute chain longer than {MAX_CHAIN} names is refused"),
            ));
        };
        let Some(chain) = chain else {
            return anywhere();
        };
        let mut candidates: Vec<Vec<String>> = Vec::new();
        let aliased = self.aliases.contains_key(&chain[0]);
        match self.aliases.get(&chain[0]) {
            Some(targets) => {
                for t in targets {
                    let mut c: Vec<String> = t.split('.').map(str::to_owned).collect();
                    c.extend(chain[1..].iter().cloned());
                    candidates.push(c);
                }
            }
            None => candidates.push(chain.clone()),
        }
        let written = chain.join(".");
        for c in candidates.iter().filter(|_| aliased) {
            // `import http` then `http.client`: a refused submodule reached by its parent.
            for k in 2..=c.len() {
                let prefix = c[..k].join(".");
                if lists::module_denied(&prefix) {
                    return Err(Refusal::at(
                        line,
                        format!(
                            "{written} reaches the refused module {prefix}",
                            written = quote_capped(&written),
                            prefix = quote_capped(&prefix)
                        ),
                    ));
                }
            }
        }
        for c in &candidates {
            // Any component that names a refused or partial module (`glob.os`, `tempfile._os`)
            // is judged as that module from there on.
            for i in 0..c.len() {
                // Past the root, modules are only recognised on an imported name: on any
                // other object `.code` or `.types` is an ordinary attribute.
                if i > 0 && !aliased {
                    break;
                }
                let comp = if i == 0 {
                    c[0].as_str()
                } else {
                    c[i].trim_start_matches('_')
                };
                let rest = &c[i + 1..];
                let dotted = std::iter::once(comp)
                    .chain(rest.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(".");
                if i > 0 && lists::module_denied(comp) {
                    return Err(Refusal::at(
                        line,
                        format!(
                            "{written} reaches the refused module {comp}",
                            written = quote_capped(&written),
                            comp = quote_capped(comp)
                        ),
                    ));
                }
                if i > 0 && lists::module_denied(&dotted) {
                    return Err(Refusal::at(
                        line,
                        format!(
                            "{written} reaches the refused module {dotted}",
                            written = quote_capped(&written),
                            dotted = quote_capped(&dotted)
                        ),
                    ));
                }
                if i + 1 < c.len() && lists::attr_denied(comp, &c[i + 1]) {
                    let reached = format!("{comp}.{}", c[i + 1]);
                    return Err(Refusal::at(
                        line,
                        if reached == written {
                            format!("{written} is refused", written = quote_capped(&written))
                        } else {
                            format!(
                                "{written} is refused (it is {reached})",
                                written = quote_capped(&written),
                                reached = quote_capped(&reached)
                            )
                        },
                    ));
                }
                if i > 0 && rest.is_empty() && lists::partial(comp).is_some() {
                    let value_use = node
                        .parent()
                        .is_none_or(|p| !(p.kind() == "attribute" && is_field(p, "object", node)));
                    if value_use {
                        return Err(Refusal::at(
                            line,
                            format!(
                                "{written} uses the module {comp} as a value",
                                written = quote_capped(&written),
                                comp = quote_capped(comp)
                            ),
                        ));
                    }
                }
            }
        }
        anywhere()
    }

    /// Calls: the callee must be nameable; `getattr` and friends need a literal name.
    fn call(&self, node: Node, src: &[u8]) -> Result<(), Refusal> {
        let line = node.start_position().row + 1;
        let Some(function) = node.child_by_field_name("function") else {
            return Err(Refusal::at(line, "a call the audit cannot read"));
        };
        let callee = unparen(function);
        match callee.kind() {
            "identifier" | "attribute" | "lambda" => {}
            "call" | "subscript" => {
                return Err(Refusal::at(
                    line,
                    format!(
                        "`{}` calls the result of an expression, which the audit cannot name",
                        short(&text(node, src))
                    ),
                ));
            }
            other => {
                return Err(Refusal::at(
                    line,
                    format!(
                        "`{}` calls a {other}, which the audit cannot name",
                        short(&text(node, src))
                    ),
                ));
            }
        }
        if callee.kind() == "identifier" {
            let name = text(callee, src);
            if lists::ATTR_BUILTINS.contains(&name.as_str()) {
                let args = node
                    .child_by_field_name("arguments")
                    .map(|a| {
                        let mut c = a.walk();
                        a.named_children(&mut c)
                            .filter(|n| n.kind() != "comment")
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default();
                let attr = args.get(1).and_then(|a| plain_string(*a, src));
                match attr {
                    Some(a) if !lists::literal_attr_denied(&a) && a.is_ascii() => {}
                    Some(a) => {
                        return Err(Refusal::at(
                            line,
                            format!(
                                "{name} with the name {a} is refused",
                                name = quote_capped(&name),
                                a = quote_capped(&a)
                            ),
                        ));
                    }
                    None => {
                        return Err(Refusal::at(
                            line,
                            format!(
                                "`{}`: {name} with a name that is not a plain string literal is refused",
                                short(&text(node, src)),
                                name = quote_capped(&name)
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether `name` is the name of a function defined directly in a class body (a method).
fn defined_in_class(name: Node) -> bool {
    let Some(def) = name
        .parent()
        .filter(|p| p.kind() == "function_definition" && is_field(*p, "name", name))
    else {
        return false;
    };
    let mut at = def.parent();
    if at.is_some_and(|p| p.kind() == "decorated_definition") {
        at = at.and_then(|p| p.parent());
    }
    at.filter(|b| b.kind() == "block")
        .and_then(|b| b.parent())
        .is_some_and(|c| c.kind() == "class_definition")
}

/// Why a refused builtin's name is refused where it appears.
fn builtin_refused(name: &str, parent_kind: &str) -> String {
    let why = match name {
        "eval" | "exec" | "compile" | "execfile" => "it runs code built at run time",
        "__import__" | "reload" | "help" => "it imports a module named at run time",
        "breakpoint" => "it starts a debugger",
        _ => "it reaches the interpreter's namespaces",
    };
    if parent_kind == "function_definition" {
        format!(
            "`def {name}` outside a class rebinds the builtin `{name}`, which the audit cannot tell apart from it ({why}); rename the function"
        )
    } else {
        format!(
            "the builtin {name} is refused: {why}",
            name = quote_capped(name)
        )
    }
}

/// `# coding: X` in the first two lines must name UTF-8.
fn check_encoding(src: &str) -> Result<(), Refusal> {
    for (i, line) in src.lines().take(2).enumerate() {
        let t = line.trim_start();
        if !t.starts_with('#') {
            continue;
        }
        let Some(at) = t
            .find("coding")
            .filter(|&at| t[at + 6..].starts_with(':') || t[at + 6..].starts_with('='))
        else {
            continue;
        };
        let name: String = t[at + 7..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect();
        let n = name.to_ascii_lowercase().replace('_', "-");
        if !matches!(n.as_str(), "utf-8" | "utf8") {
            return Err(Refusal::at(
                i + 1,
                format!(
                    "the source declares the encoding {name}; only UTF-8 is audited",
                    name = quote_capped(&name)
                ),
            ));
        }
    }
    Ok(())
}

mod command;
mod guard;

pub(crate) use command::{AuditOutcome, hidden_context, is_python, judge};
pub use guard::PythonAuditGuard;
