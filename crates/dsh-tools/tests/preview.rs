//! `Tool::preview` of the changing tools: the diff a person approves is the one the change
//! then makes, a preview reaches nothing the change could not, and it changes nothing — not
//! the file, not its times, not the session's file seam.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;

use dsh_core::{
    CancellationToken, ExecContext, Tool, ToolCall, ToolError, ToolErrorKind, ToolOutput, Workspace,
};
use dsh_tools::{EditFile, FileSeam, ReadCaps, ReadFile, WriteFile};
use serde_json::{Value, json};
use tempfile::TempDir;

struct Env {
    dir: TempDir,
    outside: TempDir,
    read: ReadFile,
    write: WriteFile,
    edit: EditFile,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ws = Arc::new(Workspace::new(dir.path()).unwrap());
    let seam = Arc::new(FileSeam::new());
    Env {
        read: ReadFile::new(ws.clone(), &ReadCaps::default()).with_seam(seam.clone()),
        write: WriteFile::new(ws.clone(), seam.clone()),
        edit: EditFile::new(ws, seam),
        dir,
        outside,
    }
}

async fn run(tool: &dyn Tool, args: Value) -> Result<ToolOutput, ToolError> {
    let spec = Arc::new(tool.spec());
    let cx = ExecContext {
        call: ToolCall::new("c1", spec.name.clone(), args.clone()),
        spec,
        cancel: CancellationToken::new(),
        attempt: 1,
        dispatch: None,
        clearance: dsh_core::Clearance::Write,
    };
    tool.run(&args, &cx).await
}

impl Env {
    fn put(&self, rel: &str, content: &[u8]) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    async fn read_file(&self, path: &str) {
        run(&self.read, json!({"path": path})).await.unwrap();
    }
}

/// A file's bytes and stat times, to show a preview left it alone.
fn snapshot(p: &Path) -> (Vec<u8>, std::time::SystemTime, i64, i64) {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(p).unwrap();
    (
        std::fs::read(p).unwrap(),
        meta.modified().unwrap(),
        meta.ctime(),
        meta.ctime_nsec(),
    )
}

#[tokio::test]
async fn the_edit_preview_is_the_diff_the_edit_then_reports() {
    let e = env();
    let body: String = (1..=30).map(|i| format!("line {i}\r\n")).collect();
    e.put("src/a.txt", body.as_bytes());
    e.read_file("src/a.txt").await;
    // LF in the arguments against a CRLF file: the conversion is shared too.
    let args = json!({"path": "src/./a.txt", "old_string": "line 12\nline 13", "new_string": "twelve\nthirteen\nmore"});
    let shown = e.edit.preview(&args).expect("a preview");
    assert!(
        shown.starts_with("--- a/src/a.txt\n+++ b/src/a.txt\n@@ -9,"),
        "{shown}"
    );
    let out = run(&e.edit, args).await.unwrap();
    assert_eq!(out.value["diff"].as_str().unwrap(), shown);
}

#[tokio::test]
async fn an_edit_that_would_fail_previews_nothing() {
    let e = env();
    e.put("a.txt", b"x x\n");
    e.put("bin", b"\0\x01\x02");
    for args in [
        json!({"path": "a.txt", "old_string": "zzz", "new_string": "y"}),
        json!({"path": "a.txt", "old_string": "x", "new_string": "y"}),
        json!({"path": "a.txt", "old_string": "x", "new_string": "x"}),
        json!({"path": "missing.txt", "old_string": "x", "new_string": "y"}),
        json!({"path": "bin", "old_string": "\u{1}", "new_string": "y"}),
        json!({"path": ".", "old_string": "x", "new_string": "y"}),
        json!({"path": "a.txt"}),
    ] {
        assert_eq!(e.edit.preview(&args), None, "{args}");
    }
    let all = json!({"path": "a.txt", "old_string": "x", "new_string": "y", "replace_all": true});
    assert!(e.edit.preview(&all).unwrap().contains("-x x\n+y y\n"));
}

#[tokio::test]
async fn a_write_preview_of_a_new_file_is_all_additions_from_dev_null() {
    let e = env();
    let args = json!({"path": "new/dir/n.txt", "content": "a\nb"});
    assert_eq!(
        e.write.preview(&args).unwrap(),
        "--- /dev/null\n+++ b/new/dir/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n"
    );
    // Nothing was created, not even the directory.
    assert!(!e.dir.path().join("new").exists());
}

