//! `dsh` alone: the interactive REPL. A consumer of agent events like `dsh exec` — no
//! decision, rule or tool logic lives here: the session is started as for `exec`
//! (`start.rs`), each prompt is a turn of the main agent, and what the person sees is
//! rendered from the events. On a terminal a person answers `ask`s; with piped stdin it is
//! a plain line reader, headless (asks end as `unavailable`) and without escape codes.

mod approval;
mod commands;
mod highlight;
mod input;
mod keys;
mod markdown;
mod render;
mod screen;
mod style;
mod toolline;
mod turn;
mod visible;

use std::io::IsTerminal;

use anyhow::anyhow;
use dsh_agent::{Approval, Ending, StopReason};
use dsh_core::ToolSet;

use crate::signals;
use crate::start::{self, ModelArgs, Started};
use crate::{Common, Failure, exit};

use commands::Command;
use input::{Input, Read};
use render::Render;
use screen::Screen;

/// The history file under `DSH_HOME`.
const HISTORY_FILE: &str = "history.txt";

pub(crate) async fn repl(common: &Common, args: &ModelArgs) -> Result<u8, Failure> {
    if common.json {
        return Err(Failure::usage(anyhow!(
            "--json is for `dsh exec` and `dsh batch`; the REPL renders for a person"
        )));
    }
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let color = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    // A person answers asks only where one can: on a terminal, and not under --yolo.
    let approval = (terminal && !common.yolo).then_some(Approval::Interactive);
    let Started {
        loaded,
        session,
        mut agent,
        mut stream,
        signals,
        resumed,
        ..
    } = start::start(common, args, approval)?;
    let mut screen = Screen::new(terminal);
    let mut render = Render::new(terminal, color);
    let st = render.style();

    screen.line(&header(
        &loaded,
        &session,
        agent.model(),
        terminal,
        common.yolo,
        st,
    ));
    if let Some(r) = &resumed {
        screen.line(&st.dim(&format!(
            "resuming session {} ({} turns)",
            r.session, r.turns
        )));
        for (call_id, tool, closed) in &r.cut_off {
            screen.line(&st.yellow(&format!(
                "call {call_id} ({tool}) was cut off when the old process ended: closed as {closed}"
            )));
        }
    }
    if agent.cost_budget_unenforced() {
        screen.line(&st.yellow(&format!(
            "[limits] max_cost_usd is set, but the prices of {} are unknown, so it cannot stop a turn; set [model] price",
            agent.model()
        )));
    }
    if terminal {
        screen.line(&st.dim("/help lists the commands; Ctrl-D leaves"));
    }
    screen.flush();

    let dsh_home = session
        .journal_path
        .as_deref()
        .and_then(|p| p.parent()?.parent())
        .map(std::path::Path::to_path_buf)
        .ok_or_else(|| Failure::harness(anyhow!("the session has no journal file")))?;
    let mut input = if terminal {
        Input::terminal(&dsh_home.join(HISTORY_FILE), &loaded.workspace)
    } else {
        Input::piped()
    };
    let mut typed = turn::TypeAhead::default();
    let mut interrupted_prompt = false;
    let mut failure: Option<Failure> = None;
    // Piped, the exit code says how the worst turn went, as `dsh exec` would: 1 when one
    // failed, else 3 when one stopped at a stop line.
    let mut worst = exit::OK;
    loop {
        if signals.token().is_cancelled() {
            break;
        }
        let line = match typed.queued.pop_front() {
            Some(line) => {
                screen.line(&format!(
                    "{} {}",
                    st.dim("›"),
                    visible::visible(&line, false)
                ));
                screen.flush();
                line
            }
            None => {
                let pending = std::mem::take(&mut typed.text);
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
                        screen.line(&st.dim("(Ctrl-C again, Ctrl-D or /exit leaves)"));
                        screen.flush();
                        continue;
                    }
                    Ok(Read::Eof) => break,
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
            match commands::parse(text) {
                Ok(Command::Exit) => break,
                Ok(command) => {
                    run_command(command, &mut agent, &session, &mut render, &mut screen);
                }
                Err(e) => screen.line(&st.red(&e)),
            }
            screen.flush();
            continue;
        }
        let outcome = turn::run(
            &session,
            &mut agent,
            text,
            &mut stream,
            &mut screen,
            &mut render,
            signals.token(),
            &mut typed,
        )
        .await;
        match outcome {
            Ok(o) => {
                let note = match o.stop {
                    StopReason::FinalAnswer => None,
                    StopReason::Interrupted => Some("interrupted".to_owned()),
                    other => Some(format!(
                        "stopped after {} steps: {}",
                        o.steps,
                        other.as_str().replace('_', " ")
                    )),
                };
                if let Some(note) = note {
                    screen.line(&st.yellow(&note));
                }
                if worst == exit::OK
                    && !matches!(o.stop, StopReason::FinalAnswer | StopReason::Interrupted)
                {
                    worst = crate::exec::STOPPED;
                }
            }
            // The turn ended on a fault (the model failed for good): said, and the next
            // prompt may try again. A journal that cannot record ends the session.
            Err(e) => {
                screen.line(&st.red(&format!("the turn failed: {e}")));
                worst = exit::HARNESS;
                if matches!(e, dsh_agent::AgentError::Journal(_)) {
                    screen.flush();
                    failure = Some(Failure::harness(anyhow::Error::new(e)));
                    break;
                }
            }
        }
        screen.flush();
    }
    screen.clear_live();
    let totals = agent.totals();
    drop(agent);
    let ending = if failure.is_some() {
        Ending::Error
    } else {
        signals.ending(Ending::Finished)
    };
    let closed = session.finish(ending, totals);
    drop(session);
    if let Some(f) = failure {
        return Err(f);
    }
    closed.map_err(|e| Failure::harness(anyhow::Error::new(e)))?;
    let code = if terminal { exit::OK } else { worst };
    Ok(signals::exit_code(ending).unwrap_or(code))
}

