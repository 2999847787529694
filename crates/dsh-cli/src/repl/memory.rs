//! `/memory`: shows, adds a line to or empties the project memory file (`.dsh/memory.md`),
//! through the pipeline as the person's own calls.

use dsh_agent::Command;
use dsh_core::ToolCall;
use serde_json::json;

use super::Live;
use super::actions::ask;
use super::commands::MemoryAction;
use super::turn::Ui;
use super::visible::visible;
use crate::signals::Signals;

/// The memory file `/memory` works on.
const MEMORY: &str = dsh_policy::MEMORY_FILE;

/// The largest memory file `/memory add` rewrites.
const MEMORY_MAX_BYTES: usize = 256 * 1024;

/// `/memory`: shows, adds a line to or empties the project memory file. Writes go through
/// the pipeline as the person's own calls (the memory policy asks, so the person approves
/// what goes into every later system prompt); the system prompt is rebuilt at once.
pub(crate) async fn memory(action: MemoryAction, live: &mut Live, ui: &mut Ui, signals: &Signals) {
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
    // Piped in, the memory file's write is asked, and nobody answers.
    let source = super::own::person_or_batch(ui);
    let written = super::own::run_own(calls, source, live, ui, signals)
        .await
        .is_some_and(|o| o.results.last().is_some_and(|r| r.ok()));
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
