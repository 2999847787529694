//! Starting a model session, as `dsh exec` and the REPL both do: configuration with the
//! model flags, the provider, the session (resumed or new), its event stream, and the
//! runtime around its main agent. Front ends differ only in who answers `ask`, the commands
//! they send and how they render the events.

use std::path::Path;
use std::sync::Arc;

use anyhow::anyhow;
use dsh_agent::{Agent, Approval, EventSink, EventStream, LoopConfig, Runtime, Session};
use dsh_core::journal::Mirror;

use crate::{Common, Failure, settings};

/// The model flags and the session to continue; `dsh exec` and the REPL take the same ones.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ModelArgs {
    /// openai, anthropic, deepseek or ollama.
    #[arg(long, global = true)]
    pub provider: Option<String>,
    /// The provider's endpoint, e.g. http://127.0.0.1:8080/v1.
    #[arg(long, value_name = "URL", global = true)]
    pub base_url: Option<String>,
    /// The model name.
    #[arg(long, value_name = "NAME", global = true)]
    pub model: Option<String>,
    /// Stop a turn after this many model calls (exec: exit code 3).
    #[arg(long, value_name = "N", global = true)]
    pub max_steps: Option<u64>,
    /// Continue session ID (an id, a name given with /save — then as it was at the save —, a
    /// unique prefix, or a journal's path) in a new journal linked to it, in the workspace it
    /// records (`--workspace DIR` moves it; a recorded directory that is gone means the
    /// current one). A model the session switched to with /model goes on unless --provider,
    /// --model or --base-url names one. Nothing is re-run and no approval is
    /// reused; calls the old process never finished are closed as cut off, and the model is
    /// told.
    #[arg(long, value_name = "ID", conflicts_with = "continue_", global = true)]
    pub resume: Option<String>,
    /// Continue the newest session of this workspace that has a user message and is not
    /// open in another process (as --resume does).
    #[arg(long = "continue", global = true)]
    pub continue_: bool,
    /// Set by the REPL when it resumes itself (`/reload`, `/load`): a `/model` switch the
    /// journal holds is newer than the model flags the REPL was started with.
    #[arg(skip)]
    pub switch_over_flags: bool,
    /// Set by the REPL's `/load`: the record of `resume` to go on from (the saved point).
    #[arg(skip)]
    pub resume_point: Option<u64>,
}

impl ModelArgs {
    /// The configuration these flags override (a usage error for an unknown provider).
    pub(crate) fn overrides(&self) -> Result<dsh_config::Overrides, Failure> {
        let provider = match &self.provider {
            Some(p) => Some(
                p.parse()
                    .map_err(|e: String| Failure::usage(anyhow!("--provider: {e}")))?,
            ),
            None => None,
        };
        Ok(dsh_config::Overrides {
            provider,
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            max_steps: self.max_steps,
            ..dsh_config::Overrides::default()
        })
    }
}

/// A started session: everything a front end drives.
pub(crate) struct Started {
    pub loaded: dsh_config::Loaded,
    pub runtime: Runtime,
    pub stream: EventStream,
    pub mirror: Option<Arc<Mirror>>,
    /// What `--resume`/`--continue` continued, if anything.
    pub resumed: Option<ResumedNote>,
    /// Nothing names a model and no key is set: the session tries a local Ollama at this
    /// URL (front ends say so; `dsh exec` exits 2 when it does not answer).
    pub unconfigured: Option<String>,
    /// What a resumed session's conversation holds, for a front end that shows it again
    /// (`dsh acp`'s `session/load`); empty for a new session.
    pub history: Vec<dsh_model::Message>,
}

impl Started {
    /// What a front end says when nothing is configured (see [`Started::unconfigured`]).
    pub(crate) fn unconfigured_notice(&self) -> Option<String> {
        let url = self.unconfigured.as_deref()?;
        let file = self.loaded.user_config.as_deref().map_or_else(
            || "a user config file".to_owned(),
            |p| p.display().to_string(),
        );
        Some(format!(
            "no model is configured and no API key is set: trying a local Ollama at {url}\n\
             to choose one, set OPENAI_API_KEY (or ANTHROPIC_API_KEY, DEEPSEEK_API_KEY), pass --provider, or put [model] in {file}"
        ))
    }
}

/// What a resumed session continues, for the front end to say.
pub(crate) struct ResumedNote {
    pub session: String,
    pub turns: usize,
    /// The model the session switched to, taken up again (or why not).
    pub model: Option<String>,
    /// `(call id, tool, how it was closed)` of each call the old process never finished.
    pub cut_off: Vec<(String, String, String)>,
}

