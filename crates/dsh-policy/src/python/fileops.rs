//! File operations judged by what they are called on and with, not by name alone:
//!
//! - **`pathlib` moves and mode changes.** `rename`, `replace` and `chmod` are ordinary
//!   names elsewhere (`"a".replace("a", "b")`, `df.rename(columns=…)`), so they are refused
//!   when the receiver is a path ([`Paths::is_path`]) or a path class (`Path.rename(p, q)`).
//!   On a receiver of unknown type they are refused only when the script uses `pathlib` and
//!   the call has `Path`'s shape: `.chmod(…)` always, `.rename(x)` / `.replace(x)` with one
//!   argument that is not a dict, list, set, tuple, number or constant (`str.replace` takes
//!   two; `DataFrame.replace({…})` a dict). A path from a library that the script never
//!   imports `pathlib` for (a pytest `tmp_path`, say) is not caught: a miss the module docs
//!   name. `symlink_to`, `hardlink_to`, `link_to` and `lchmod` are refused on any object
//!   ([`lists::PATH_ANYWHERE`]), and `unlink`/`rmdir` already were.
//! - **`os.open` with write flags**: `O_WRONLY`, `O_RDWR`, `O_CREAT`, `O_TRUNC`, `O_APPEND`,
//!   `O_TMPFILE` (as `os.O_*` or imported by name), a numeric literal with one of their bits
//!   (on Linux or macOS), or flags not written at the call (a variable) are refused: it
//!   creates files with any mode (an executable one) through a descriptor; `open()` does not.
//! - **The `shutil` copy family** (`copy`, `copy2`, `copyfile`, `copytree`, `copymode`,
//!   `copystat`): the destination must be a literal path inside the workspace (relative to
//!   the workspace root, where scripts run). Absolute paths outside, `~`, `expanduser`,
//!   anything computed is refused; without a workspace (`audit_source`), absolute paths and
//!   `..` escapes are. Used other than as a direct call, they and `os.open` are refused.

use dsh_core::{PathError, quote_capped};
use tree_sitter::Node;

use super::imports::resolve;
use super::paths::Paths;
use super::syntax::{Arg, argument, arguments, chain, field_text, is_field, short, text, unparen};
use super::{Auditor, Refusal, lists};

/// Path methods judged by their receiver, with what each does.
const PATH_CHANGES: &[(&str, &str)] = &[
    ("rename", "moves a file"),
    ("replace", "moves a file over another"),
    ("chmod", "changes a file's mode"),
];

/// The `shutil` functions whose destination is judged.
const COPY_FAMILY: &[&str] = &[
    "copy", "copy2", "copyfile", "copytree", "copymode", "copystat",
];

/// `os.open` flags that write, create or truncate.
const WRITE_FLAGS: &[&str] = &[
    "O_WRONLY",
    "O_RDWR",
    "O_CREAT",
    "O_TRUNC",
    "O_APPEND",
    "O_TMPFILE",
    "O_ACCMODE",
];

/// `os.open` flags that only change how a file is read.
const READ_FLAGS: &[&str] = &[
    "O_RDONLY",
    "O_CLOEXEC",
    "O_NONBLOCK",
    "O_NDELAY",
    "O_DIRECTORY",
    "O_NOFOLLOW",
    "O_NOCTTY",
    "O_BINARY",
    "O_TEXT",
    "O_NOATIME",
    "O_LARGEFILE",
    "O_PATH",
    "O_NOINHERIT",
    "O_SEQUENTIAL",
    "O_RANDOM",
    "O_DIRECT",
    "O_SYNC",
    "O_DSYNC",
    "O_RSYNC",
    "O_ASYNC",
    "O_EXCL",
    "O_SHLOCK",
    "O_EXLOCK",
];

/// The bits of the write flags on Linux (`O_WRONLY` 1, `O_RDWR` 2, `O_CREAT` 0o100,
/// `O_TRUNC` 0o1000, `O_APPEND` 0o2000, `O_TMPFILE` 0o20000000) and macOS (`O_APPEND` 8,
/// `O_CREAT` 0x200, `O_TRUNC` 0x400).
const WRITE_BITS: u64 = 1 | 2 | 8 | 0o100 | 0o1000 | 0o2000 | 0o20000000;

