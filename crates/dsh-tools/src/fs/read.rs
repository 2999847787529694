//! `read_file{path, offset?, limit?}`: one page of a text file, with line numbers.
//!
//! The file is streamed, never slurped: lines before `offset` are counted with `memchr` and
//! dropped, each shown line keeps at most [`LINE_MAX_CHARS`] characters (the rest of a long
//! line is skipped without being buffered), and a page stops at `limit` lines or
//! [`ReadCaps::max_read_bytes`] of shown content, whichever comes first. After the page, lines
//! are counted on for at most [`COUNT_AHEAD`] bytes to report `total_lines`; past that the
//! total is `null` rather than a guess. Memory stays bounded whatever the file's size.
//!
//! The file's encoding is decided first, from its first [`DETECT_BYTES`](crate::fs::encoding::DETECT_BYTES)
//! ([`crate::fs::encoding`]: UTF-8, UTF-16 with a byte order mark, or Windows-1252), exactly as
//! `edit_file` and `write_file` decide it. A file that is not UTF-8 is decoded as it is read
//! (memory stays bounded) and its page starts with one notice line naming the encoding,
//! [`encoding_notice`]; like the other `[…]` lines it has no line number, so the numbers are
//! the file's own. A file is refused as binary when detection says so (a NUL byte in the first
//! 8 KiB, say), or when a UTF-8 file's line to be shown is not valid UTF-8 after all.

use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    Access, CancellationToken, ExecContext, Parallel, Tool, ToolError, ToolErrorKind, ToolOutput,
    ToolSpec, Workspace,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::confine::{display, open_file};
use crate::fs::encoding::{Detected, Encoding, Transcoder, detect};
use crate::fs::seam::{FileSeam, Version};
use crate::{ReadCaps, blocking, cancelled, parse_args, path_access};

/// Characters of one line shown; the rest is cut with a marker.
pub const LINE_MAX_CHARS: usize = 2000;
/// Bytes past the page scanned to count the remaining lines.
pub const COUNT_AHEAD: u64 = 8 * 1024 * 1024;
/// Read buffer: large enough that skipping lines is `memchr` over big chunks.
const BUFFER_BYTES: usize = 64 * 1024;

/// The `read_file` tool.
#[derive(Clone, Debug)]
pub struct ReadFile {
    ws: Arc<Workspace>,
    /// Where reads are recorded as observations, for write_file and edit_file.
    seam: Option<Arc<FileSeam>>,
    max_bytes: usize,
    max_lines: usize,
    /// The session's redactor (its spill store's): a long line is scrubbed before it is
    /// cut, so no cut leaves a recognisable half of a secret.
    scrub: Option<Arc<dsh_core::SpillStore>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

impl ReadFile {
    pub fn new(ws: Arc<Workspace>, limits: &ReadCaps) -> Self {
        ReadFile {
            ws,
            seam: None,
            scrub: None,
            max_bytes: limits.max_read_bytes.max(1),
            max_lines: limits.max_read_lines.max(1),
        }
    }

    /// Records every file this tool reads as observed by the session (the file seam).
    #[must_use]
    pub fn with_seam(mut self, seam: Arc<FileSeam>) -> Self {
        self.seam = Some(seam);
        self
    }

    /// Scrubs each line longer than [`LINE_MAX_CHARS`] with `store`'s redactor before
    /// cutting it.
    #[must_use]
    pub fn with_scrub(mut self, store: Arc<dsh_core::SpillStore>) -> Self {
        self.scrub = Some(store);
        self
    }
}

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "read_file",
            format!(
                "Read a text file, with line numbers. Pages by lines: `offset` is the first \
                 line (1-based, default 1), `limit` the line count (default and max {}). Lines \
                 over {LINE_MAX_CHARS} chars are cut. UTF-16 (with BOM) and Windows-1252 files \
                 are decoded under an unnumbered first line `{}`. Refuses binary files, \
                 directories (use list_dir) and devices.",
                self.max_lines,
                encoding_notice("ENC"),
            ),
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "relative to the workspace root"},
                "offset": {"type": "integer", "minimum": 1},
                "limit": {"type": "integer", "minimum": 1}
            },
            "required": ["path"],
            "additionalProperties": false
        }))
        .output_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 0},
                "total_lines": {"type": ["integer", "null"], "minimum": 0},
                "truncated": {"type": "boolean"},
                "encoding": {"enum": ["utf-8", "utf-16le", "utf-16be", "windows-1252"]}
            },
            "required": ["path", "start_line", "end_line", "total_lines", "truncated", "encoding"],
            "additionalProperties": false
        }))
        .read_only(true)
        .parallel(Parallel::Always)
        .idempotent(true)
    }

    fn accesses(&self, args: &Value) -> Vec<Access> {
        path_access(args, None, false)
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args("read_file", args)?;
        let this = self.clone();
        blocking(&cx.cancel, move |cancel| this.read(&args, &cancel)).await
    }
}

