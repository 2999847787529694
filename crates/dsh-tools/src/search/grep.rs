//! `grep{pattern, path?, include?}`: regex search of file contents, on ripgrep's crates.
//!
//! The walk is `ignore`'s parallel walker with our skipping rules (see the module docs of
//! `search`); each file is opened by [`WalkOpener`] (no symlink anywhere on the way, no FIFO,
//! one link, inside the workspace) and searched by `grep-searcher` with the binary detection of ripgrep's
//! default (`quit` on a NUL byte: a binary file contributes nothing). Results are sorted by
//! (path, line) and cut at [`ReadCaps::max_results`]; a file contributes at most that many
//! matches, so the total said when truncated is a lower bound ("at least N"), the same on
//! every run.
//!
//! **Long lines.** The searcher holds a line whole while it looks at it, so a file of one
//! 1 GB line would cost 1 GB. Its line buffer is held to [`LINE_MAX_BYTES`]: a longer line
//! ends the search of its file there (what was found before it is kept), and the result says
//! which file was not searched to its end and why. `read_file` pages such a file, its lines cut.
//!
//! **Interrupts.** The searcher calls back only on matches, so a file with few matches would
//! be searched to its end before anything looked at the cancellation token. Each file is
//! therefore read through [`Cancellable`], which checks the token before every read (the
//! searcher reads 64 KiB at a time): a search stops within one buffer's worth of work of an
//! interrupt, inside a 1 GB file as between small ones (BENCHMARKS.md).

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use dsh_core::{
    Access, CancellationToken, ExecContext, Parallel, Tool, ToolError, ToolErrorKind, ToolOutput,
    ToolSpec, Workspace,
};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::{ParallelVisitor, ParallelVisitorBuilder, WalkState};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{PathGlob, Shortfall, TopK, lock, walker};
use crate::confine::{Skipped, WalkOpener, describe, display, open_file};
use crate::confine::{Want, lstat, path_error};
use crate::{ReadCaps, blocking, cancelled, parse_args, path_access};

/// Characters of a matching line shown; longer lines are cut with a marker.
pub const TEXT_MAX_CHARS: usize = 300;

/// The longest line searched, in bytes (8 MiB): the searcher's buffer (one per walker thread)
/// never grows past it; a longer line ends the search of its file (see the module docs).
pub const LINE_MAX_BYTES: usize = 8 << 20;

/// Said when some path had to be shown lossily.
const LOSSY_PATHS: &str = "some paths are not valid UTF-8 and are shown with \u{FFFD}; tools cannot open them by that name";

/// The `grep` tool.
#[derive(Clone, Debug)]
pub struct Grep {
    ws: Arc<Workspace>,
    max_results: usize,
    /// The session's redactor (its spill store's): a matching line is scrubbed before it is
    /// cut, so no cut leaves a recognisable half of a secret.
    scrub: Option<Arc<dsh_core::SpillStore>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    pattern: String,
    path: Option<String>,
    include: Option<String>,
}

impl Grep {
    pub fn new(ws: Arc<Workspace>, limits: &ReadCaps) -> Self {
        Grep {
            ws,
            max_results: limits.max_results.max(1),
            scrub: None,
        }
    }

    /// Scrubs each matching line with `store`'s redactor before cutting it.
    #[must_use]
    pub fn with_scrub(mut self, store: Arc<dsh_core::SpillStore>) -> Self {
        self.scrub = Some(store);
        self
    }
}