impl ResumedNote {
    /// What a front end says of it: the session resumed, then each call cut off.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "resuming session {} ({})",
            self.session,
            crate::words::plural(self.turns, "turn")
        )];
        out.extend(self.model.clone());
        out.extend(self.cut_off.iter().map(|(call_id, tool, closed)| {
            format!(
                "call {call_id} ({tool}) was cut off when the old process ended: closed as {closed}"
            )
        }));
        out
    }
}

/// Says once, on stderr, why the session's mode does not work as chosen (`auto` without its
/// hardened sandbox behaves as `ask`).
pub(crate) fn say_mode(session: &Session) {
    if let Some(why) = session.mode_notice(session.mode()) {
        eprintln!("dsh: {why}");
    }
}

/// Waits for the MCP servers (`dsh batch`, `check`, `replay` before their first call) and
/// says which are not there.
pub(crate) async fn wait_for_servers(session: &Session) {
    session.wait_for_extensions().await;
    say_extensions(session);
}

/// Says on stderr which MCP servers failed or were not started, and why.
pub(crate) fn say_extensions(session: &Session) {
    for s in session.mcp_status() {
        if matches!(s.state, dsh_mcp::State::Failed | dsh_mcp::State::Skipped) {
            let why = s.last_error.unwrap_or_default();
            eprintln!(
                "dsh: MCP server {} {}: {}",
                s.name,
                s.state.as_str(),
                crate::repl::visible::visible(&why, false)
            );
        }
    }
}

/// Starts the session `common` and `args` describe. `approval` overrides who answers
/// `ask` (the REPL's person); `None` keeps the flags' choice (`--yolo` or nobody). The
/// signal handlers are the caller's, installed once per process (`Signals::install`), and
/// `cancel` their token: cancelled, it interrupts every command. `verify`: the configured
/// check runs after each turn that changes files from the start (`dsh exec --verify`).
///
/// `--resume ID` is read first: the session continues in the workspace it records (see
/// `workspace.rs`), whose configuration is loaded. `--continue` is keyed on the workspace
/// given (or the current directory), so it is found once that configuration is loaded.
pub(crate) fn start(
    common: &Common,
    args: &ModelArgs,
    approval: Option<Approval>,
    cancel: &dsh_core::CancellationToken,
    verify: bool,
) -> Result<Started, Failure> {
    start_with(common, args, approval, cancel, verify, Extra::default())
}

/// What a front end's client adds to a session (`dsh acp`'s editor): its MCP servers and
/// its name.
#[derive(Default)]
pub(crate) struct Extra {
    pub mcp: Vec<dsh_mcp::ServerSpec>,
    pub mcp_skipped: Vec<dsh_mcp::Skipped>,
    pub client: Option<String>,
    /// Keep a resumed conversation in [`Started::history`].
    pub history: bool,
}

