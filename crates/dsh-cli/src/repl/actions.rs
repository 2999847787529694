//! What a prompt and each slash command do. Decisions stay with the runtime: each command
//! that acts (a prompt, `/memory add`'s write, `/model`, `/turns`, `/clear`, `/save`,
//! `/verify`) is a runtime command; this file only reads the person's input and shows the
//! replies.

use dsh_agent::{AgentError, Command, Reply, StopReason};
use dsh_core::Decision;

use super::Live;
use super::commands::{self, Command as Slash, Setting};
use super::input::Input;
use super::turn::{self, Ui};
use super::visible::visible;
use crate::signals::Signals;
use crate::words::plural;

/// What the loop does after a command.
pub(crate) enum Flow {
    Continue,
    Exit,
    /// End this session and resume the one with this id (or journal path), at this point
    /// (`None`: its end).
    Resume(String, Option<u64>),
}

/// How long the session list of `/sessions` is.
const SESSIONS_SHOWN: usize = 10;

/// A prompt: one turn (then, with `/verify on`, the runtime's check and its rounds).
pub(crate) async fn prompt(
    text: &str,
    live: &mut Live,
    ui: &mut Ui,
    signals: &Signals,
) -> Result<StopReason, AgentError> {
    let st = ui.render.style();
    let (started, before) = (std::time::Instant::now(), ui.stats.spent());
    let reply = turn::drive(
        Command::Prompt(text.to_owned()),
        &live.runtime,
        signals,
        &mut live.stream,
        ui,
    )
    .await;
    let o = match reply {
        Some(Reply::Turn(outcome)) => outcome?,
        // The runtime is gone (the session ended under it): as an interrupted turn.
        _ => return Ok(StopReason::Interrupted),
    };
    let note = match o.stop {
        StopReason::FinalAnswer => None,
        StopReason::Interrupted => Some("interrupted".to_owned()),
        StopReason::PromptBlocked => Some(format!(
            "the prompt was not sent: {}",
            visible(&o.text, false)
        )),
        other => Some(format!(
            "stopped after {}: {}",
            plural(o.steps, "step"),
            other.as_str().replace('_', " ")
        )),
    };
    if let Some(note) = note {
        ui.screen.line(&st.yellow(&note));
    }
    // The footer: what this turn took and spent (on a terminal; piped output is the answer).
    if ui.screen.terminal() {
        let spent = ui.stats.spent().since(before);
        ui.screen.line(&st.dim(&spent.footer(started.elapsed())));
    }
    Ok(o.stop)
}

/// Sends a command that needs no turn and returns its reply (`None`: the runtime stopped).
pub(crate) async fn ask(live: &mut Live, command: Command) -> Option<Reply> {
    let id = live.runtime.send(command).ok()?;
    while let Some(event) = live.stream.recv().await {
        if let dsh_agent::EventKind::Done { command, reply } = event.kind
            && command == id
        {
            return Some(reply);
        }
    }
    None
}