#[async_trait]
impl Tool for Grep {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "grep",
            format!(
                "Search file contents with a regex (Rust syntax; `(?i)` ignores case) under \
                 `path` (a directory or file; default: the workspace root). Skips \
                 .gitignore'd and hidden files, node_modules, target, __pycache__ and binary \
                 files. `include` keeps files matching a glob (`*.rs`, `src/**/*.ts`). Prints \
                 `path:line:text`, sorted, at most {} matches.",
                self.max_results
            ),
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1},
                "path": {"type": "string", "minLength": 1},
                "include": {"type": "string", "minLength": 1}
            },
            "required": ["pattern"],
            "additionalProperties": false
        }))
        .output_schema(json!({
            "type": "object",
            "properties": {
                "matches": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"},
                            "line": {"type": "integer", "minimum": 1},
                            "text": {"type": "string"}
                        },
                        "required": ["path", "line", "text"],
                        "additionalProperties": false
                    }
                },
                "truncated": {"type": "boolean"},
                "files_searched": {"type": "integer", "minimum": 0}
            },
            "required": ["matches", "truncated", "files_searched"],
            "additionalProperties": false
        }))
        .read_only(true)
        .parallel(Parallel::Always)
        .idempotent(true)
    }

    fn accesses(&self, args: &Value) -> Vec<Access> {
        path_access(args, Some("."), false)
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args("grep", args)?;
        let this = self.clone();
        blocking(&cx.cancel, move |cancel| this.grep(&args, &cancel)).await
    }
}

/// One match, ordered by (path, line).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Hit {
    path: PathBuf,
    line: u64,
    text: String,
}

/// What a search found, per thread and then merged.
#[derive(Debug)]
struct Found {
    top: TopK<Hit>,
    /// Matches counted (at most `max_results` per file).
    total: u64,
    /// Some file had more matches than were counted.
    at_least: bool,
    files: u64,
    binary: u64,
    hard_linked: u64,
    /// Files whose search stopped before their end (a line over [`LINE_MAX_BYTES`], a read
    /// error), and the first of them by path with why.
    cut_short: u64,
    first_cut_short: Option<(PathBuf, String)>,
}

impl Found {
    fn new(k: usize) -> Self {
        Found {
            top: TopK::new(k),
            total: 0,
            at_least: false,
            files: 0,
            binary: 0,
            hard_linked: 0,
            cut_short: 0,
            first_cut_short: None,
        }
    }

    /// Notes that `rel`'s search stopped before its end, for `why`.
    fn cut_short(&mut self, rel: &Path, why: String) {
        self.cut_short += 1;
        if self
            .first_cut_short
            .as_ref()
            .is_none_or(|(first, _)| rel < first.as_path())
        {
            self.first_cut_short = Some((rel.to_path_buf(), why));
        }
    }

    fn merge(&mut self, other: Found) {
        self.top.merge(other.top);
        self.total += other.total;
        self.at_least |= other.at_least;
        self.files += other.files;
        self.binary += other.binary;
        self.hard_linked += other.hard_linked;
        if let Some((rel, why)) = other.first_cut_short {
            self.cut_short(&rel, why);
            self.cut_short += other.cut_short - 1;
        }
    }

    /// Searches one opened file; `rel` is its workspace-relative path. Stops early, keeping
    /// what it found, once `cancel` is cancelled.
    fn search(
        &mut self,
        searcher: &mut Searcher,
        matcher: &RegexMatcher,
        file: &std::fs::File,
        rel: &Path,
        cap: usize,
        cancel: &CancellationToken,
    ) {
        let mut sink = FileSink {
            matches: Vec::new(),
            cap,
            binary: false,
            more: false,
        };
        self.files += 1;
        // An error mid-file (a line over the limit, a file truncated under us, the call
        // cancelled) keeps what was found before it; but for a cancellation, the result says
        // the file was not searched to its end.
        if let Err(e) = searcher.search_reader(matcher, Cancellable { file, cancel }, &mut sink)
            && !cancel.is_cancelled()
        {
            let why = if e.to_string().contains("allocation limit") {
                format!("past a line longer than {} MiB", LINE_MAX_BYTES >> 20)
            } else {
                format!("to its end: {e}")
            };
            self.cut_short(rel, why);
        }
        if sink.binary {
            self.binary += 1;
            return;
        }
        self.total += sink.matches.len() as u64;
        self.at_least |= sink.more;
        for (line, text) in sink.matches {
            self.top.push(Hit {
                path: rel.to_path_buf(),
                line,
                text,
            });
        }
    }
}

/// A file as the searcher reads it, failing every read once the call is cancelled.
struct Cancellable<'a, R> {
    file: R,
    cancel: &'a CancellationToken,
}