/// [`start`] with what the client adds.
pub(crate) fn start_with(
    common: &Common,
    args: &ModelArgs,
    approval: Option<Approval>,
    cancel: &dsh_core::CancellationToken,
    verify: bool,
    extra: Extra,
) -> Result<Started, Failure> {
    let keep_history = extra.history;
    let by_id = match &args.resume {
        Some(id) => Some(resume_id(id, args.resume_point, &common.workspace)?),
        None => None,
    };
    let moved;
    let common = match &by_id {
        Some(r) => {
            moved = crate::workspace::for_recorded(common, r.workspace.as_deref(), "resuming")?;
            &moved
        }
        None => common,
    };
    let loaded = settings::load_config_with(common, args.overrides()?)?;
    if verify && loaded.config.verify.command.is_none() {
        return Err(Failure::usage(anyhow!(
            "--verify: no [verify] command is configured (e.g. [verify] command = \"cargo test\" in .dsh/config.toml)"
        )));
    }
    let env = dsh_config::process_env();
    let provider = dsh_agent::provider_from_loaded(&loaded, &env).map_err(Failure::usage)?;
    let mut unconfigured = dsh_agent::fallback_endpoint(&loaded, &env);

    let mut settings = settings::session_settings(common, &loaded)?;
    settings.add_client_servers(
        extra.mcp,
        extra.mcp_skipped,
        loaded.trusted.then_some(loaded.workspace.as_path()),
    );
    if let Some(client) = &extra.client {
        settings.set_client(client);
    }
    // The yolo mode (a flag or the user's configuration) is its own approver.
    if let Some(approval) = approval
        && settings.mode != dsh_config::PermissionMode::Yolo
    {
        settings.approval = approval;
    }
    let resumed = match by_id {
        Some(r) => Some(r),
        None if args.continue_ => Some(continue_newest(&settings.dsh_home, &loaded.workspace)?),
        None => None,
    };
    if let Some(r) = &resumed {
        settings.resumed_from = Some(r.link.clone());
        settings.earlier_sessions.clone_from(&r.chain);
    }
    // A model the resumed chain switched to (`/model`) goes on, unless the command line
    // names one.
    let names_a_model = !args.switch_over_flags
        && (args.provider.is_some() || args.model.is_some() || args.base_url.is_some());
    let mut model_note = None;
    let provider = match resumed.as_ref().and_then(|r| r.model.as_ref()) {
        Some(m) if !names_a_model => match dsh_agent::provider_for_switch(&loaded, &env, m) {
            Ok(p) => {
                model_note = Some(format!(
                    "the model is {}/{}, as /model left it",
                    m.provider, m.model
                ));
                unconfigured = None;
                p
            }
            Err(why) => {
                model_note = Some(format!(
                    "the session had switched to {}/{}, which cannot be used now ({why}); {}/{} instead",
                    m.provider,
                    m.model,
                    provider.name(),
                    provider.model()
                ));
                provider
            }
        },
        _ => provider,
    };
    settings.provider = Some(provider.name().to_owned());
    settings.model = Some(provider.model().to_owned());
    let mirror = crate::mirror::open(common.json)?;
    let (events, stream) = EventSink::channel();
    settings.events = events;
    let session =
        Session::assemble_with_mirror(&settings, mirror.clone()).map_err(Failure::assembly)?;
    say_mode(&session);
    // Only the session holds the sink now: the stream ends when the session is gone.
    drop(settings);
    let session = Arc::new(session);
    let config = LoopConfig::from_loaded(&loaded);
    let history = resumed
        .as_ref()
        .filter(|_| keep_history)
        .map(|r| r.history.clone())
        .unwrap_or_default();
    let (agent, note) = match resumed {
        None => (Agent::new(session.clone(), provider, config), None),
        Some(r) => {
            session
                .record_cut_off(&r.cut_off, &r.cut_off_children)
                .map_err(|e| Failure::harness(anyhow::Error::new(e)))?;
            let note = ResumedNote {
                session: r.session.clone(),
                turns: r.turn_starts.len(),
                model: model_note,
                cut_off: r
                    .cut_off
                    .iter()
                    .map(|c| {
                        (
                            c.call_id().to_owned(),
                            c.tool().to_owned(),
                            c.failure_kind().map_or("", |k| k.as_str()).to_owned(),
                        )
                    })
                    .collect(),
            };
            (
                Agent::resumed(session.clone(), provider, config, r),
                Some(note),
            )
        }
    };
    let verify = dsh_agent::VerifyConfig {
        command: loaded.config.verify.command.clone(),
        max_rounds: loaded.config.verify.max_rounds,
        on: verify,
    };
    drop(session);
    let runtime = Runtime::start(agent, verify, cancel.clone());
    Ok(Started {
        loaded,
        runtime,
        stream,
        mirror,
        resumed: note,
        unconfigured,
        history,
    })
}

/// The conversation `--resume ID` names, rebuilt from its journal under `DSH_HOME`: an id,
/// or a `/save` name (then as it was at the save; a name saved in `workspace` first).
fn resume_id(
    id: &str,
    point: Option<u64>,
    workspace: &Path,
) -> Result<dsh_agent::resume::Resumed, Failure> {
    let home = dsh_config::dsh_home(&dsh_config::process_env()).map_err(Failure::usage)?;
    let workspace = workspace.canonicalize().ok();
    let found =
        dsh_agent::sessions::find(&home, id, workspace.as_deref()).map_err(Failure::usage)?;
    dsh_agent::resume::load_session(&home, &found.path, found.point.or(point))
        .map_err(Failure::usage)
}

/// The conversation `--continue` names: the newest session of `workspace` that can go on.
fn continue_newest(
    dsh_home: &Path,
    workspace: &Path,
) -> Result<dsh_agent::resume::Resumed, Failure> {
    use dsh_agent::resume;
    let path = resume::newest_for(dsh_home, workspace).map_err(Failure::usage)?;
    resume::load_session(dsh_home, &path, None).map_err(Failure::usage)
}
