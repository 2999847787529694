//! How a dsh tool call looks to an editor: a `tool_call` when it is proposed (its title, its
//! kind, the paths it names as locations, its raw input), `tool_call_update`s as it starts
//! and finishes (the status; the content: a file change as a diff, a command's output as
//! text, a refusal as its reason with the deciding gate and policy). Presentation only:
//! which tool a call is decides nothing here but how it is drawn.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    ContentBlock, Diff, TextContent, ToolCall as AcpCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use dsh_agent::Session;
use dsh_core::{FrozenResult, ToolCall};
use serde_json::Value;

/// The most characters of a result's text sent as its content (the model saw it, bounded
/// and spilled, already; an editor shows a preview).
const CONTENT_MAX: usize = 16_000;

/// The `tool_call` for a call the pipeline just journaled (gate 1 comes next).
pub(crate) fn proposed(call: &ToolCall, root: &Path) -> AcpCall {
    AcpCall::new(call.id().to_owned(), title(call))
        .kind(kind(call.name()))
        .status(ToolCallStatus::Pending)
        .locations(locations(call, root))
        .raw_input(call.args().clone())
}

/// The fields an approval request shows of the call: everything its `tool_call` said, and
/// what it would change (a diff, as its tool previews it).
pub(crate) fn asked(call: &ToolCall, root: &Path, preview: Option<&str>) -> ToolCallUpdate {
    let mut fields = ToolCallUpdateFields::new()
        .title(title(call))
        .kind(kind(call.name()))
        .status(ToolCallStatus::Pending)
        .locations(locations(call, root))
        .raw_input(call.args().clone());
    if let Some(p) = preview {
        fields = fields.content(vec![text(p)]);
    }
    ToolCallUpdate::new(call.id().to_owned(), fields)
}

/// The update for a call that passed gates 1–3 and runs.
pub(crate) fn started(call_id: &str) -> ToolCallUpdate {
    ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
    )
}

/// The update for a call whose result is journaled. `call` is the proposed call (`None`
/// when it was not seen, e.g. one proposed before the client attached).
pub(crate) fn finished(
    session: &Session,
    call: Option<&ToolCall>,
    result: &FrozenResult,
) -> ToolCallUpdate {
    let root = session.workspace.root();
    let status = if result.ok() {
        ToolCallStatus::Completed
    } else {
        ToolCallStatus::Failed
    };
    let mut content = Vec::new();
    if result.ok() {
        content.extend(diffs(session, call, result, root));
    }
    let said = said(result);
    if !said.is_empty() {
        content.push(text(&said));
    }
    ToolCallUpdate::new(
        result.call_id().to_owned(),
        ToolCallUpdateFields::new()
            .status(status)
            .content(content)
            .raw_output(serde_json::to_value(result).ok()),
    )
}

/// What a result says as text: its content (bounded), and for a call that did not succeed,
/// what became of it, which gate and policy decided and why.
fn said(result: &FrozenResult) -> String {
    let mut out = String::new();
    if let Some(kind) = result.failure_kind() {
        let d = result.decided_by();
        let who = match &d.policy {
            Some(p) => format!("{} ({p})", d.gate.as_str()),
            None => d.gate.as_str().to_owned(),
        };
        out.push_str(&format!("{} by {who}: {}", kind.as_str(), d.reason));
        if result.content() != d.reason && !result.content().is_empty() {
            out.push_str("\n\n");
            out.push_str(&bounded(result.content()));
        }
    } else {
        out.push_str(&bounded(result.content()));
        if let Some(code) = result.exit_code().filter(|c| *c != 0) {
            out.push_str(&format!("\n\nexit {code}"));
        }
    }
    out
}

fn bounded(s: &str) -> String {
    if s.chars().count() <= CONTENT_MAX {
        return s.to_owned();
    }
    let head: String = s.chars().take(CONTENT_MAX).collect();
    format!("{head}\n… (cut; the model saw the whole result)")
}

