//! What a prompt and each slash command do. Decisions stay with the runtime: each command
//! that acts (a prompt, `/memory add`'s write, `/model`, `/turns`, `/clear`, `/save`,
//! `/verify`) is a runtime command; this file only reads the person's input and shows the
//! replies.

use dsh_agent::{AgentError, Command, Reply, StopReason};
use dsh_core::{Decision, ToolCall, ToolSet};
use serde_json::json;

use super::commands::{self, Command as Slash, MemoryAction, Setting};
use super::input::{Input, Read};
use super::turn::{self, Ui};
use super::visible::visible;
use super::{Live, model_pick};
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

/// The memory file `/memory` works on.
const MEMORY: &str = dsh_policy::MEMORY_FILE;

/// The largest memory file `/memory add` rewrites.
const MEMORY_MAX_BYTES: usize = 256 * 1024;

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
async fn ask(live: &mut Live, command: Command) -> Option<Reply> {
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
        Slash::Help(which) => match commands::help(which.as_deref()) {
            Ok(lines) => lines.iter().for_each(|l| screen.line(l)),
            Err(e) => screen.line(&st.red(&e)),
        },
        Slash::Init => {
            ui.screen
                .line(&st.dim("asking the model to survey the project and write AGENTS.md"));
            if let Err(e) = prompt(INIT_PROMPT, live, ui, signals).await {
                ui.screen
                    .line(&st.red(&format!("/init: the turn failed: {e}")));
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
            let specs = live.runtime.session().pipeline.specs(&ToolSet::all());
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
        Slash::Memory(action) => memory(action, live, ui, signals).await,
        Slash::Model(choice) => model(choice, live, ui, input, signals).await,
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
            let n = live.loaded.config.mcp.servers.len();
            screen.line(&st.dim(&extension_line("MCP servers", "[mcp.servers.NAME]", n)));
        }
        Slash::Plugins => {
            let n = live.loaded.config.plugins.len();
            screen.line(&st.dim(&extension_line("plugins", "[plugins.NAME]", n)));
        }
        Slash::Skills => {
            let n = live.loaded.config.skills.len();
            screen.line(&st.dim(&extension_line("skills", "[skills.NAME]", n)));
        }
    }
    Flow::Continue
}

fn extension_line(what: &str, key: &str, configured: usize) -> String {
    if configured == 0 {
        format!("none configured (add {key} to the configuration); {what} are not implemented yet")
    } else {
        format!(
            "{configured} configured under {key}, but {what} are not implemented yet: none is loaded"
        )
    }
}

/// `/memory`: shows, adds a line to or empties the project memory file. Writes go through
/// the pipeline as the person's own calls (the memory policy asks, so the person approves
/// what goes into every later system prompt); the system prompt is rebuilt at once.
async fn memory(action: MemoryAction, live: &mut Live, ui: &mut Ui, signals: &Signals) {
    let st = ui.render.style();
    // The person asked for the memory file: never a file a symlink on the way points to
    // (their command approves a write of the memory file, and of nothing else).
    match live.runtime.session().workspace.resolve(MEMORY) {
        Ok(r) if dsh_policy::is_memory_file(&r.rel) => {}
        Ok(r) => {
            ui.screen.line(&st.red(&format!(
                "/memory: {MEMORY} leads to {} through a symlink; /memory reads and writes only the memory file itself",
                visible(&r.rel.display().to_string(), false)
            )));
            return;
        }
        Err(e) => {
            ui.screen.line(&st.red(&format!("/memory: {e}")));
            return;
        }
    }
    let current = read_memory(live);
    let new_text = match (&action, &current) {
        (MemoryAction::Show, Ok(None)) => {
            ui.screen
                .line(&st.dim(&format!("no {MEMORY} yet (/memory add TEXT starts it)")));
            return;
        }
        (MemoryAction::Show, Ok(Some(text))) => {
            ui.screen.line(&st.dim(&format!("{MEMORY}:")));
            for l in text.lines() {
                ui.screen.line(&format!("  {}", visible(l, false)));
            }
            return;
        }
        (_, Err(e)) => {
            ui.screen.line(&st.red(&format!("/memory: {e}")));
            return;
        }
        (MemoryAction::Clear, Ok(None)) => {
            ui.screen.line(&st.dim(&format!("no {MEMORY} to clear")));
            return;
        }
        (MemoryAction::Clear, Ok(Some(_))) => String::new(),
        (MemoryAction::Add(line), Ok(text)) => {
            let mut t = text.clone().unwrap_or_default();
            if !t.is_empty() && !t.ends_with('\n') {
                t.push('\n');
            }
            t.push_str(&format!("- {}\n", line.trim()));
            t
        }
    };
    let id = dsh_agent::new_session_id();
    let mut calls = Vec::new();
    if matches!(current, Ok(Some(_))) {
        calls.push(ToolCall::new(
            format!("memory-read-{id}"),
            "read_file",
            json!({"path": MEMORY}),
        ));
    }
    calls.push(ToolCall::new(
        format!("memory-write-{id}"),
        "write_file",
        json!({"path": MEMORY, "content": new_text}),
    ));
    // Typed at a terminal, the command is the person's approval; piped in, nobody typed it
    // and it is judged like a batch line (the memory file's write is then asked, and
    // nobody answers).
    let source = if ui.screen.terminal() {
        dsh_core::CallSource::User
    } else {
        dsh_core::CallSource::Batch
    };
    let own = Command::OwnCalls { calls, source };
    let reply = turn::drive(own, &live.runtime, signals, &mut live.stream, ui).await;
    let written = match reply {
        Some(Reply::Calls(Ok(o))) => o.results.last().is_some_and(|r| r.ok()),
        _ => false,
    };
    if written {
        ask(live, Command::ReloadPrompt).await;
        ui.screen.line(&st.dim(&format!(
            "{MEMORY} updated; the system prompt carries it from the next request"
        )));
    } else {
        ui.screen
            .line(&st.yellow(&format!("{MEMORY} was not changed")));
    }
}

