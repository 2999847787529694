//! `edit_file{path, old_string, new_string, replace_all?}`: replace exact text in a file the
//! session has read, keeping its line endings, encoding and permissions, and show the diff.
//!
//! A file in UTF-16 or Windows-1252 is edited as text and written back in its encoding, so its
//! bytes outside the edit stay exactly as they were; a `new_string` with a character the
//! encoding has not is refused ([`crate::fs::seam`]).

use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    Access, ExecContext, Parallel, Tool, ToolError, ToolErrorKind, ToolOutput, ToolSpec, Workspace,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::confine::{Want, path_error};
use crate::fs::encoding::Encoding;
use crate::fs::preview;
use crate::fs::seam::{FileSeam, Intent};
use crate::{blocking, parse_args, path_access};

/// Files larger than this are not edited (the whole file is held in memory).
pub const MAX_EDIT_BYTES: u64 = 64 * 1024 * 1024;

/// The `edit_file` tool.
#[derive(Debug)]
pub struct EditFile {
    ws: Arc<Workspace>,
    seam: Arc<FileSeam>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

impl EditFile {
    pub fn new(ws: Arc<Workspace>, seam: Arc<FileSeam>) -> Self {
        EditFile { ws, seam }
    }
}

/// The edit itself: `old` → `new` in `text`, in the file's own line endings.
fn apply(text: &str, args: &Args) -> Result<(String, usize), ToolError> {
    if args.old_string.is_empty() {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArgs,
            "old_string is empty; give the exact text to replace (use write_file to create a file)",
        ));
    }
    if args.old_string == args.new_string {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArgs,
            "old_string and new_string are the same; nothing would change",
        ));
    }
    // The text as given first; only when it is absent from a CRLF file, the same text in
    // CRLF (a model usually writes LF), replacing in CRLF too.
    let literal = text.matches(args.old_string.as_str()).count();
    let crlf = literal == 0 && text.contains("\r\n") && !args.old_string.contains('\r');
    let convert = |s: &str| {
        if crlf {
            s.replace('\n', "\r\n")
        } else {
            s.to_owned()
        }
    };
    let (old, new) = (convert(&args.old_string), convert(&args.new_string));
    let count = text.matches(old.as_str()).count();
    match count {
        0 => Err(ToolError::failed(format!(
            "old_string was not found in `{}`; read the file again and copy the text exactly, including whitespace",
            args.path
        ))),
        n if n > 1 && !args.replace_all => Err(ToolError::failed(format!(
            "old_string occurs {n} times in `{}`; add surrounding lines to make it unique, or set replace_all",
            args.path
        ))),
        n if args.replace_all => Ok((text.replace(old.as_str(), &new), n)),
        _ => Ok((text.replacen(old.as_str(), &new, 1), 1)),
    }
}

/// The unified diff of the edit ([`preview::unified`]).
fn diff(path: &str, before: &str, after: &str) -> String {
    preview::unified(&format!("a/{path}"), &format!("b/{path}"), before, after)
}

/// The edit of `before` and the diff shown for it: `run` and `preview` both go through here,
/// so what the person approves is what the model is then told was done.
fn edited(rel: &str, before: &str, args: &Args) -> Result<(String, usize, String), ToolError> {
    let (after, n) = apply(before, args)?;
    let shown = diff(rel, before, &after);
    Ok((after, n, shown))
}

