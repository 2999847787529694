//! The approval prompt (gate 2): what is about to happen, shown before the question — which
//! agent asks, the tool, the full arguments (a command exactly as it will run, control and
//! invisible characters made visible), for a file change the diff it would apply, which
//! policy asked and why — and one key for the answer: `y` approve once, `n` deny, `m` deny
//! with a message for the model, `a` always allow (a policy change, offered only where a rule
//! can lift the ask). Enter alone does nothing; keys typed before the prompt appeared are
//! discarded (see the turn); one answer per call.

use dsh_agent::AlwaysAllow;
use dsh_agent::events::ApprovalAsk;
use dsh_core::{ApprovalAnswer, ApprovalOutcome};
use serde_json::Value;

use super::keys::Key;
use super::style::Style;
use super::toolline;
use super::visible::{has_hidden, visible};

/// Argument text shown per value before it is cut.
const ARG_MAX: usize = 2000;
/// Diff lines shown in the prompt before the rest is counted (`v` shows them all).
const PREVIEW_LINES: usize = 16;

/// What a key did to the question.
pub(crate) enum Action {
    /// Nothing to do (Enter alone, an unknown key, typing a message).
    None,
    /// The answer to send.
    Answer(ApprovalAnswer),
    /// Write the "always" rule, then approve this call once.
    Always,
    /// Print the whole call (every argument uncut, the whole diff) above the question.
    View,
}

/// One open question.
pub(crate) struct Question {
    pub(crate) ask: ApprovalAsk,
    /// The rule "always allow" would add, if one can lift this ask.
    pub(crate) always: Option<AlwaysAllow>,
    /// Typing a message for the model (after `m`).
    message: Option<String>,
    /// Keys typed before the question appeared, discarded.
    pub(crate) discarded: usize,
    /// An error to show (a rule that could not be written).
    pub(crate) error: Option<String>,
    /// `a` was pressed once: a second `a` confirms the policy change.
    confirm_always: bool,
    /// The call comes from a program (Code Mode): what its `run_code` call says it does.
    pub(crate) program: Option<String>,
    /// The call runs on an MCP server: which, and what the server says of the tool.
    pub(crate) remote: Option<String>,
}

impl Question {
    pub(crate) fn new(ask: ApprovalAsk, always: Option<AlwaysAllow>) -> Question {
        Question {
            ask,
            always,
            message: None,
            discarded: 0,
            error: None,
            confirm_always: false,
            program: None,
            remote: None,
        }
    }

    /// Whether keys are text now (a message being typed, or the confirming `a`).
    pub(crate) fn takes_text(&self) -> bool {
        self.message.is_some() || self.confirm_always
    }

    /// What `key` does (Esc and Ctrl-C are the turn's: they interrupt). `a` asks for a
    /// second `a`: a policy change is never one keystroke.
    pub(crate) fn key(&mut self, key: Key) -> Action {
        if self.confirm_always {
            self.confirm_always = false;
            return if key == Key::Char('a') || key == Key::Char('A') {
                Action::Always
            } else {
                Action::None
            };
        }
        if let Some(text) = &mut self.message {
            match key {
                Key::Enter => {
                    let text = std::mem::take(text);
                    self.message = None;
                    return Action::Answer(if text.trim().is_empty() {
                        ApprovalOutcome::Rejected.into()
                    } else {
                        ApprovalAnswer::rejected_with(text)
                    });
                }
                Key::Backspace => {
                    text.pop();
                }
                Key::Char(c) => text.push(c),
                Key::Paste(p) => text.push_str(&p),
                _ => {}
            }
            return Action::None;
        }
        match key {
            Key::Char('y' | 'Y') => Action::Answer(ApprovalOutcome::AllowedOnce.into()),
            Key::Char('v' | 'V') => Action::View,
            Key::Char('n' | 'N') => Action::Answer(ApprovalOutcome::Rejected.into()),
            Key::Char('m' | 'M') => {
                self.message = Some(String::new());
                Action::None
            }
            Key::Char('a' | 'A') if self.always.is_some() => {
                self.confirm_always = true;
                Action::None
            }
            _ => Action::None,
        }
    }

