//! `list_dir` through the pipeline: sorting, kinds, the cap, names that are not UTF-8.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;

use common::{env, env_with, mkfifo};
use dsh_core::FailureKind;
use dsh_tools::ReadCaps;
use serde_json::json;

#[tokio::test]
async fn entries_are_sorted_with_dirs_slashed_symlinks_arrowed_and_others_marked() {
    let e = env();
    e.write("b.txt", "b");
    e.write("a/inner.txt", "a");
    e.write(".hidden", "h");
    symlink("a/inner.txt", e.ws.path().join("c-link")).unwrap();
    symlink("missing", e.ws.path().join("dangling")).unwrap();
    mkfifo(&e.ws.path().join("fifo"));
    let (content, value) = e.ok("list_dir", json!({"path": "."})).await;
    assert_eq!(
        content,
        ".hidden\na/\nb.txt\nc-link@ -> a/inner.txt\ndangling@ -> missing\nfifo [not a file or directory]"
    );
    assert_eq!(
        value,
        json!({"path": ".", "truncated": false, "entries": [
            {"name": ".hidden", "kind": "file"},
            {"name": "a", "kind": "dir"},
            {"name": "b.txt", "kind": "file"},
            {"name": "c-link", "kind": "symlink", "target": "a/inner.txt"},
            {"name": "dangling", "kind": "symlink", "target": "missing"},
            {"name": "fifo", "kind": "other"},
        ]})
    );
    let (content, value) = e.ok("list_dir", json!({"path": "a/"})).await;
    assert_eq!(content, "inner.txt");
    assert_eq!(value["path"], "a");
}

#[tokio::test]
async fn the_cap_keeps_the_first_names_in_order_and_says_how_many_there_are() {
    let e = env_with(&ReadCaps {
        max_list_entries: 3,
        ..ReadCaps::default()
    });
    for name in ["e", "a", "d", "b", "c", "f"] {
        e.write(name, "");
    }
    let (content, value) = e.ok("list_dir", json!({"path": "."})).await;
    assert_eq!(
        content,
        "a\nb\nc\n[showing the first 3 of 6 entries by name; use find_files with a pattern to narrow]"
    );
    assert_eq!(value["truncated"], true);
    assert_eq!(value["entries"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn names_that_are_not_utf8_are_shown_lossily_and_flagged() {
    let e = env();
    let raw = OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(e.ws.path().join(raw), "x").unwrap();
    let (content, value) = e.ok("list_dir", json!({"path": "."})).await;
    assert!(
        content.starts_with("caf\u{FFFD}.txt (not UTF-8)\n["),
        "{content}"
    );
    assert!(content.contains("not valid UTF-8"), "{content}");
    assert_eq!(
        value["entries"],
        json!([{"name": "caf\u{FFFD}.txt", "kind": "file", "lossy": true}])
    );
}

#[tokio::test]
async fn a_file_an_empty_dir_and_a_missing_path() {
    let e = env();
    e.write("f.txt", "x");
    std::fs::create_dir(e.ws.path().join("empty")).unwrap();
    let msg = e
        .fails(
            "list_dir",
            json!({"path": "f.txt"}),
            FailureKind::InvalidArgs,
        )
        .await;
    assert_eq!(
        msg,
        "`f.txt` is a regular file, not a directory; use read_file to read it"
    );
    let (content, value) = e.ok("list_dir", json!({"path": "empty"})).await;
    assert_eq!(content, "[the directory is empty]");
    assert_eq!(
        value,
        json!({"path": "empty", "entries": [], "truncated": false})
    );
    e.fails("list_dir", json!({"path": "nope"}), FailureKind::NotFound)
        .await;
}