/// `text` with the content of each workspace file it mentions (`@path`) appended under its
/// path, each read by the person's own `read_file` call through the pipeline; a refused or
/// failed read is shown (its line says why) and leaves that file out.
pub(crate) async fn with_mentions(
    text: &str,
    live: &mut Live,
    ui: &mut Ui,
    signals: &Signals,
) -> String {
    let root = live.runtime.session().workspace.root().to_path_buf();
    let paths = super::mention::mentioned(text, &root);
    if paths.is_empty() {
        return text.to_owned();
    }
    let id = dsh_agent::new_session_id();
    let calls: Vec<ToolCall> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| ToolCall::new(format!("mention-{id}-{i}"), "read_file", json!({"path": p})))
        .collect();
    let source = if ui.screen.terminal() {
        dsh_core::CallSource::User
    } else {
        dsh_core::CallSource::Batch
    };
    let own = Command::OwnCalls { calls, source };
    let reply = turn::drive(own, &live.runtime, signals, &mut live.stream, ui).await;
    let Some(Reply::Calls(Ok(outcome))) = reply else {
        return text.to_owned();
    };
    let mut out = text.to_owned();
    for (path, result) in paths.iter().zip(&outcome.results) {
        if result.ok() {
            out.push_str(&format!("\n\n[@{path}]\n{}", result.content()));
        }
    }
    out
}

/// `/init`'s request to the model: a prompt like any other, so its file write goes through the
/// pipeline and is asked like any write.
pub(crate) const INIT_PROMPT: &str = "Survey this project with your read-only tools: its layout, \
languages, how to build it, how to run its tests and linters, and the conventions its code \
follows. Then write AGENTS.md at the workspace root with write_file: a short guide for a coding \
agent working here (the commands to build, test and lint; where things live; conventions to \
keep; anything surprising). If AGENTS.md exists, read it first and improve it with edit_file \
instead of replacing it. Keep it under 80 lines, and say what you wrote.";

/// How much of a `!command`'s output goes to the model (the whole is in the journal and the
/// result's spill).
const NOTE_MAX_CHARS: usize = 8_000;

