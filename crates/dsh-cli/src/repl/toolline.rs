//! How a tool call looks in the REPL: one line while it waits or runs, finished in place with
//! its outcome, elapsed time and exit code; a denial or failure names the deciding gate,
//! policy and reason (SPEC P12). A file change adds a compact diff, a command's output its
//! head and tail, with the spill locator when the whole output was spilled.

use std::time::Duration;

use dsh_core::{FailureKind, FrozenResult, ToolCall};
use serde_json::Value;

use super::style::Style;
use super::visible::visible;

/// Diff lines shown under a file change.
const DIFF_LINES: usize = 12;
/// Output lines shown from each end of a command's output.
const OUTPUT_HEAD: usize = 3;
const OUTPUT_TAIL: usize = 3;

/// The call's arguments in short: a command as it will run, a path, a pattern in its path;
/// else the arguments as `key=value`.
pub(crate) fn short_args(args: &Value) -> String {
    let s = |k: &str| args.get(k).and_then(Value::as_str);
    let text = match (s("command"), s("path"), s("pattern")) {
        (Some(command), _, _) => command.to_owned(),
        (None, path, Some(pattern)) => match path {
            Some(p) => format!("{pattern} in {p}"),
            None => pattern.to_owned(),
        },
        (None, Some(path), None) => path.to_owned(),
        (None, None, None) => crate::sessions::short_args(args),
    };
    visible(&text, false).into_owned()
}

/// Who makes the call, when it is not the main agent: `[sub-1] `.
fn agent_tag(call: Option<&ToolCall>) -> String {
    call.and_then(ToolCall::agent)
        .map(|a| format!("[{}] ", visible(a, false)))
        .unwrap_or_default()
}

/// The line of a call not finished yet: waiting for the gates (`elapsed` none) or running.
pub(crate) fn running(
    call: &ToolCall,
    elapsed: Option<Duration>,
    frame: &str,
    st: Style,
) -> String {
    let state = match elapsed {
        None => st.dim("waiting"),
        Some(e) => st.dim(&seconds(e)),
    };
    format!(
        "{} {}{} {} {state}",
        st.cyan(frame),
        agent_tag(Some(call)),
        st.bold(&visible(call.name(), false)),
        st.dim(&short_args(call.args())),
    )
}

/// What happened to a call that did not succeed, as a person says it; the gate and policy
/// that decided follow only where `detail` asks (and stay in `--json` and the journal).
fn outcome_words(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::Denied => "refused",
        FailureKind::Rejected => "you said no",
        FailureKind::Unavailable => "needed approval",
        FailureKind::CancelledBefore => "cancelled before it ran",
        FailureKind::CancelledAfter => "cancelled while it ran",
        FailureKind::InvalidArgs => "the model's arguments are invalid",
        FailureKind::UnknownTool => "there is no such tool",
        FailureKind::Timeout => "took too long and was stopped",
        FailureKind::Crashed => "dsh failed inside (a bug)",
        FailureKind::InvalidOutput => "the tool's output broke its own schema",
        FailureKind::StaleVersion => "the file changed since it was read",
        FailureKind::NotObserved => "the file must be read first",
        FailureKind::NotFound => "not found",
        FailureKind::ToolError => "failed",
    }
}

/// The finished call: its line, then what it changed or printed. `detail`: a failure's line
/// ends with the gate and policy that decided (`/verbose on`, `dsh exec`'s lines).
pub(crate) fn finished(
    call: Option<&ToolCall>,
    result: &FrozenResult,
    st: Style,
    detail: bool,
) -> Vec<String> {
    let name = &*visible(result.tool(), false);
    let args = call.map(|c| short_args(c.args())).unwrap_or_default();
    let elapsed = millis(result.elapsed_ms());
    let mut head = match result.failure_kind() {
        None => {
            let mark = match result.exit_code() {
                Some(code) if code != 0 => st.yellow("✓"),
                _ => st.green("✓"),
            };
            let mut line = format!(
                "{mark} {}{} {}",
                agent_tag(call),
                st.bold(name),
                st.dim(&args)
            );
            if let Some(code) = result.exit_code() {
                let exit = format!("exit {code}");
                line.push_str(&format!(
                    " · {}",
                    if code == 0 {
                        st.dim(&exit)
                    } else {
                        st.yellow(&exit)
                    }
                ));
            }
            line.push_str(&format!(" · {}", st.dim(&elapsed)));
            line
        }
        Some(kind) => {
            let d = result.decided_by();
            let mut line = format!(
                "{} {}{} {} · {}: {}",
                st.red("✗"),
                agent_tag(call),
                st.bold(name),
                st.dim(&args),
                st.red(outcome_words(kind)),
                visible(&d.reason, false),
            );
            if detail {
                let who = match &d.policy {
                    Some(p) => format!("{}/{p}", d.gate.as_str()),
                    None => d.gate.as_str().to_owned(),
                };
                line.push_str(&format!(
                    " {}",
                    st.dim(&format!("[{} by {who}]", kind.as_str()))
                ));
            }
            line
        }
    };
    if let Some(code) = result
        .exit_code()
        .filter(|_| result.failure_kind().is_some())
    {
        head.push_str(&format!(" · exit {code}"));
    }
    let mut lines = vec![head];
    if result.ok() {
        if let Some(diff) = result
            .value()
            .and_then(|v| v.get("diff"))
            .and_then(Value::as_str)
        {
            lines.extend(diff_lines(diff, DIFF_LINES, st));
        } else if result.exit_code().is_some() {
            lines.extend(output_lines(result.content(), st));
        }
    }
    lines
}