    /// The prompt's lines. The keys line comes only once the prompt is `armed` (the keys
    /// typed before it appeared are read and discarded), so no answer is taken before it
    /// shows.
    pub(crate) fn lines(&self, armed: bool, st: Style) -> Vec<String> {
        let ask = &self.ask;
        let call = &ask.call;
        let who = visible(call.agent().unwrap_or("main"), false);
        let mut out = vec![format!(
            "{} {} wants to run {}",
            st.yellow("?"),
            st.bold(&format!("agent {who}")),
            st.bold(&visible(call.name(), false))
        )];
        if let Some(description) = &self.program {
            out.push(format!(
                "  {} {}",
                st.yellow("from a program (run_code), which says it will:"),
                visible(&crate::sessions::shorten(description, 300), false)
            ));
        }
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
                Value::Object(map) => {
                    // With a diff to show, the new text need not be shown twice.
                    let shown_by_diff = |k: &str| {
                        ask.preview.is_some()
                            && matches!(k, "content" | "new_string" | "old_string")
                    };
                    // The path first: it says what the rest is about.
                    let mut args: Vec<_> = map.iter().filter(|(k, _)| !shown_by_diff(k)).collect();
                    args.sort_by_key(|(k, _)| *k != "path");
                    out.extend(args.into_iter().map(|(k, v)| arg_line(k, v, st)));
                }
                other => out.push(format!("  {}", visible(&other.to_string(), false))),
            },
        }
        if let Some(remote) = &self.remote {
            out.push(format!("  {}", st.yellow(&visible(remote, false))));
        }
        if let Some(diff) = &ask.preview {
            out.push(format!("  {}", st.dim("the change it would make:")));
            let lines = toolline::diff_lines(diff, PREVIEW_LINES, st);
            out.extend(lines);
        }
        let why = match &ask.policy {
            Some(p) => format!("asked by {p}: {}", visible(&ask.reason, false)),
            None => format!(
                "asked by the tool's default: {}",
                visible(&ask.reason, false)
            ),
        };
        out.push(format!("  {}", st.dim(&why)));
        if let Some(a) = &self.always {
            out.push(format!(
                "  {} {} {}",
                st.dim("[a] always allow is a policy change: it adds"),
                st.bold(&format!("`{}`", visible(&a.rule, false))),
                st.dim(&format!(
                    "to {} in {}",
                    visible(&a.section, false),
                    visible(&a.file.display().to_string(), false)
                )),
            ));
        }
        if let Some(e) = &self.error {
            out.push(format!("  {}", st.red(e)));
        }
        if self.confirm_always {
            out.push(format!(
                "  {} {}",
                st.bold("press a again to add the rule and approve this call;"),
                st.dim("any other key goes back")
            ));
        } else if let Some(text) = &self.message {
            out.push(format!(
                "  {} {}",
                st.bold("message for the model (Enter sends, the call is denied):"),
                visible(text, false)
            ));
        } else if armed {
            let always = if self.always.is_some() {
                format!("   {} always allow", st.bold("[a]"))
            } else {
                String::new()
            };
            out.push(format!(
                "  {} approve once   {} deny   {} deny with a message{always}   {} view all   {}",
                st.bold("[y]"),
                st.bold("[n]"),
                st.bold("[m]"),
                st.bold("[v]"),
                st.dim("(Esc interrupts the turn)")
            ));
        }
        if self.discarded > 0 {
            out.push(st.dim(&format!(
                "  ({} keys typed before this question were discarded)",
                self.discarded
            )));
        }
        out
    }
}