/// Each file the call changed, as a diff: an edit's replaced text and its replacement; a
/// written file's content before (the pre-image the change kept; none for a new file) and
/// after.
fn diffs(
    session: &Session,
    call: Option<&ToolCall>,
    result: &FrozenResult,
    root: &Path,
) -> Vec<ToolCallContent> {
    let args = call.map(ToolCall::args);
    let s = |k: &str| args.and_then(|a| a.get(k)).and_then(Value::as_str);
    result
        .changes()
        .iter()
        .filter_map(|change| {
            let path = root.join(&change.path);
            let before = || {
                change
                    .before
                    .as_deref()
                    .and_then(|d| session.pre_image(d))
                    .and_then(|b| String::from_utf8(b).ok())
            };
            let diff = match (s("old_string"), s("new_string"), s("content")) {
                (Some(old), Some(new), _) => Diff::new(path, new).old_text(old.to_owned()),
                (_, _, Some(content)) => Diff::new(path, content).old_text(before()),
                // A file put back or removed: its old side, when kept; nothing to show else.
                _ if change.after.is_none() => Diff::new(path, "").old_text(before()),
                _ => return None,
            };
            Some(ToolCallContent::Diff(diff))
        })
        .collect()
}

fn text(s: &str) -> ToolCallContent {
    ToolCallContent::from(ContentBlock::Text(TextContent::new(s)))
}

/// `[sub-1] run_shell: cargo test`: who calls (when not the main agent), the tool, its
/// arguments in short, with what could disguise them escaped.
fn title(call: &ToolCall) -> String {
    let who = call.agent().map(|a| format!("[{a}] ")).unwrap_or_default();
    let args = short_args(call.args());
    if args.is_empty() {
        format!("{who}{}", crate::visible::visible(call.name()))
    } else {
        format!("{who}{}: {args}", crate::visible::visible(call.name()))
    }
}

/// A command as it will run, a path, a pattern in its path; else nothing.
fn short_args(args: &Value) -> String {
    let s = |k: &str| args.get(k).and_then(Value::as_str);
    let text = match (s("command"), s("path"), s("pattern")) {
        (Some(command), _, _) => command.to_owned(),
        (None, Some(path), Some(pattern)) => format!("{pattern} in {path}"),
        (None, None, Some(pattern)) => pattern.to_owned(),
        (None, Some(path), None) => path.to_owned(),
        (None, None, None) => s("name").or(s("task")).unwrap_or_default().to_owned(),
    };
    // A command's line breaks and tabs read as spaces on one line; what else could
    // disguise it is escaped.
    let spaced: String = text
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let one_line = crate::visible::visible(&spaced);
    if one_line.chars().count() > 200 {
        let cut: String = one_line.chars().take(200).collect();
        format!("{cut}…")
    } else {
        one_line
    }
}

/// The protocol's kind of a call, for its icon.
fn kind(tool: &str) -> ToolKind {
    match tool {
        "read_file" | "read_output" | "skill" => ToolKind::Read,
        "write_file" | "edit_file" | "restore_file" => ToolKind::Edit,
        "run_shell" | "run_code" => ToolKind::Execute,
        "grep" | "find_files" | "list_dir" => ToolKind::Search,
        "call_sub_agent" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// The path the call names (`path`), absolute: where the editor can follow it.
fn locations(call: &ToolCall, root: &Path) -> Vec<ToolCallLocation> {
    let Some(path) = call.args().get("path").and_then(Value::as_str) else {
        return Vec::new();
    };
    let path = Path::new(path);
    let abs: PathBuf = if path.is_absolute() {
        path.to_path_buf()
    } else {
        root.join(path)
    };
    vec![ToolCallLocation::new(abs)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_shows_its_tool_arguments_and_paths() {
        let call = ToolCall::new("c1", "run_shell", json!({"command": "cargo\ttest"}));
        let shown = serde_json::to_value(proposed(&call, Path::new("/ws"))).unwrap();
        assert_eq!(shown["title"], "run_shell: cargo test");
        assert_eq!(shown["kind"], "execute");
        // Pending is the protocol's default status: left out on the wire.
        assert!(shown["status"].is_null() || shown["status"] == "pending");
        assert_eq!(shown["rawInput"]["command"], "cargo\ttest");

        let call = ToolCall::new("c2", "edit_file", json!({"path": "src/a.rs"}));
        let shown = serde_json::to_value(proposed(&call, Path::new("/ws"))).unwrap();
        assert_eq!(shown["kind"], "edit");
        assert_eq!(shown["locations"][0]["path"], "/ws/src/a.rs");
    }
}
