//! `dsh mcp add` and `dsh mcp remove`: a `[mcp.servers.NAME]` table written into, or taken
//! out of, the user configuration file, the rest of the file — comments, formatting, order —
//! kept byte for byte, as "always allow" writes a rule. The file must load afterwards as it
//! did, with the server's table as the loader reads it; otherwise nothing is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, Value};

use crate::error::{ConfigError, ErrorKind, line_of};
use crate::trust::{open_for_edit, write_atomically};

/// A server as `dsh mcp add` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewMcpServer {
    /// `command`, `args`, `env`.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    /// `url`, `headers_env` (header → the variable holding its value).
    Http {
        url: String,
        headers_env: BTreeMap<String, String>,
    },
}

/// Adds `[mcp.servers.NAME]` to the configuration file `file` (created when missing,
/// symlinks followed). Refuses a name already configured there, naming its line. Returns the
/// file written and the line of the new table.
pub fn add_mcp_server(
    file: &Path,
    name: &str,
    server: &NewMcpServer,
) -> Result<(PathBuf, usize), ConfigError> {
    let (target, text, mut doc) = open_for_edit(file)?;
    let key = format!("mcp.servers.{name}");
    if let Some(why) = crate::file::mcp_server_name_error(name) {
        return Err(ConfigError::new(ErrorKind::InvalidValue, why)
            .in_file(&target)
            .with_key(&key));
    }
    let servers = servers_table(&mut doc, &target)?;
    if servers.contains_key(name) {
        let line = text
            .find(&format!("[mcp.servers.{name}]"))
            .map(|at| line_of(&text, at));
        return Err(ConfigError::new(
            ErrorKind::InvalidValue,
            format!("a server named {name} is configured already (`dsh mcp remove {name}` first)"),
        )
        .in_file(&target)
        .at_line(line)
        .with_key(&key));
    }
    let mut table = Table::new();
    match server {
        NewMcpServer::Stdio { command, args, env } => {
            table.insert("command", Item::Value(command.as_str().into()));
            if !args.is_empty() {
                table.insert(
                    "args",
                    Item::Value(Value::Array(args.iter().collect::<Array>())),
                );
            }
            if !env.is_empty() {
                table.insert("env", Item::Value(Value::InlineTable(inline(env))));
            }
        }
        NewMcpServer::Http { url, headers_env } => {
            table.insert("url", Item::Value(url.as_str().into()));
            if !headers_env.is_empty() {
                table.insert(
                    "headers_env",
                    Item::Value(Value::InlineTable(inline(headers_env))),
                );
            }
        }
    }
    // A new section gets a blank line before its header.
    if !text.is_empty() {
        let before = if text.ends_with("\n\n") { "" } else { "\n" };
        table.decor_mut().set_prefix(before);
    }
    servers.insert(name, Item::Table(table));
    let written = doc.to_string();
    check(&target, &written)?;
    write_atomically(&target, written.as_bytes())?;
    let line = written
        .find(&format!("[mcp.servers.{name}]"))
        .map_or(1, |at| line_of(&written, at));
    Ok((target, line))
}

/// Takes `[mcp.servers.NAME]` out of `file`. Returns the file, and `false` when it had no
/// such server (nothing written).
pub fn remove_mcp_server(file: &Path, name: &str) -> Result<(PathBuf, bool), ConfigError> {
    let (target, text, mut doc) = open_for_edit(file)?;
    if text.is_empty() {
        return Ok((target, false));
    }
    let servers = servers_table(&mut doc, &target)?;
    if servers.remove(name).is_none() {
        return Ok((target, false));
    }
    let written = doc.to_string();
    check(&target, &written)?;
    write_atomically(&target, written.as_bytes())?;
    Ok((target, true))
}

fn inline(map: &BTreeMap<String, String>) -> InlineTable {
    let mut t = InlineTable::new();
    for (k, v) in map {
        t.insert(k, v.as_str().into());
    }
    t
}