impl Question {
    /// The whole call, for `v`: every argument uncut (multi-line values line by line), then
    /// the whole preview, control characters made visible.
    pub(crate) fn full_lines(&self, st: Style) -> Vec<String> {
        let call = &self.ask.call;
        let mut out = vec![st.dim(&format!(
            "── the whole call: {} ──",
            visible(call.name(), false)
        ))];
        if let Value::Object(map) = call.args() {
            for (k, v) in map {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push(st.dim(&format!("{}:", visible(k, false))));
                for l in visible(&text, true).lines() {
                    out.push(format!("  {l}"));
                }
            }
        }
        if let Some(diff) = &self.ask.preview {
            out.push(st.dim("the change it would make:"));
            out.extend(toolline::diff_lines(diff, usize::MAX, st));
        }
        out.push(st.dim("── end of the call ──"));
        out
    }
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

/// The line left in the scrollback once answered.
pub(crate) fn answered(ask: &ApprovalAsk, answer: &ApprovalAnswer, st: Style) -> String {
    let what = match answer.outcome {
        ApprovalOutcome::AllowedOnce => st.green("approved once"),
        ApprovalOutcome::Rejected => match &answer.message {
            Some(m) => st.red(&format!("denied, telling the model: {}", visible(m, false))),
            None => st.red("denied"),
        },
        ApprovalOutcome::Cancelled => st.yellow("cancelled"),
        ApprovalOutcome::Unavailable => st.yellow("unavailable"),
    };
    format!(
        "{} {} {}: {what}",
        st.dim("?"),
        st.bold(&visible(ask.call.name(), false)),
        st.dim(&toolline::short_args(ask.call.args())),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod snapshots {
    use dsh_agent::events::ApprovalAsk;
    use dsh_core::ToolCall;
    use serde_json::{Value, json};

    use super::super::keys::Key;
    use super::super::style::Style;
    use super::Question;

    fn ask(name: &str, args: Value, policy: Option<&str>, reason: &str) -> ApprovalAsk {
        ApprovalAsk {
            call: ToolCall::new("c1", name, args),
            accesses: vec![],
            policy: policy.map(str::to_owned),
            reason: reason.to_owned(),
            preview: None,
        }
    }

    fn shown(lines: &[String]) -> String {
        lines.join("\n").replace('\x1b', "␛")
    }

    fn write_preview() -> ApprovalAsk {
        let mut a = ask(
            "write_file",
            json!({"path": "notes.md", "content": "# Notes\nnew line\n"}),
            Some("files"),
            "writes outside the scratch directory ask",
        );
        a.preview = Some(
            "--- a/notes.md\n+++ b/notes.md\n@@ -1,2 +1,2 @@\n # Notes\n-old line\n+new line\n"
                .to_owned(),
        );
        a
    }

    #[test]
    fn shell_with_hidden_characters() {
        let a = ask(
            "run_shell",
            json!({"command": "echo \x1b[2Jhi\nls \u{202E}txt.sh", "timeout_ms": 5000}),
            Some("shell"),
            "not on the allow list",
        );
        insta::assert_snapshot!(shown(
            &Question::new(a, None).lines(true, Style::new(false))
        ));
    }

    #[test]
    fn write_with_preview() {
        insta::assert_snapshot!(shown(
            &Question::new(write_preview(), None).lines(true, Style::new(false))
        ));
    }

    #[test]
    fn write_with_preview_coloured() {
        insta::assert_snapshot!(shown(
            &Question::new(write_preview(), None).lines(true, Style::new(true))
        ));
    }

    #[test]
    fn edit_not_armed() {
        let mut a = ask(
            "edit_file",
            json!({"path": "src/lib.rs", "old_string": "a", "new_string": "b"}),
            None,
            "edit_file asks by default",
        );
        a.preview = Some("@@ -3 +3 @@\n-let a = 1;\n+let b = 1;\n".to_owned());
        insta::assert_snapshot!(shown(
            &Question::new(a, None).lines(false, Style::new(false))
        ));
    }

    #[test]
    fn edit_without_preview() {
        let a = ask(
            "edit_file",
            json!({"path": "src/lib.rs", "old_string": "a\tb", "new_string": "c\nd"}),
            None,
            "edit_file asks by default",
        );
        insta::assert_snapshot!(shown(
            &Question::new(a, None).lines(true, Style::new(false))
        ));
    }

    #[test]
    fn sub_agent_ask_with_discarded_keys() {
        let mut a = ask(
            "run_shell",
            json!({"command": "git push"}),
            Some("shell"),
            "pushes ask",
        );
        a.call = a.call.with_agent(Some("sub-1".into()));
        let mut q = Question::new(a, None);
        q.discarded = 3;
        insta::assert_snapshot!(shown(&q.lines(true, Style::new(false))));
    }

    #[test]
    fn message_entry() {
        let a = ask(
            "run_shell",
            json!({"command": "rm -r build"}),
            Some("shell"),
            "deletes ask",
        );
        let mut q = Question::new(a, None);
        q.key(Key::Char('m'));
        for c in "use cargo clean\x07".chars() {
            q.key(Key::Char(c));
        }
        insta::assert_snapshot!(shown(&q.lines(true, Style::new(false))));
    }
}
