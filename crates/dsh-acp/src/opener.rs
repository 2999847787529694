//! How the ACP front end gets a session: it asks an [`Opener`] (dsh-cli's, which starts a
//! session exactly as `dsh` would in that directory: configuration, trust, provider,
//! journal, runtime) and drives the runtime it gets back. Nothing here decides what a
//! session may do.

use std::path::PathBuf;

use dsh_agent::{EventStream, Runtime};

/// What the client asked for: a new session (`session/new`) or a recorded one to go on
/// with (`session/load`).
#[derive(Debug)]
pub struct Open {
    /// The workspace: the client's `cwd` (an absolute path, as the protocol requires).
    pub cwd: PathBuf,
    /// The MCP servers the client hands the session (the editor's user configured them).
    pub mcp_servers: Vec<dsh_mcp::ServerSpec>,
    /// Those the client named that cannot be started, and why (shown in `/mcp`).
    pub mcp_skipped: Vec<dsh_mcp::Skipped>,
    /// `session/load`: the session id the client gave (any file of a resumed chain).
    pub resume: Option<String>,
    /// The client's name, for `session_start`.
    pub client: String,
}

/// A started session.
pub struct Opened {
    pub runtime: Runtime,
    pub stream: EventStream,
    /// For a loaded session: the conversation it goes on from, to replay to the client.
    pub history: Vec<dsh_model::Message>,
    /// What a person should know about the session (a resumed chain, a model that is not
    /// configured, calls cut off by the old process), one line each.
    pub notices: Vec<String>,
}

/// Starts sessions for the ACP front end.
pub trait Opener: Send + Sync {
    /// A session as `open` describes it, or why it could not start (shown to the client
    /// as the request's error).
    fn open(&self, open: Open) -> Result<Opened, String>;
}