/// `!command`: the person's own command, run through the pipeline like any call — typed at a
/// terminal it is its own approval (source `user`), but deny rules, the structural denials,
/// the protected paths and the sandbox hold; piped in, nobody typed it, so it is judged like
/// a batch line. The command and what it printed go to the model with the next prompt.
pub(crate) async fn own_command(command: &str, live: &mut Live, ui: &mut Ui, signals: &Signals) {
    let st = ui.render.style();
    if command.is_empty() {
        ui.screen
            .line(&st.red("!: say which command, e.g. !cargo test"));
        return;
    }
    let call_id = format!("user-shell-{}", dsh_agent::new_session_id());
    let call = ToolCall::new(call_id.as_str(), "run_shell", json!({"command": command}));
    let source = if ui.screen.terminal() {
        dsh_core::CallSource::User
    } else {
        dsh_core::CallSource::Batch
    };
    let own = Command::OwnCalls {
        calls: vec![call],
        source,
    };
    let reply = turn::drive(own, &live.runtime, signals, &mut live.stream, ui).await;
    let Some(Reply::Calls(Ok(outcome))) = reply else {
        ui.screen
            .line(&st.red("!: the command did not run (the session ended)"));
        return;
    };
    let Some(result) = outcome.results.first() else {
        return;
    };
    use dsh_core::FailureKind as K;
    let how = match (result.failure_kind(), result.exit_code()) {
        (None, Some(code)) => format!("it exited {code}"),
        (None, None) => "it finished".to_owned(),
        // Refused or never started: its line above says why; the model hears nothing of it.
        (
            Some(
                K::Denied
                | K::Rejected
                | K::Unavailable
                | K::CancelledBefore
                | K::InvalidArgs
                | K::UnknownTool,
            ),
            _,
        ) => {
            ui.screen
                .line(&st.dim("it did not run; nothing goes to the model"));
            return;
        }
        (Some(kind), _) => format!(
            "it was not run to the end ({})",
            kind.as_str().replace('_', " ")
        ),
    };
    let mut output: String = result.content().chars().take(NOTE_MAX_CHARS).collect();
    if output.len() < result.content().len() {
        output.push_str("\n[… cut; the whole output is in the session's journal]");
    }
    let note = format!("I ran `{command}` myself; {how}. What it printed:\n{output}");
    match ask(
        live,
        Command::Note {
            call_id,
            text: note,
        },
    )
    .await
    {
        Some(Reply::Recorded(Ok(()))) => ui
            .screen
            .line(&st.dim("the command and its output go to the model with your next prompt")),
        Some(Reply::Recorded(Err(e))) => {
            ui.screen
                .line(&st.red(&format!("!: cannot record it: {e}")));
        }
        _ => {}
    }
}

