//! dsh's MCP support (DESIGN §2: the only crate that names rmcp).
//!
//! **Client.** [`McpServers`] holds the session's configured servers ([`ServerSpec`]): it
//! starts them all at once in the background, each within its start-up timeout, and hands
//! their tools to the session as [`McpTool`]s — `mcp__SERVER__TOOL` — which the session
//! registers through its one registration point between steps ([`McpServers::tool_changes`]),
//! so a slow server never delays the first prompt and a tool list that changes never changes
//! in the middle of a batch. Every MCP tool passes the same pipeline as a built-in one: it
//! declares only that it hands the call to a service dsh does not confine, so it asks unless
//! a permission rule allows it, is refused in the read-only mode unless the server says it
//! only reads and a rule allows it, and is never lifted by `auto`. The servers' annotations
//! are shown, never trusted. Faults are results: a server that cannot start, dies mid-call,
//! hangs past its timeout or answers garbage gives a failure naming it, and a status line in
//! `/mcp` ([`McpServers::status`]); a dead stdio server is started again on the next call, a
//! bounded number of times. A stdio server's message longer than [`MAX_MESSAGE_BYTES`] ends
//! its connection (what dsh holds of one message is bounded), failing at once the call that
//! waited for it. A server's stderr goes to its log file, never to the terminal.
//!
//! **Server.** [`serve_stdio`] answers an MCP client with a [`ToolHost`]'s tools; dsh-cli's
//! `dsh mcp serve` wires the host to a session, so the calls pass its gates (`serve.rs`).

mod bound;
mod content;
/// For the fuzz targets only (`fuzz/`): not an API.
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod names;
mod process;
mod serve;
mod server;
mod spec;
mod tool;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

pub use bound::MAX_MESSAGE_BYTES;
pub use content::content_schema;
pub use names::{PREFIX, server_of, tool_name};
pub use serve::{HostFactory, HostResult, HostTool, ToolHost, serve_stdio};
pub use server::{Hints, Server, ServerStatus, State, ToolStatus};
pub use spec::{Header, Launch, ServerSpec};
pub use tool::McpTool;

/// A change to the session's tools, for it to apply between steps.
pub enum ToolChange {
    /// A tool to register.
    Add(Arc<McpTool>),
    /// A registered tool whose declaration changed: replace it.
    Replace(Arc<McpTool>),
}

impl std::fmt::Debug for ToolChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolChange::Add(t) => write!(f, "Add({t:?})"),
            ToolChange::Replace(t) => write!(f, "Replace({t:?})"),
        }
    }
}

/// A configured server that is not started, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub name: String,
    pub launch: String,
    pub why: String,
}

/// The session's MCP servers.
#[derive(Debug, Default)]
pub struct McpServers {
    servers: Vec<Arc<Server>>,
    skipped: Vec<Skipped>,
    /// The tools handed to the session: dsh name → (server, the catalog generation and the
    /// declaration it was built from).
    handed: Mutex<BTreeMap<String, (usize, String)>>,
    /// Each server's catalog generation last looked at: an unchanged list costs a step
    /// nothing.
    seen: Mutex<BTreeMap<usize, u64>>,
    started: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    was_started: std::sync::atomic::AtomicBool,
}

impl McpServers {
    /// The servers of `specs`, each logging its stderr to `log_dir/NAME.log`; `skipped` are
    /// configured but not to be started (shown in `/mcp` with their reason).
    pub fn new(specs: Vec<ServerSpec>, log_dir: PathBuf, skipped: Vec<Skipped>) -> Self {
        McpServers {
            servers: specs
                .into_iter()
                .map(|s| {
                    let log = log_dir.join(format!("{}.log", s.name));
                    Arc::new(Server::new(s, log))
                })
                .collect(),
            skipped,
            ..McpServers::default()
        }
    }