/// Why a page ended before the end of the file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Lines,
    Bytes,
}

impl ReadFile {
    fn read(&self, args: &Args, cancel: &CancellationToken) -> Result<ToolOutput, ToolError> {
        let (mut file, resolved) = open_file(&self.ws, &args.path)?;
        // The version read is the one opened (a change after this makes a later write or
        // edit stale, the safe direction); it is recorded only if the read succeeds.
        let opened = file
            .metadata()
            .map_err(|e| ToolError::failed(format!("reading `{}`: {e}", args.path)))?;
        let (shown_path, _) = display(&resolved.rel);
        let io_error = |e: io::Error| ToolError::failed(format!("reading `{}`: {e}", args.path));

        let encoding = match detect(&mut file).map_err(io_error)? {
            Detected::Text(encoding) => encoding,
            Detected::Binary(why) => return Err(binary(&args.path, &why)),
        };
        file.seek(SeekFrom::Start(0)).map_err(io_error)?;
        let source: Box<dyn Read> = match encoding {
            Encoding::Utf8 => Box::new(file),
            other => Box::new(Transcoder::new(file, other)),
        };
        let mut reader = BufReader::with_capacity(BUFFER_BYTES, source);

        let offset = args.offset.unwrap_or(1).max(1);
        let limit = args
            .limit
            .unwrap_or(self.max_lines as u64)
            .clamp(1, self.max_lines as u64);
        let skipped = skip_lines(&mut reader, offset - 1, cancel)?.map_err(io_error)?;
        if skipped < offset - 1 {
            return Err(past_end(&args.path, offset, skipped));
        }

        let keep = LINE_MAX_CHARS * 4 + 4;
        let mut content = String::new();
        let mut line = Vec::with_capacity(256);
        let mut shown: u64 = 0;
        let mut shown_bytes = 0usize;
        let mut stop = None;
        loop {
            if shown == limit {
                stop = Some(Stop::Lines);
                break;
            }
            if cancel.is_cancelled() {
                return Err(cancelled());
            }
            let Some(len) = next_line(&mut reader, &mut line, keep).map_err(io_error)? else {
                break;
            };
            let number = offset + shown;
            let text = decode(&line, len, self.scrub.as_deref()).ok_or_else(|| {
                binary(
                    &args.path,
                    &format!("line {number} is not valid UTF-8 text"),
                )
            })?;
            if shown > 0 && shown_bytes + text.len() > self.max_bytes {
                stop = Some(Stop::Bytes);
                break;
            }
            shown_bytes += text.len();
            content.push_str(&format!("{number:>6}\t{text}\n"));
            shown += 1;
        }
        if shown == 0 && offset > 1 {
            return Err(past_end(&args.path, offset, offset - 1));
        }

        let end = offset + shown - 1;
        let (truncated, total) = match stop {
            None => (false, Some(end)),
            // The line that did not fit was read already: it is one more line after `end`.
            Some(Stop::Bytes) => (
                true,
                count_rest(&mut reader, cancel)?
                    .map_err(io_error)?
                    .map(|n| end + 1 + n),
            ),
            Some(Stop::Lines) => {
                if reader.fill_buf().map_err(io_error)?.is_empty() {
                    (false, Some(end))
                } else {
                    let rest = count_rest(&mut reader, cancel)?.map_err(io_error)?;
                    (true, rest.map(|n| end + n))
                }
            }
        };

        let of_total = total.map(|t| format!(" of {t}")).unwrap_or_default();
        match stop {
            _ if !truncated => {}
            Some(Stop::Bytes) => content.push_str(&format!(
                "[stopped after {} KiB of content: showing lines {offset}-{end}{of_total}; continue with offset={}]\n",
                self.max_bytes / 1024,
                end + 1
            )),
            _ => {
                let more = if total.is_none() { "; the file goes on" } else { "" };
                content.push_str(&format!(
                    "[showing lines {offset}-{end}{of_total}{more}; continue with offset={}]\n",
                    end + 1
                ));
            }
        }
        if shown == 0 {
            content.push_str("[the file is empty]");
        }
        while content.ends_with('\n') {
            content.pop();
        }
        if encoding != Encoding::Utf8 {
            content.insert_str(0, &format!("{}\n", encoding_notice(encoding.name())));
        }
        if let Some(seam) = &self.seam {
            seam.observe(&resolved.abs, Version::of(&opened));
        }
        Ok(ToolOutput::new(
            content,
            json!({
                "path": shown_path,
                "start_line": offset,
                "end_line": end,
                "total_lines": total,
                "truncated": truncated,
                "encoding": encoding.name(),
            }),
        ))
    }
}

