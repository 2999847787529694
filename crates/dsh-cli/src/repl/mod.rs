//! `dsh` alone: the interactive REPL. A consumer of agent events like `dsh exec` — no
//! decision, rule or tool logic lives here: the session is started as for `exec`
//! (`start.rs`), each prompt is a turn of the main agent, and what the person sees is
//! rendered from the events. On a terminal a person answers `ask`s; with piped stdin it is
//! a plain line reader, headless (asks end as `unavailable`) and without escape codes.

mod actions;
mod approval;
mod commands;
mod highlight;
mod input;
mod keys;
mod markdown;
mod model_pick;
mod render;
mod screen;
mod stats;
pub(crate) mod style;
pub(crate) mod toolline;
mod turn;
mod visible;

use std::io::IsTerminal;
use std::sync::Arc;

use anyhow::anyhow;
use dsh_agent::{Agent, Approval, Ending, EventStream, Session, StopReason};

use crate::signals::{self, Signals};
use crate::start::{self, ModelArgs, Started};
use crate::{Common, Failure, exit};

use actions::Flow;
use input::{Input, Read};
use render::Render;
use screen::Screen;
use turn::{TypeAhead, Ui};

/// The history file under `DSH_HOME`.
const HISTORY_FILE: &str = "history.txt";

/// The session the REPL drives now; replaced by `/reload` and `/load`.
pub(crate) struct Live {
    pub(crate) loaded: dsh_config::Loaded,
    pub(crate) session: Arc<Session>,
    pub(crate) agent: Agent,
    pub(crate) stream: EventStream,
}

/// How the REPL was started, for starting a session again.
pub(crate) struct Start<'a> {
    pub(crate) common: &'a Common,
    pub(crate) args: ModelArgs,
    pub(crate) approval: Option<Approval>,
    pub(crate) terminal: bool,
}

impl Start<'_> {
    /// Starts a session (resuming `args.resume`, if set) and prints its header.
    pub(crate) fn live(&self, ui: &mut Ui) -> Result<Live, Failure> {
        let Started {
            loaded,
            session,
            agent,
            stream,
            resumed,
            ..
        } = start::start(self.common, &self.args, self.approval.clone())?;
        let st = ui.render.style();
        let screen = &mut ui.screen;
        screen.line(&header(&loaded, &session, &agent, self.terminal, st));
        // The first line (which session) dim; the calls cut off stand out.
        for (i, line) in resumed
            .iter()
            .flat_map(start::ResumedNote::lines)
            .enumerate()
        {
            let line = visible::visible(&line, false);
            screen.line(&if i == 0 {
                st.dim(&line)
            } else {
                st.yellow(&line)
            });
        }
        if agent.cost_budget_unenforced() {
            screen.line(&st.yellow(&format!(
                "[limits] max_cost_usd is set, but the prices of {} are unknown, so it cannot stop a turn; set [model] price",
                agent.model()
            )));
        }
        screen.flush();
        Ok(Live {
            loaded,
            session,
            agent,
            stream,
        })
    }
}

impl Live {
    /// Ends this session's journal (`session_end`); its file can then be resumed.
    pub(crate) fn finish(self, ending: Ending) -> Result<(), Failure> {
        let totals = self.agent.totals();
        drop(self.agent);
        let closed = self.session.finish(ending, totals);
        drop(self.session);
        crate::settle(
            "the session",
            Ok::<(), std::convert::Infallible>(()),
            closed,
        )
    }

    pub(crate) fn dsh_home(&self) -> Option<std::path::PathBuf> {
        self.session
            .journal_path
            .as_deref()
            .and_then(|p| p.parent()?.parent())
            .map(std::path::Path::to_path_buf)
    }
}