impl<R: Read> Read for Cancellable<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cancel.is_cancelled() {
            // Not `Interrupted`: readers retry that one.
            return Err(io::Error::other("the call was cancelled"));
        }
        self.file.read(buf)
    }
}

/// Collects one file's matches, up to `cap`; a binary file is flagged and abandoned.
struct FileSink {
    matches: Vec<(u64, String)>,
    cap: usize,
    binary: bool,
    more: bool,
}

impl Sink for FileSink {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.matches.len() >= self.cap {
            self.more = true;
            return Ok(false);
        }
        self.matches
            .push((mat.line_number().unwrap_or(0), preview(mat.bytes())));
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// How far past [`TEXT_MAX_CHARS`] a matching line is kept until it is shown: room for a
/// secret across the cut to be seen whole by the redactor first.
const SCRUB_MARGIN_CHARS: usize = 512;

/// A matching line as kept: without its line terminator, lossy UTF-8, cut (marked) a margin
/// past [`TEXT_MAX_CHARS`]; [`cut`] makes it what is shown.
fn preview(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    match text.char_indices().nth(TEXT_MAX_CHARS + SCRUB_MARGIN_CHARS) {
        Some((i, _)) => format!("{}[… cut]", &text[..i]),
        None => text.into_owned(),
    }
}

/// A kept line as shown: at most [`TEXT_MAX_CHARS`] characters, `[… cut]` after a cut.
fn cut(text: String) -> String {
    match text.char_indices().nth(TEXT_MAX_CHARS) {
        Some((i, _)) => format!("{}[… cut]", &text[..i]),
        None => text,
    }
}

fn searcher() -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .heap_limit(Some(LINE_MAX_BYTES))
        .build()
}

impl Grep {
    fn grep(&self, args: &Args, cancel: &CancellationToken) -> Result<ToolOutput, ToolError> {
        let matcher = RegexMatcherBuilder::new()
            .line_terminator(Some(b'\n'))
            .build(&args.pattern)
            .map_err(|e| {
                ToolError::new(
                    ToolErrorKind::InvalidArgs,
                    format!(
                        "`pattern` is not a valid regex: {e}\n(Rust regex syntax: escape `( ) [ ] {{ }} . * + ? | \\ ^ $` with `\\` to match them literally; one line at a time)"
                    ),
                )
            })?;
        let include = args
            .include
            .as_deref()
            .map(|g| PathGlob::new(g, "include"))
            .transpose()?;
        let given = args.path.as_deref().unwrap_or(".");
        let resolved = self
            .ws
            .resolve(given)
            .map_err(|e| path_error(e, Want::Dir))?;
        let meta = lstat(&resolved, Want::Dir)?;

        let cap = self.max_results;
        let mut found = Found::new(cap);
        if meta.is_file() {
            // One file named explicitly: searched even if ignored, with read_file's checks.
            let (file, resolved) = open_file(&self.ws, given)?;
            found.search(&mut searcher(), &matcher, &file, &resolved.rel, cap, cancel);
            if cancel.is_cancelled() {
                return Err(cancelled());
            }
        } else if meta.is_dir() {
            let shared = Mutex::new(Found::new(cap));
            let shortfall = Shortfall::default();
            let opener = WalkOpener::new(&self.ws);
            let mut builder = VisitorBuilder {
                ws: &self.ws,
                opener: &opener,
                dir: &resolved.abs,
                matcher: &matcher,
                include: include.as_ref(),
                cancel,
                cap,
                shared: &shared,
                shortfall: &shortfall,
            };
            walker(&self.ws, &resolved.abs, 0).visit(&mut builder);
            if cancel.is_cancelled() {
                return Err(cancelled());
            }
            shortfall.check("grep", given)?;
            found = shared.into_inner().unwrap_or_else(|p| p.into_inner());
        } else {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArgs,
                format!(
                    "`{given}` is {}; grep searches regular files and directories only",
                    describe(&meta)
                ),
            ));
        }
        Ok(self.render(args, given, found))
    }

    fn render(&self, args: &Args, given: &str, found: Found) -> ToolOutput {
        let files = found.files;
        let hits = found.top.into_sorted_vec();
        let truncated = found.at_least || found.total > hits.len() as u64;
        let mut content = String::new();
        let mut matches = Vec::with_capacity(hits.len());
        let mut any_lossy = false;
        for mut hit in hits {
            let (path, lossy) = display(&hit.path);
            any_lossy |= lossy;
            if let Some(store) = &self.scrub {
                hit.text = store.scrub(&hit.text).into_owned();
            }
            hit.text = cut(hit.text);
            content.push_str(&format!("{path}:{}:{}\n", hit.line, hit.text));
            matches.push(json!({"path": path, "line": hit.line, "text": hit.text}));
        }
        if matches.is_empty() {
            let only = match &args.include {
                Some(g) => format!(" matching `{g}`"),
                None => String::new(),
            };
            content.push_str(&format!(
                "No matches for `{}` in `{given}` ({files} files{only} searched).\n",
                args.pattern
            ));
        }
        if truncated {
            let least = if found.at_least { "at least " } else { "" };
            content.push_str(&format!(
                "[showing the first {} of {least}{} matches; narrow the pattern or path]\n",
                matches.len(),
                found.total
            ));
        }
        if found.binary > 0 && matches.is_empty() {
            content.push_str(&format!("[{} binary files were skipped]\n", found.binary));
        }
        if let Some((rel, why)) = &found.first_cut_short {
            let (path, _) = display(rel);
            content.push_str(&match found.cut_short {
                1 => format!("[`{path}` was not searched {why}]\n"),
                n => format!(
                    "[{n} files were not searched to their end; the first, `{path}`, was not searched {why}]\n"
                ),
            });
        }
        if found.hard_linked > 0 {
            content.push_str(&format!(
                "[{} files with several hard links were skipped: they may be files outside the workspace]\n",
                found.hard_linked
            ));
        }
        if any_lossy {
            content.push_str(&format!("[{LOSSY_PATHS}]\n"));
        }
        content.pop();
        ToolOutput::new(
            content,
            json!({"matches": matches, "truncated": truncated, "files_searched": files}),
        )
    }
}

