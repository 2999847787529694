//! `/mcp` and the MCP column of `/tools`: what the session's servers are doing, read from the
//! runtime's session (no state of its own). Whatever a server supplied — tool names, its
//! errors, its log's last line — is shown with control characters made visible.

use dsh_agent::Session;
use dsh_mcp::{ServerStatus, State};

use super::style::Style;
use super::visible::visible;
use crate::words::plural;

/// The lines of `/mcp`.
pub(crate) fn lines(session: &Session, st: Style) -> Vec<String> {
    let statuses = session.mcp_status();
    if statuses.is_empty() {
        return vec![st.dim(
            "no MCP servers configured (add [mcp.servers.NAME] with command = … to your user config)",
        )];
    }
    let mut out = Vec::new();
    for s in &statuses {
        out.extend(server_lines(s, st));
    }
    out.push(st.dim(
        "MCP tools ask unless an allow rule names them (e.g. allow = [\"mcp__NAME__TOOL\"] or [\"mcp__NAME__*\"]); servers' resources and prompts are not offered yet",
    ));
    out
}

fn server_lines(s: &ServerStatus, st: Style) -> Vec<String> {
    let state = match s.state {
        State::Ready => st.green(s.state.as_str()),
        State::Starting => st.yellow(s.state.as_str()),
        State::Failed | State::Skipped => st.red(s.state.as_str()),
    };
    let offered = s.tools.iter().filter(|t| t.refused.is_none()).count();
    let mut head = format!(
        "{} {state}  {}",
        st.bold(&s.name),
        st.dim(&visible(&s.launch, false))
    );
    if s.state == State::Ready || offered > 0 {
        head.push_str(&format!("  {}", plural(offered, "tool")));
    }
    if s.restarts > 0 {
        head.push_str(&format!(
            "  (started again {})",
            plural(s.restarts as usize, "time")
        ));
    }
    let mut out = vec![head];
    for t in &s.tools {
        let name = t.name.as_deref().unwrap_or("-");
        let line = match (&t.refused, t.hints.describe()) {
            (Some(why), _) => format!(
                "  {} ({}): not offered: {}",
                visible(name, false),
                visible(&t.remote, false),
                visible(why, false)
            ),
            (None, Some(h)) => format!(
                "  {}  {}",
                visible(name, false),
                st.dim(&format!("says: {h}"))
            ),
            (None, None) => format!("  {}", visible(name, false)),
        };
        out.push(line);
    }
    if let Some(e) = &s.last_error {
        out.push(format!("  {} {}", st.red("last error:"), visible(e, false)));
    }
    if let Some(log) = &s.log {
        out.push(st.dim(&format!("  its stderr: {}", log.display())));
    }
    out
}

/// Where a tool of `/tools` comes from: built in, or an MCP server (with what it says of the
/// tool, which nothing trusts).
pub(crate) fn origin(session: &Session, tool: &str) -> String {
    match dsh_mcp::server_of(tool) {
        Some(server) => {
            let said = session
                .tool_hints(tool)
                .and_then(|h| h.describe())
                .map(|h| format!(" (says: {h})"))
                .unwrap_or_default();
            format!("MCP server {}{said}", visible(server, false))
        }
        None => "built-in".to_owned(),
    }
}

/// What an approval of MCP tool `tool` says of where it runs and what its server claims.
pub(crate) fn approval_line(session: &Session, tool: &str) -> Option<String> {
    let server = dsh_mcp::server_of(tool)?;
    let said = session
        .tool_hints(tool)
        .and_then(|h| h.describe())
        .map_or_else(
            || "it says nothing of what the tool does".to_owned(),
            |h| format!("it says the tool is {h} (its word, not checked)"),
        );
    Some(format!(
        "runs on MCP server {server}, outside dsh's sandbox; {said}"
    ))
}
