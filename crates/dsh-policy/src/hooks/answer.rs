//! Reading a hook's answer as Claude Code's hooks give it: exit code 2 = "no" with stderr as
//! the reason; exit 0 = read stdout — a JSON object (`hookSpecificOutput.permissionDecision`
//! allow/deny/ask with `permissionDecisionReason`, `decision: "block"` or `"approve"` with
//! `reason`, `hookSpecificOutput.additionalContext`, `continue: false` with `stopReason`,
//! `systemMessage`), or text, which abstains (for `SessionStart` and `UserPromptSubmit` it is
//! context, as Claude Code takes it). Any other exit, a timeout, a crash, and an object that
//! is not valid JSON or does not fit that shape are hook errors: `Err` says which.

use dsh_core::HookEvent;
use serde::Deserialize;
use serde_json::Value;

use super::run::{Ended, Outcome};

/// What a hook said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Its decision: for `PreToolUse` allow, ask or deny; for the other events a `Deny` is
    /// "block" (the prompt, the result, the stop).
    pub decision: Option<Said>,
    /// Why, in its words (may be empty).
    pub reason: String,
    /// Context for the model (`additionalContext`, or text a `SessionStart`/`UserPromptSubmit`
    /// hook printed).
    pub context: Option<String>,
    /// `continue: false`: the hook asks that the agent not go on, with its `stopReason`.
    pub stop: Option<String>,
    /// Something for the person (`systemMessage`, or the stderr of an exit 2 that only the
    /// person sees).
    pub message: Option<String>,
    /// Parts of the answer dsh does not act on (`updatedInput`: SPEC P2, a policy cannot
    /// rewrite a call).
    pub ignored: Vec<&'static str>,
}

/// A hook's decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Said {
    Allow,
    Ask,
    Deny,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(rename = "continue")]
    go_on: Option<bool>,
    stop_reason: Option<String>,
    #[allow(dead_code)]
    suppress_output: Option<bool>,
    system_message: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    hook_specific_output: Option<Specific>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Specific {
    permission_decision: Option<String>,
    permission_decision_reason: Option<String>,
    updated_input: Option<Value>,
    additional_context: Option<String>,
}

/// Reads `outcome` as an answer to `event`; `Err` is a hook error, in words.
pub fn read(event: HookEvent, outcome: &Outcome) -> Result<Answer, String> {
    match &outcome.ended {
        Ended::Exit(0) => read_stdout(event, &outcome.stdout),
        Ended::Exit(2) => {
            let said = outcome.stderr.trim();
            let reason = if said.is_empty() {
                "it exited with code 2 and said nothing on stderr".to_owned()
            } else {
                said.to_owned()
            };
            Ok(match event {
                HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::UserPromptSubmit
                | HookEvent::Stop
                | HookEvent::SubagentStop => Answer {
                    decision: Some(Said::Deny),
                    reason,
                    ..Answer::default()
                },
                HookEvent::SessionStart | HookEvent::PreCompact | HookEvent::Notification => {
                    Answer {
                        message: Some(reason),
                        ..Answer::default()
                    }
                }
            })
        }
        Ended::Exit(code) => Err(format!(
            "it exited with code {code}{}",
            last_line(&outcome.stderr)
                .map(|l| format!(" ({l})"))
                .unwrap_or_default()
        )),
        Ended::Failed(why) => Err(why.clone()),
        Ended::TimedOut(d) => Err(format!(
            "it did not answer within {} ms and was killed",
            d.as_millis()
        )),
    }
}

