//! The file seam through the pipeline (SPEC P5): `write_file` and `edit_file` change only what
//! this session has read and is still as it was read; every change is atomic, keeps line
//! endings and permissions, and never reaches outside the workspace. Also `read_output`
//! paging a spilled output back.
//!
//! Each session here is a real pipeline over `session_tools` with an approver that allows
//! every ask (the changing tools default to ask), recording into a memory journal. Nothing
//! relies on file permissions being enforced (CI runs as root).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::write_under;
use dsh_core::journal::MemoryJournal;
use dsh_core::{
    ApprovalOutcome, CancellationToken, FailureKind, FrozenResult, Gate, Pipeline, Registry,
    SpillStore, ToolCall, Workspace,
};
use dsh_testkit::ScriptedApprover;
use dsh_tools::{FileSeam, ReadCaps, session_tools};
use serde_json::{Value, json};
use tempfile::TempDir;

/// Characters `read_output` may page at once (it keeps 200 for its footer).
const SPILL_CHARS: usize = 20_000;

/// One session: its own file seam (observed versions) and pipeline.
struct Session {
    pipeline: Arc<Pipeline>,
    next_id: AtomicUsize,
}

impl Session {
    fn new(root: &Path, store: Arc<SpillStore>) -> Self {
        let ws = Arc::new(Workspace::new(root).unwrap());
        let mut registry = Registry::new();
        for tool in session_tools(
            ws,
            &ReadCaps::default(),
            Arc::new(FileSeam::new()),
            store,
            SPILL_CHARS,
        ) {
            registry.register_arc(tool).unwrap();
        }
        let journal = Arc::new(MemoryJournal::new("dsh-tools-seam-test"));
        let pipeline = Pipeline::builder(registry, journal)
            .approver(ScriptedApprover::answering(ApprovalOutcome::AllowedOnce))
            .build();
        Session {
            pipeline,
            next_id: AtomicUsize::new(1),
        }
    }

    async fn call(&self, name: &str, args: Value) -> Arc<FrozenResult> {
        let id = format!("c{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let cancel = CancellationToken::new();
        let run = self
            .pipeline
            .run_batch(vec![ToolCall::new(id, name, args)], &cancel);
        tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .expect("the batch hung")
            .unwrap()
            .results
            .remove(0)
    }

    /// A call that must succeed; returns (content, value).
    async fn ok(&self, name: &str, args: Value) -> (String, Value) {
        let r = self.call(name, args).await;
        assert!(r.ok(), "{}", r.to_json());
        (r.content().to_owned(), r.value().cloned().unwrap())
    }

    /// A call that must fail with `kind`; returns the content the model sees.
    async fn fails(&self, name: &str, args: Value, kind: FailureKind) -> String {
        let r = self.call(name, args).await;
        assert_eq!(r.failure_kind(), Some(kind), "{}", r.to_json());
        assert!(r.value().is_none());
        r.content().to_owned()
    }

    /// A refusal by the tool's own re-check (no policy is mounted, so gate 1 never denies).
    async fn denied(&self, name: &str, args: Value) -> String {
        let r = self.call(name, args).await;
        assert_eq!(
            r.failure_kind(),
            Some(FailureKind::Denied),
            "{}",
            r.to_json()
        );
        assert_eq!(r.decided_by().gate, Gate::Execute, "{}", r.to_json());
        r.content().to_owned()
    }

    async fn read(&self, path: &str) {
        self.ok("read_file", json!({"path": path})).await;
    }
}

struct Env {
    ws: TempDir,
    outside: TempDir,
    _spill: TempDir,
    store: Arc<SpillStore>,
    session: Session,
}

impl std::ops::Deref for Env {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

fn env() -> Env {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let store = Arc::new(SpillStore::new(spill.path().join("session")));
    let session = Session::new(ws.path(), store.clone());
    Env {
        ws,
        outside,
        _spill: spill,
        store,
        session,
    }
}

impl Env {
    fn path(&self, rel: &str) -> PathBuf {
        self.ws.path().join(rel)
    }

    fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        write_under(self.ws.path(), rel, content)
    }

    fn write_outside(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        write_under(self.outside.path(), rel, content)
    }