/// Makes one [`Visitor`] per walker thread.
struct VisitorBuilder<'a> {
    ws: &'a Workspace,
    opener: &'a WalkOpener<'a>,
    dir: &'a Path,
    matcher: &'a RegexMatcher,
    include: Option<&'a PathGlob>,
    cancel: &'a CancellationToken,
    cap: usize,
    shared: &'a Mutex<Found>,
    shortfall: &'a Shortfall,
}

impl<'s> ParallelVisitorBuilder<'s> for VisitorBuilder<'s> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Visitor {
            ws: self.ws,
            opener: self.opener,
            dir: self.dir,
            matcher: self.matcher.clone(),
            searcher: searcher(),
            include: self.include,
            cancel: self.cancel,
            cap: self.cap,
            local: Found::new(self.cap),
            shared: self.shared,
            shortfall: self.shortfall,
        })
    }
}

/// One walker thread's searcher and findings; merged into the shared ones when dropped.
struct Visitor<'a> {
    ws: &'a Workspace,
    opener: &'a WalkOpener<'a>,
    dir: &'a Path,
    matcher: RegexMatcher,
    searcher: Searcher,
    include: Option<&'a PathGlob>,
    cancel: &'a CancellationToken,
    cap: usize,
    local: Found,
    shared: &'a Mutex<Found>,
    shortfall: &'a Shortfall,
}

impl ParallelVisitor for Visitor<'_> {
    fn visit(&mut self, entry: Result<ignore::DirEntry, ignore::Error>) -> WalkState {
        if self.cancel.is_cancelled() {
            return WalkState::Quit;
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                self.shortfall.note_walk(&e);
                return WalkState::Continue;
            }
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return WalkState::Continue;
        }
        let path = entry.path();
        let rel = path.strip_prefix(self.ws.root()).unwrap_or(path);
        if let Some(glob) = self.include {
            let rel_dir = path.strip_prefix(self.dir).unwrap_or(path);
            if !glob.is_match(entry.file_name(), rel_dir, rel) {
                return WalkState::Continue;
            }
        }
        match self.opener.open(path) {
            Ok(file) => {
                self.local.search(
                    &mut self.searcher,
                    &self.matcher,
                    &file,
                    rel,
                    self.cap,
                    self.cancel,
                );
            }
            Err(Skipped::HardLinked) => self.local.hard_linked += 1,
            Err(Skipped::NotRegular | Skipped::Outside) => {}
            Err(failed @ Skipped::Failed(..)) => self.shortfall.note(failed),
        }
        WalkState::Continue
    }
}