/// A unified diff, compact: the first `max` lines coloured, then how many more there are.
pub(crate) fn diff_lines(diff: &str, max: usize, st: Style) -> Vec<String> {
    // The `---`/`+++` header lines go; inside a hunk, a removed `--x` or an added `++y`
    // is a change like any other and stays.
    let hunks = diff.find("\n@@").map_or(0, |i| i + 1);
    let hunks = if diff.starts_with("@@") { 0 } else { hunks };
    let body: Vec<&str> = diff[hunks..].lines().collect();
    let mut out: Vec<String> = body
        .iter()
        .take(max)
        .map(|l| {
            let text = visible(l, false);
            let shown = if l.starts_with('+') {
                st.green(&text)
            } else if l.starts_with('-') {
                st.red(&text)
            } else if l.starts_with("@@") {
                st.cyan(&text)
            } else {
                st.dim(&text)
            };
            format!("    {shown}")
        })
        .collect();
    if body.len() > max {
        out.push(format!(
            "    {}",
            st.dim(&format!("… {} more diff lines", body.len() - max))
        ));
    }
    out
}

/// A command's output: its head and tail, the spill locator kept.
fn output_lines(content: &str, st: Style) -> Vec<String> {
    let lines: Vec<&str> = content.lines().filter(|l| !l.trim().is_empty()).collect();
    let locator = lines.iter().find(|l| l.contains("read_output{"));
    let bar = |l: &str| format!("    {}", st.dim(&format!("│ {}", visible(l, false))));
    let mut out = Vec::new();
    if lines.len() <= OUTPUT_HEAD + OUTPUT_TAIL + 1 {
        out.extend(lines.iter().map(|l| bar(l)));
        return out;
    }
    out.extend(lines[..OUTPUT_HEAD].iter().map(|l| bar(l)));
    let hidden = lines.len() - OUTPUT_HEAD - OUTPUT_TAIL;
    out.push(format!(
        "    {}",
        st.dim(&format!("│ … {hidden} more lines"))
    ));
    out.extend(lines[lines.len() - OUTPUT_TAIL..].iter().map(|l| bar(l)));
    if let Some(l) = locator
        && !out.iter().any(|o| o.contains("read_output{"))
    {
        out.push(bar(l));
    }
    out
}

/// `850 ms`, `3.4 s`, `2 min 5 s`.
pub(crate) fn millis(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        seconds(Duration::from_millis(ms))
    }
}

