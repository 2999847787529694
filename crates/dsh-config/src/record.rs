//! Recording a permission rule (the approval prompt's "always allow"): into a file's own
//! `[permissions]`, or into the user file's `[workspaces."<path>".permissions]`.

use std::path::{Path, PathBuf};

use toml_edit::{Array, Document, DocumentMut, InlineTable, Item, Table, Value};

use dsh_core::Decision;

use crate::config::{Origin, Rule};
use crate::error::{ConfigError, ErrorKind, line_of};
use crate::locate::{Seg, dotted, span_of};
use crate::read::read_optional;
use crate::trust::{canonical_workspace, write_atomically};

/// Which `permissions` table of the file [`record_rule`] writes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleScope {
    /// The file's own `[permissions]` (for a trusted workspace's project file).
    Permissions,
    /// `[workspaces."<path>".permissions]` (for the user file): applies only when the
    /// loaded workspace is exactly this directory. The path is canonicalized (it must
    /// exist).
    Workspace(PathBuf),
}

/// What [`record_rule`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRule {
    /// The file written (symlinks resolved), or that already held the rule.
    pub file: PathBuf,
    /// The entry's dotted key, as [`Origin::key`] will name it on the next load:
    /// `permissions.allow[2]`, `workspaces."/repo".permissions.allow[0]`.
    pub key: String,
    /// The entry's line, as [`Origin::line`] will name it on the next load.
    pub line: Option<usize>,
    /// False when the rule was already there (the file was left untouched).
    pub added: bool,
}

/// Adds `rule` to the `kind` list of `scope` in the config file `file`, keeping the rest
/// of the file — comments, formatting, order — byte for byte. The rule is checked with the
/// rule grammar ([`Rule::parse`]) before anything is read or written. Creates the file and
/// its parent directories when missing; does nothing when an equal rule is already listed
/// (`added: false`); refuses, naming file, line and key, when a table or list on the way
/// exists with another type. Writes like [`record_trust`](crate::record_trust): through a
/// temporary file and a rename, following a symlinked `file`.
pub fn record_rule(
    file: &Path,
    scope: RuleScope,
    kind: Decision,
    rule: &str,
) -> Result<RecordedRule, ConfigError> {
    let target = match std::fs::canonicalize(file) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => file.to_path_buf(),
        Err(e) => return Err(ConfigError::io(file, "cannot resolve", &e)),
    };
    let mut path = Vec::new();
    if let RuleScope::Workspace(ws) = &scope {
        let ws = canonical_workspace(ws)?;
        let Some(name) = ws.to_str() else {
            return Err(ConfigError::new(
                ErrorKind::Trust,
                format!(
                    "workspace {} is not valid UTF-8 and cannot be written to TOML",
                    ws.display()
                ),
            ));
        };
        path.extend([Seg::from("workspaces"), Seg::from(name)]);
    }
    path.extend([Seg::from("permissions"), Seg::from(kind.as_str())]);
    let wanted = Rule::parse(kind, rule, Origin::builtin()).map_err(|why| {
        ConfigError::new(
            ErrorKind::InvalidValue,
            format!("{rule:?} is not a rule: {why}"),
        )
        .in_file(&target)
        .with_key(dotted(&path))
    })?;

    let text = read_optional(&target)?.unwrap_or_default();
    let syntax = |e: toml_edit::TomlError| {
        ConfigError::new(
            ErrorKind::Syntax,
            format!("invalid TOML: {}", e.message().trim()),
        )
        .in_file(&target)
        .at_line(e.span().map(|s| line_of(&text, s.start)))
    };
    let spans = Document::parse(text.as_str()).map_err(syntax)?;
    let mut doc: DocumentMut = text.parse().map_err(syntax)?;
    let wrong_type = |upto: usize, expected: &str, found: &str| {
        let at = &path[..upto];
        ConfigError::new(
            ErrorKind::InvalidValue,
            format!("expected {expected}, found {found}: cannot record {rule:?} here"),
        )
        .in_file(&target)
        .at_line(span_of(&spans, at).map(|s| line_of(&text, s.start)))
        .with_key(dotted(at))
    };

    // A new section gets a blank line before its header.
    let spaced = !text.is_empty() && !text.ends_with("\n\n");
    let (tables, list_key) = path.split_at(path.len() - 1);
    let mut node = Node::Table(doc.as_table_mut());
    for (i, seg) in tables.iter().enumerate() {
        let Seg::Key(key) = seg else { continue };
        // `workspaces` and `workspaces."<path>"` exist only to hold what is below them.
        let implicit = i + 1 < tables.len();
        node = node
            .child(key, implicit, spaced)
            .map_err(|found| wrong_type(i + 1, "a table", found))?;
    }
    let Some(Seg::Key(list_key)) = list_key.first() else {
        return Err(wrong_type(path.len(), "a list", "nothing"));
    };
    let list = node
        .list(list_key)
        .map_err(|found| wrong_type(path.len(), "an array of rules", found))?;

    let same = |v: &Value| {
        v.as_str()
            .and_then(|s| Rule::parse(kind, s, Origin::builtin()).ok())
            .is_some_and(|r| r.tool == wanted.tool && r.specifier == wanted.specifier)
    };
    if let Some(i) = list.iter().position(same) {
        path.push(Seg::Index(i));
        return Ok(RecordedRule {
            file: target,
            key: dotted(&path),
            line: span_of(&spans, &path).map(|s| line_of(&text, s.start)),
            added: false,
        });
    }
    path.push(Seg::Index(list.len()));
    list.push(rule);

    let out = doc.to_string();
    // Never write a file the next load could not read back.
    if let Err(e) = out.parse::<toml::Table>() {
        return Err(ConfigError::new(
            ErrorKind::Syntax,
            format!("recording {rule:?} would make the file invalid TOML: {e}"),
        )
        .in_file(&target));
    }
    write_atomically(&target, out.as_bytes())?;
    let line = Document::parse(out.as_str())
        .ok()
        .and_then(|written| span_of(&written, &path))
        .map(|s| line_of(&out, s.start));
    Ok(RecordedRule {
        file: target,
        key: dotted(&path),
        line,
        added: true,
    })
}

