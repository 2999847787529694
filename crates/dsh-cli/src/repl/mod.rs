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
mod mcp;
mod memory;
mod mention;
mod model;
mod model_pick;
mod own;
mod paste;
mod render;
mod screen;
mod stats;
pub(crate) mod style;
mod table;
pub(crate) mod toolline;
mod turn;
mod undo;
pub(crate) mod visible;

use std::io::IsTerminal;

use anyhow::anyhow;
use dsh_agent::{
    Approval, Command, Ending, Event, EventKind, EventStream, Reply, Runtime, Session, Status,
    StopReason, VerifyStep,
};

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
    pub(crate) runtime: Runtime,
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
    pub(crate) fn live(&self, ui: &mut Ui, signals: &Signals) -> Result<Live, Failure> {
        let started = start::start(
            self.common,
            &self.args,
            self.approval.clone(),
            signals.token(),
            false,
        )?;
        let unconfigured = started.unconfigured_notice();
        let Started {
            loaded,
            runtime,
            stream,
            resumed,
            ..
        } = started;
        let st = ui.render.style();
        let screen = &mut ui.screen;
        let status = runtime.status();
        screen.line(&header(
            &loaded,
            runtime.session(),
            &status,
            self.terminal,
            st,
        ));
        // Nothing configured: said at once, with how to set one (the first prompt's error,
        // if no local model answers, gives every way).
        for line in unconfigured.iter().flat_map(|n| n.lines()) {
            screen.line(&st.yellow(line));
        }
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
        if status.cost_budget_unenforced {
            screen.line(&st.yellow(&format!(
                "[limits] max_cost_usd is set, but the prices of {} are unknown, so it cannot stop a turn; set [model] price",
                status.model
            )));
        }
        screen.flush();
        Ok(Live {
            loaded,
            runtime,
            stream,
        })
    }
}

impl Live {
    /// Ends this session's journal (`session_end`); its file can then be resumed.
    pub(crate) async fn finish(mut self, ending: Ending) -> Result<(), Failure> {
        let closed = match self.runtime.send(Command::Finish(ending)) {
            Ok(id) => loop {
                match self.stream.recv().await {
                    Some(Event {
                        kind:
                            EventKind::Done {
                                command,
                                reply: Reply::Finished(closed),
                            },
                        ..
                    }) if command == id => break closed,
                    Some(_) => {}
                    None => {
                        return Err(Failure::harness(anyhow!(
                            "the runtime stopped before the session ended"
                        )));
                    }
                }
            },
            Err(e) => return Err(Failure::harness(anyhow::Error::new(e))),
        };
        crate::settle(
            "the session",
            Ok::<(), std::convert::Infallible>(()),
            closed,
        )
    }

    pub(crate) fn dsh_home(&self) -> Option<std::path::PathBuf> {
        self.runtime
            .session()
            .journal_path
            .as_deref()
            .and_then(|p| p.parent()?.parent())
            .map(std::path::Path::to_path_buf)
    }
}

/// The REPL; `first`: a prompt to send first, as if typed (`dsh "PROMPT"`).
pub(crate) async fn repl(
    common: &Common,
    args: &ModelArgs,
    first: Option<String>,
) -> Result<u8, Failure> {
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
    let mut live = start.live(&mut ui, &signals)?;
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
        Input::terminal(&dsh_home.join(HISTORY_FILE), &live.loaded.workspace, color)
    } else {
        Input::piped()
    };
    ui.typed
        .queued
        .extend(first.filter(|p| !p.trim().is_empty()));
    let mut interrupted_prompt = false;
    let mut failure: Option<Failure> = None;
    // Piped, the exit code says how the worst turn went, as `dsh exec` would: 1 when one
    // failed, else 3 when one stopped at a stop line.
    let mut worst = exit::OK;
    loop {
        if signals.token().is_cancelled() {
            break;
        }
        // Whether the line was typed at the prompt, seen whole before Enter: not one queued
        // while a turn ran (pastes arrive there key by key) nor `dsh "PROMPT"`'s.
        let mut at_prompt = false;
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
                        at_prompt = true;
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
        // `!command`: the person's own command, through the pipeline. Their approval only
        // when they typed it at the prompt on one line; otherwise (queued during a turn, a
        // collapsed paste, more than one line) it is asked like any call.
        if let Some(command) = text.strip_prefix('!') {
            let seen = at_prompt && !command.trim().contains('\n');
            own::own_command(command.trim(), seen, &mut live, &mut ui, &signals).await;
            ui.screen.flush();
            continue;
        }
        if text.starts_with('/') {
            let flow = match commands::parse(text) {
                Ok(command) => {
                    actions::run(command, &mut live, &mut ui, &mut input, &signals).await
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
                Flow::Resume(id, point) => {
                    // The session ends; the one named goes on in a new journal.
                    live.finish(Ending::Finished).await?;
                    start.args.resume = Some(id);
                    start.args.resume_point = point;
                    start.args.continue_ = false;
                    start.args.switch_over_flags = true;
                    live = match start.live(&mut ui, &signals) {
                        Ok(l) => l,
                        // Refused (open elsewhere, broken): a new session instead, so the
                        // person can go on.
                        Err(f) => {
                            ui.screen.line(&st.red(&format!(
                                "cannot resume it: {}; a new session starts",
                                crate::render_chain(&f.error)
                            )));
                            start.args.resume = None;
                            start.args.resume_point = None;
                            start.live(&mut ui, &signals)?
                        }
                    };
                }
            }
            continue;
        }
        let with_files = own::with_mentions(text, &mut live, &mut ui, &signals).await;
        match actions::prompt(&with_files, &mut live, &mut ui, &signals).await {
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
    let closed = live.finish(ending).await;
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
    status: &Status,
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
        status.provider,
        visible::visible(&status.model, false),
        mode.as_str(),
        loaded.config.sandbox.mode.as_str(),
        st.dim(&journal)
    )
}

/// A verify step as a line (the REPL colours it; `dsh exec` prints it on stderr).
pub(crate) fn verify_line(step: &VerifyStep) -> String {
    match step {
        VerifyStep::Running { command, .. } => {
            format!("verify: running `{}`", visible::visible(command, false))
        }
        VerifyStep::Passed => "verify: passed".to_owned(),
        VerifyStep::NotRun => {
            "verify: the command did not run (see its line above); nothing is handed to the model"
                .to_owned()
        }
        VerifyStep::Failed { round, rounds, .. } => {
            format!("verify: failed; handing the failure to the model (round {round} of {rounds})")
        }
        _ => "verify: (a step this version cannot show)".to_owned(),
    }
}