/// The first line of a page of a file that is not UTF-8.
pub fn encoding_notice(encoding: &str) -> String {
    format!("[dsh: decoded as {encoding}; edits are written back in {encoding}]")
}

fn binary(path: &str, why: &str) -> ToolError {
    ToolError::failed(format!(
        "`{path}` looks binary ({why}); read_file shows text only (UTF-8, UTF-16 with a byte order mark, Windows-1252). Use grep to find text in it, or run_shell with a tool made for this format"
    ))
}

fn past_end(path: &str, offset: u64, lines: u64) -> ToolError {
    let advice = if lines == 0 {
        "it is empty".to_owned()
    } else {
        format!("use an offset from 1 to {lines}")
    };
    ToolError::new(
        ToolErrorKind::InvalidArgs,
        format!("offset {offset} is past the end of `{path}`, which has {lines} lines; {advice}"),
    )
}

/// The line as shown: valid UTF-8, at most [`LINE_MAX_CHARS`] characters plus a marker if
/// cut. `kept` holds the first bytes of a line `len` bytes long. `None`: not UTF-8.
fn decode(kept: &[u8], len: usize, scrub: Option<&dsh_core::SpillStore>) -> Option<String> {
    let text = match std::str::from_utf8(kept) {
        Ok(s) => s,
        // A character cut by the byte cap is not an encoding error.
        Err(e) if len > kept.len() && e.error_len().is_none() => {
            std::str::from_utf8(&kept[..e.valid_up_to()]).ok()?
        }
        Err(_) => return None,
    };
    // A line that will be cut is scrubbed whole first (what is kept of it: four times the
    // shown length), so a secret across the cut is replaced, not halved.
    let scrubbed;
    let text = match scrub {
        Some(store) if len > LINE_MAX_CHARS => {
            scrubbed = store.scrub(text).into_owned();
            scrubbed.as_str()
        }
        _ => text,
    };
    let cut_at = text.char_indices().nth(LINE_MAX_CHARS).map(|(i, _)| i);
    match cut_at {
        None if len == kept.len() => Some(text.to_owned()),
        Some(i) => Some(format!(
            "{}[… line cut at {LINE_MAX_CHARS} chars]",
            &text[..i]
        )),
        None => Some(format!("{text}[… line cut at {LINE_MAX_CHARS} chars]")),
    }
}

/// Reads the next line into `out` (without its `\n`), keeping at most `keep` bytes; the rest
/// of a longer line is consumed without being kept. Returns the line's full length, or `None`
/// at the end of the file.
fn next_line(r: &mut impl BufRead, out: &mut Vec<u8>, keep: usize) -> io::Result<Option<usize>> {
    out.clear();
    let mut len = 0;
    let mut any = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(any.then_some(len));
        }
        any = true;
        let (end, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        let room = keep.saturating_sub(out.len());
        out.extend_from_slice(&buf[..end.min(room)]);
        len += end;
        r.consume(if done { end + 1 } else { end });
        if done {
            return Ok(Some(len));
        }
    }
}