    fn text(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    /// A second session over the same workspace: its own seam, nothing observed.
    fn other_session(&self) -> Session {
        Session::new(self.ws.path(), self.store.clone())
    }
}

fn edit(path: &str, old: &str, new: &str) -> Value {
    json!({"path": path, "old_string": old, "new_string": new})
}

fn write(path: &str, content: &str) -> Value {
    json!({"path": path, "content": content})
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Entries of a directory whose name holds the seam's temporary-file marker.
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".dsh-") || n.ends_with(".tmp"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Observation: what must be read before it is changed.

#[tokio::test]
async fn write_file_over_a_file_never_read_is_not_observed_and_leaves_it_unchanged() {
    let e = env();
    e.write("notes.txt", "original\n");
    let msg = e
        .fails(
            "write_file",
            write("notes.txt", "clobbered\n"),
            FailureKind::NotObserved,
        )
        .await;
    assert!(msg.contains("`notes.txt`"), "{msg}");
    assert!(
        msg.contains("read_file"),
        "the advice names read_file: {msg}"
    );
    assert_eq!(e.text("notes.txt"), "original\n");
    assert!(temp_files(e.ws.path()).is_empty());
}

#[tokio::test]
async fn write_file_after_a_read_replaces_the_file() {
    let e = env();
    e.write("notes.txt", "original\n");
    e.read("notes.txt").await;
    let (content, value) = e.ok("write_file", write("notes.txt", "new text\n")).await;
    assert_eq!(
        value,
        json!({"path": "notes.txt", "bytes": 9, "created": false, "encoding": "utf-8"})
    );
    assert_eq!(content, "replaced notes.txt (9 bytes)");
    assert_eq!(e.text("notes.txt"), "new text\n");
}

#[tokio::test]
async fn write_file_creates_a_new_file_and_its_missing_directories() {
    let e = env();
    let (content, value) = e
        .ok("write_file", write("a/b/c/new.rs", "fn main() {}\n"))
        .await;
    assert_eq!(
        value,
        json!({"path": "a/b/c/new.rs", "bytes": 13, "created": true, "encoding": "utf-8"})
    );
    assert_eq!(content, "created a/b/c/new.rs (13 bytes)");
    assert_eq!(e.text("a/b/c/new.rs"), "fn main() {}\n");
    // What this session wrote, it has observed: replacing it needs no read.
    let (_, value) = e
        .ok("write_file", write("a/b/c/new.rs", "fn main() { run() }\n"))
        .await;
    assert_eq!(value["created"], false);
    assert_eq!(e.text("a/b/c/new.rs"), "fn main() { run() }\n");
}

#[tokio::test]
async fn edit_file_without_a_read_is_not_observed() {
    let e = env();
    e.write("lib.rs", "fn a() {}\n");
    let msg = e
        .fails(
            "edit_file",
            edit("lib.rs", "fn a", "fn b"),
            FailureKind::NotObserved,
        )
        .await;
    assert!(msg.contains("read_file"), "{msg}");
    assert_eq!(e.text("lib.rs"), "fn a() {}\n");
}

#[tokio::test]
async fn a_change_from_outside_makes_edits_and_writes_stale_before_any_text_matching() {
    let e = env();
    e.write("lib.rs", "fn a() {}\n");
    e.read("lib.rs").await;
    // Another program changes the file (a different length: the version surely differs).
    std::fs::write(e.path("lib.rs"), "fn a() { changed }\n").unwrap();
    // The old text is absent from the new content: a stale check made after matching would
    // say "not found" (tool_error) instead.
    let msg = e
        .fails(
            "edit_file",
            edit("lib.rs", "text that is nowhere", "x"),
            FailureKind::StaleVersion,
        )
        .await;
    assert!(msg.contains("changed since"), "{msg}");
    assert!(msg.contains("read it again"), "{msg}");
    e.fails(
        "edit_file",
        edit("lib.rs", "fn a", "fn b"),
        FailureKind::StaleVersion,
    )
    .await;
    e.fails(
        "write_file",
        write("lib.rs", "overwrite\n"),
        FailureKind::StaleVersion,
    )
    .await;
    assert_eq!(e.text("lib.rs"), "fn a() { changed }\n");
    // Reading again brings the session up to date.
    e.read("lib.rs").await;
    e.ok("edit_file", edit("lib.rs", "changed", "kept")).await;
    assert_eq!(e.text("lib.rs"), "fn a() { kept }\n");
}

#[tokio::test]
async fn a_same_length_change_from_outside_is_stale_too() {
    let e = env();
    e.write("v.txt", "version=1\n");
    e.read("v.txt").await;
    let before = std::fs::metadata(e.path("v.txt"))
        .unwrap()
        .modified()
        .unwrap();
    // Same length, same inode: only the timestamps tell. The new mtime is set a second
    // later explicitly, so a coarse clock cannot hide the change.
    std::fs::write(e.path("v.txt"), "version=2\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(e.path("v.txt"))
        .unwrap()
        .set_modified(before + Duration::from_secs(1))
        .unwrap();
    let after = std::fs::metadata(e.path("v.txt"))
        .unwrap()
        .modified()
        .unwrap();
    assert_ne!(before, after, "the file system did not move the mtime");
    e.fails(
        "edit_file",
        edit("v.txt", "version=2", "version=3"),
        FailureKind::StaleVersion,
    )
    .await;
    assert_eq!(e.text("v.txt"), "version=2\n");
}

// ---------------------------------------------------------------------------------------------
// edit_file itself.

#[tokio::test]
async fn read_then_edit_replaces_the_text_and_shows_a_diff() {
    let e = env();
    e.write("src/lib.rs", "fn one() {}\nfn two() {}\nfn three() {}\n");
    e.read("src/lib.rs").await;
    let (content, value) = e
        .ok(
            "edit_file",
            edit("src/lib.rs", "fn two() {}", "fn two() { 2 }"),
        )
        .await;
    assert_eq!(
        e.text("src/lib.rs"),
        "fn one() {}\nfn two() { 2 }\nfn three() {}\n"
    );
    assert_eq!(value["path"], "src/lib.rs");
    assert_eq!(value["replacements"], 1);
    let diff = value["diff"].as_str().unwrap();
    assert!(diff.contains("--- a/src/lib.rs"), "{diff}");
    assert!(diff.contains("+++ b/src/lib.rs"), "{diff}");
    assert!(diff.contains("\n-fn two() {}\n"), "{diff}");
    assert!(diff.contains("\n+fn two() { 2 }\n"), "{diff}");
    assert!(diff.contains("\n fn one() {}\n"), "context lines: {diff}");
    assert!(
        content.starts_with("edited src/lib.rs: 1 replacement\n"),
        "{content}"
    );
    assert!(
        content.ends_with(diff),
        "the model sees the diff: {content}"
    );
}

#[tokio::test]
async fn a_second_edit_needs_no_new_read_because_the_first_was_recorded() {
    let e = env();
    e.write("count.txt", "n = 1\n");
    e.read("count.txt").await;
    e.ok("edit_file", edit("count.txt", "n = 1", "n = 2")).await;
    e.ok("edit_file", edit("count.txt", "n = 2", "n = 3")).await;
    e.ok("write_file", write("count.txt", "n = 4\n")).await;
    e.ok("edit_file", edit("count.txt", "n = 4", "n = 5")).await;
    assert_eq!(e.text("count.txt"), "n = 5\n");
}

#[tokio::test]
async fn edit_of_a_missing_file_is_not_found_and_says_to_create_it() {
    let e = env();
    let msg = e
        .fails(
            "edit_file",
            edit("missing.rs", "a", "b"),
            FailureKind::NotFound,
        )
        .await;
    assert!(msg.contains("`missing.rs` does not exist"), "{msg}");
    assert!(msg.contains("write_file"), "{msg}");
    assert!(!e.path("missing.rs").exists());
}

#[tokio::test]
async fn an_absent_old_string_is_a_tool_error_and_changes_nothing() {
    let e = env();
    e.write("a.txt", "alpha beta\n");
    e.read("a.txt").await;
    let msg = e
        .fails(
            "edit_file",
            edit("a.txt", "gamma", "delta"),
            FailureKind::ToolError,
        )
        .await;
    assert!(msg.contains("old_string was not found in `a.txt`"), "{msg}");
    assert_eq!(e.text("a.txt"), "alpha beta\n");
    // Whitespace counts: an almost-match is no match.
    e.fails(
        "edit_file",
        edit("a.txt", "alpha  beta", "x"),
        FailureKind::ToolError,
    )
    .await;
    // A failed edit leaves the observation as it was: the next edit still works.
    e.ok("edit_file", edit("a.txt", "beta", "BETA")).await;
    assert_eq!(e.text("a.txt"), "alpha BETA\n");
}

#[tokio::test]
async fn an_ambiguous_old_string_is_a_tool_error_and_replace_all_replaces_every_one() {
    let e = env();
    e.write("dup.txt", "x = old;\ny = old;\nz = old;\n");
    e.read("dup.txt").await;
    let msg = e
        .fails(
            "edit_file",
            edit("dup.txt", "old", "new"),
            FailureKind::ToolError,
        )
        .await;
    assert!(msg.contains("occurs 3 times"), "{msg}");
    assert!(msg.contains("replace_all"), "{msg}");
    assert_eq!(e.text("dup.txt"), "x = old;\ny = old;\nz = old;\n");
    let (content, value) = e
        .ok(
            "edit_file",
            json!({"path": "dup.txt", "old_string": "old", "new_string": "new", "replace_all": true}),
        )
        .await;
    assert_eq!(value["replacements"], 3);
    assert!(
        content.starts_with("edited dup.txt: 3 replacements\n"),
        "{content}"
    );
    assert_eq!(e.text("dup.txt"), "x = new;\ny = new;\nz = new;\n");
}

#[tokio::test]
async fn a_crlf_file_edited_with_lf_strings_keeps_crlf() {
    let e = env();
    e.write("win.txt", "one\r\ntwo\r\nthree\r\n");
    e.read("win.txt").await;
    e.ok(
        "edit_file",
        edit("win.txt", "one\ntwo\n", "uno\ndos\ntres\n"),
    )
    .await;
    let bytes = std::fs::read(e.path("win.txt")).unwrap();
    assert_eq!(bytes, b"uno\r\ndos\r\ntres\r\nthree\r\n");
}

#[tokio::test]
async fn permissions_are_kept_by_edit_and_by_write() {
    let e = env();
    let script = e.write("run.sh", "#!/bin/sh\necho one\n");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    e.read("run.sh").await;
    e.ok("edit_file", edit("run.sh", "echo one", "echo two"))
        .await;
    assert_eq!(mode(&script), 0o755);
    e.ok("write_file", write("run.sh", "#!/bin/sh\necho three\n"))
        .await;
    assert_eq!(mode(&script), 0o755);
    // A narrower mode is kept as well, not widened to a default.
    let private = e.write("private.txt", "secret\n");
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    e.read("private.txt").await;
    e.ok("edit_file", edit("private.txt", "secret", "still secret"))
        .await;
    assert_eq!(mode(&private), 0o600);
    assert_eq!(e.text("run.sh"), "#!/bin/sh\necho three\n");
}

#[tokio::test]
async fn replacement_is_atomic_and_leaves_no_temporary_file() {
    let e = env();
    // Versions of a 2 MB file, two of different lengths and the edit of one; a reader must
    // only ever see one of them whole, never a mix, an empty file or a short one.
    let a = format!("{}MARK_A\n", "a".repeat(2_000_000));
    let b = format!("{}MARK_BB\n", "b".repeat(2_100_000));
    let c = a.replace("MARK_A", "MARK_C");
    let path = e.write("big.txt", &a);
    e.read("big.txt").await;

    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, path) = (stop.clone(), path.clone());
        let (a, b, c) = (a.clone(), b.clone(), c.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let seen = std::fs::read_to_string(&path).unwrap();
                assert!(
                    seen == a || seen == b || seen == c,
                    "a reader saw a partial file of {} bytes",
                    seen.len()
                );
                reads += 1;
            }
            reads
        })
    };
    for i in 0..10 {
        let content = if i % 2 == 0 { &b } else { &a };
        e.ok("write_file", write("big.txt", content)).await;
        assert!(temp_files(e.ws.path()).is_empty());
    }
    for i in 0..6 {
        let (old, new) = if i % 2 == 0 {
            ("MARK_A", "MARK_C")
        } else {
            ("MARK_C", "MARK_A")
        };
        e.ok("edit_file", edit("big.txt", old, new)).await;
        assert!(temp_files(e.ws.path()).is_empty());
    }
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("the reader saw a partial file");
    assert!(reads > 0);
    assert_eq!(e.text("big.txt"), a);
    let names: Vec<_> = std::fs::read_dir(e.ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["big.txt"], "nothing but the file is left");
}

