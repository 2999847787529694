//! `grep` through the pipeline: results, skipping rules, the cap, bad patterns (SPEC A3).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use common::{env, env_with, grep_hits};
use dsh_core::FailureKind;
use dsh_tools::ReadCaps;
use serde_json::json;

#[tokio::test]
async fn matches_are_relpath_line_text_sorted_by_path_then_line() {
    let e = env();
    e.write(
        "src/b.rs",
        "fn b() {}\n// TODO: two\nlet x = 1; // TODO: three\n",
    );
    e.write("src/a.rs", "x\nx\nx\n// TODO: one\n");
    e.write("README.md", "nothing here\n");
    e.write("src/a/b.rs", "// TODO: nested\n");
    let (content, value) = e.ok("grep", json!({"pattern": "TODO: \\w+"})).await;
    assert_eq!(
        content,
        "src/a/b.rs:1:// TODO: nested\n\
         src/a.rs:4:// TODO: one\n\
         src/b.rs:2:// TODO: two\n\
         src/b.rs:3:let x = 1; // TODO: three"
    );
    assert_eq!(
        value,
        json!({"matches": [
            {"path": "src/a/b.rs", "line": 1, "text": "// TODO: nested"},
            {"path": "src/a.rs", "line": 4, "text": "// TODO: one"},
            {"path": "src/b.rs", "line": 2, "text": "// TODO: two"},
            {"path": "src/b.rs", "line": 3, "text": "let x = 1; // TODO: three"},
        ], "truncated": false, "files_searched": 4})
    );
}

#[tokio::test]
async fn honours_gitignore_and_ignore_outside_a_git_repository() {
    let e = env();
    e.write(".gitignore", "*.log\n/generated/\n");
    e.write(".ignore", "secret.txt\n");
    e.write("sub/.gitignore", "!keep.log\n");
    for f in [
        "app.log",
        "generated/x.rs",
        "secret.txt",
        "sub/keep.log",
        "sub/other.log",
        "sub/generated/y.rs",
        "main.rs",
    ] {
        e.write(f, "needle\n");
    }
    let (_, value) = e.ok("grep", json!({"pattern": "needle"})).await;
    assert_eq!(
        grep_hits(&value),
        ["main.rs:1", "sub/generated/y.rs:1", "sub/keep.log:1"]
    );
    // Searching a subdirectory still applies the root's rules (and nothing above the root).
    let (_, value) = e
        .ok("grep", json!({"pattern": "needle", "path": "sub"}))
        .await;
    assert_eq!(
        grep_hits(&value),
        ["sub/generated/y.rs:1", "sub/keep.log:1"]
    );
}

#[tokio::test]
async fn skips_noise_directories_hidden_entries_and_binaries() {
    let e = env();
    for f in [
        "node_modules/pkg/index.js",
        "target/debug/out.rs",
        "src/__pycache__/m.py",
        ".git/config",
        ".venv/lib.py",
        "src/.hidden.rs",
        "src/real.rs",
        "deep/target/x.rs",
    ] {
        e.write(f, "needle\n");
    }
    e.write("blob.bin", b"needle\0\x01\x02 needle\n");
    let (content, value) = e.ok("grep", json!({"pattern": "needle"})).await;
    assert_eq!(grep_hits(&value), ["src/real.rs:1"]);
    assert_eq!(content, "src/real.rs:1:needle");
    // Naming a skipped directory searches it: the rules apply below the path given.
    let (_, value) = e
        .ok("grep", json!({"pattern": "needle", "path": "node_modules"}))
        .await;
    assert_eq!(grep_hits(&value), ["node_modules/pkg/index.js:1"]);
    // A binary named directly is reported as skipped, not as a match.
    let (content, value) = e
        .ok("grep", json!({"pattern": "needle", "path": "blob.bin"}))
        .await;
    assert_eq!(
        content,
        "No matches for `needle` in `blob.bin` (1 files searched).\n[1 binary files were skipped]"
    );
    assert_eq!(value["files_searched"], 1);
}

