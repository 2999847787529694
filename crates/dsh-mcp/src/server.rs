//! One configured server at run time: started once in the background, its tool list kept
//! current (`notifications/tools/list_changed` re-lists it), its calls made with
//! cancellation sent to it, and a stdio server that died started again on the next call, a
//! bounded number of times. Every fault becomes a sentence naming the server and what
//! happened, kept for `/mcp`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{CallToolRequestParams, ClientCapabilities, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::bound::{Bounded, MAX_MESSAGE_BYTES, describe_bound};
use crate::process::{ServerProcess, last_log_line, spawn};
use crate::spec::{Launch, ServerSpec};

/// A server's state, for `/mcp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Not started yet, or starting.
    Starting,
    /// Connected; its tools are offered.
    Ready,
    /// It could not be started, or died and is not started again: the reason says which.
    Failed,
    /// Configured but never started: the reason says why.
    Skipped,
}

impl State {
    pub fn as_str(&self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Ready => "ready",
            State::Failed => "failed",
            State::Skipped => "not started",
        }
    }
}

/// What a server says of a tool (MCP annotations): shown to a person, never trusted for a
/// decision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
}

impl Hints {
    /// `says: read-only, not destructive, open world`, or `None` when it says nothing.
    pub fn describe(&self) -> Option<String> {
        let mut said: Vec<&'static str> = Vec::new();
        let mut say = |hint: Option<bool>, yes: &'static str, no: &'static str| {
            if let Some(h) = hint {
                said.push(if h { yes } else { no });
            }
        };
        say(self.read_only, "read-only", "changes things");
        say(self.destructive, "destructive", "not destructive");
        say(self.idempotent, "idempotent", "not idempotent");
        say(self.open_world, "reaches the outside world", "closed world");
        (!said.is_empty()).then(|| said.join(", "))
    }
}

/// One tool a server offers, as `/mcp` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolStatus {
    /// Its dsh name (`mcp__SERVER__TOOL`), when it has one.
    pub name: Option<String>,
    /// Its name on the server.
    pub remote: String,
    pub hints: Hints,
    /// Why it is not offered, when it is not.
    pub refused: Option<String>,
}

/// A server's state for `/mcp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerStatus {
    pub name: String,
    /// Its command line or URL.
    pub launch: String,
    pub state: State,
    pub tools: Vec<ToolStatus>,
    /// The last thing that went wrong (or why it is not started).
    pub last_error: Option<String>,
    pub restarts: u32,
    /// Where its stderr goes (stdio servers).
    pub log: Option<PathBuf>,
}

/// The tool list a server last gave, with a number that changes with it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Catalog {
    pub tools: Vec<rmcp::model::Tool>,
    pub generation: u64,
}

/// What the background tasks and the calls share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub state: Mutex<(State, Option<String>)>,
    pub catalog: Mutex<Catalog>,
    /// Why a tool is not offered, by its name on the server.
    pub refused: Mutex<std::collections::BTreeMap<String, String>>,
}

impl Shared {
    fn set(&self, state: State, error: Option<String>) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.0 = state;
        if error.is_some() {
            s.1 = error;
        }
    }

    fn set_tools(&self, tools: Vec<rmcp::model::Tool>) {
        let mut c = self.catalog.lock().unwrap_or_else(PoisonError::into_inner);
        c.tools = tools;
        c.generation += 1;
    }
}

/// The client side of one connection: tells the server who we are, and re-lists the tools
/// when it says they changed. Sampling and elicitation are refused (rmcp's defaults); no
/// roots are offered.
#[derive(Clone)]
struct Handler {
    shared: Arc<Shared>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut me = Implementation::from_build_env();
        me.name = "dsh".to_owned();
        me.version = env!("CARGO_PKG_VERSION").to_owned();
        rmcp::model::ClientConfig::new(ClientCapabilities::default(), me)
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let (shared, peer) = (self.shared.clone(), context.peer);
        // Off the connection's own task: the answer to the list arrives through it.
        tokio::spawn(async move {
            match peer.list_all_tools().await {
                Ok(tools) => shared.set_tools(tools),
                Err(e) => shared.set(
                    State::Ready,
                    Some(format!("its tool list changed but could not be read: {e}")),
                ),
            }
        });
    }
}

/// A live connection.
struct Live {
    service: RunningService<RoleClient, Handler>,
    /// A stdio server's process (none for an HTTP server).
    process: tokio::sync::Mutex<Option<ServerProcess>>,
    /// Set when a stdio server sent a message longer than [`MAX_MESSAGE_BYTES`], which ended
    /// the connection.
    overrun: Arc<AtomicBool>,
}