pub(crate) async fn repl(common: &Common, args: &ModelArgs) -> Result<u8, Failure> {
    if common.json {
        return Err(Failure::usage(anyhow!(
            "--json is for `dsh exec` and `dsh batch`; the REPL renders for a person"
        )));
    }
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let color = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let signals = Signals::install().map_err(Failure::harness)?;
    if terminal {
        // The terminal closing ends the session even while the line editor or the key
        // reader spin on it (`crate::hangup`).
        signals.watch_terminal().map_err(Failure::harness)?;
    }
    let mut start = Start {
        common,
        args: args.clone(),
        // A person answers asks only where one can: on a terminal, and not under --yolo.
        approval: (terminal && !common.yolo).then_some(Approval::Interactive),
        terminal,
    };
    let mut ui = Ui {
        screen: Screen::new(terminal),
        render: Render::new(terminal, color),
        stats: stats::Stats::new(),
        typed: TypeAhead::default(),
    };
    let mut live = start.live(&mut ui)?;
    let st = ui.render.style();
    if terminal {
        ui.screen
            .line(&st.dim("/help lists the commands; Ctrl-D leaves"));
        ui.screen.flush();
    }
    let dsh_home = live
        .dsh_home()
        .ok_or_else(|| Failure::harness(anyhow!("the session has no journal file")))?;
    let mut input = if terminal {
        Input::terminal(&dsh_home.join(HISTORY_FILE), &live.loaded.workspace)
    } else {
        Input::piped()
    };
    let mut state = actions::State::default();
    let mut interrupted_prompt = false;
    let mut failure: Option<Failure> = None;
    // Piped, the exit code says how the worst turn went, as `dsh exec` would: 1 when one
    // failed, else 3 when one stopped at a stop line.
    let mut worst = exit::OK;
    loop {
        if signals.token().is_cancelled() {
            break;
        }
        let line = match ui.typed.queued.pop_front() {
            Some(line) => {
                ui.screen.line(&format!(
                    "{} {}",
                    st.dim("›"),
                    visible::visible(&line, false)
                ));
                ui.screen.flush();
                line
            }
            None => {
                let pending = std::mem::take(&mut ui.typed.text);
                let read = tokio::select! {
                    read = input.read(&pending) => read,
                    () = signals.token().cancelled() => break,
                };
                match read {
                    Ok(Read::Line(line)) => {
                        interrupted_prompt = false;
                        line
                    }
                    Ok(Read::Interrupt) => {
                        if interrupted_prompt {
                            break;
                        }
                        interrupted_prompt = true;
                        ui.screen
                            .line(&st.dim("(Ctrl-C again, Ctrl-D or /exit leaves)"));
                        ui.screen.flush();
                        continue;
                    }
                    Ok(Read::Eof) => break,
                    // A terminal that can no longer be read (its window closed) has hung
                    // up, SIGHUP or not.
                    Err(_) if terminal => {
                        signals.hang_up();
                        break;
                    }
                    Err(e) => {
                        failure = Some(Failure::harness(anyhow!("cannot read the input: {e}")));
                        break;
                    }
                }
            }
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if text.starts_with('/') {
            let flow = match commands::parse(text) {
                Ok(command) => {
                    actions::run(
                        command, &mut live, &mut ui, &mut state, &mut input, &signals,
                    )
                    .await
                }
                Err(e) => {
                    ui.screen.line(&st.red(&e));
                    Flow::Continue
                }
            };
            ui.screen.flush();
            match flow {
                Flow::Continue => {}
                Flow::Exit => break,
                Flow::Resume(id) => {
                    // The session ends; the one named goes on in a new journal.
                    live.finish(Ending::Finished)?;
                    start.args.resume = Some(id);
                    start.args.continue_ = false;
                    live = match start.live(&mut ui) {
                        Ok(l) => l,
                        // Refused (open elsewhere, broken): a new session instead, so the
                        // person can go on.
                        Err(f) => {
                            ui.screen.line(&st.red(&format!(
                                "cannot resume it: {}; a new session starts",
                                crate::render_chain(&f.error)
                            )));
                            start.args.resume = None;
                            start.live(&mut ui)?
                        }
                    };
                }
            }
            continue;
        }
        match actions::prompt(text, &mut live, &mut ui, &state, &signals).await {
            Ok(stop) => {
                if worst == exit::OK
                    && !matches!(stop, StopReason::FinalAnswer | StopReason::Interrupted)
                {
                    worst = crate::exec::STOPPED;
                }
            }
            Err(e) => {
                ui.screen.line(&st.red(&format!("the turn failed: {e}")));
                worst = exit::HARNESS;
                // A journal that cannot record ends the session; a model that failed for
                // good may work for the next prompt.
                if matches!(e, dsh_agent::AgentError::Journal(_)) {
                    ui.screen.flush();
                    failure = Some(Failure::harness(anyhow::Error::new(e)));
                    break;
                }
            }
        }
        ui.screen.flush();
    }
    ui.screen.clear_live();
    let ending = if failure.is_some() {
        Ending::Error
    } else {
        signals.ending(Ending::Finished)
    };
    let closed = live.finish(ending);
    if let Some(f) = failure {
        return Err(f);
    }
    closed?;
    let code = if terminal { exit::OK } else { worst };
    Ok(signals::exit_code(ending).unwrap_or(code))
}

/// The one-line header: workspace, provider and model, the permission mode, sandbox, trust,
/// who answers asks, where the session is journaled.
fn header(
    loaded: &dsh_config::Loaded,
    session: &Session,
    agent: &Agent,
    terminal: bool,
    st: style::Style,
) -> String {
    let mode = session.mode();
    let yolo = mode == dsh_config::PermissionMode::Yolo;
    let trust = if loaded.trusted {
        "trusted"
    } else {
        "untrusted"
    };
    let approvals = match (yolo, terminal) {
        (true, _) => "approvals: yolo",
        (false, true) => "approvals: you",
        (false, false) => "approvals: none (piped)",
    };
    let journal = session
        .journal_path
        .as_deref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    format!(
        "{} {} · {}/{} · mode {} · sandbox {} · {trust} · {approvals} · {}",
        st.bold("dsh"),
        visible::visible(&loaded.workspace.display().to_string(), false),
        agent.provider_name(),
        visible::visible(agent.model(), false),
        mode.as_str(),
        loaded.config.sandbox.mode.as_str(),
        st.dim(&journal)
    )
}
