//! The MCP servers a client hands a session (`session/new`, `session/load`): the editor's
//! user configured them, so they start without dsh's approval — but their tools are gated
//! like any MCP tool (they ask unless a rule allows them), and a stdio server gets the
//! command environment's allowlist with its own variables over it, never dsh's keys (the
//! session adds the allowlist, `dsh_agent::SessionSettings::add_client_servers`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use agent_client_protocol::v1::schema::McpServer;
use dsh_config::defaults;

/// The longest server name kept (its tools are `mcp__NAME__TOOL`, at most 64 characters).
const NAME_MAX: usize = 24;

/// The client's servers as sessions take them, and those that cannot start (with why).
pub(crate) fn servers(given: Vec<McpServer>) -> (Vec<dsh_mcp::ServerSpec>, Vec<dsh_mcp::Skipped>) {
    let mut specs: Vec<dsh_mcp::ServerSpec> = Vec::new();
    let mut skipped = Vec::new();
    for server in given {
        let (given_name, launch) = match server {
            McpServer::Stdio(s) => (
                s.name,
                dsh_mcp::Launch::Stdio {
                    program: s.command.to_string_lossy().into_owned(),
                    args: s.args,
                    env: s
                        .env
                        .into_iter()
                        .map(|v| (OsString::from(v.name), OsString::from(v.value)))
                        .collect(),
                    // Decided by the session: the workspace when it is trusted, else the
                    // session's private directory (a launcher loads code from its working
                    // directory, and a cloned repository could plant it there).
                    cwd: PathBuf::new(),
                },
            ),
            McpServer::Http(s) => (
                s.name,
                dsh_mcp::Launch::Http {
                    url: s.url,
                    headers: s
                        .headers
                        .into_iter()
                        .map(|h| dsh_mcp::Header {
                            name: h.name,
                            value: h.value,
                        })
                        .collect(),
                },
            ),
            McpServer::Sse(s) => {
                skipped.push(dsh_mcp::Skipped {
                    name: plain_name(&s.name),
                    launch: s.url,
                    why: "the client's server speaks the SSE transport, which dsh does not (stdio and streamable HTTP only)".to_owned(),
                });
                continue;
            }
            _ => continue,
        };
        let mut name = plain_name(&given_name);
        if specs.iter().any(|s| s.name == name) {
            let base = name.clone();
            let mut n = 2;
            while specs.iter().any(|s| s.name == name) {
                name = format!("{base}-{n}");
                n += 1;
            }
        }
        specs.push(dsh_mcp::ServerSpec {
            name,
            launch,
            startup_timeout: Duration::from_secs(defaults::MCP_STARTUP_TIMEOUT_S),
            call_timeout: Duration::from_secs(defaults::MCP_TIMEOUT_S),
            max_restarts: defaults::MCP_MAX_RESTARTS,
        });
    }
    (specs, skipped)
}

/// A server name as tool names can carry it: `[A-Za-z0-9_-]`, no `__` (which separates
/// server and tool), at most [`NAME_MAX`] characters; `client` when nothing is left.
fn plain_name(given: &str) -> String {
    let mut out = String::new();
    for c in given.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
        if out.len() >= NAME_MAX {
            break;
        }
    }
    let out = out.trim_matches('_').to_owned();
    if out.is_empty() {
        "client".to_owned()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{EnvVariable, McpServerStdio};

    #[test]
    fn names_become_plain_and_unique() {
        assert_eq!(plain_name("git"), "git");
        assert_eq!(plain_name("My  Server.v2"), "My_Server_v2");
        assert_eq!(plain_name("a__b"), "a_b");
        assert_eq!(plain_name("__"), "client");
        assert_eq!(plain_name(&"x".repeat(100)).len(), NAME_MAX);
        let one = |name: &str| {
            McpServer::Stdio(
                McpServerStdio::new(name, "/bin/server").env(vec![EnvVariable::new("TOKEN", "t")]),
            )
        };
        let (specs, skipped) = servers(vec![one("fs"), one("fs"), one("f s")]);
        assert!(skipped.is_empty());
        let names: Vec<_> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fs", "fs-2", "f_s"]);
        match &specs[0].launch {
            dsh_mcp::Launch::Stdio { env, cwd, .. } => {
                assert_eq!(env, &[(OsString::from("TOKEN"), OsString::from("t"))]);
                assert!(cwd.as_os_str().is_empty());
            }
            dsh_mcp::Launch::Http { .. } => panic!("a stdio server"),
        }
    }
}