fn read_stdout(event: HookEvent, stdout: &str) -> Result<Answer, String> {
    let text = stdout.trim();
    if !text.starts_with('{') {
        let context = matches!(event, HookEvent::SessionStart | HookEvent::UserPromptSubmit)
            && !text.is_empty();
        return Ok(Answer {
            context: context.then(|| text.to_owned()),
            ..Answer::default()
        });
    }
    let raw: Raw = serde_json::from_str(text).map_err(|e| {
        let what = if serde_json::from_str::<Value>(text).is_ok() {
            "an answer of the wrong shape"
        } else {
            "invalid JSON"
        };
        format!("it printed {what}: {e}")
    })?;
    let mut answer = Answer {
        message: raw.system_message,
        ..Answer::default()
    };
    if raw.go_on == Some(false) {
        answer.stop = Some(
            raw.stop_reason
                .unwrap_or_else(|| "a hook said not to go on".to_owned()),
        );
    }
    let mut reason = raw.reason;
    answer.decision = match raw.decision.as_deref() {
        None => None,
        Some("block") => Some(Said::Deny),
        Some("approve") if event == HookEvent::PreToolUse => Some(Said::Allow),
        Some(other) => {
            return Err(format!(
                "it printed an answer of the wrong shape: decision {other:?} is not \"block\"{}",
                if event == HookEvent::PreToolUse {
                    " or \"approve\""
                } else {
                    ""
                }
            ));
        }
    };
    if let Some(s) = raw.hook_specific_output {
        if let Some(d) = s.permission_decision {
            if event != HookEvent::PreToolUse {
                answer.ignored.push("permissionDecision");
            } else {
                answer.decision = Some(match d.as_str() {
                    "allow" => Said::Allow,
                    "ask" => Said::Ask,
                    "deny" => Said::Deny,
                    other => {
                        return Err(format!(
                            "it printed an answer of the wrong shape: permissionDecision {other:?} is not \"allow\", \"deny\" or \"ask\""
                        ));
                    }
                });
                if s.permission_decision_reason.is_some() {
                    reason = s.permission_decision_reason;
                }
            }
        }
        if s.updated_input.is_some() {
            answer.ignored.push("updatedInput");
        }
        answer.context = s.additional_context.filter(|c| !c.trim().is_empty());
    }
    answer.reason = reason.unwrap_or_default();
    Ok(answer)
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: i32, stdout: &str, stderr: &str) -> Outcome {
        Outcome {
            ended: Ended::Exit(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    fn pre(code: i32, stdout: &str, stderr: &str) -> Result<Answer, String> {
        read(HookEvent::PreToolUse, &out(code, stdout, stderr))
    }

    #[test]
    fn each_answer_style_reads_as_claude_code_reads_it() {
        let a = pre(0, r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no rm"}}"#, "").unwrap();
        assert_eq!((a.decision, a.reason.as_str()), (Some(Said::Deny), "no rm"));
        let a = pre(
            0,
            r#"{"hookSpecificOutput":{"permissionDecision":"ask"}}"#,
            "",
        )
        .unwrap();
        assert_eq!(a.decision, Some(Said::Ask));
        let a = pre(0, r#"{"decision":"approve","reason":"fine"}"#, "").unwrap();
        assert_eq!((a.decision, a.reason.as_str()), (Some(Said::Allow), "fine"));
        let a = pre(2, "", "blocked: rm -rf\n").unwrap();
        assert_eq!(
            (a.decision, a.reason.as_str()),
            (Some(Said::Deny), "blocked: rm -rf")
        );
        assert_eq!(
            pre(0, "", "").unwrap(),
            Answer::default(),
            "silence abstains"
        );
        assert_eq!(
            pre(0, "all good\n", "").unwrap(),
            Answer::default(),
            "text abstains"
        );
        let a = pre(0, r#"{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":"ls"}}}"#, "").unwrap();
        assert_eq!(
            (a.decision, a.ignored),
            (Some(Said::Allow), vec!["updatedInput"])
        );
        let a = pre(0, r#"{"continue":false,"stopReason":"enough"}"#, "").unwrap();
        assert_eq!(a.stop.as_deref(), Some("enough"));
    }

    #[test]
    fn what_does_not_fit_is_a_hook_error() {
        assert!(pre(1, "", "boom\n").unwrap_err().contains("code 1 (boom)"));
        assert!(
            pre(0, "{not json", "")
                .unwrap_err()
                .contains("invalid JSON")
        );
        assert!(
            pre(0, r#"{"decision": 3}"#, "")
                .unwrap_err()
                .contains("wrong shape")
        );
        assert!(
            pre(
                0,
                r#"{"hookSpecificOutput":{"permissionDecision":"maybe"}}"#,
                ""
            )
            .unwrap_err()
            .contains("wrong shape")
        );
        let timed_out = Outcome {
            ended: Ended::TimedOut(std::time::Duration::from_millis(50)),
            stdout: String::new(),
            stderr: String::new(),
        };
        assert!(
            read(HookEvent::PreToolUse, &timed_out)
                .unwrap_err()
                .contains("within 50 ms")
        );
    }

    #[test]
    fn prompt_and_session_hooks_add_printed_text_as_context() {
        let a = read(
            HookEvent::UserPromptSubmit,
            &out(0, "today is Tuesday\n", ""),
        )
        .unwrap();
        assert_eq!(a.context.as_deref(), Some("today is Tuesday"));
        let a = read(
            HookEvent::PostToolUse,
            &out(0, r#"{"decision":"block","reason":"lint failed","hookSpecificOutput":{"additionalContext":"run fmt"}}"#, ""),
        )
        .unwrap();
        assert_eq!(a.decision, Some(Said::Deny));
        assert_eq!(a.context.as_deref(), Some("run fmt"));
        let a = read(HookEvent::Notification, &out(2, "", "beep")).unwrap();
        assert_eq!((a.decision, a.message.as_deref()), (None, Some("beep")));
    }
}
