//! `/undo [N]`: asks the runtime to put back what the last N turns changed through the file
//! tools (as the person's own calls, whose lines show like a turn's), and says what became of
//! each file — and, every time, what an undo does not cover.

use dsh_agent::runtime::{UndoReport, Undone};
use dsh_agent::{Command, Reply};

use super::Live;
use super::own::person_or_batch;
use super::turn::{self, Ui};
use super::visible::visible;
use crate::signals::Signals;
use crate::words::{one_line, plural};

/// What an undo never covers, said with every answer.
const NOT_COVERED: &str = "what commands changed (run_shell, !COMMAND) is not covered: only the file tools' changes are checkpointed";

pub(crate) async fn undo(turns: usize, live: &mut Live, ui: &mut Ui, signals: &Signals) {
    let source = person_or_batch(ui);
    let reply = turn::drive(
        Command::Undo { turns, source },
        &live.runtime,
        signals,
        &mut live.stream,
        ui,
    )
    .await;
    let st = ui.render.style();
    let report = match reply {
        Some(Reply::Undone(Ok(report))) => report,
        Some(Reply::Undone(Err(e))) => {
            ui.screen.line(&st.red(&format!("/undo: {e}")));
            return;
        }
        _ => {
            ui.screen.line(&st.red("/undo: the session has ended"));
            return;
        }
    };
    for line in lines(&report) {
        let shown = match line.0 {
            Tone::Plain => line.1,
            Tone::Good => st.green(&line.1),
            Tone::Warn => st.yellow(&line.1),
            Tone::Dim => st.dim(&line.1),
        };
        ui.screen.line(&shown);
    }
}

enum Tone {
    Plain,
    Good,
    Warn,
    Dim,
}

fn lines(report: &UndoReport) -> Vec<(Tone, String)> {
    let mut out = Vec::new();
    let Some(last) = report.turns.last() else {
        out.push((
            Tone::Dim,
            "nothing to undo: no turn since dsh started (or since the last /reload or /load) changed a file with the file tools".to_owned(),
        ));
        out.push((Tone::Dim, NOT_COVERED.to_owned()));
        return out;
    };
    let earlier = report.turns.len() - 1;
    let mut head = format!("undo of the turn “{}”", visible(&one_line(last, 60), false));
    if earlier > 0 {
        head.push_str(&format!(" and {} before it", plural(earlier, "turn")));
    }
    out.push((Tone::Plain, head));
    for (path, undone) in &report.files {
        let path = visible(path, false);
        let why = |w: &str| visible(w, false).into_owned();
        out.push(match undone {
            Undone::Restored => (Tone::Good, format!("  restored {path}")),
            Undone::Removed => (
                Tone::Good,
                format!("  removed {path} (the turn created it)"),
            ),
            Undone::LeftAlone(w) => (Tone::Warn, format!("  left {path} alone: {}", why(w))),
            Undone::NotRun(w) => (Tone::Warn, format!("  did not restore {path}: {}", why(w))),
        });
    }
    if report.files.is_empty() {
        out.push((
            Tone::Dim,
            "  its files are as they were before it already".to_owned(),
        ));
    }
    if let Some(e) = &report.note_error {
        out.push((
            Tone::Warn,
            format!("the model could not be told (the journal refused it: {e})"),
        ));
    }
    if report
        .files
        .iter()
        .any(|(_, u)| matches!(u, Undone::NotRun(_)))
    {
        out.push((
            Tone::Dim,
            "what was not restored stays to undo: /undo tries it again".to_owned(),
        ));
    }
    out.push((Tone::Dim, NOT_COVERED.to_owned()));
    out
}