    /// Whether any server is configured (started or not).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.skipped.is_empty()
    }

    /// Starts every server at once, in the background (once; later calls do nothing). Needs
    /// a tokio runtime.
    pub fn start(&self) {
        if self
            .was_started
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        for s in &self.servers {
            let s = s.clone();
            started.push(tokio::spawn(async move { s.start().await }));
        }
    }

    /// Waits until every server is ready or has failed, each within its start-up timeout
    /// (starting them if nobody did).
    pub async fn wait_started(&self) {
        self.start();
        for h in self.take_started() {
            let _ = h.await;
        }
    }

    /// The tools to register or replace since the last time this was asked: those of the
    /// servers that became ready, and of those whose tool list changed.
    pub fn tool_changes(&self) -> Vec<ToolChange> {
        let mut handed = self.handed.lock().unwrap_or_else(PoisonError::into_inner);
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let mut changes = Vec::new();
        for (i, server) in self.servers.iter().enumerate() {
            let generation = server.generation();
            if seen.get(&i) == Some(&generation) {
                continue;
            }
            seen.insert(i, generation);
            let catalog = server.catalog();
            // The dsh names this pass gave out for this server, with the server's name for
            // each: two of its tools that map to one dsh name (`a.b`, `a_b`) — the first in
            // its list keeps it, the others are refused (never one replacing the other).
            let mut given: BTreeMap<String, String> = BTreeMap::new();
            for t in &catalog.tools {
                let Ok(name) = tool_name(server.name(), &t.name) else {
                    continue;
                };
                if let Some(first) = given.get(&name) {
                    if *first != *t.name {
                        server.refuse(
                            &t.name,
                            format!("its dsh name `{name}` is taken by its tool `{first}`"),
                        );
                    }
                    continue;
                }
                given.insert(name.clone(), t.name.to_string());
                let declared = serde_json::to_string(t).unwrap_or_default();
                match handed.get(&name) {
                    Some((owner, _)) if *owner != i => {
                        server.refuse(&t.name, format!("its dsh name `{name}` is taken"));
                    }
                    Some((_, before)) if *before == declared => {}
                    Some(_) => {
                        changes.push(ToolChange::Replace(Arc::new(McpTool::new(
                            server.clone(),
                            name.clone(),
                            t,
                        ))));
                        handed.insert(name, (i, declared));
                    }
                    None => {
                        changes.push(ToolChange::Add(Arc::new(McpTool::new(
                            server.clone(),
                            name.clone(),
                            t,
                        ))));
                        handed.insert(name, (i, declared));
                    }
                }
            }
        }
        changes
    }

    /// Records why the session refused to register a tool (an input or output schema it
    /// cannot use), for `/mcp`.
    pub fn refused(&self, tool: &str, why: String) {
        let Some(server) =
            server_of(tool).and_then(|s| self.servers.iter().find(|x| x.name() == s))
        else {
            return;
        };
        let remote = server
            .catalog()
            .tools
            .iter()
            .find(|t| tool_name(server.name(), &t.name).ok().as_deref() == Some(tool))
            .map(|t| t.name.to_string());
        if let Some(remote) = remote {
            server.refuse(&remote, why);
        }
    }

    /// Every configured server's state, in configuration order, then those not started.
    pub fn status(&self) -> Vec<ServerStatus> {
        let mut out: Vec<ServerStatus> = self.servers.iter().map(|s| s.status()).collect();
        out.extend(self.skipped.iter().map(|s| ServerStatus {
            name: s.name.clone(),
            launch: s.launch.clone(),
            state: State::Skipped,
            tools: Vec::new(),
            last_error: Some(s.why.clone()),
            restarts: 0,
            log: None,
        }));
        out
    }

    /// What the server of MCP tool `name` says of it, if it is one.
    pub fn hints(&self, name: &str) -> Option<Hints> {
        let server = self
            .servers
            .iter()
            .find(|s| Some(s.name()) == server_of(name))?;
        server.hints_of(name)
    }

    /// Kills every server's processes now, without waiting (the session is ending).
    pub fn stop_now(&self) {
        for h in self.take_started() {
            h.abort();
        }
        for s in &self.servers {
            s.stop_now();
        }
    }

    /// The start-up tasks not yet waited for.
    fn take_started(&self) -> Vec<tokio::task::JoinHandle<()>> {
        std::mem::take(&mut *self.started.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Stops every server at once: closes the connections, gives each process a moment to
    /// end on its own, and kills what is left.
    pub async fn shutdown(&self) {
        for h in self.take_started() {
            h.abort();
        }
        futures::future::join_all(self.servers.iter().map(|s| s.shutdown())).await;
    }
}