/// Runs one slash command.
pub(crate) async fn run(
    command: Slash,
    live: &mut Live,
    ui: &mut Ui,
    input: &mut Input,
    signals: &Signals,
) -> Flow {
    let st = ui.render.style();
    let screen = &mut ui.screen;
    match command {
        Slash::Exit => return Flow::Exit,
        Slash::Help(which) => match commands::help(which.as_deref(), screen.cols()) {
            Ok(lines) => lines.iter().for_each(|l| screen.line(l)),
            Err(e) => screen.line(&st.red(&e)),
        },
        Slash::Expand => match &ui.render.last_result {
            None => ui.screen.line(&st.dim("no tool call has finished yet")),
            Some((call, result)) => {
                let args = call
                    .as_ref()
                    .map(|c| crate::sessions::short_args(c.args()))
                    .unwrap_or_default();
                let head = format!("── {} {args} · the whole result ──", result.tool());
                ui.screen.line(&st.dim(&visible(&head, false)));
                for l in result.content().lines() {
                    ui.screen.line(&visible(l, false));
                }
                ui.screen.line(&st.dim("── end ──"));
            }
        },
        Slash::Init => {
            ui.screen
                .line(&st.dim("asking the model to survey the project and write AGENTS.md"));
            if let Err(e) = prompt(super::own::INIT_PROMPT, live, ui, signals).await {
                ui.screen
                    .line(&st.red(&format!("/init: the turn failed: {e}")));
            }
            // The configuration is the person's to write, not the model's: offered.
            let root = live.runtime.session().workspace.root().to_path_buf();
            if !root.join(".dsh/config.toml").exists() {
                let found = dsh_config::init::detect(&root);
                let what = if found.is_empty() {
                    String::new()
                } else {
                    let names: Vec<&str> = found.iter().map(|e| e.name.as_str()).collect();
                    format!(" ({} found)", names.join(", "))
                };
                ui.screen.line(&st.dim(&format!(
                    "no .dsh/config.toml here: `dsh init` writes a commented one{what} with the test command for [verify] and allow rules to accept"
                )));
            }
        }
        Slash::Clear => match ask(live, Command::Clear).await {
            Some(Reply::Recorded(Ok(()))) => ui.screen.line(
                &st.dim("history cleared (the system prompt stays; journaled as history_cleared)"),
            ),
            Some(Reply::Recorded(Err(e))) => {
                ui.screen
                    .line(&st.red(&format!("cannot clear the history: {e}")));
            }
            _ => ui
                .screen
                .line(&st.red("cannot clear the history: the session has ended")),
        },
        Slash::Tools => {
            let session = live.runtime.session();
            // As the next step will have them: with the MCP servers that became ready.
            session.sync_tools();
            let tools = session.main_tools();
            screen.line(&st.dim(&format!(
                "tools mode {} ([tools] mode, --tools-mode)",
                session.tools_mode
            )));
            let specs = session.pipeline.specs(&tools.offered());
            let width = specs
                .iter()
                .map(|s| s.name.len())
                .max()
                .unwrap_or(0)
                .max(16);
            screen.line(&st.dim(&format!(
                "{:<width$} {:<10} {:<14} {}",
                "tool", "read-only", "parallel-safe", "from"
            )));
            for s in specs {
                screen.line(&format!(
                    "{:<width$} {:<10} {:<14} {}",
                    s.name,
                    if s.read_only { "yes" } else { "no" },
                    s.parallel.as_str(),
                    super::mcp::origin(session, &s.name)
                ));
            }
            if tools.offered().contains(dsh_agent::RUN_CODE) {
                let programs: Vec<String> = session
                    .pipeline
                    .specs(&tools)
                    .iter()
                    .filter(|s| !s.reserved)
                    .map(|s| s.name.clone())
                    .collect();
                screen.line(&st.dim(&format!(
                    "run_code's programs may call: {}",
                    programs.join(", ")
                )));
            }
            screen.line(&st.dim(&format!(
                "{:<16} {:<10} {}",
                "sub-agent", "parallel", "tools"
            )));
            let pipeline = &live.runtime.session().pipeline;
            for p in live.runtime.session().profiles.iter() {
                let parallel = if p.parallel_safe(|n| pipeline.spec(n)) {
                    "yes"
                } else {
                    "no"
                };
                let line = format!("{:<16} {parallel:<10} {}", p.name, p.tools_text());
                screen.line(&visible(&line, false));
            }
        }
        Slash::Log(n) => match live.runtime.session().journal_path.as_deref() {
            Some(path) => match crate::sessions::readable_lines(path) {
                Ok(lines) => {
                    let from = lines.len().saturating_sub(n);
                    for l in &lines[from..] {
                        screen.line(&visible(l, false));
                    }
                }
                Err(e) => screen.line(&st.red(&format!("cannot read the journal: {e}"))),
            },
            None => screen.line(&st.red("this session has no journal file")),
        },
        Slash::Show(setting) => {
            let status = live.runtime.status();
            let text = match setting {
                Setting::Turns => match status.keep_turns {
                    Some(n) => format!("requests send the last {}", plural(n, "whole turn")),
                    None => "requests send every turn (/turns N keeps the last N)".to_owned(),
                },
                Setting::Verbose if ui.render.verbose => {
                    "verbose is on: reasoning is shown in full".to_owned()
                }
                Setting::Verbose => "verbose is off: reasoning is shown as one line".to_owned(),
                Setting::Verify if status.verify => "verify is on".to_owned(),
                Setting::Verify => "verify is off".to_owned(),
            };
            screen.line(&text);
        }
        Slash::Verbose(on) => {
            ui.render.verbose = on;
            ui.screen.line(&st.dim(if on {
                "reasoning is shown in full"
            } else {
                "reasoning is shown as one line"
            }));
        }
        Slash::Stats => {
            for l in ui.stats.lines() {
                ui.screen.line(&l);
            }
        }
        Slash::Permissions => {
            let session = live.runtime.session();
            let mode = session.mode();
            screen.line(&format!("mode {}", st.bold(mode.as_str())));
            if let Some(why) = session.mode_notice(mode) {
                screen.line(&st.dim(&why));
            }
            let rules = session.rules_in_force();
            for decision in [Decision::Deny, Decision::Ask, Decision::Allow] {
                let these: Vec<_> = rules.iter().filter(|r| r.decision == decision).collect();
                let name = match decision {
                    Decision::Deny => "deny",
                    Decision::Ask => "ask",
                    Decision::Allow => "allow",
                };
                if these.is_empty() {
                    screen.line(&st.dim(&format!("{name}: no rules")));
                    continue;
                }
                screen.line(&format!("{name}:"));
                // What a configuration file says reaches the terminal made visible, then styled.
                let shown: Vec<(String, String)> = these
                    .iter()
                    .map(|r| {
                        (
                            visible(&r.to_string(), false).into_owned(),
                            visible(&r.origin.to_string(), false).into_owned(),
                        )
                    })
                    .collect();
                let width = shown
                    .iter()
                    .map(|(r, _)| r.chars().count())
                    .max()
                    .unwrap_or(0);
                for (rule, origin) in shown {
                    screen.line(&format!("  {rule:<width$}  {}", st.dim(&origin)));
                }
            }
            let protected = session.protected_in_force().join(", ");
            screen.line(&format!(
                "protected (no tool writes them): {}",
                visible(&protected, false)
            ));
        }
        Slash::Cost => {
            for l in ui.stats.cost_lines() {
                ui.screen.line(&l);
            }
        }
        Slash::Undo(n) => super::undo::undo(n, live, ui, signals).await,
        Slash::Compact(focus) => {
            // Driven like a turn: the summary request's events show, Esc interrupts it.
            let reply = turn::drive(
                Command::Compact(focus),
                &live.runtime,
                signals,
                &mut live.stream,
                ui,
            )
            .await;
            let st = ui.render.style();
            match reply {
                Some(Reply::Compacted(Ok(true))) => {}
                Some(Reply::Compacted(Ok(false))) => ui.screen.line(&st.dim(
                    "no turns were summarized (the last two always stay whole, and turns already summarized are not again)",
                )),
                Some(Reply::Compacted(Err(e))) => {
                    ui.screen.line(&st.red(&format!("/compact: {e}")));
                }
                _ => ui.screen.line(&st.red("/compact: the session has ended")),
            }
        }
        Slash::Turns(n) => {
            ask(live, Command::KeepTurns(n)).await;
            ui.screen.line(&st.dim(&match n {
                Some(n) => format!(
                    "the next requests send the last {}",
                    plural(n, "whole turn")
                ),
                None => "the next requests send every turn".to_owned(),
            }));
        }
        Slash::Mode(mode) => {
            let session = live.runtime.session();
            let next = mode.unwrap_or_else(|| dsh_agent::next_mode(session.mode()));
            match session.set_mode(next, "person") {
                Ok(()) => {
                    screen.line(&format!("mode {}", st.bold(next.as_str())));
                    if let Some(why) = session.mode_notice(next) {
                        screen.line(&st.dim(&why));
                    }
                }
                Err(e) => screen.line(&st.red(&format!("/mode: {e}"))),
            }
        }
        Slash::Verify(on) => {
            let rounds = live.loaded.config.verify.max_rounds.max(1);
            let command = live
                .loaded
                .config
                .verify
                .command
                .clone()
                .unwrap_or_default();
            match ask(live, Command::Verify(on)).await {
                Some(Reply::Refused(why)) => {
                    ui.screen.line(&st.red(&format!("/verify on: {why}")));
                }
                _ if on => ui.screen.line(&st.dim(&format!(
                    "after a reply that changed files, `{}` runs; a failure goes back to the model at most {}",
                    visible(&command, false),
                    plural(rounds, "time"),
                ))),
                _ => ui.screen.line(&st.dim("verify is off")),
            }
        }
        Slash::Memory(action) => super::memory::memory(action, live, ui, signals).await,
        Slash::Model(choice) => super::model::model(choice, live, ui, input, signals).await,
        Slash::Reload => {
            return match live.runtime.session().id.clone() {
                id if !id.is_empty() => {
                    screen.line(&st.dim(
                        "reloading the configuration: this session ends and goes on in a new journal",
                    ));
                    Flow::Resume(id, None)
                }
                _ => Flow::Continue,
            };
        }
        Slash::Save(name) => {
            let id = live.runtime.session().id.clone();
            // `id` when no name is given: the name then resolves as the id does.
            let name = name.unwrap_or_else(|| id.clone());
            match ask(live, Command::Name(name.clone())).await {
                Some(Reply::Recorded(Ok(()))) => ui.screen.line(&st.dim(&format!(
                    "saved as {}: /load {0} (or dsh --resume {0}) goes on from this point",
                    visible(&name, false),
                ))),
                Some(Reply::Recorded(Err(e))) => {
                    ui.screen.line(&st.red(&format!("cannot save: {e}")));
                }
                _ => ui
                    .screen
                    .line(&st.red("cannot save: the session has ended")),
            }
        }
        Slash::Load(name) => {
            let Some(home) = live.dsh_home() else {
                screen.line(&st.red("this session has no journal file"));
                return Flow::Continue;
            };
            // Only a name saved in this workspace; resumed as `--resume NAME` would be, at
            // the point the save names.
            match dsh_agent::sessions::by_name(&home, &name, Some(&live.loaded.workspace)) {
                Some(found)
                    if dsh_agent::sessions::summarize(&found.path)
                        .is_ok_and(|s| s.workspace == live.loaded.workspace) =>
                {
                    screen.line(&st.dim(&format!(
                        "loading {}: this session ends",
                        visible(&name, false)
                    )));
                    // The session found, at the point the save names (not the name again: an
                    // id equal to it would win).
                    return Flow::Resume(found.path.display().to_string(), found.point);
                }
                _ => screen.line(&st.red(&format!(
                    "/load: no session of this workspace was saved as {} (/sessions lists them)",
                    visible(&name, false)
                ))),
            }
        }
        Slash::Sessions => {
            let Some(home) = live.dsh_home() else {
                return Flow::Continue;
            };
            let (all, _) = dsh_agent::sessions::list(&home);
            let mine: Vec<_> = all
                .into_iter()
                .filter(|s| s.workspace == live.loaded.workspace)
                .collect();
            let chains = dsh_agent::sessions::chains(&mine);
            if chains.is_empty() {
                screen.line(&st.dim("no sessions of this workspace yet"));
                return Flow::Continue;
            }
            // The list's columns, without the workspace (it is this one).
            let header = crate::sessions::LIST_HEADER.trim_end_matches("WORKSPACE");
            screen.line(&st.dim(header.trim_end()));
            let now = std::time::SystemTime::now();
            for c in chains.iter().take(SESSIONS_SHOWN) {
                let here = if c.newest.id == live.runtime.session().id {
                    " (this one)"
                } else {
                    ""
                };
                let line = crate::sessions::chain_line(c, now, false);
                screen.line(&format!("{}{here}", visible(&line, false)));
            }
            if chains.len() > SESSIONS_SHOWN {
                screen.line(&st.dim(&format!(
                    "… and {} more (dsh sessions list --workspace . shows them all)",
                    chains.len() - SESSIONS_SHOWN
                )));
            }
        }
        Slash::Mcp => {
            for line in super::mcp::lines(live.runtime.session(), st) {
                screen.line(&line);
            }
        }
        Slash::Plugins => {
            let session = live.runtime.session();
            let plugins = session.plugins();
            if plugins.is_empty() {
                screen.line(&st.dim(
                    "no plugins: a plugin is a folder with a plugin.toml, under plugins/ beside your user config or .dsh/plugins/ of a trusted project",
                ));
            }
            for p in plugins {
                let tools = if p.tools.is_empty() {
                    "no tools".to_owned()
                } else {
                    p.tools.join(", ")
                };
                screen.line(&format!(
                    "{}  {}",
                    st.bold(&visible(&p.name, false)),
                    st.dim(&visible(
                        &format!(
                            "({}, {}) {tools}: {}",
                            p.source.as_str(),
                            p.dir.display(),
                            p.state.describe()
                        ),
                        false
                    ))
                ));
            }
        }
        Slash::Skills => {
            let session = live.runtime.session();
            let skills = session.skills();
            if skills.is_empty() {
                screen.line(&st.dim(
                    "no skills: a skill is a folder with a SKILL.md, under .dsh/skills/ or .claude/skills/ of a trusted project or skills/ beside your user config (/reload rescans)",
                ));
            }
            for s in skills {
                screen.line(&format!(
                    "{}  {}",
                    st.bold(&visible(&s.name, false)),
                    st.dim(&format!(
                        "({}) {}",
                        s.source,
                        visible(&s.description, false)
                    ))
                ));
            }
        }
    }
    Flow::Continue
}
