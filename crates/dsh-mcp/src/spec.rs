//! What one configured MCP server is, as the session hands it over: plain data, every value
//! already decided by configuration (dsh-agent's settings are its only reader).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// One server to connect to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// `[A-Za-z0-9_-]`, without `__`: its tools are `mcp__NAME__TOOL`.
    pub name: String,
    pub launch: Launch,
    /// How long starting it and listing its tools may take.
    pub startup_timeout: Duration,
    /// How long one of its tool calls may run (the pipeline's timeout for its tools).
    pub call_timeout: Duration,
    /// How many times it is started again after it died, in one session.
    pub max_restarts: u32,
}

/// How a server is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launch {
    /// A child process speaking MCP over its stdin and stdout.
    Stdio {
        program: String,
        args: Vec<String>,
        /// Its whole environment (dsh's own is not inherited): the command environment's
        /// allowlist and the server's configured variables.
        env: Vec<(OsString, OsString)>,
        /// Its working directory.
        cwd: PathBuf,
    },
    /// A streamable-HTTP endpoint, each request carrying `headers`.
    Http { url: String, headers: Vec<Header> },
}

/// An HTTP header sent to a server; its value (a token, typically) never shows in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub value: String,
}

impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: <{} bytes>", self.name, self.value.len())
    }
}

impl Launch {
    /// The command line or URL, for a person reading `/mcp`.
    pub fn describe(&self) -> String {
        match self {
            Launch::Stdio { program, args, .. } => {
                let mut line = program.clone();
                for a in args {
                    line.push(' ');
                    line.push_str(a);
                }
                line
            }
            Launch::Http { url, .. } => url.clone(),
        }
    }
}
