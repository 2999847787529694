//! The session's extensions: the configured MCP servers. They start in the background when
//! the runtime starts (or, for `dsh batch`, `check` and `replay`, before the first call), and
//! their tools join the registry through the one registration point at the start of a step,
//! never in the middle of a batch ([`Session::sync_tools`]).

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use crate::{Session, SessionSettings};

/// The session's servers: each stdio server's environment is the command environment's
/// allowlist (never dsh's API keys) with its configured variables over it; one without a
/// working directory (an untrusted workspace's) gets the session's private one; its stderr
/// goes to `DSH_HOME/logs/<session>/mcp/<server>.log`.
pub(crate) fn mcp_servers(
    settings: &SessionSettings,
    session: &str,
    temp_dir: &Path,
) -> dsh_mcp::McpServers {
    let base =
        dsh_tools::shell::env::command_env(std::env::vars_os(), &settings.shell.pass_env, temp_dir);
    let specs = settings
        .mcp
        .iter()
        .cloned()
        .map(|mut spec| {
            if let dsh_mcp::Launch::Stdio { env, cwd, .. } = &mut spec.launch {
                if cwd.as_os_str().is_empty() {
                    temp_dir.clone_into(cwd);
                }
                let own = std::mem::take(env);
                env.extend(
                    base.iter()
                        .filter(|(k, _)| !own.iter().any(|(o, _)| o == k))
                        .cloned(),
                );
                env.extend(own);
            }
            spec
        })
        .collect();
    let logs = settings.dsh_home.join("logs").join(session).join("mcp");
    dsh_mcp::McpServers::new(specs, logs, settings.mcp_skipped.clone())
}

/// `KEY=VALUE` pairs as an environment.
pub(crate) fn env_pairs<'a>(
    pairs: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<(OsString, OsString)> {
    pairs
        .into_iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}

impl SessionSettings {
    /// MCP servers a front end's client hands the session (an editor's, through `dsh acp`):
    /// the person configured them there, so they start without `dsh mcp approve` — their
    /// tools are still gated like any MCP tool's, and a stdio server still gets the command
    /// environment's allowlist under its own variables, never dsh's keys. A name a
    /// configured server has already stays the configured one's (the client's is skipped,
    /// saying so). A stdio server without a directory starts in `trusted_workspace` when
    /// the workspace is trusted, else in the session's private directory.
    pub fn add_client_servers(
        &mut self,
        servers: Vec<dsh_mcp::ServerSpec>,
        skipped: Vec<dsh_mcp::Skipped>,
        trusted_workspace: Option<&Path>,
    ) {
        for mut spec in servers {
            let taken = self.mcp.iter().any(|s| s.name == spec.name)
                || self.mcp_skipped.iter().any(|s| s.name == spec.name);
            if taken {
                self.mcp_skipped.push(dsh_mcp::Skipped {
                    name: spec.name.clone(),
                    launch: spec.launch.describe(),
                    why: "the client names a server the configuration names already: the configured one is used".to_owned(),
                });
                continue;
            }
            if let (dsh_mcp::Launch::Stdio { cwd, .. }, Some(ws)) =
                (&mut spec.launch, trusted_workspace)
                && cwd.as_os_str().is_empty()
            {
                ws.clone_into(cwd);
            }
            self.mcp.push(spec);
        }
        self.mcp_skipped.extend(skipped);
    }
}

impl Session {
    /// Starts the MCP servers in the background (once). Needs a tokio runtime.
    pub fn start_extensions(&self) {
        if self.mcp.is_empty() {
            return;
        }
        // The servers' TMPDIR.
        let _ = crate::assemble::create_private_dir(&self.temp_dir);
        self.mcp.start();
    }

    /// Starts the MCP servers if nobody did and waits until each is ready or has failed
    /// (each within its start-up timeout), then registers their tools: what `dsh batch`,
    /// `check` and `replay` do before the first call.
    pub async fn wait_for_extensions(&self) {
        if self.mcp.is_empty() {
            return;
        }
        self.start_extensions();
        self.mcp.wait_started().await;
        self.sync_tools();
    }

    /// Registers the tools of the servers that became ready and of those whose tool list
    /// changed since the last time (a tool the registry refuses — an unusable schema — is
    /// shown as refused in `/mcp`). Called between steps.
    pub fn sync_tools(&self) {
        for change in self.mcp.tool_changes() {
            let (tool, replace) = match change {
                dsh_mcp::ToolChange::Add(t) => (t, false),
                dsh_mcp::ToolChange::Replace(t) => (t, true),
            };
            let name = dsh_core::Tool::spec(tool.as_ref()).name;
            let tool: Arc<dyn dsh_core::Tool> = tool;
            let done = if replace {
                self.pipeline.replace(tool)
            } else {
                self.register_tool(tool)
            };
            if let Err(e) = done {
                self.mcp.refused(&name, e.to_string());
            }
        }
    }

    /// Every configured MCP server's state, for `/mcp`.
    pub fn mcp_status(&self) -> Vec<dsh_mcp::ServerStatus> {
        self.mcp.status()
    }

    /// What the MCP server of tool `name` says of it (never trusted), if it is an MCP tool.
    pub fn tool_hints(&self, name: &str) -> Option<dsh_mcp::Hints> {
        self.mcp.hints(name)
    }

    /// Stops the MCP servers at the session's end: their input closed, a moment to end on
    /// their own, then their process groups killed. [`Session::finish`] kills any still
    /// running at once.
    pub async fn close_extensions(&self) {
        self.mcp.shutdown().await;
    }

    /// Stops the MCP servers now (their process groups killed): the session is ending.
    pub fn stop_extensions(&self) {
        self.mcp.stop_now();
    }
}
