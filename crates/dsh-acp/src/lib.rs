//! `dsh acp`: dsh as an Agent Client Protocol agent on stdio, for editors (Zed, JetBrains
//! IDEs, Neovim, Emacs). The third front end on the runtime handle, beside `dsh exec` and the
//! REPL: it turns the client's requests into runtime commands and the runtime's events into
//! the client's updates, and holds no policy, tool or runtime logic — every call passes the
//! same pipeline, journal and sandbox as anywhere else. The only crate that names the
//! protocol's crate (`agent-client-protocol`, protocol version 1).
//!
//! - `opener.rs`: how a session is started (dsh-cli's opener, as `dsh` starts one there).
//! - `live.rs`: one open session — the runtime it drives, its events as updates.
//! - `tool_call.rs`: how a call looks (title, kind, locations, diffs, refusals).
//! - `permission.rs`: gate 2's asks as `session/request_permission`.
//! - `prompt.rs`, `commands.rs`: a prompt's content; the slash commands offered.
//! - `modes.rs`, `mcp.rs`, `history.rs`: modes, the client's MCP servers, `session/load`.
//!
//! stdout carries only protocol messages; what dsh logs goes to stderr and the journal.
//! Files are read and written by dsh's own tools (the file seam's versions and confinement),
//! not through the client's `fs/*` methods: an editor's unsaved buffer is not what dsh reads.

mod commands;
/// For the fuzz targets only (`fuzz/`): not an API.
#[doc(hidden)]
pub mod fuzzing;
mod history;
mod live;
mod mcp;
mod modes;
mod opener;
mod outbox;
mod permission;
mod prompt;
mod stdio;
mod tool_call;
mod visible;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthenticateRequest, AuthenticateResponse, AvailableCommandsUpdate,
    CancelNotification, Implementation, InitializeRequest, InitializeResponse, LoadSessionRequest,
    LoadSessionResponse, McpCapabilities, NewSessionRequest, NewSessionResponse,
    PromptCapabilities, PromptRequest, PromptResponse, SessionId, SessionUpdate,
    SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use agent_client_protocol::{Agent, Client, Error, ErrorCode};
use dsh_agent::Ending;
use dsh_core::CancellationToken;

pub use opener::{Open, Opened, Opener};

use live::Live;
use outbox::Outbox;

/// The ACP agent: the sessions it opened, by the id the client knows them by.
pub struct AcpServer {
    state: Arc<State>,
}

struct State {
    opener: Arc<dyn Opener>,
    sessions: Mutex<HashMap<String, Arc<Live>>>,
    /// The client's name from `initialize`, for the sessions' `session_start`.
    client: Mutex<String>,
}

impl AcpServer {
    pub fn new(opener: Arc<dyn Opener>) -> AcpServer {
        AcpServer {
            state: Arc::new(State {
                opener,
                sessions: Mutex::default(),
                client: Mutex::new("an ACP client".to_owned()),
            }),
        }
    }

    /// Serves the client on this process's stdin and stdout until stdin closes or `stop`
    /// is cancelled. The sessions stay open: [`AcpServer::finish`] ends them.
    pub async fn serve_stdio(&self, stop: &CancellationToken) -> Result<(), String> {
        let served = self.connection().connect_to(stdio::transport());
        tokio::select! {
            r = served => r.map_err(|e| format!("the ACP connection failed: {e}")),
            () = stop.cancelled() => Ok(()),
        }
    }

    /// Ends every open session (`session_end` written; a running turn interrupted first).
    pub async fn finish(&self, ending: Ending) {
        let open: Vec<Arc<Live>> = lock(&self.state.sessions).drain().map(|(_, l)| l).collect();
        for live in open {
            live.finish(ending).await;
        }
    }

