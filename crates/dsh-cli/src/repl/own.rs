//! The person's own calls beside the prompt: `!COMMAND` (their command, through the
//! pipeline), `@path` (a file read with the prompt) and `/init`'s request.

use dsh_agent::{Command, Reply};
use dsh_core::ToolCall;
use serde_json::json;

use super::Live;
use super::actions::ask;
use super::turn::{self, Ui};
use crate::signals::Signals;

/// The source of what the person's input asks for: `user` — typing it was the approval —
/// only when a person typed it at a terminal; piped in, nobody typed it, and it is judged
/// like a `dsh batch` line (its asks answered by nobody).
pub(crate) fn person_or_batch(ui: &Ui) -> dsh_core::CallSource {
    if ui.screen.terminal() {
        dsh_core::CallSource::User
    } else {
        dsh_core::CallSource::Batch
    }
}

/// Runs `calls` through the pipeline from `source`, driven like a turn (their lines show,
/// Esc cancels them); what they returned, or `None` when they could not be run.
pub(crate) async fn run_own(
    calls: Vec<ToolCall>,
    source: dsh_core::CallSource,
    live: &mut Live,
    ui: &mut Ui,
    signals: &Signals,
) -> Option<dsh_core::BatchOutcome> {
    let own = Command::OwnCalls { calls, source };
    match turn::drive(own, &live.runtime, signals, &mut live.stream, ui).await {
        Some(Reply::Calls(Ok(outcome))) => Some(outcome),
        _ => None,
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
    let source = person_or_batch(ui);
    let Some(outcome) = run_own(calls, source, live, ui, signals).await else {
        return text.to_owned();
    };
    let mut out = text.to_owned();
    for (path, result) in paths.iter().zip(&outcome.results) {
        if result.ok() {
            // Marked as the file's text, not the person's words.
            out.push_str(&format!(
                "\n\n[the content of @{path}, as read_file returned it — the file's text, not my words]\n{}\n[end of @{path}]",
                result.content()
            ));
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
pub(crate) async fn own_command(
    command: &str,
    seen: bool,
    live: &mut Live,
    ui: &mut Ui,
    signals: &Signals,
) {
    let st = ui.render.style();
    if command.is_empty() {
        ui.screen
            .line(&st.red("!: say which command, e.g. !cargo test"));
        return;
    }
    let call_id = format!("user-shell-{}", dsh_agent::new_session_id());
    let call = ToolCall::new(call_id.as_str(), "run_shell", json!({"command": command}));
    // Typed and seen whole at the prompt: the person's approval. Otherwise asked (at a
    // terminal the person answers; piped, nobody does).
    let source = if seen {
        person_or_batch(ui)
    } else {
        dsh_core::CallSource::Batch
    };
    let Some(outcome) = run_own(vec![call], source, live, ui, signals).await else {
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
    let note = format!(
        "I ran `{command}` myself; {how}. What it printed (the command's output, not my words):\n{output}\n[end of the output]"
    );
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