/// A table being descended: a `[header]`/dotted one, or an inline `{ … }` one (whose
/// children must be inline too).
enum Node<'a> {
    Table(&'a mut Table),
    Inline(&'a mut InlineTable),
}

impl<'a> Node<'a> {
    /// The table under `key`, created when missing; `Err(type name)` when `key` holds
    /// something else.
    fn child(self, key: &str, implicit: bool, spaced: bool) -> Result<Node<'a>, &'static str> {
        match self {
            Node::Table(t) => {
                let item = t.entry(key).or_insert_with(|| {
                    let mut table = Table::new();
                    table.set_implicit(implicit);
                    if spaced && !implicit {
                        table.decor_mut().set_prefix("\n");
                    }
                    Item::Table(table)
                });
                match item {
                    Item::Table(t) => Ok(Node::Table(t)),
                    Item::Value(Value::InlineTable(t)) => Ok(Node::Inline(t)),
                    other => Err(other.type_name()),
                }
            }
            Node::Inline(t) => match inline_entry(t, key, Value::InlineTable(InlineTable::new())) {
                Value::InlineTable(t) => Ok(Node::Inline(t)),
                other => Err(other.type_name()),
            },
        }
    }

    /// The array under `key`, created empty when missing.
    fn list(self, key: &str) -> Result<&'a mut Array, &'static str> {
        let value = match self {
            Node::Table(t) => {
                let item = t
                    .entry(key)
                    .or_insert(Item::Value(Value::Array(Array::new())));
                match item {
                    Item::Value(v) => v,
                    other => return Err(other.type_name()),
                }
            }
            Node::Inline(t) => inline_entry(t, key, Value::Array(Array::new())),
        };
        match value {
            Value::Array(a) => Ok(a),
            other => Err(other.type_name()),
        }
    }
}

/// `table[key]`, inserting `new` when missing, as the last entry and taking over the
/// spacing that closed the table (`{ a = 1 }` → `{ a = 1, b = 2 }`, not `{ a = 1 , b = 2 }`).
fn inline_entry<'t>(table: &'t mut InlineTable, key: &str, mut new: Value) -> &'t mut Value {
    if !table.contains_key(key) {
        if let Some((_, last)) = table.iter_mut().last() {
            let suffix = last.decor().suffix().cloned();
            last.decor_mut().set_suffix("");
            if let Some(suffix) = suffix {
                new.decor_mut().set_suffix(suffix);
            }
        }
        new.decor_mut().set_prefix(" ");
        table.insert(key, new);
    }
    table.entry(key).or_insert(Value::Array(Array::new()))
}