impl Drop for Visitor<'_> {
    fn drop(&mut self) {
        let local = std::mem::replace(&mut self.local, Found::new(0));
        lock(self.shared).merge(local);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 MB: `needle` on the first and the last line, `hay` between.
    fn haystack() -> tempfile::NamedTempFile {
        let mut text = String::from("needle\n");
        text.push_str(&"hay\n".repeat(500_000));
        text.push_str("needle\n");
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    /// Reads like a file, and cancels the call right after its first read.
    struct CancelAfterFirstRead<'a> {
        file: std::fs::File,
        cancel: &'a CancellationToken,
        reads: usize,
    }

    impl Read for CancelAfterFirstRead<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.reads += 1;
            let n = self.file.read(buf)?;
            self.cancel.cancel();
            Ok(n)
        }
    }

    #[test]
    fn a_search_cancelled_inside_a_file_stops_at_the_next_read() {
        let hay = haystack();
        let cancel = CancellationToken::new();
        let mut inner = CancelAfterFirstRead {
            file: std::fs::File::open(hay.path()).unwrap(),
            cancel: &cancel,
            reads: 0,
        };
        let matcher = RegexMatcherBuilder::new().build("needle").unwrap();
        let mut sink = FileSink {
            matches: Vec::new(),
            cap: 10,
            binary: false,
            more: false,
        };
        let reader = Cancellable {
            file: &mut inner,
            cancel: &cancel,
        };
        let stopped = searcher().search_reader(&matcher, reader, &mut sink);
        assert!(stopped.is_err());
        // No read after the one that saw the cancellation: the needle 2 MB on is never met.
        assert_eq!(inner.reads, 1);
        assert!(sink.matches.iter().all(|(line, _)| *line == 1));
    }

    /// A line over the limit ends its file's search: the match before it is kept, the one
    /// after it is not, and the result says so.
    #[test]
    fn a_line_over_the_limit_ends_the_search_of_its_file_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("needle first\n");
        text.push_str(&"x".repeat(LINE_MAX_BYTES + 1));
        text.push_str("\nneedle after\n");
        std::fs::write(dir.path().join("long.txt"), text).unwrap();
        std::fs::write(dir.path().join("short.txt"), "a needle\n").unwrap();
        let ws = Arc::new(Workspace::new(dir.path()).unwrap());
        let grep = Grep::new(ws, &crate::ReadCaps::default());
        for path in ["long.txt", "."] {
            let args = Args {
                pattern: "needle".to_owned(),
                path: Some(path.to_owned()),
                include: None,
            };
            let out = grep.grep(&args, &CancellationToken::new()).unwrap();
            let content = out.content;
            assert!(content.contains("long.txt:1:needle first"), "{content}");
            assert!(!content.contains("needle after"), "{content}");
            assert!(
                content.contains("[`long.txt` was not searched past a line longer than 8 MiB]"),
                "{content}"
            );
        }
    }

    #[test]
    fn grep_of_one_named_file_answers_cancelled_when_cancelled() {
        let hay = haystack();
        let dir = hay.path().parent().unwrap();
        let ws = Arc::new(Workspace::new(dir).unwrap());
        let grep = Grep::new(ws, &crate::ReadCaps::default());
        let name = hay.path().file_name().unwrap().to_str().unwrap().to_owned();
        let args = Args {
            pattern: "needle".to_owned(),
            path: Some(name),
            include: None,
        };
        let cancel = CancellationToken::new();
        assert!(grep.grep(&args, &cancel).is_ok());
        cancel.cancel();
        let err = grep.grep(&args, &cancel).unwrap_err();
        assert!(err.message.contains("cancelled"), "{}", err.message);
    }
}