/// The one-line header: workspace, provider and model, sandbox, trust, where the session is
/// journaled.
fn header(
    loaded: &dsh_config::Loaded,
    session: &dsh_agent::Session,
    model: &str,
    terminal: bool,
    yolo: bool,
    st: style::Style,
) -> String {
    let provider = loaded.config.model.provider.as_str();
    let trust = if loaded.trusted {
        "trusted"
    } else {
        "untrusted"
    };
    let approvals = match (yolo, terminal) {
        (true, _) => "approvals: --yolo",
        (false, true) => "approvals: you",
        (false, false) => "approvals: none (piped)",
    };
    let journal = session
        .journal_path
        .as_deref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    format!(
        "{} {} · {provider}/{model} · sandbox {} · {trust} · {approvals} · {}",
        st.bold("dsh"),
        visible::visible(&loaded.workspace.display().to_string(), false),
        loaded.config.sandbox.mode.as_str(),
        st.dim(&journal)
    )
}

/// A slash command other than `/exit`.
fn run_command(
    command: Command,
    agent: &mut dsh_agent::Agent,
    session: &dsh_agent::Session,
    render: &mut Render,
    screen: &mut Screen,
) {
    let st = render.style();
    match command {
        Command::Help(which) => match commands::help(which.as_deref()) {
            Ok(lines) => lines.iter().for_each(|l| screen.line(l)),
            Err(e) => screen.line(&st.red(&e)),
        },
        Command::Clear => match agent.clear_history() {
            Ok(()) => screen.line(
                &st.dim("history cleared (the system prompt stays; journaled as history_cleared)"),
            ),
            Err(e) => screen.line(&st.red(&format!("cannot clear the history: {e}"))),
        },
        Command::Tools => {
            let specs = session.pipeline.specs(&ToolSet::All);
            screen.line(&st.dim(&format!(
                "{:<16} {:<10} {:<14} {}",
                "tool", "read-only", "parallel-safe", "from"
            )));
            for s in specs {
                screen.line(&format!(
                    "{:<16} {:<10} {:<14} {}",
                    s.name,
                    if s.read_only { "yes" } else { "no" },
                    s.parallel.as_str(),
                    "built-in"
                ));
            }
        }
        Command::Log(n) => match session.journal_path.as_deref() {
            Some(path) => match crate::sessions::readable_lines(path) {
                Ok(lines) => {
                    let from = lines.len().saturating_sub(n);
                    for l in &lines[from..] {
                        screen.line(&visible::visible(l, false));
                    }
                }
                Err(e) => screen.line(&st.red(&format!("cannot read the journal: {e}"))),
            },
            None => screen.line(&st.red("this session has no journal file")),
        },
        Command::Verbose(on) => {
            render.verbose = on;
            screen.line(&st.dim(if on {
                "reasoning is shown in full"
            } else {
                "reasoning is shown as one line"
            }));
        }
        Command::Exit => {}
    }
}
