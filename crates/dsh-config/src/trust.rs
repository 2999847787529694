//! Workspace trust: recorded in the user config only, matched by canonical path.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use toml_edit::{Array, DocumentMut, Item, Table, Value};

use crate::error::{ConfigError, ErrorKind, line_of};
use crate::read::read_optional;

/// The canonical form of a workspace path (symlinks resolved); an error naming the path
/// if it does not exist.
pub(crate) fn canonical_workspace(workspace: &Path) -> Result<PathBuf, ConfigError> {
    std::fs::canonicalize(workspace).map_err(|e| {
        ConfigError::new(
            ErrorKind::Trust,
            format!("workspace {}: {e}", workspace.display()),
        )
    })
}

/// True when `workspace` (already canonical) is one of `entries` — compared exactly,
/// and also after canonicalizing each entry (so a hand-written path through a symlink
/// still matches). Only exact directories are trusted, never their subdirectories.
pub(crate) fn is_trusted(workspace: &Path, entries: &[PathBuf]) -> bool {
    entries
        .iter()
        .any(|entry| names_workspace(entry, workspace))
}

/// True when the configured path `entry` names `workspace` (already canonical): equal,
/// or equal once canonicalized. Never a parent or a subdirectory.
pub(crate) fn names_workspace(entry: &Path, workspace: &Path) -> bool {
    entry == workspace || std::fs::canonicalize(entry).is_ok_and(|c| c == workspace)
}

/// Records `workspace` as trusted in the user config file `user_config`: adds its
/// canonical path to `[trust].workspaces`, keeping the rest of the file — comments,
/// formatting, order — as it was. Creates the file and its parent directories when
/// missing; does nothing when the path is already listed; writes through a temporary
/// file in the same directory and a rename, so a crash never leaves a half-written
/// config. When `user_config` is a symlink, the file it points to is updated.
pub fn record_trust(user_config: &Path, workspace: &Path) -> Result<(), ConfigError> {
    let workspace = canonical_workspace(workspace)?;
    let Some(entry) = workspace.to_str() else {
        return Err(ConfigError::new(
            ErrorKind::Trust,
            format!(
                "workspace {} is not valid UTF-8 and cannot be written to TOML",
                workspace.display()
            ),
        ));
    };
    let (target, _, mut doc) = open_for_edit(user_config)?;

    let not_table = |key: &str, what: &str| {
        ConfigError::new(ErrorKind::Trust, format!("expected {what}"))
            .in_file(&target)
            .with_key(key)
    };
    let trust = doc
        .entry("trust")
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_like_mut()
        .ok_or_else(|| not_table("trust", "a table"))?;
    let list = trust
        .entry("workspaces")
        .or_insert(Item::Value(Value::Array(Array::new())))
        .as_array_mut()
        .ok_or_else(|| not_table("trust.workspaces", "an array of paths"))?;
    if list.iter().any(|v| v.as_str() == Some(entry)) {
        return Ok(());
    }
    list.push(entry);

    write_atomically(&target, doc.to_string().as_bytes())
}

/// A configuration file to edit: its path (symlinks followed; a missing file is to be
/// created there), its text (empty when missing) and its document; a file that is not TOML
/// is an error naming its line.
pub(crate) fn open_for_edit(file: &Path) -> Result<(PathBuf, String, DocumentMut), ConfigError> {
    let target = match std::fs::canonicalize(file) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => file.to_path_buf(),
        Err(e) => return Err(ConfigError::io(file, "cannot resolve", &e)),
    };
    let text = read_optional(&target)?.unwrap_or_default();
    let doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        ConfigError::new(
            ErrorKind::Syntax,
            format!("invalid TOML: {}", e.message().trim()),
        )
        .in_file(&target)
        .at_line(e.span().map(|s| line_of(&text, s.start)))
    })?;
    Ok((target, text, doc))
}

pub(crate) fn write_atomically(target: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| ConfigError::io(&dir, "cannot create", &e))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".dsh-config-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|e| ConfigError::io(&dir, "cannot create a temporary file", &e))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| ConfigError::io(tmp.path(), "cannot write", &e))?;
    if let Ok(meta) = std::fs::metadata(target) {
        // Keep the user's permissions (the temporary file starts as 0600).
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(target)
        .map_err(|e| ConfigError::io(target, "cannot replace", &e.error))?;
    Ok(())
}
