//! What a file change would do, for the person approving it ([`dsh_core::Tool::preview`]):
//! the file's current text, reached as the change would reach it, and the unified diff of
//! the change (which the edit also shows the model).
//!
//! A preview changes nothing: it creates no directory, takes no lock, and records nothing in
//! the file seam (a preview is not a read; the change still needs one). It reads only what
//! the change itself could reach: the path is resolved by the [`Workspace`] (a path or symlink
//! leading outside is refused before anything is opened), a non-regular file is never opened,
//! and the handle is checked again (no symlink followed, one link, inside the root). Whatever
//! it cannot know — a file too large, not text, unreadable — previews as nothing.

use std::fs::File;
use std::io::{Cursor, Read};
use std::time::Duration;

use dsh_core::Workspace;

use crate::fs::encoding::{Detected, Encoding, decode_all, detect, encode};

/// Characters of diff shown (to the model by `edit_file`, to the person approving a change).
pub(crate) const MAX_DIFF_CHARS: usize = 4000;
/// How long a diff may search for the smallest edit before it settles for a larger one (a
/// whole-file rewrite of a big file has no short diff to find).
const DIFF_TIMEOUT: Duration = Duration::from_secs(1);

/// The file a change would start from, as it is now.
pub(crate) struct Current {
    /// The path relative to the workspace root, as the change reports it.
    pub(crate) rel: String,
    /// Its text and encoding; `None` when it does not exist.
    pub(crate) text: Option<(String, Encoding)>,
}

/// Resolves `given` as the changing tools do and reads its current text, decoded in the
/// encoding a change would keep. `None` when the change would refuse the path, or the file
/// is larger than `max_bytes`, not a regular file, not text, or unreadable.
pub(crate) fn current(ws: &Workspace, given: &str, max_bytes: u64) -> Option<Current> {
    let resolved = ws.resolve(given).ok()?;
    if resolved.rel.as_os_str().is_empty() {
        return None;
    }
    let rel = resolved.rel.display().to_string();
    // `lstat` first: a FIFO or a device is never opened, a missing file is new.
    match std::fs::symlink_metadata(&resolved.abs) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(Current { rel, text: None });
        }
        Err(_) => return None,
        Ok(meta) if !meta.file_type().is_file() || meta.len() > max_bytes => return None,
        Ok(_) => {}
    }
    let (file, _) = ws.open_read(given).ok()?;
    let text = read_text(file, max_bytes)?;
    Some(Current {
        rel,
        text: Some(text),
    })
}

/// The whole text of `file` and its encoding, as an edit would decode it.
fn read_text(file: File, max_bytes: u64) -> Option<(String, Encoding)> {
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > max_bytes {
        return None;
    }
    let Detected::Text(encoding) = detect(&mut Cursor::new(bytes.as_slice())).ok()? else {
        return None;
    };
    let text = decode_all(encoding, bytes).ok()?;
    Some((text, encoding))
}

/// Whether `text` can be written in `encoding` (a change refuses it otherwise).
pub(crate) fn encodable(encoding: Encoding, text: String) -> bool {
    encode(encoding, text).is_ok()
}

/// A unified diff from `before` (labelled `old`, e.g. `a/src/x.rs` or `/dev/null`) to
/// `after` (labelled `new`), cut at [`MAX_DIFF_CHARS`]. Only the region between the common
/// leading and trailing lines is diffed (an edit changes a small part of a file; hashing all
/// of a 10 MB file's lines was most of an edit's time), with hunk line numbers counted from
/// the top of the file.
pub(crate) fn unified(old: &str, new: &str, before: &str, after: &str) -> String {
    const CONTEXT: usize = 3;
    let old_lines: Vec<&str> = before.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = after.split_inclusive('\n').collect();
    let prefix = old_lines
        .iter()
        .zip(&new_lines)
        .take_while(|(a, b)| a == b)
        .count();
    let room = old_lines.len().min(new_lines.len()) - prefix;
    let suffix = old_lines
        .iter()
        .rev()
        .zip(new_lines.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let start = prefix.saturating_sub(CONTEXT);
    let mid =
        |lines: &[&str]| lines[start..(lines.len() - suffix + CONTEXT).min(lines.len())].concat();
    let (old_mid, new_mid) = (mid(&old_lines), mid(&new_lines));
    let d = similar::TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(&old_mid, &new_mid);
    let mut text = format!("--- {old}\n+++ {new}\n");
    for group in d.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let (o, n) = (first.old_range().start, first.new_range().start);
        let (o_len, n_len) = (last.old_range().end - o, last.new_range().end - n);
        // A side with no lines is numbered by the line before it (`-0,0` for an empty file).
        let number = |at: usize, len: usize| if len == 0 { start + at } else { start + at + 1 };
        text.push_str(&format!(
            "@@ -{},{o_len} +{},{n_len} @@\n",
            number(o, o_len),
            number(n, n_len)
        ));
        for op in &group {
            for change in d.iter_changes(op) {
                text.push(match change.tag() {
                    similar::ChangeTag::Equal => ' ',
                    similar::ChangeTag::Delete => '-',
                    similar::ChangeTag::Insert => '+',
                });
                text.push_str(change.value());
                if !change.value().ends_with('\n') {
                    text.push_str("\n\\ No newline at end of file\n");
                }
            }
        }
    }
    if text.chars().count() > MAX_DIFF_CHARS {
        let cut: String = text.chars().take(MAX_DIFF_CHARS).collect();
        text = format!(
            "{cut}\n… [diff cut at {MAX_DIFF_CHARS} characters; read the file to see the rest]"
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_is_all_additions_numbered_from_zero() {
        assert_eq!(
            unified("/dev/null", "b/n", "", "a\nb\n"),
            "--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        );
    }

    #[test]
    fn numbering_matches_a_whole_file_diff_when_a_side_is_empty() {
        for (before, after) in [
            ("", "x\ny\n"),
            ("x\ny\n", ""),
            ("a\nb\n", "a\nb\nc\nd\n"),
            ("a\nb\nc\n", "a\nc\n"),
        ] {
            let whole = similar::TextDiff::from_lines(before, after)
                .unified_diff()
                .context_radius(3)
                .header("a/f", "b/f")
                .to_string();
            assert_eq!(
                unified("a/f", "b/f", before, after),
                whole,
                "{before:?} → {after:?}"
            );
        }
    }
}
