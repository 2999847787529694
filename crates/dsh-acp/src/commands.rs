//! The slash commands that make sense without a terminal, advertised to the client as
//! available commands and run when a prompt is one of them: each is a runtime command (or a
//! read of the session), answered as the agent's message. A prompt starting with `/` that
//! names none of them goes to the model as text (a path, say).

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, UnstructuredCommandInput,
};
use dsh_agent::runtime::{UndoReport, Undone};
use dsh_agent::{Command, Reply, Session};
use dsh_core::CallSource;

/// What a slash command does.
pub(crate) enum Slash {
    /// Ask the runtime; its reply is said with [`said`].
    Run(Command),
    /// Said at once (a read of the session).
    Say(String),
}

/// Name, description and the hint for its argument.
const COMMANDS: &[(&str, &str, Option<&str>)] = &[
    (
        "compact",
        "Summarize the oldest turns now, keeping what the text names",
        Some("what to keep (optional)"),
    ),
    (
        "clear",
        "Empty the conversation (the journal keeps it)",
        None,
    ),
    (
        "undo",
        "Put back the files the last N turns changed with the file tools",
        Some("N (default 1)"),
    ),
    (
        "verify",
        "Run the configured check after each turn that changes files",
        Some("on | off"),
    ),
    (
        "turns",
        "Send only the last N whole turns to the model",
        Some("N | all"),
    ),
    (
        "save",
        "Name the session, so `dsh --resume NAME` finds it",
        Some("NAME"),
    ),
    ("tools", "The tools the model has", None),
    ("mcp", "The MCP servers, their state and tools", None),
];

/// The commands as `available_commands_update` advertises them.
pub(crate) fn available() -> Vec<AvailableCommand> {
    COMMANDS
        .iter()
        .map(|(name, description, hint)| {
            let c = AvailableCommand::new(*name, *description);
            match hint {
                Some(h) => c.input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(*h),
                )),
                None => c,
            }
        })
        .collect()
}

/// The command `text` runs, if it is one (`Err`: it is one, used wrongly).
pub(crate) fn parse(text: &str, session: &Session) -> Option<Result<Slash, String>> {
    let rest = text.trim().strip_prefix('/')?;
    let (name, arg) = rest
        .split_once(char::is_whitespace)
        .map_or((rest, ""), |(n, a)| (n, a.trim()));
    if !COMMANDS.iter().any(|(n, ..)| *n == name) {
        return None;
    }
    Some(match (name, arg) {
        ("compact", focus) => Ok(Slash::Run(Command::Compact(
            (!focus.is_empty()).then(|| focus.to_owned()),
        ))),
        ("clear", "") => Ok(Slash::Run(Command::Clear)),
        ("undo", n) => match if n.is_empty() {
            Ok(1)
        } else {
            n.parse::<usize>()
        } {
            Ok(turns) if turns > 0 => Ok(Slash::Run(Command::Undo {
                turns,
                // Typed by the person: its asks are theirs, as at the REPL.
                source: CallSource::User,
            })),
            _ => Err(format!("/undo takes a number of turns, not `{n}`")),
        },
        ("verify", "on") => Ok(Slash::Run(Command::Verify(true))),
        ("verify", "off") => Ok(Slash::Run(Command::Verify(false))),
        ("turns", "all") => Ok(Slash::Run(Command::KeepTurns(None))),
        ("turns", n) => match n.parse::<usize>() {
            Ok(n) if n > 0 => Ok(Slash::Run(Command::KeepTurns(Some(n)))),
            _ => Err(format!("/turns takes a number or `all`, not `{n}`")),
        },
        ("save", name) if !name.is_empty() => Ok(Slash::Run(Command::Name(name.to_owned()))),
        ("tools", "") => Ok(Slash::Say(tools(session))),
        ("mcp", "") => Ok(Slash::Say(mcp(session))),
        (name, _) => Err(format!(
            "/{name}: {}",
            COMMANDS
                .iter()
                .find(|(n, ..)| *n == name)
                .and_then(|(_, _, hint)| *hint)
                .map_or_else(|| "takes no argument".to_owned(), |h| format!("takes {h}"))
        )),
    })
}

/// What the runtime's reply to a slash command says.
pub(crate) fn said(reply: Reply) -> String {
    match reply {
        Reply::Compacted(Ok(true)) => "the oldest turns are summarized".to_owned(),
        Reply::Compacted(Ok(false)) => "too little to summarize yet".to_owned(),
        Reply::Compacted(Err(e)) => format!("could not summarize: {e}"),
        Reply::Recorded(Ok(())) | Reply::Done => "done".to_owned(),
        Reply::Recorded(Err(e)) => format!("the journal refused it: {e}"),
        Reply::Refused(why) => why,
        Reply::Undone(Ok(report)) => undone(&report),
        Reply::Undone(Err(e)) => format!("/undo: {e}"),
        _ => "the session has ended".to_owned(),
    }
}

fn undone(report: &UndoReport) -> String {
    const NOT_COVERED: &str = "What commands changed (run_shell) is not covered: only the file tools' changes are checkpointed.";
    if report.turns.is_empty() {
        return format!(
            "Nothing to undo: no turn of this session changed a file with the file tools.\n{NOT_COVERED}"
        );
    }
    let mut out = vec![format!(
        "Undid {} turn{}:",
        report.turns.len(),
        if report.turns.len() == 1 { "" } else { "s" }
    )];
    for (path, undone) in &report.files {
        out.push(match undone {
            Undone::Restored => format!("- restored `{path}`"),
            Undone::Removed => format!("- removed `{path}` (the turn created it)"),
            Undone::LeftAlone(why) => format!("- left `{path}` alone: {why}"),
            Undone::NotRun(why) => format!("- did not restore `{path}`: {why}"),
        });
    }
    if let Some(e) = &report.note_error {
        out.push(format!(
            "The model could not be told (the journal refused it: {e})."
        ));
    }
    out.push(NOT_COVERED.to_owned());
    out.join("\n")
}

fn tools(session: &Session) -> String {
    let specs = session.pipeline.specs(&session.main_tools());
    let mut out = vec![format!("{} tools:", specs.len())];
    for s in specs {
        let line = s.description.lines().next().unwrap_or_default();
        out.push(format!("- `{}`: {line}", s.name));
    }
    out.join("\n")
}

fn mcp(session: &Session) -> String {
    let statuses = session.mcp_status();
    if statuses.is_empty() {
        return "No MCP servers: the client named none and none is configured.".to_owned();
    }
    let mut out = Vec::new();
    for s in statuses {
        let offered: Vec<&str> = s
            .tools
            .iter()
            .filter(|t| t.refused.is_none())
            .filter_map(|t| t.name.as_deref())
            .collect();
        out.push(format!(
            "- **{}** {} ({}): {}",
            s.name,
            s.state.as_str(),
            s.launch,
            if offered.is_empty() {
                "no tools".to_owned()
            } else {
                offered.join(", ")
            }
        ));
        if let Some(e) = &s.last_error {
            out.push(format!("  last error: {e}"));
        }
    }
    out.push(
        "MCP tools ask unless an allow rule names them (`mcp__NAME__TOOL`, `mcp__NAME__*`)."
            .to_owned(),
    );
    out.join("\n")
}