    fn connection(
        &self,
    ) -> agent_client_protocol::v1::Builder<
        Agent,
        impl agent_client_protocol::HandleDispatchFrom<Client> + 'static,
    > {
        let (s1, s2, s3, s4, s5, s6) = (
            self.state.clone(),
            self.state.clone(),
            self.state.clone(),
            self.state.clone(),
            self.state.clone(),
            self.state.clone(),
        );
        Agent
            .v1()
            .name("dsh")
            .on_receive_request(
                async move |req: InitializeRequest, responder, _cx| {
                    if let Some(info) = &req.client_info {
                        info.name.clone_into(&mut lock(&s1.client));
                    }
                    responder.respond(initialize())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                // No authentication: keys come from the environment and the configuration,
                // as for `dsh exec` (`initialize` offers no method).
                async move |_req: AuthenticateRequest, responder, _cx| {
                    responder.respond(AuthenticateResponse::new())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: NewSessionRequest, responder, cx| {
                    let (mcp_servers, mcp_skipped) = mcp::servers(req.mcp_servers);
                    let open = Open {
                        cwd: req.cwd,
                        mcp_servers,
                        mcp_skipped,
                        resume: None,
                        client: lock(&s2.client).clone(),
                    };
                    match s2.open(open, None, &cx) {
                        Ok((id, live)) => {
                            let modes = modes::state(live.session());
                            responder.respond(NewSessionResponse::new(id).modes(modes))?;
                            advertise(&live);
                            Ok(())
                        }
                        Err(e) => responder.respond_with_error(e),
                    }
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: LoadSessionRequest, responder, cx| {
                    let (mcp_servers, mcp_skipped) = mcp::servers(req.mcp_servers);
                    let given = req.session_id.0.to_string();
                    let open = Open {
                        cwd: req.cwd,
                        mcp_servers,
                        mcp_skipped,
                        resume: Some(given.clone()),
                        client: lock(&s3.client).clone(),
                    };
                    match s3.open(open, Some(given), &cx) {
                        Ok((_, live)) => {
                            let modes = modes::state(live.session());
                            responder.respond(LoadSessionResponse::new().modes(modes))?;
                            advertise(&live);
                            Ok(())
                        }
                        Err(e) => responder.respond_with_error(e),
                    }
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: PromptRequest, responder, _cx| {
                    let live = match s4.live(&req.session_id) {
                        Ok(l) => l,
                        Err(e) => return responder.respond_with_error(e),
                    };
                    let text = match prompt::text(&req.prompt, live.session().workspace.root()) {
                        Ok(t) => t,
                        Err(why) => {
                            return responder
                                .respond_with_error(Error::new(ErrorCode::INVALID_PARAMS, why));
                        }
                    };
                    match commands::parse(&text, live.session()) {
                        None => live.prompt(text, responder),
                        Some(Ok(commands::Slash::Run(command))) => live.slash(command, responder),
                        Some(Ok(commands::Slash::Say(said))) => {
                            live.outbox().say(&said);
                            responder.respond(PromptResponse::new(StopReason::EndTurn))?;
                        }
                        Some(Err(why)) => {
                            live.outbox().say(&why);
                            responder.respond(PromptResponse::new(StopReason::EndTurn))?;
                        }
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: SetSessionModeRequest, responder, _cx| {
                    let live = match s5.live(&req.session_id) {
                        Ok(l) => l,
                        Err(e) => return responder.respond_with_error(e),
                    };
                    let switched = modes::parse(&req.mode_id.0).and_then(|m| {
                        live.session()
                            .set_mode(m, "client")
                            .map_err(|e| e.to_string())
                    });
                    match switched {
                        Ok(()) => responder.respond(SetSessionModeResponse::new()),
                        Err(why) => {
                            responder.respond_with_error(Error::new(ErrorCode::INVALID_PARAMS, why))
                        }
                    }
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_notification(
                async move |n: CancelNotification, _cx| {
                    if let Ok(live) = s6.live(&n.session_id) {
                        live.cancel();
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
    }
}

/// What dsh offers in `initialize`: protocol version 1 (the only one it speaks, whatever
/// the client asked for), loading sessions, prompts with text, resource links and embedded
/// resources, MCP servers over stdio and streamable HTTP, and no authentication.
fn initialize() -> InitializeResponse {
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
                .mcp_capabilities(McpCapabilities::new().http(true)),
        )
        .agent_info(Implementation::new("dsh", env!("CARGO_PKG_VERSION")).title("dsh"))
        .auth_methods(Vec::new())
}

/// Sends the session's slash commands and starts its events (after the response that
/// names the session).
fn advertise(live: &Live) {
    live.begin();
    live.outbox().update(SessionUpdate::AvailableCommandsUpdate(
        AvailableCommandsUpdate::new(commands::available()),
    ));
}

impl State {
    /// Opens a session; for `session/load`, `replay_as` is the id the client gave (the
    /// session goes on under it, and its history is sent first).
    fn open(
        &self,
        open: Open,
        replay_as: Option<String>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(SessionId, Arc<Live>), Error> {
        if let Some(id) = &replay_as
            && lock(&self.sessions).contains_key(id)
        {
            return Err(Error::new(
                ErrorCode::INVALID_PARAMS,
                format!("session {id} is open in this dsh acp already: go on with it as it is"),
            ));
        }
        if !open.cwd.is_absolute() {
            return Err(Error::new(
                ErrorCode::INVALID_PARAMS,
                format!("cwd must be an absolute path, not {}", open.cwd.display()),
            ));
        }
        let opened = self
            .opener
            .open(open)
            .map_err(|why| Error::new(ErrorCode::INVALID_PARAMS, why))?;
        let id = replay_as
            .clone()
            .unwrap_or_else(|| opened.runtime.session().id.clone());
        let session_id = SessionId::new(id.clone());
        let outbox = Outbox::new(cx.clone(), session_id.clone());
        if replay_as.is_some() {
            for update in history::updates(&opened.history) {
                outbox.update(update);
            }
        }
        for notice in &opened.notices {
            eprintln!("dsh: {notice}");
        }
        let live = Live::new(opened.runtime, opened.stream, outbox);
        lock(&self.sessions).insert(id, live.clone());
        Ok((session_id, live))
    }

    fn live(&self, id: &SessionId) -> Result<Arc<Live>, Error> {
        lock(&self.sessions).get(&*id.0).cloned().ok_or_else(|| {
            Error::new(
                ErrorCode::INVALID_PARAMS,
                format!(
                    "no open session {}: open one with session/new or session/load",
                    id.0
                ),
            )
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