/// Skips `n` lines; returns how many there were (fewer at the end of the file). The outer
/// `Result` is cancellation, the inner one I/O.
fn skip_lines(
    r: &mut impl BufRead,
    n: u64,
    cancel: &CancellationToken,
) -> Result<io::Result<u64>, ToolError> {
    let mut skipped = 0;
    let mut partial = false;
    while skipped < n {
        if cancel.is_cancelled() {
            return Err(cancelled());
        }
        let buf = match r.fill_buf() {
            Ok(buf) => buf,
            Err(e) => return Ok(Err(e)),
        };
        if buf.is_empty() {
            return Ok(Ok(skipped + u64::from(partial)));
        }
        let need = n - skipped;
        let mut consumed = buf.len();
        let mut found = 0;
        for pos in memchr::memchr_iter(b'\n', buf) {
            found += 1;
            if found == need {
                consumed = pos + 1;
                break;
            }
        }
        partial = buf[..consumed].last() != Some(&b'\n');
        skipped += found;
        r.consume(consumed);
    }
    Ok(Ok(skipped))
}

/// Counts the lines left, reading at most [`COUNT_AHEAD`] bytes; `None` if the end was not
/// reached within that.
fn count_rest(
    r: &mut impl BufRead,
    cancel: &CancellationToken,
) -> Result<io::Result<Option<u64>>, ToolError> {
    let mut lines = 0;
    let mut read = 0u64;
    let mut partial = false;
    loop {
        if cancel.is_cancelled() {
            return Err(cancelled());
        }
        let buf = match r.fill_buf() {
            Ok(buf) => buf,
            Err(e) => return Ok(Err(e)),
        };
        if buf.is_empty() {
            return Ok(Ok(Some(lines + u64::from(partial))));
        }
        if read >= COUNT_AHEAD {
            return Ok(Ok(None));
        }
        lines += memchr::memchr_iter(b'\n', buf).count() as u64;
        partial = buf.last() != Some(&b'\n');
        read += buf.len() as u64;
        let n = buf.len();
        r.consume(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(data: &str, keep: usize) -> Vec<(String, usize)> {
        let mut r = BufReader::with_capacity(4, data.as_bytes());
        let mut out = Vec::new();
        let mut line = Vec::new();
        while let Some(len) = next_line(&mut r, &mut line, keep).unwrap() {
            out.push((String::from_utf8(line.clone()).unwrap(), len));
        }
        out
    }

    #[test]
    fn next_line_splits_and_caps_across_small_buffers() {
        assert_eq!(
            lines_of("ab\n\nlonger line\nlast", 5),
            [
                ("ab".to_owned(), 2),
                (String::new(), 0),
                ("longe".to_owned(), 11),
                ("last".to_owned(), 4)
            ]
        );
        assert!(lines_of("", 5).is_empty());
        assert_eq!(lines_of("x\n", 5), [("x".to_owned(), 1)]);
    }

    #[test]
    fn skip_and_count_agree_on_a_final_line_without_newline() {
        let t = CancellationToken::new();
        for (data, lines) in [("a\nb\nc", 3), ("a\nb\nc\n", 3), ("", 0), ("\n", 1)] {
            let mut r = BufReader::with_capacity(2, data.as_bytes());
            assert_eq!(
                skip_lines(&mut r, 10, &t).unwrap().unwrap(),
                lines,
                "{data:?}"
            );
            let mut r = BufReader::with_capacity(2, data.as_bytes());
            assert_eq!(
                count_rest(&mut r, &t).unwrap().unwrap(),
                Some(lines),
                "{data:?}"
            );
        }
        let mut r = BufReader::with_capacity(2, "a\nb\nc\n".as_bytes());
        assert_eq!(skip_lines(&mut r, 2, &t).unwrap().unwrap(), 2);
        let mut line = Vec::new();
        assert_eq!(next_line(&mut r, &mut line, 10).unwrap(), Some(1));
        assert_eq!(line, b"c");
    }

    #[test]
    fn decode_cuts_long_lines_and_tolerates_a_character_split_by_the_cap() {
        let long = "é".repeat(LINE_MAX_CHARS + 5);
        let cut = decode(long.as_bytes(), long.len(), None).unwrap();
        assert!(cut.ends_with("[… line cut at 2000 chars]"));
        assert_eq!(cut.chars().filter(|&c| c == 'é').count(), LINE_MAX_CHARS);
        // A kept prefix ending inside a character, of a longer line.
        assert_eq!(
            decode(&"aé".as_bytes()[..2], 3, None).unwrap(),
            "a[… line cut at 2000 chars]"
        );
        assert_eq!(decode(b"\xff\xfe", 2, None), None);
        assert_eq!(decode(b"plain", 5, None).unwrap(), "plain");
    }
}