#[async_trait]
impl Tool for EditFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "edit_file",
            "Replace exact text in a file you have read with read_file in this session. old_string \
             must match exactly once (include surrounding lines to make it unique) unless \
             replace_all is true. A file read_file decoded from another encoding (its first \
             line said so) is written back in that encoding; text that encoding cannot hold is \
             refused. Returns a diff.",
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Relative to the workspace root."},
                "old_string": {"type": "string", "description": "Exact text to replace."},
                "new_string": {"type": "string", "description": "The replacement."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        }))
        .parallel(Parallel::Never)
        .output_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "replacements": {"type": "integer", "minimum": 1},
                "diff": {"type": "string"},
                "encoding": {"enum": ["utf-8", "utf-16le", "utf-16be", "windows-1252"]}
            },
            "required": ["path", "replacements", "diff", "encoding"],
            "additionalProperties": false
        }))
    }

    fn accesses(&self, args: &Value) -> Vec<Access> {
        path_access(args, None, true)
    }

    /// The diff `run` would report, against the file as it is now; `None` when the edit
    /// would fail (the file missing, too large or not text, the text not found or ambiguous,
    /// a character its encoding cannot hold), as `run` then says why.
    fn preview(&self, args: &Value) -> Option<String> {
        let args: Args = serde_json::from_value(args.clone()).ok()?;
        let current = preview::current(&self.ws, &args.path, MAX_EDIT_BYTES)?;
        let (before, encoding) = current.text?;
        let (after, _, shown) = edited(&current.rel, &before, &args).ok()?;
        preview::encodable(encoding, after).then_some(shown)
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args("edit_file", args)?;
        let ws = self.ws.clone();
        let seam = self.seam.clone();
        blocking(&cx.cancel, move |cancel| {
            let resolved = ws
                .resolve(&args.path)
                .map_err(|e| path_error(e, Want::File))?;
            let rel = resolved.rel.display().to_string();
            let ((n, shown), changed) = seam.change(
                &ws,
                &resolved,
                Intent::Edit,
                MAX_EDIT_BYTES,
                &cancel,
                |current| {
                    let before = current.text.as_deref().unwrap_or_default();
                    let (after, n, shown) = edited(&rel, before, &args)?;
                    Ok((after, (n, shown)))
                },
            )?;
            let plural = if n == 1 { "" } else { "s" };
            let encoding = changed.encoding;
            let kept = match encoding {
                Encoding::Utf8 => String::new(),
                other => format!(", written back in {other}"),
            };
            Ok(ToolOutput::new(
                format!("edited {rel}: {n} replacement{plural}{kept}\n{shown}"),
                json!({"path": rel, "replacements": n, "diff": shown, "encoding": encoding.name()}),
            )
            .with_change(changed.change))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(old: &str, new: &str, all: bool) -> Args {
        Args {
            path: "f".to_owned(),
            old_string: old.to_owned(),
            new_string: new.to_owned(),
            replace_all: all,
        }
    }

    #[test]
    fn replaces_a_unique_match() {
        assert_eq!(
            apply("a b c", &args("b", "B", false)).unwrap(),
            ("a B c".to_owned(), 1)
        );
    }

    #[test]
    fn refuses_ambiguous_and_missing_text() {
        assert!(
            apply("x x", &args("x", "y", false))
                .unwrap_err()
                .message
                .contains("2 times")
        );
        assert!(
            apply("x", &args("z", "y", false))
                .unwrap_err()
                .message
                .contains("not found")
        );
        assert_eq!(
            apply("x x", &args("x", "y", true)).unwrap(),
            ("y y".to_owned(), 2)
        );
    }

    #[test]
    fn mixed_line_endings_match_the_literal_text_first() {
        let (out, n) = apply("a\r\nb\nc\n", &args("b\nc", "B\nC", false)).unwrap();
        assert_eq!((out.as_str(), n), ("a\r\nB\nC\n", 1));
    }

    #[test]
    fn the_diff_numbers_hunks_from_the_top_of_the_file() {
        let before: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let after = before.replace("line 50\n", "LINE 50\n");
        let d = diff("f.txt", &before, &after);
        assert_eq!(
            d,
            "--- a/f.txt\n+++ b/f.txt\n@@ -47,7 +47,7 @@\n line 47\n line 48\n line 49\n-line 50\n+LINE 50\n line 51\n line 52\n line 53\n"
        );
        // Near the ends, and without a final newline.
        let d = diff("f", "a\nb", "a\nc");
        assert_eq!(
            d,
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
        );
    }

    #[test]
    fn the_diff_agrees_with_a_whole_file_diff() {
        let before: String = (1..=40).map(|i| format!("l{i}\n")).collect();
        let after = before
            .replace("l2\n", "x2\n")
            .replace("l30\n", "x30\ny30\n");
        let whole = similar::TextDiff::from_lines(before.as_str(), after.as_str())
            .unified_diff()
            .context_radius(3)
            .header("a/f", "b/f")
            .to_string();
        assert_eq!(diff("f", &before, &after), whole);
    }

    #[test]
    fn keeps_crlf_line_endings() {
        let (out, _) = apply("one\r\ntwo\r\n", &args("one\ntwo", "uno\ndos", false)).unwrap();
        assert_eq!(out, "uno\r\ndos\r\n");
    }
}