impl Auditor<'_> {
    /// `x.rename(…)`, `x.replace(…)`, `x.chmod(…)` on a path, and the link methods anywhere.
    pub(super) fn path_method(
        &self,
        node: Node,
        src: &[u8],
        paths: &Paths<'_, '_>,
    ) -> Result<(), Refusal> {
        let line = node.start_position().row + 1;
        let attr = field_text(node, "attribute", src);
        if let Some((_, does)) = lists::PATH_ANYWHERE.iter().find(|(n, _)| *n == attr) {
            return Err(Refusal::at(
                line,
                format!("`.{attr}` is refused on any object: it is `Path.{attr}`, which {does}"),
            ));
        }
        let Some((_, does)) = PATH_CHANGES.iter().find(|(n, _)| *n == attr) else {
            return Ok(());
        };
        let Some(object) = node.child_by_field_name("object") else {
            return Ok(());
        };
        let call = node
            .parent()
            .filter(|p| p.kind() == "call" && is_field(*p, "function", node));
        let written = short(&text(call.unwrap_or(node), src));
        if paths.is_path_class(object) || paths.is_path(object) {
            return Err(Refusal::at(
                line,
                format!(
                    "{written} is `Path.{attr}`, which {does}; it is refused",
                    written = quote_capped(&written)
                ),
            ));
        }
        let Some(call) = call else {
            return Ok(());
        };
        if !paths.uses_pathlib() || !self.may_be_path(object, src) {
            return Ok(());
        }
        let args = arguments(call);
        let shaped = match attr.as_str() {
            "chmod" => true,
            _ => match args.as_slice() {
                [a] => match a.kind() {
                    "keyword_argument" => field_text(*a, "name", src) == "target",
                    "list_splat" | "dictionary_splat" => true,
                    kind => !NOT_A_PATH.contains(&kind),
                },
                _ => args.iter().any(|a| a.kind() == "list_splat"),
            },
        };
        if shaped {
            return Err(Refusal::at(
                line,
                format!(
                    "{written} may be `Path.{attr}`, which {does}: the script uses `pathlib` and the audit cannot tell that `{}` is not a path; it is refused",
                    short(&text(object, src)),
                    written = quote_capped(&written)
                ),
            ));
        }
        Ok(())
    }

    /// Whether an object of unknown type may be a path: not a literal of another type, and
    /// not a module bound by `import` (`dataclasses.replace(obj)`).
    fn may_be_path(&self, object: Node, src: &[u8]) -> bool {
        let object = unparen(object);
        if NOT_A_PATH.contains(&object.kind())
            || matches!(object.kind(), "string" | "concatenated_string")
        {
            return false;
        }
        match chain(object, src).ok().flatten() {
            Some(names) if self.modules.contains(&names[0]) => resolve(&self.aliases, &names)
                .iter()
                .any(|r| r.starts_with("pathlib")),
            _ => true,
        }
    }

    /// `os.open(…)` flags and `shutil.copy*(…)` destinations.
    pub(super) fn file_call(
        &self,
        node: Node,
        src: &[u8],
        paths: &Paths<'_, '_>,
    ) -> Result<(), Refusal> {
        let line = node.start_position().row + 1;
        let Some(api) = node
            .child_by_field_name("function")
            .and_then(|f| self.judged_api(f, src))
        else {
            return Ok(());
        };
        if api == "os.open" {
            let why = match argument(node, 1, "flags", src) {
                Arg::Given(flags) => match self.write_flags(flags, src) {
                    Ok(()) => return Ok(()),
                    Err(why) => why,
                },
                Arg::Absent | Arg::Splat => "flags the audit cannot read".to_owned(),
            };
            return Err(Refusal::at(
                line,
                format!(
                    "`os.open` with {why} is refused: it creates or writes a file through a descriptor, with any mode it is given; use `open()`"
                ),
            ));
        }
        let dst = match argument(node, 1, "dst", src) {
            Arg::Given(dst) => dst,
            Arg::Absent | Arg::Splat => {
                return Err(Refusal::at(
                    line,
                    format!(
                        "`{api}` with a destination the audit cannot read is refused; name it with a literal path inside the workspace"
                    ),
                ));
            }
        };
        match self.destination(dst, src, paths) {
            None => Ok(()),
            Some(why) => Err(Refusal::at(
                line,
                format!(
                    "`{api}` {why}; it is refused (copy to a literal path inside the workspace)"
                ),
            )),
        }
    }

    /// `os.open` or a `shutil` copy used other than as a direct call (`f = shutil.copy`).
    pub(super) fn judged_value(&self, node: Node, src: &[u8]) -> Result<(), Refusal> {
        let Some(parent) = node.parent() else {
            return Ok(());
        };
        let skipped = match parent.kind() {
            "call" => is_field(parent, "function", node),
            "attribute" => is_field(parent, "attribute", node),
            "keyword_argument" => is_field(parent, "name", node),
            "dotted_name" | "aliased_import" | "import_statement" | "import_from_statement" => true,
            _ => false,
        };
        if skipped {
            return Ok(());
        }
        if let Some(api) = self.judged_api(node, src) {
            return Err(Refusal::at(
                node.start_position().row + 1,
                format!(
                    "`{api}` used other than as a direct call is refused: what it is called with cannot be judged"
                ),
            ));
        }
        Ok(())
    }

    /// `os.open` or `shutil.<copy>` when `node` (a name or a chain) stands for one.
    fn judged_api(&self, node: Node, src: &[u8]) -> Option<String> {
        let names = chain(unparen(node), src).ok().flatten()?;
        resolve(&self.aliases, &names).into_iter().find(|r| {
            r == "os.open"
                || r.strip_prefix("shutil.")
                    .is_some_and(|f| COPY_FAMILY.contains(&f))
        })
    }

    /// `Ok` when the flags only read; else which flag writes.
    fn write_flags(&self, flags: Node, src: &[u8]) -> Result<(), String> {
        let flags = unparen(flags);
        match flags.kind() {
            "binary_operator" => {
                let op = flags.child_by_field_name("operator").map(|o| o.kind());
                if !matches!(op, Some("|" | "+")) {
                    return Err(format!("the flags `{}`", short(&text(flags, src))));
                }
                for side in ["left", "right"] {
                    if let Some(s) = flags.child_by_field_name(side) {
                        self.write_flags(s, src)?;
                    }
                }
                Ok(())
            }
            "integer" => {
                let written = text(flags, src);
                match parse_int(&written) {
                    Some(v) if v & WRITE_BITS == 0 => Ok(()),
                    _ => Err(format!(
                        "the numeric flags {written} (they hold write, create or truncate bits)",
                        written = quote_capped(&written)
                    )),
                }
            }
            "identifier" | "attribute" => {
                let names = chain(flags, src).ok().flatten().unwrap_or_default();
                let flag = resolve(&self.aliases, &names)
                    .into_iter()
                    .find_map(|r| r.strip_prefix("os.").map(str::to_owned));
                match flag {
                    Some(f) if READ_FLAGS.contains(&f.as_str()) => Ok(()),
                    Some(f) if WRITE_FLAGS.contains(&f.as_str()) => Err(quote_capped(&f)),
                    Some(f) => Err(format!(
                        "the flag {f}, which the audit does not know",
                        f = quote_capped(&f)
                    )),
                    None => Err(format!(
                        "the flags `{}`, which are not written at the call",
                        short(&text(flags, src))
                    )),
                }
            }
            _ => Err(format!(
                "the flags `{}`, which are not written at the call",
                short(&text(flags, src))
            )),
        }
    }

    /// Why a copy's destination is refused, if it is.
    fn destination(&self, dst: Node, src: &[u8], paths: &Paths<'_, '_>) -> Option<String> {
        let written = short(&text(dst, src));
        let home = written.contains("expanduser") || written.contains("home()");
        let values = paths.values(dst).filter(|v| v.iter().all(|v| v.whole));
        let Some(values) = values else {
            return Some(if home {
                format!(
                    "to {written}, under `~`, outside the workspace",
                    written = quote_capped(&written)
                )
            } else {
                format!(
                    "to {written}, which is not a literal path, so where it writes cannot be told",
                    written = quote_capped(&written)
                )
            });
        };
        for v in values {
            let p = &v.text;
            if p.starts_with('~') {
                return Some(format!(
                    "to {p}, under `~`, outside the workspace",
                    p = quote_capped(p)
                ));
            }
            match self.root {
                Some(ws) => match ws.resolve(p) {
                    Ok(_) => {}
                    Err(PathError::Outside { .. }) => {
                        return Some(format!(
                            "to {p}, outside the workspace",
                            p = quote_capped(p)
                        ));
                    }
                    Err(e) => return Some(format!("to {p}: {e}", p = quote_capped(p))),
                },
                None if p.starts_with('/') => {
                    return Some(format!(
                        "to the absolute path {p}, which cannot be checked against a workspace here",
                        p = quote_capped(p)
                    ));
                }
                None if escapes(p) => {
                    return Some(format!(
                        "to {p}, outside the workspace",
                        p = quote_capped(p)
                    ));
                }
                None => {}
            }
        }
        None
    }
}

/// Literal kinds that are never a path (`df.replace({…})`, `x.replace(0)`).
const NOT_A_PATH: &[&str] = &[
    "dictionary",
    "list",
    "set",
    "tuple",
    "integer",
    "float",
    "true",
    "false",
    "none",
    "lambda",
    "dictionary_comprehension",
    "list_comprehension",
    "set_comprehension",
];

/// Whether a relative path climbs above where it starts (`a/../../b`).
fn escapes(path: &str) -> bool {
    let mut depth = 0usize;
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return true,
            },
            _ => depth += 1,
        }
    }
    false
}

/// A Python integer literal's value (`577`, `0o101`, `0x41`, `0b1`, `1_000`).
fn parse_int(literal: &str) -> Option<u64> {
    let s = literal.replace('_', "").to_ascii_lowercase();
    let (digits, radix) = match s.get(..2) {
        Some("0x") => (&s[2..], 16),
        Some("0o") => (&s[2..], 8),
        Some("0b") => (&s[2..], 2),
        _ => (s.as_str(), 10),
    };
    u64::from_str_radix(digits, radix).ok()
}