#[tokio::test]
async fn a_write_preview_of_an_existing_file_diffs_its_current_text() {
    let e = env();
    e.put("f.txt", b"one\ntwo\nthree\n");
    let args = json!({"path": "f.txt", "content": "one\n2\nthree\n"});
    assert_eq!(
        e.write.preview(&args).unwrap(),
        "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
    );
    // The same content: nothing to show.
    let same = json!({"path": "f.txt", "content": "one\ntwo\nthree\n"});
    assert_eq!(e.write.preview(&same), None);
    // A file in UTF-16 is diffed as its text.
    let mut utf16 = vec![0xFF, 0xFE];
    utf16.extend("héllo\n".encode_utf16().flat_map(u16::to_le_bytes));
    e.put("w.txt", &utf16);
    let d = e
        .write
        .preview(&json!({"path": "w.txt", "content": "hello\n"}))
        .unwrap();
    assert!(d.ends_with("-héllo\n+hello\n"), "{d}");
    // A binary file is not text: no diff.
    e.put("bin", b"\0\x01\x02");
    assert_eq!(
        e.write.preview(&json!({"path": "bin", "content": "x"})),
        None
    );
    // A directory is not a file.
    std::fs::create_dir(e.dir.path().join("d")).unwrap();
    assert_eq!(e.write.preview(&json!({"path": "d", "content": "x"})), None);
}

#[tokio::test]
async fn paths_outside_the_workspace_preview_nothing() {
    let e = env();
    let secret = e.outside.path().join("secret.txt");
    std::fs::write(&secret, "secret\n").unwrap();
    symlink(&secret, e.dir.path().join("link")).unwrap();
    symlink(e.outside.path(), e.dir.path().join("dirlink")).unwrap();
    let name = e.outside.path().file_name().unwrap().to_str().unwrap();
    let up = format!("../{name}/secret.txt");
    let abs = secret.to_str().unwrap().to_owned();
    for path in [
        up.as_str(),
        abs.as_str(),
        "link",
        "dirlink/secret.txt",
        "../x",
    ] {
        let w = json!({"path": path, "content": "changed\n"});
        let ed = json!({"path": path, "old_string": "secret", "new_string": "changed"});
        assert_eq!(e.write.preview(&w), None, "{path}");
        assert_eq!(e.edit.preview(&ed), None, "{path}");
        // And the change itself refuses them too.
        assert_eq!(
            run(&e.write, w).await.unwrap_err().kind,
            ToolErrorKind::Denied,
            "{path}"
        );
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret\n");
    assert!(!e.dir.path().parent().unwrap().join("x").exists());
}

#[tokio::test]
async fn a_hard_linked_file_previews_nothing() {
    let e = env();
    let outer = e.outside.path().join("o.txt");
    std::fs::write(&outer, "o\n").unwrap();
    if std::fs::hard_link(&outer, e.dir.path().join("h.txt")).is_err() {
        return; // different file systems
    }
    let w = json!({"path": "h.txt", "content": "x\n"});
    assert_eq!(e.write.preview(&w), None);
}

#[tokio::test]
async fn a_preview_changes_nothing_not_even_the_seam() {
    let e = env();
    e.put("f.txt", b"alpha\nbeta\n");
    let path = e.dir.path().join("f.txt");
    let edit = json!({"path": "f.txt", "old_string": "beta", "new_string": "gamma"});
    let write = json!({"path": "f.txt", "content": "new\n"});
    let refused = run(&e.edit, edit.clone()).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::NotObserved);
    let before = snapshot(&path);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(e.edit.preview(&edit).is_some());
    assert!(e.write.preview(&write).is_some());
    assert_eq!(snapshot(&path), before);
    // Still not observed: a preview is not a read.
    assert_eq!(run(&e.edit, edit.clone()).await.unwrap_err(), refused);
    let w = run(&e.write, write).await.unwrap_err();
    assert_eq!(w.kind, ToolErrorKind::NotObserved);
    // No temporary file or anything else left in the workspace.
    let names: Vec<_> = std::fs::read_dir(e.dir.path())
        .unwrap()
        .map(|d| d.unwrap().file_name())
        .collect();
    assert_eq!(names, ["f.txt"]);
    // After a read, the edit goes through as previewed.
    e.read_file("f.txt").await;
    let shown = e.edit.preview(&edit).unwrap();
    let out = run(&e.edit, edit).await.unwrap();
    assert_eq!(out.value["diff"].as_str().unwrap(), shown);
}