/// The memory file's whole text (`None`: it does not exist), read through the workspace's
/// confinement.
fn read_memory(live: &Live) -> Result<Option<String>, String> {
    use std::io::Read as _;
    let ws = &live.runtime.session().workspace;
    let (file, _) = match ws.open_read(MEMORY) {
        Ok(f) => f,
        Err(_) if !ws.root().join(MEMORY).exists() => return Ok(None),
        Err(e) => return Err(format!("cannot read {MEMORY}: {e}")),
    };
    let mut bytes = Vec::new();
    file.take(MEMORY_MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {MEMORY}: {e}"))?;
    if bytes.len() > MEMORY_MAX_BYTES {
        return Err(format!(
            "{MEMORY} is over {} KiB; edit it yourself",
            MEMORY_MAX_BYTES / 1024
        ));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| format!("{MEMORY} is not UTF-8 text; edit it yourself"))
}

/// `/model [PROVIDER/MODEL]`: switches the model of the next request. Without an argument,
/// a picker of the configured and known models, then the endpoint and the key's variable.
/// The picker and the line editor read the terminal on threads of their own, which a
/// hung-up terminal may keep spinning: they are not waited for once the session is over.
async fn model(
    choice: Option<String>,
    live: &mut Live,
    ui: &mut Ui,
    input: &mut Input,
    signals: &Signals,
) {
    let st = ui.render.style();
    let env = dsh_config::process_env();
    let status = live.runtime.status();
    // What the endpoint serves, beside the presets (it may list nothing, or not answer).
    let served = if choice.is_none() {
        match ask(live, Command::ListModels).await {
            Some(Reply::Models(Ok(names))) => names,
            Some(Reply::Models(Err(why))) => {
                ui.screen.line(&st.dim(&format!(
                    "the endpoint does not list its models ({}); the presets follow",
                    visible(&why, false)
                )));
                Vec::new()
            }
            _ => Vec::new(),
        }
    } else {
        Vec::new()
    };
    let mut choices = dsh_agent::model_choices(&live.loaded, &status.model);
    // A served model is the current provider at the current endpoint: after the current
    // model, before the presets.
    if let Ok(provider) = status.provider.parse::<dsh_config::Provider>() {
        let at = 1.min(choices.len());
        let extra: Vec<dsh_agent::ModelChoice> = served
            .iter()
            .filter(|n| **n != status.model)
            .map(|n| dsh_agent::ModelChoice {
                provider,
                model: n.clone(),
                base_url: Some(status.base_url.clone()),
                api_key_env: None,
            })
            .collect();
        choices.retain(|c| {
            !extra
                .iter()
                .any(|e| e.provider == c.provider && e.model == c.model)
        });
        choices.splice(at..at, extra);
    }
    let label = |c: &dsh_agent::ModelChoice| {
        visible(&format!("{}/{}", c.provider.as_str(), c.model), false).into_owned()
    };
    let mut picked = match choice {
        Some(text) => match parse_choice(&text, &status.provider) {
            Ok(c) => c,
            Err(e) => {
                ui.screen.line(&st.red(&format!("/model: {e}")));
                return;
            }
        },
        None => {
            if !ui.screen.terminal() {
                ui.screen
                    .line(&st.dim("/model PROVIDER/MODEL switches; known models:"));
                for c in &choices {
                    ui.screen.line(&format!("  {}", label(c)));
                }
                return;
            }
            ui.screen.flush();
            let items: Vec<String> = choices.iter().map(label).collect();
            let title = "pick a model (↑/↓, Enter; Esc leaves it as it is)".to_owned();
            let picked = tokio::select! {
                p = tokio::task::spawn_blocking(move || model_pick::pick(&title, &items, 0, st)) => p,
                () = signals.token().cancelled() => return,
            };
            let Ok(Ok(Some(i))) = picked else {
                ui.screen.line(&st.dim("the model stays"));
                return;
            };
            let mut c = choices[i].clone();
            // A model the endpoint serves needs no questions: same endpoint, same key.
            if c.base_url.is_some() && c.provider.as_str() == status.provider {
                return switch(live, ui, &env, c).await;
            }
            let (base, key) = dsh_agent::choice_defaults(&live.loaded, &env, &c);
            // A hosted provider whose key is not set cannot be used: said before any question.
            if let Some(var) = &key
                && base.trim_end_matches('/') == c.provider.default_base_url()
                && env.get(var).is_none_or(|v| v.trim().is_empty())
            {
                ui.screen.line(&st.yellow(&format!(
                    "{} needs its key: export {var}=<your key> (or name another variable under [model] api_key_env), then /model again",
                    c.provider.as_str()
                )));
                return;
            }
            ui.screen.line(&st.dim("base URL (Enter keeps it):"));
            ui.screen.flush();
            let url = tokio::select! {
                read = input.read(&base) => read,
                () = signals.token().cancelled() => return,
            };
            if let Ok(Read::Line(url)) = url {
                c.base_url = Some(url.trim().to_owned()).filter(|u| !u.is_empty());
            }
            ui.screen.line(&st.dim(
                "the environment variable holding the API key (Enter keeps it; empty: none):",
            ));
            ui.screen.flush();
            let var = tokio::select! {
                read = input.read(key.as_deref().unwrap_or("")) => read,
                () = signals.token().cancelled() => return,
            };
            if let Ok(Read::Line(var)) = var {
                c.api_key_env = Some(var.trim().to_owned());
            }
            c
        }
    };
    if picked.api_key_env.as_deref() == Some("") {
        picked.api_key_env = None;
    }
    switch(live, ui, &env, picked).await;
}

/// Switches to `picked` (journaled as `model_changed`, so `/reload` and a resume keep it).
async fn switch(
    live: &mut Live,
    ui: &mut Ui,
    env: &std::collections::BTreeMap<String, String>,
    picked: dsh_agent::ModelChoice,
) {
    let st = ui.render.style();
    match dsh_agent::provider_for_choice(&live.loaded, env, &picked) {
        Ok(provider) => match ask(live, Command::SwitchModel(provider)).await {
            Some(Reply::Recorded(Err(e))) => {
                ui.screen.line(&st.red(&format!("/model: {e}")));
            }
            _ => {
                let status = live.runtime.status();
                ui.screen.line(&st.dim(&format!(
                    "the next request goes to {}/{}",
                    status.provider,
                    visible(&status.model, false)
                )));
            }
        },
        Err(e) => ui.screen.line(&st.red(&format!("/model: {e}"))),
    }
}

/// `PROVIDER/MODEL`, or a model of the current provider.
fn parse_choice(text: &str, current: &str) -> Result<dsh_agent::ModelChoice, String> {
    let (provider, model) = match text.split_once('/') {
        Some((p, m)) if p.parse::<dsh_config::Provider>().is_ok() => (p, m),
        _ => (current, text),
    };
    let provider: dsh_config::Provider = provider.parse()?;
    if model.trim().is_empty() || model.chars().any(char::is_control) {
        return Err(format!("{text:?} names no model"));
    }
    Ok(dsh_agent::ModelChoice {
        provider,
        model: model.trim().to_owned(),
        base_url: None,
        api_key_env: None,
    })
}