/// The encoding is decided on the first MiB; a UTF-8 file that stops being UTF-8 after it
/// cannot be decoded exactly, so edit_file refuses it (files in legacy encodings: encodings.rs).
#[tokio::test]
async fn a_file_that_is_utf8_only_in_its_first_mib_is_refused_by_edit_as_invalid_args() {
    let e = env();
    let lines = 400_000;
    let mut bytes = "ok\n".repeat(lines).into_bytes();
    bytes.extend_from_slice(b"caf\xe9\n");
    e.write("late.txt", &bytes);
    // Line 1 reads fine (and observes the file).
    e.ok("read_file", json!({"path": "late.txt", "limit": 1}))
        .await;
    let msg = e
        .fails(
            "edit_file",
            edit("late.txt", "ok\nok\n", "fine\n"),
            FailureKind::InvalidArgs,
        )
        .await;
    assert!(
        msg.starts_with(&format!(
            "`late.txt` cannot be edited: it is not valid utf-8 at byte {}; edit_file only changes text files",
            3 * lines + 3
        )),
        "{msg}"
    );
    assert_eq!(std::fs::read(e.path("late.txt")).unwrap(), bytes);
}

// ---------------------------------------------------------------------------------------------
// Confinement of the changing tools.

#[tokio::test]
async fn write_through_a_symlink_to_outside_is_denied_and_the_outside_file_is_unchanged() {
    let e = env();
    let target = e.write_outside("target.txt", "outside\n");
    symlink(&target, e.path("link.txt")).unwrap();
    let msg = e.denied("write_file", write("link.txt", "pwned\n")).await;
    assert!(msg.contains("`link.txt` is outside the workspace"), "{msg}");
    let msg = e
        .denied("edit_file", edit("link.txt", "outside", "pwned"))
        .await;
    assert!(msg.contains("outside the workspace"), "{msg}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "outside\n");
    // A symlink is never replaced by a file either.
    assert!(
        std::fs::symlink_metadata(e.path("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[tokio::test]
async fn write_through_a_dangling_symlink_is_denied_and_creates_nothing_outside() {
    let e = env();
    let target = e.outside.path().join("created-by-dsh.txt");
    symlink(&target, e.path("dangling")).unwrap();
    e.denied("write_file", write("dangling", "pwned\n")).await;
    assert!(!target.exists());
}

#[tokio::test]
async fn write_under_a_parent_that_is_a_symlink_to_outside_is_denied() {
    let e = env();
    e.write_outside("dir/existing.txt", "outside\n");
    symlink(e.outside.path().join("dir"), e.path("out")).unwrap();
    let msg = e
        .denied("write_file", write("out/new.txt", "pwned\n"))
        .await;
    assert!(
        msg.contains("`out/new.txt` is outside the workspace"),
        "{msg}"
    );
    e.denied("write_file", write("out/existing.txt", "pwned\n"))
        .await;
    e.denied("write_file", write("out/sub/deeper.txt", "pwned\n"))
        .await;
    assert!(!e.outside.path().join("dir/new.txt").exists());
    assert!(!e.outside.path().join("dir/sub").exists());
    assert_eq!(
        std::fs::read_to_string(e.outside.path().join("dir/existing.txt")).unwrap(),
        "outside\n"
    );
}

#[tokio::test]
async fn edit_of_a_hard_linked_file_is_denied_and_the_other_link_is_unchanged() {
    let e = env();
    let outside = e.write_outside("shared.txt", "shared text\n");
    std::fs::hard_link(&outside, e.path("hard.txt")).unwrap();
    let msg = e
        .denied("edit_file", edit("hard.txt", "shared", "pwned"))
        .await;
    assert!(msg.contains("hard link"), "{msg}");
    e.denied("write_file", write("hard.txt", "pwned\n")).await;
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "shared text\n");

    // A file read while it had one link, then linked from outside: still refused.
    let inside = e.write("solo.txt", "solo\n");
    e.read("solo.txt").await;
    let other = e.outside.path().join("solo-link.txt");
    std::fs::hard_link(&inside, &other).unwrap();
    e.denied("edit_file", edit("solo.txt", "solo", "pwned"))
        .await;
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "solo\n");
}

#[tokio::test]
async fn write_and_edit_with_a_dotdot_escape_are_denied() {
    let e = env();
    let escape = format!(
        "../{}/escaped.txt",
        e.outside.path().file_name().unwrap().to_string_lossy()
    );
    // Both temp dirs share a parent, so this names a real place outside.
    let msg = e.denied("write_file", write(&escape, "pwned\n")).await;
    assert!(msg.contains("is outside the workspace"), "{msg}");
    assert!(!e.outside.path().join("escaped.txt").exists());
    e.denied("write_file", write("src/../../x.txt", "pwned\n"))
        .await;
    let abs = e.write_outside("abs.txt", "outside\n");
    e.denied("write_file", write(abs.to_str().unwrap(), "pwned\n"))
        .await;
    e.denied("edit_file", edit(abs.to_str().unwrap(), "outside", "pwned"))
        .await;
    assert_eq!(std::fs::read_to_string(&abs).unwrap(), "outside\n");
}

#[tokio::test]
async fn fifos_and_directories_are_refused_as_invalid_args_without_being_opened() {
    let e = env();
    // Opening a FIFO with no writer would block; the batch's timeout would catch a hang.
    common::mkfifo(&e.path("pipe"));
    std::fs::create_dir(e.path("dir")).unwrap();
    for path in ["pipe", "dir"] {
        let msg = e
            .fails("write_file", write(path, "x"), FailureKind::InvalidArgs)
            .await;
        assert!(msg.contains("is not a regular file"), "{path}: {msg}");
        e.fails("edit_file", edit(path, "x", "y"), FailureKind::InvalidArgs)
            .await;
    }
    assert!(e.path("dir").is_dir());
}

// ---------------------------------------------------------------------------------------------
// Sessions.

#[tokio::test]
async fn sessions_are_separate_a_read_in_one_does_not_authorize_another() {
    let e = env();
    e.write("shared.txt", "v1\n");
    e.read("shared.txt").await;
    let other = e.other_session();
    other
        .fails(
            "write_file",
            write("shared.txt", "from other\n"),
            FailureKind::NotObserved,
        )
        .await;
    other
        .fails(
            "edit_file",
            edit("shared.txt", "v1", "v2"),
            FailureKind::NotObserved,
        )
        .await;
    assert_eq!(e.text("shared.txt"), "v1\n");
    // The other session reads and edits; the first session's observation is now stale.
    other.read("shared.txt").await;
    other.ok("edit_file", edit("shared.txt", "v1", "v2")).await;
    e.fails(
        "edit_file",
        edit("shared.txt", "v2", "v3"),
        FailureKind::StaleVersion,
    )
    .await;
    assert_eq!(e.text("shared.txt"), "v2\n");
}

/// Two sessions of one process each read a file and then edit it at the same time. Their
/// seams' mutexes are separate, so only the lock on the directory (which belongs to each
/// open directory handle, not to the process) keeps the two checks and renames apart: an edit
/// either lands or fails `stale_version`, never reports `ok` and is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_editing_one_file_at_once_never_lose_an_update() {
    let e = env();
    let other = e.other_session();
    let padding = "x".repeat(1_000_000);
    for run in 0..20 {
        e.write("shared.txt", format!("a0\nb0\n{padding}"));
        e.read("shared.txt").await;
        other.read("shared.txt").await;
        let (a, b) = tokio::join!(
            e.call("edit_file", edit("shared.txt", "a0", "a1")),
            other.call("edit_file", edit("shared.txt", "b0", "b1")),
        );
        let text = e.text("shared.txt");
        for (r, mark) in [(&a, "a1"), (&b, "b1")] {
            match r.failure_kind() {
                None => assert!(
                    text.contains(mark),
                    "run {run}: {mark} reported ok and was lost"
                ),
                Some(FailureKind::StaleVersion) => {
                    assert!(!text.contains(mark), "run {run}: {mark} failed and landed")
                }
                Some(other) => panic!("run {run}: {other:?}: {}", r.to_json()),
            }
        }
        assert!(
            a.ok() != b.ok(),
            "run {run}: both read the same version, one must fail"
        );
    }
}

/// A lock on the directory held by someone else (here `flock` on another handle, as a hung
/// dsh or `flock DIR cmd` would hold it) makes a change wait, but at most five seconds: then
/// it fails as a `timeout` that says what holds it, and the file is unchanged.
#[tokio::test]
async fn a_change_waits_at_most_five_seconds_for_a_held_directory_lock() {
    let e = env();
    e.write("locked/f.txt", "v1\n");
    e.read("locked/f.txt").await;
    let holder = std::fs::File::open(e.path("locked")).unwrap();
    holder.lock().unwrap();
    let started = std::time::Instant::now();
    let why = e
        .fails(
            "edit_file",
            edit("locked/f.txt", "v1", "v2"),
            FailureKind::Timeout,
        )
        .await;
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(why.contains("lock on its directory"), "{why}");
    assert_eq!(e.text("locked/f.txt"), "v1\n");
    // Released, the same change goes through.
    holder.unlock().unwrap();
    e.ok("edit_file", edit("locked/f.txt", "v1", "v2")).await;
    assert_eq!(e.text("locked/f.txt"), "v2\n");
    assert!(temp_files(&e.path("locked")).is_empty());
}

// ---------------------------------------------------------------------------------------------
// read_output.

/// Splits a read_output content into the page text and its footer line.
fn page_and_footer(content: &str) -> (&str, &str) {
    content.rsplit_once('\n').expect("a footer line")
}

#[tokio::test]
async fn read_output_pages_a_spilled_output_back_whole() {
    let e = env();
    // 50 000 characters, multi-byte ones included: offsets count characters, not bytes.
    let big: String = (0..5_000).map(|i| format!("{i:05}-é-ü\n")).collect();
    assert_eq!(big.chars().count(), 50_000);
    let id = e.store.save("c1", &big).unwrap();
    assert_eq!(id, "out-c1");

    let mut joined = String::new();
    let mut offset = 0usize;
    let mut pages = 0;
    loop {
        let (content, value) = e
            .ok("read_output", json!({"id": id, "offset": offset}))
            .await;
        pages += 1;
        let (text, footer) = page_and_footer(&content);
        let chars = text.chars().count();
        assert_eq!(value["offset"], offset);
        assert_eq!(value["chars"], chars);
        assert_eq!(value["total_chars"], 50_000);
        assert!(chars <= SPILL_CHARS, "a page fits under the spill limit");
        joined.push_str(text);
        let end = offset + chars;
        if value["has_more"] == true {
            assert_eq!(
                footer,
                format!(
                    "[characters {offset}–{end} of 50000; next page: read_output{{\"id\":\"{id}\",\"offset\":{end}}}]"
                )
            );
            offset = end;
        } else {
            assert_eq!(
                footer,
                format!("[characters {offset}–{end} of 50000; end of output]")
            );
            break;
        }
        assert!(pages < 10, "paging does not advance");
    }
    assert!(pages >= 3, "50 000 characters take several pages");
    assert_eq!(joined, big);

    // An explicit limit is honoured.
    let (content, value) = e
        .ok("read_output", json!({"id": id, "offset": 5, "limit": 5}))
        .await;
    assert_eq!(page_and_footer(&content).0, "-é-ü\n");
    assert_eq!(value["has_more"], true);
}

#[tokio::test]
async fn read_output_with_a_bad_or_unknown_id_is_not_found() {
    let e = env();
    e.store.save("c1", "some output").unwrap();
    for id in ["out-nope", "../etc/passwd", "out-../../x", "c1", ""] {
        let msg = e
            .fails("read_output", json!({"id": id}), FailureKind::NotFound)
            .await;
        assert!(msg.contains("use the id a truncated result"), "{id}: {msg}");
    }
}

// Regressions found while reviewing the seam.

#[tokio::test]
async fn a_failed_edit_creates_no_directories() {
    let e = env();
    e.fails(
        "edit_file",
        edit("newdir/sub/missing.rs", "a", "b"),
        FailureKind::NotFound,
    )
    .await;
    assert!(!e.path("newdir").exists());
}

#[tokio::test]
async fn files_with_long_names_can_be_changed() {
    let e = env();
    let name = format!("{}.rs", "n".repeat(250));
    e.write(&name, "old\n");
    e.read(&name).await;
    e.ok("edit_file", edit(&name, "old", "new")).await;
    assert_eq!(e.text(&name), "new\n");
    assert!(temp_files(e.ws.path()).is_empty());
}

#[tokio::test]
async fn a_failed_read_does_not_authorize_a_write() {
    let e = env();
    e.write("bin.dat", b"\x00\x01binary".as_slice());
    e.fails(
        "read_file",
        json!({"path": "bin.dat"}),
        FailureKind::ToolError,
    )
    .await;
    e.fails(
        "write_file",
        write("bin.dat", "text"),
        FailureKind::NotObserved,
    )
    .await;
}

#[tokio::test]
async fn the_workspace_root_is_not_a_file() {
    let e = env();
    e.fails("write_file", write(".", "x"), FailureKind::InvalidArgs)
        .await;
}
