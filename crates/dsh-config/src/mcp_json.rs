//! A project's `.mcp.json` — the file Claude Code and other harnesses read for a
//! repository's MCP servers — read beside `[mcp.servers]`: `{"mcpServers": {NAME: {"command",
//! "args", "env", "cwd"} | {"type": "http", "url", "headers"}}}`. Its servers are the
//! project's (they start only once a person approved each one: [`crate::approval_digest`]); from an
//! untrusted workspace they are ignored with the notice, like the project file's. `${VAR}` in
//! an `env` value or a header is read from dsh's environment when the server starts.
//! A server dsh cannot run (the SSE transport, a name its tools cannot carry) is left out
//! with a notice; a file that is not such JSON is an error naming it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::config::{Layer, McpLaunch, McpServer, Origin, Sourced};
use crate::error::ConfigError;
use crate::merge::Part;

/// The file's name, at the workspace root.
pub const MCP_JSON: &str = ".mcp.json";

#[derive(Deserialize)]
struct File {
    #[serde(rename = "mcpServers", default)]
    servers: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// The servers of `workspace`'s `.mcp.json` as a part of `layer` (the project's), with a
/// notice for each server left out; `None` when there is no such file.
pub(crate) fn read(
    workspace: &Path,
    layer: Layer,
    files: &mut Vec<std::path::PathBuf>,
    notices: &mut Vec<String>,
) -> Result<Option<Part>, ConfigError> {
    let path = workspace.join(MCP_JSON);
    let shape = r#"an MCP server list ({"mcpServers": {…}})"#;
    let Some((file, text)) = crate::read::read_json::<File>(&path, shape, files)? else {
        return Ok(None);
    };
    let mut part = Part::new(layer, path.display().to_string());
    for (name, e) in file.servers {
        let origin = Origin {
            layer,
            path: Some(path.clone()),
            line: text
                .find(&format!("\"{name}\""))
                .map(|at| crate::error::line_of(&text, at)),
            key: Some(format!("mcpServers.{name}")),
        };
        let leave_out =
            |why: String| format!("{}: server {name:?} left out: {why}", origin.location());
        if let Some(why) = crate::file::mcp_server_name_error(&name) {
            notices.push(leave_out(why));
            continue;
        }
        let launch = match (e.kind.as_deref(), e.command, e.url) {
            (None | Some("stdio"), Some(command), None) => McpLaunch::Stdio {
                command,
                args: e.args,
                env: e.env,
                cwd: e.cwd,
            },
            (None | Some("http" | "streamable-http"), None, Some(url)) => {
                if let Err(why) = crate::keys::check_url(&url) {
                    notices.push(leave_out(why));
                    continue;
                }
                McpLaunch::Http {
                    url,
                    headers_env: BTreeMap::new(),
                    headers: e.headers,
                }
            }
            (Some("sse"), ..) => {
                notices.push(leave_out(
                    "the SSE transport is not supported (streamable HTTP and stdio are)".into(),
                ));
                continue;
            }
            (kind, ..) => {
                notices.push(leave_out(format!(
                    "give a command (stdio) or a url (http){}",
                    kind.map(|k| format!("; type {k:?} is not known"))
                        .unwrap_or_default()
                )));
                continue;
            }
        };
        part.mcp.push((
            name,
            Sourced {
                value: McpServer {
                    launch,
                    startup_timeout_s: crate::defaults::MCP_STARTUP_TIMEOUT_S,
                    timeout_s: crate::defaults::MCP_TIMEOUT_S,
                },
                origin,
            },
        ));
    }
    Ok(Some(part))
}

/// The `${VAR}` names in `text`.
pub fn variables(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else { break };
        out.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    out
}

/// `text` with each `${VAR}` replaced by `VAR`'s value in `env`; `Err` names the first that is
/// not set.
pub fn expand(text: &str, env: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[i..]);
            return Ok(out);
        };
        let var = &after[..end];
        out.push_str(env.get(var).ok_or_else(|| var.to_owned())?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_found_and_expanded() {
        let env: BTreeMap<String, String> = [("T".to_owned(), "tok".to_owned())].into();
        assert_eq!(variables("Bearer ${T} ${U}"), ["T", "U"]);
        assert_eq!(expand("Bearer ${T}", &env).unwrap(), "Bearer tok");
        assert_eq!(expand("${U}", &env).unwrap_err(), "U");
        assert_eq!(expand("plain", &env).unwrap(), "plain");
    }
}
