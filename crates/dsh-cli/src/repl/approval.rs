//! The approval prompt (gate 2): what is about to happen, shown before the question — the
//! tool, the full arguments (a command exactly as it will run, control and invisible
//! characters made visible), which policy asked and why, which agent asks — and one key for
//! the answer. Enter alone does nothing; keys typed before the prompt appeared are discarded
//! by the turn; one answer per call.

use dsh_agent::events::ApprovalAsk;
use dsh_core::ApprovalOutcome;
use serde_json::Value;

use super::keys::Key;
use super::style::Style;
use super::visible::{has_hidden, visible};

/// Argument text shown per value before it is cut.
const ARG_MAX: usize = 2000;

/// The prompt's lines. The keys line comes only once the prompt is `armed` (the keys typed
/// before it appeared are read and discarded), so no answer is taken before it shows.
pub(crate) fn lines(ask: &ApprovalAsk, armed: bool, st: Style) -> Vec<String> {
    let call = &ask.call;
    let who = call.agent().unwrap_or("main");
    let mut out = vec![format!(
        "{} {} wants to run {}",
        st.yellow("?"),
        st.bold(&format!("agent {who}")),
        st.bold(call.name())
    )];
    let args = call.args();
    match args.get("command").and_then(Value::as_str) {
        Some(command) => {
            out.push(format!("  {}", st.dim("command, exactly as it will run:")));
            for l in visible(command, true).lines() {
                out.push(format!("    {}", st.bold(l)));
            }
            if has_hidden(command) {
                out.push(format!(
                    "  {}",
                    st.red("the command holds control or invisible characters (shown escaped)")
                ));
            }
            if let Value::Object(map) = args {
                for (k, v) in map.iter().filter(|(k, _)| *k != "command") {
                    out.push(arg_line(k, v, st));
                }
            }
        }
        None => match args {
            Value::Object(map) => out.extend(map.iter().map(|(k, v)| arg_line(k, v, st))),
            other => out.push(format!("  {}", visible(&other.to_string(), false))),
        },
    }
    let why = match &ask.policy {
        Some(p) => format!("asked by {p}: {}", visible(&ask.reason, false)),
        None => format!(
            "asked by the tool's default: {}",
            visible(&ask.reason, false)
        ),
    };
    out.push(format!("  {}", st.dim(&why)));
    if armed {
        out.push(format!(
            "  {} approve once   {} deny   {}",
            st.bold("[y]"),
            st.bold("[n]"),
            st.dim("(Esc interrupts the turn)")
        ));
    }
    out
}

fn arg_line(key: &str, value: &Value, st: Style) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut shown = visible(&text, false).into_owned();
    if shown.chars().count() > ARG_MAX {
        let cut: String = shown.chars().take(ARG_MAX).collect();
        shown = format!("{cut}… ({} characters in all)", text.chars().count());
    }
    format!("  {} {shown}", st.dim(&format!("{key}:")))
}

/// What a key answers, if anything: `y` approves once, `n` denies; Esc and Ctrl-C are the
/// turn's interrupt (the open question is then `cancelled`).
pub(crate) fn answer(key: &Key) -> Option<ApprovalOutcome> {
    match key {
        Key::Char('y' | 'Y') => Some(ApprovalOutcome::AllowedOnce),
        Key::Char('n' | 'N') => Some(ApprovalOutcome::Rejected),
        _ => None,
    }
}

/// The line left in the scrollback once answered.
pub(crate) fn answered(ask: &ApprovalAsk, outcome: ApprovalOutcome, st: Style) -> String {
    let what = match outcome {
        ApprovalOutcome::AllowedOnce => st.green("approved once"),
        ApprovalOutcome::Rejected => st.red("denied"),
        ApprovalOutcome::Cancelled => st.yellow("cancelled"),
        ApprovalOutcome::Unavailable => st.yellow("unavailable"),
    };
    format!(
        "{} {} {}: {what}",
        st.dim("?"),
        st.bold(ask.call.name()),
        st.dim(&super::toolline::short_args(ask.call.args())),
    )
}