#[tokio::test]
async fn include_filters_by_name_or_by_path() {
    let e = env();
    for f in ["src/lib.rs", "src/deep/mod.rs", "src/app.ts", "tests/t.rs"] {
        e.write(f, "needle\n");
    }
    let (_, value) = e
        .ok("grep", json!({"pattern": "needle", "include": "*.rs"}))
        .await;
    assert_eq!(
        grep_hits(&value),
        ["src/deep/mod.rs:1", "src/lib.rs:1", "tests/t.rs:1"]
    );
    let (_, value) = e
        .ok(
            "grep",
            json!({"pattern": "needle", "include": "src/**/*.rs"}),
        )
        .await;
    assert_eq!(grep_hits(&value), ["src/deep/mod.rs:1", "src/lib.rs:1"]);
    let (_, value) = e
        .ok(
            "grep",
            json!({"pattern": "needle", "path": "src", "include": "*.{ts,js}"}),
        )
        .await;
    assert_eq!(grep_hits(&value), ["src/app.ts:1"]);
    let msg = e
        .fails(
            "grep",
            json!({"pattern": "needle", "include": "src/[x"}),
            FailureKind::InvalidArgs,
        )
        .await;
    assert!(msg.starts_with("`include` is not a valid glob"), "{msg}");
}

#[tokio::test]
async fn results_are_cut_at_the_cap_and_the_cut_is_said() {
    let e = env();
    for i in 0..60 {
        e.write(&format!("f{i:02}.txt"), "needle\n");
    }
    let (content, value) = e.ok("grep", json!({"pattern": "needle"})).await;
    assert_eq!(value["matches"].as_array().unwrap().len(), 50);
    assert_eq!(value["truncated"], true);
    assert_eq!(value["files_searched"], 60);
    assert_eq!(grep_hits(&value)[49], "f49.txt:1");
    assert!(
        content.ends_with("\n[showing the first 50 of 60 matches; narrow the pattern or path]"),
        "{content}"
    );
    // The same call gives the same content every time, whatever the threads did.
    let (again, _) = e.ok("grep", json!({"pattern": "needle"})).await;
    assert_eq!(again, content);
}

#[tokio::test]
async fn one_file_over_the_cap_gives_a_lower_bound() {
    let e = env_with(&ReadCaps {
        max_results: 5,
        ..ReadCaps::default()
    });
    e.write("many.txt", "hit\n".repeat(100));
    let (content, value) = e.ok("grep", json!({"pattern": "hit"})).await;
    assert_eq!(value["matches"].as_array().unwrap().len(), 5);
    assert!(
        content
            .ends_with("[showing the first 5 of at least 5 matches; narrow the pattern or path]"),
        "{content}"
    );
}

#[tokio::test]
async fn an_invalid_regex_is_invalid_args_with_the_regex_error() {
    let e = env();
    e.write("a.txt", "x\n");
    let msg = e
        .fails(
            "grep",
            json!({"pattern": "fn main("}),
            FailureKind::InvalidArgs,
        )
        .await;
    assert!(msg.starts_with("`pattern` is not a valid regex: "), "{msg}");
    assert!(msg.contains("unclosed group"), "{msg}");
    assert!(msg.contains("escape"), "{msg}");
}

#[tokio::test]
async fn non_utf8_file_names_and_contents_are_shown_lossily() {
    let e = env();
    let dir = e.ws.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join(OsStr::from_bytes(b"caf\xe9.txt")),
        b"needle \xff\n",
    )
    .unwrap();
    let (content, value) = e.ok("grep", json!({"pattern": "needle"})).await;
    assert!(
        content.starts_with("d/caf\u{FFFD}.txt:1:needle \u{FFFD}\n[some paths are not valid UTF-8"),
        "{content}"
    );
    assert_eq!(value["matches"][0]["path"], "d/caf\u{FFFD}.txt");
}

#[tokio::test]
async fn no_match_says_what_was_searched_and_long_lines_are_cut() {
    let e = env();
    e.write("a.rs", format!("{}needle\n", "z".repeat(1000)));
    let (content, value) = e
        .ok("grep", json!({"pattern": "absent", "include": "*.rs"}))
        .await;
    assert_eq!(
        content,
        "No matches for `absent` in `.` (1 files matching `*.rs` searched)."
    );
    assert_eq!(
        value,
        json!({"matches": [], "truncated": false, "files_searched": 1})
    );
    let (_, value) = e.ok("grep", json!({"pattern": "needle"})).await;
    let text = value["matches"][0]["text"].as_str().unwrap();
    assert_eq!(text, format!("{}[… cut]", "z".repeat(300)));
}

#[tokio::test]
async fn missing_paths_and_unsearchable_kinds() {
    let e = env();
    e.fails(
        "grep",
        json!({"pattern": "x", "path": "nope"}),
        FailureKind::NotFound,
    )
    .await;
    common::mkfifo(&e.ws.path().join("pipe"));
    let msg = e
        .fails(
            "grep",
            json!({"pattern": "x", "path": "pipe"}),
            FailureKind::InvalidArgs,
        )
        .await;
    assert_eq!(
        msg,
        "`pipe` is a FIFO (named pipe); grep searches regular files and directories only"
    );
}