pub(crate) fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        let whole = d.as_secs();
        format!("{} min {} s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod snapshots {
    use std::time::Duration;

    use dsh_core::{FrozenResult, ToolCall};
    use serde_json::{Value, json};

    use super::super::style::Style;
    use super::{finished, running};

    /// A result as a journal would read it back (DESIGN §4's result object).
    fn result(tool: &str, fields: Value) -> FrozenResult {
        let mut r = json!({
            "call_id": "c1",
            "tool": tool,
            "ok": true,
            "failure_kind": null,
            "decided_by": {"gate": "pre_policy", "policy": "builtin", "reason": "allowed"},
            "content": "",
            "value": null,
            "elapsed_ms": 42,
            "exit_code": null,
            "sandbox": null,
        });
        for (k, v) in fields.as_object().unwrap() {
            r[k] = v.clone();
        }
        serde_json::from_value(r).unwrap()
    }

    fn shown(lines: &[String]) -> String {
        lines.join("\n").replace('\x1b', "␛")
    }

    fn shell_output(n: usize) -> String {
        let mut s: String = (1..=n).map(|i| format!("line {i}\n")).collect();
        s.push_str("[… page it with read_output{\"id\":\"x\",\"offset\":0,\"limit\":100}]\n");
        s
    }

    #[test]
    fn read_ok() {
        let call = ToolCall::new("c1", "read_file", json!({"path": "src/main.rs"}));
        let r = result(
            "read_file",
            json!({"content": "fn main() {}\n", "elapsed_ms": 3}),
        );
        insta::assert_snapshot!(shown(&finished(Some(&call), &r, Style::new(false), true)));
    }

    #[test]
    fn shell_exit_0() {
        let call = ToolCall::new("c1", "run_shell", json!({"command": "echo hi"}));
        let r = result(
            "run_shell",
            json!({"content": "hi\n", "exit_code": 0, "elapsed_ms": 1250}),
        );
        insta::assert_snapshot!(shown(&finished(Some(&call), &r, Style::new(false), true)));
    }

    #[test]
    fn shell_exit_2_long_output() {
        let call = ToolCall::new("c1", "run_shell", json!({"command": "cargo test"}));
        let r = result(
            "run_shell",
            json!({"content": shell_output(20), "exit_code": 2, "elapsed_ms": 125_000}),
        );
        insta::assert_snapshot!(shown(&finished(Some(&call), &r, Style::new(false), true)));
    }

    #[test]
    fn shell_exit_2_long_output_coloured() {
        let call = ToolCall::new("c1", "run_shell", json!({"command": "cargo test"}));
        let r = result(
            "run_shell",
            json!({"content": shell_output(20), "exit_code": 2, "elapsed_ms": 125_000}),
        );
        insta::assert_snapshot!(shown(&finished(Some(&call), &r, Style::new(true), true)));
    }

    #[test]
    fn denied_by_shell_policy() {
        let call = ToolCall::new("c1", "run_shell", json!({"command": "rm -rf /"}));
        let r = result(
            "run_shell",
            json!({
                "ok": false,
                "failure_kind": "denied",
                "decided_by": {"gate": "pre_policy", "policy": "shell",
                    "reason": "`rm -rf` outside the workspace is never run"},
                "content": "denied",
                "elapsed_ms": 0,
            }),
        );
        insta::assert_snapshot!(shown(&finished(Some(&call), &r, Style::new(false), true)));
        // Without detail (the REPL's default) the line speaks words only.
        let plain = shown(&finished(Some(&call), &r, Style::new(false), false));
        assert_eq!(
            plain,
            "✗ run_shell rm -rf / · refused: `rm -rf` outside the workspace is never run"
        );
    }

    #[test]
    fn unavailable_by_approval() {
        let call = ToolCall::new("c1", "write_file", json!({"path": "a.txt", "content": "x"}));
        let r = result(
            "write_file",
            json!({
                "ok": false,
                "failure_kind": "unavailable",
                "decided_by": {"gate": "approval", "policy": null,
                    "reason": "no one could be asked (not a terminal)"},
                "content": "unavailable",
                "elapsed_ms": 1,
            }),
        );
        insta::assert_snapshot!(shown(&finished(Some(&call), &r, Style::new(false), true)));
    }

    fn long_diff() -> String {
        let mut d = String::from("--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,10 +1,10 @@\n");
        for i in 1..=10 {
            d.push_str(&format!("-old {i}\n+new {i}\n"));
        }
        d
    }

    #[test]
    fn edit_long_diff() {
        let call = ToolCall::new(
            "c1",
            "edit_file",
            json!({"path": "src/lib.rs", "old_string": "old", "new_string": "new"}),
        );
        let r = result(
            "edit_file",
            json!({"content": "edited src/lib.rs", "value": {"diff": long_diff()}, "elapsed_ms": 7}),
        );
        insta::assert_snapshot!(shown(&finished(Some(&call), &r, Style::new(false), true)));
    }

    #[test]
    fn sub_agent_call() {
        let call = ToolCall::new("c1", "grep", json!({"pattern": "TODO", "path": "src"}))
            .with_agent(Some("sub-1".into()));
        let r = result(
            "grep",
            json!({"content": "src/a.rs:3: TODO", "elapsed_ms": 12}),
        );
        insta::assert_snapshot!(shown(&finished(Some(&call), &r, Style::new(false), true)));
    }

    #[test]
    fn running_lines() {
        let call = ToolCall::new("c1", "run_shell", json!({"command": "cargo build"}));
        let sub = ToolCall::new("c2", "read_file", json!({"path": "Cargo.toml"}))
            .with_agent(Some("sub-1".into()));
        let lines = [
            running(&call, None, "⠋", Style::new(false)),
            running(
                &call,
                Some(Duration::from_millis(3400)),
                "⠙",
                Style::new(false),
            ),
            running(&sub, Some(Duration::from_secs(75)), "⠹", Style::new(false)),
        ];
        insta::assert_snapshot!(shown(&lines));
    }

    #[test]
    fn changed_lines_that_start_like_diff_headers_are_shown() {
        let diff = "--- a/r.txt\n+++ b/r.txt\n@@ -1,2 +1,2 @@\n---require-hashes\n foo==1\n+++hidden line\n";
        let shown = super::diff_lines(diff, 12, Style::new(false)).join("\n");
        assert!(shown.contains("---require-hashes"), "{shown}");
        assert!(shown.contains("+++hidden line"), "{shown}");
        assert!(!shown.contains("a/r.txt"), "{shown}");
    }
}