impl Live {
    /// Why its connection ended, when it was dsh that ended it: a message over the bound.
    fn overran(&self) -> bool {
        self.overrun.load(Ordering::SeqCst)
    }
}

/// What a server that overran the bound did (`during`: ` while running `TOOL``, or empty),
/// for an error.
fn overran(name: &str, during: &str) -> String {
    format!(
        "MCP server `{name}` sent a message longer than {}{during} (dsh's bound on one MCP message, MAX_MESSAGE_BYTES); dsh closed the connection and stopped it",
        describe_bound()
    )
}

enum Link {
    NotStarted,
    Up(Arc<Live>),
    Down,
}

/// A failed call: what the model is told, and whether it was cancelled.
#[derive(Debug)]
pub(crate) enum CallError {
    Failed(String),
    Cancelled,
}

/// One configured server.
pub struct Server {
    spec: ServerSpec,
    log: PathBuf,
    link: tokio::sync::Mutex<Link>,
    pub(crate) shared: Arc<Shared>,
    restarts: AtomicU32,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

impl Server {
    pub(crate) fn new(spec: ServerSpec, log: PathBuf) -> Self {
        Server {
            spec,
            log,
            link: tokio::sync::Mutex::new(Link::NotStarted),
            shared: Arc::new(Shared {
                state: Mutex::new((State::Starting, None)),
                catalog: Mutex::new(Catalog::default()),
                refused: Mutex::default(),
            }),
            restarts: AtomicU32::new(0),
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub(crate) fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// Its state for `/mcp`.
    pub(crate) fn status(&self) -> ServerStatus {
        let (state, last_error) = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let refused = self
            .shared
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let tools = self
            .catalog()
            .tools
            .iter()
            .map(|t| {
                let name = crate::names::tool_name(&self.spec.name, &t.name);
                ToolStatus {
                    remote: t.name.to_string(),
                    hints: hints(t),
                    refused: refused
                        .get(t.name.as_ref())
                        .cloned()
                        .or_else(|| name.as_ref().err().cloned()),
                    name: name.ok(),
                }
            })
            .collect();
        ServerStatus {
            name: self.spec.name.clone(),
            launch: self.spec.launch.describe(),
            state,
            tools,
            last_error,
            restarts: self.restarts.load(Ordering::SeqCst),
            log: matches!(self.spec.launch, Launch::Stdio { .. }).then(|| self.log.clone()),
        }
    }

    /// Records why its tool `remote` is not offered.
    pub(crate) fn refuse(&self, remote: &str, why: String) {
        self.shared
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(remote.to_owned(), why);
    }

    /// What it says of its tool whose dsh name is `name`.
    pub(crate) fn hints_of(&self, name: &str) -> Option<Hints> {
        self.shared
            .catalog
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .tools
            .iter()
            .find(|t| crate::names::tool_name(&self.spec.name, &t.name).as_deref() == Ok(name))
            .map(hints)
    }

    /// Whether its tool list holds `remote`.
    pub(crate) fn offers(&self, remote: &str) -> bool {
        self.shared
            .catalog
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .tools
            .iter()
            .any(|t| t.name == remote)
    }

    /// The number of its tool list, which changes with the list.
    pub(crate) fn generation(&self) -> u64 {
        self.shared
            .catalog
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .generation
    }

    pub(crate) fn catalog(&self) -> Catalog {
        self.shared
            .catalog
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Starts it (once): connects, initializes and lists its tools within its start-up
    /// timeout.
    pub(crate) async fn start(&self) {
        let mut link = self.link.lock().await;
        if matches!(*link, Link::NotStarted) {
            *link = self.connect().await;
        }
    }

    /// The live connection, starting the server again if it died (at most `max_restarts`
    /// times in the session).
    async fn live(&self) -> Result<Arc<Live>, String> {
        let mut link = self.link.lock().await;
        if let Link::Up(live) = &*link {
            if !live.service.is_transport_closed() {
                return Ok(live.clone());
            }
            let mut process = live.process.lock().await;
            let why = if live.overran() {
                if let Some(p) = process.as_mut() {
                    p.kill().await;
                }
                overran(&self.spec.name, "")
            } else {
                let how = process.as_mut().and_then(ServerProcess::exited);
                format!(
                    "MCP server `{}` ended ({})",
                    self.spec.name,
                    how.as_deref().unwrap_or("its connection closed")
                )
            };
            drop(process);
            self.shared.set(State::Failed, Some(why));
            *link = Link::Down;
        }
        if matches!(*link, Link::NotStarted) {
            *link = self.connect().await;
        } else if matches!(*link, Link::Down) {
            let done = self.restarts.load(Ordering::SeqCst);
            if done >= self.spec.max_restarts {
                let last = self.status().last_error.unwrap_or_default();
                return Err(format!(
                    "MCP server `{}` is down and was already started again {done} times this session ({last}); see /mcp and its log {}",
                    self.spec.name,
                    self.log.display()
                ));
            }
            self.restarts.fetch_add(1, Ordering::SeqCst);
            self.shared.set(State::Starting, None);
            *link = self.connect().await;
        }
        match &*link {
            Link::Up(live) => Ok(live.clone()),
            _ => Err(self
                .status()
                .last_error
                .unwrap_or_else(|| format!("MCP server `{}` is not running", self.spec.name))),
        }
    }

    /// Connects, recording the outcome in its state.
    async fn connect(&self) -> Link {
        self.shared.set(State::Starting, None);
        match self.try_connect().await {
            Ok(live) => {
                self.shared.set(State::Ready, None);
                Link::Up(Arc::new(live))
            }
            Err(e) => {
                self.shared.set(State::Failed, Some(e));
                Link::Down
            }
        }
    }

    async fn try_connect(&self) -> Result<Live, String> {
        let name = &self.spec.name;
        let handler = Handler {
            shared: self.shared.clone(),
        };
        let (program, args, env, cwd) = match &self.spec.launch {
            Launch::Stdio {
                program,
                args,
                env,
                cwd,
            } => (program, args, env, cwd),
            Launch::Http { url, headers } => {
                let transport = crate::http::transport(url, headers)
                    .map_err(|e| format!("MCP server `{name}` ({url}): {e}"))?;
                let started = initialize(handler, transport);
                return match tokio::time::timeout(self.spec.startup_timeout, started).await {
                    Ok(Ok((service, tools))) => {
                        self.shared.set_tools(tools);
                        Ok(Live {
                            service,
                            process: tokio::sync::Mutex::new(None),
                            overrun: Arc::default(),
                        })
                    }
                    Ok(Err(e)) => Err(format!("MCP server `{name}` ({url}) did not start: {e}")),
                    Err(_) => Err(format!(
                        "MCP server `{name}` ({url}) did not start: it did not answer within {} s (startup_timeout_s)",
                        self.spec.startup_timeout.as_secs()
                    )),
                };
            }
        };
        let (mut process, stdout, stdin) = spawn(program, args, env, cwd, &self.log)
            .map_err(|e| format!("MCP server `{name}`: could not start `{program}`: {e}"))?;
        let overrun = Arc::new(AtomicBool::new(false));
        let transport = AsyncRwTransport::new_client(
            Bounded::new(stdout, MAX_MESSAGE_BYTES, overrun.clone()),
            stdin,
        )
        .with_max_line_length(MAX_MESSAGE_BYTES);
        let started = initialize(handler, transport);
        let outcome = tokio::time::timeout(self.spec.startup_timeout, started).await;
        let why = match outcome {
            Ok(Ok((service, tools))) => {
                self.shared.set_tools(tools);
                return Ok(Live {
                    service,
                    process: tokio::sync::Mutex::new(Some(process)),
                    overrun,
                });
            }
            Ok(Err(_)) if overrun.load(Ordering::SeqCst) => format!(
                "it sent a message longer than {} (dsh's bound on one MCP message, MAX_MESSAGE_BYTES)",
                describe_bound()
            ),
            Ok(Err(e)) => e,
            Err(_) => format!(
                "it did not finish starting within {} s (startup_timeout_s)",
                self.spec.startup_timeout.as_secs()
            ),
        };
        // Give a process that is exiting a moment to be reaped, for its status.
        let exited = tokio::time::timeout(std::time::Duration::from_millis(200), async {
            loop {
                if let Some(how) = process.exited() {
                    return how;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
        .await
        .ok();
        process.kill().await;
        Err(self.failure(&format!(
            "MCP server `{name}` did not start: {why}{}",
            exited.map(|h| format!(" ({h})")).unwrap_or_default()
        )))
    }

    /// `what`, with the last line the server wrote to its log and where the log is.
    fn failure(&self, what: &str) -> String {
        match last_log_line(&self.log) {
            Some(line) => format!("{what}; it said: {line} (log: {})", self.log.display()),
            None => format!("{what} (log: {})", self.log.display()),
        }
    }

    /// Calls its tool `remote` with `args` (a JSON object). Cancelled, the call is given up
    /// and the server is sent `notifications/cancelled` for it. Returns the result's wire
    /// form.
    pub(crate) async fn call(
        &self,
        remote: &str,
        args: &Value,
        cancel: &CancellationToken,
    ) -> Result<Value, CallError> {
        let live = tokio::select! {
            live = self.live() => live.map_err(CallError::Failed)?,
            () = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        let mut params = CallToolRequestParams::new(remote.to_owned());
        params.arguments = args.as_object().cloned();
        let outcome = tokio::select! {
            // Dropping the request when cancelled sends `notifications/cancelled`.
            r = live.service.call_tool(params) => r,
            () = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        let name = &self.spec.name;
        match outcome {
            Ok(result) => serde_json::to_value(&result).map_err(|e| {
                CallError::Failed(format!(
                    "MCP server `{name}`'s result could not be read: {e}"
                ))
            }),
            Err(ServiceError::McpError(e)) => Err(CallError::Failed(format!(
                "MCP server `{name}` refused the call to `{remote}`: {} (error {})",
                e.message, e.code.0
            ))),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                let left = self
                    .spec
                    .max_restarts
                    .saturating_sub(self.restarts.load(Ordering::SeqCst));
                let next = if left > 0 {
                    "it is started again on the next call"
                } else {
                    "it is not started again this session"
                };
                let what = if live.overran() {
                    if let Some(p) = live.process.lock().await.as_mut() {
                        p.kill().await;
                    }
                    format!(
                        "{}; {next}",
                        overran(name, &format!(" while running `{remote}`"))
                    )
                } else {
                    let how = wait_exit(&live).await;
                    format!("MCP server `{name}` ended while running `{remote}` ({how}); {next}")
                };
                let what = self.failure(&what);
                self.shared.set(State::Failed, Some(what.clone()));
                Err(CallError::Failed(what))
            }
            Err(e) => Err(CallError::Failed(format!(
                "MCP server `{name}`: the call to `{remote}` failed: {e}"
            ))),
        }
    }

    /// Kills the process group now, without waiting (the session is ending); a server busy
    /// starting is left to its own kill on drop.
    pub(crate) fn stop_now(&self) {
        if let Ok(mut link) = self.link.try_lock()
            && let Link::Up(live) = std::mem::replace(&mut *link, Link::Down)
        {
            live.service.cancellation_token().cancel();
            if let Ok(mut p) = live.process.try_lock()
                && let Some(p) = p.as_mut()
            {
                p.kill_now();
            }
        }
    }

    /// Closes the connection (a stdio server's input ends), gives the process a moment to
    /// end on its own — a served dsh writes its closing records then —, and kills what is
    /// left of its process group.
    pub(crate) async fn shutdown(&self) {
        let mut link = self.link.lock().await;
        if let Link::Up(live) = std::mem::replace(&mut *link, Link::Down) {
            live.service.cancellation_token().cancel();
            if let Some(p) = live.process.lock().await.as_mut() {
                let _ = tokio::time::timeout(SHUTDOWN_GRACE, p.wait()).await;
                p.kill().await;
            }
        }
    }
}

/// How long a stdio server may take to end once its input closed, at the session's end.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The MCP handshake over `transport`, then the server's tool list.
async fn initialize<T, E, A>(
    handler: Handler,
    transport: T,
) -> Result<(RunningService<RoleClient, Handler>, Vec<rmcp::model::Tool>), String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let service = handler
        .serve(transport)
        .await
        .map_err(|e| format!("its initialization failed: {e}"))?;
    let tools = service
        .list_all_tools()
        .await
        .map_err(|e| format!("its tool list could not be read: {e}"))?;
    Ok((service, tools))
}

/// How a server whose connection closed ended, waiting a moment for it to be reaped.
async fn wait_exit(live: &Live) -> String {
    for _ in 0..50 {
        match live.process.lock().await.as_mut() {
            None => return "its connection closed".to_owned(),
            Some(p) => {
                if let Some(how) = p.exited() {
                    return how;
                }
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    "its connection closed".to_owned()
}

/// A tool's annotations as hints.
pub(crate) fn hints(tool: &rmcp::model::Tool) -> Hints {
    tool.annotations
        .as_ref()
        .map(|a| Hints {
            read_only: a.read_only_hint,
            destructive: a.destructive_hint,
            idempotent: a.idempotent_hint,
            open_world: a.open_world_hint,
        })
        .unwrap_or_default()
}