/// `[mcp.servers]`, made (implicit: only its entries get headers) when missing.
fn servers_table<'a>(
    doc: &'a mut DocumentMut,
    target: &Path,
) -> Result<&'a mut Table, ConfigError> {
    let wrong = |key: &str| {
        ConfigError::new(ErrorKind::InvalidValue, "expected a table")
            .in_file(target)
            .with_key(key)
    };
    let mcp = doc
        .entry("mcp")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| wrong("mcp"))?;
    mcp.entry("servers")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| wrong("mcp.servers"))
}

/// The written text must still be a configuration the loader accepts.
fn check(target: &Path, text: &str) -> Result<(), ConfigError> {
    crate::file::parse_part(target, text, crate::config::Layer::User).map(|_| ())
}

/// Records a person's approval of a project command (its [`crate::approval_digest`]) in the
/// user file's `[trust] approved`, with `note` — what was approved, in words — as the
/// entry's comment. Nothing is written when the digest is there already.
pub fn record_approval(file: &Path, digest: &str, note: &str) -> Result<PathBuf, ConfigError> {
    let (target, _, mut doc) = open_for_edit(file)?;
    let trust = doc
        .entry("trust")
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_like_mut()
        .ok_or_else(|| {
            ConfigError::new(ErrorKind::Trust, "expected a table")
                .in_file(&target)
                .with_key("trust")
        })?;
    let list = trust
        .entry("approved")
        .or_insert(Item::Value(Value::Array(Array::new())))
        .as_array_mut()
        .ok_or_else(|| {
            ConfigError::new(ErrorKind::Trust, "expected an array of digests")
                .in_file(&target)
                .with_key("trust.approved")
        })?;
    if list.iter().any(|v| v.as_str() == Some(digest)) {
        return Ok(target);
    }
    let note: String = note.chars().filter(|c| !c.is_control()).collect();
    let mut entry = Value::from(digest);
    entry.decor_mut().set_prefix(format!("\n  # {note}\n  "));
    list.push_formatted(entry);
    list.set_trailing("\n");
    list.set_trailing_comma(true);
    let written = doc.to_string();
    check(&target, &written)?;
    write_atomically(&target, written.as_bytes())?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_keeps_the_file_and_remove_takes_only_the_server() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        let before = "# my settings\n[permissions]\nallow = [\"read_file\"]  # reads\n";
        std::fs::write(&file, before).unwrap();
        let server = NewMcpServer::Stdio {
            command: "uvx".into(),
            args: vec!["mcp-server-git".into()],
            env: [("A".to_owned(), "1".to_owned())].into(),
        };
        let (_, line) = add_mcp_server(&file, "git", &server).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with(before), "{text}");
        assert_eq!(
            &text[before.len()..],
            "\n[mcp.servers.git]\ncommand = \"uvx\"\nargs = [\"mcp-server-git\"]\nenv = { A = \"1\" }\n"
        );
        assert_eq!(line, 5);
        let e = add_mcp_server(&file, "git", &server)
            .unwrap_err()
            .to_string();
        assert!(e.contains("configured already") && e.contains(":5"), "{e}");
        let e = add_mcp_server(&file, "a__b", &server)
            .unwrap_err()
            .to_string();
        assert!(e.contains("__"), "{e}");
        let http = NewMcpServer::Http {
            url: "https://example.invalid/mcp".into(),
            headers_env: [("Authorization".to_owned(), "MY_TOKEN".to_owned())].into(),
        };
        add_mcp_server(&file, "remote", &http).unwrap();
        assert!(remove_mcp_server(&file, "git").unwrap().1);
        assert!(!remove_mcp_server(&file, "git").unwrap().1);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with(before));
        assert!(!text.contains("[mcp.servers.git]"));
        assert!(text.contains("[mcp.servers.remote]\nurl = \"https://example.invalid/mcp\"\nheaders_env = { Authorization = \"MY_TOKEN\" }\n"), "{text}");
    }
}
