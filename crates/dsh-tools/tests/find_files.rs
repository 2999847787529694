//! `find_files` through the pipeline: glob semantics, skipping rules, the cap (SPEC A3).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use common::{env, strings};
use dsh_core::FailureKind;
use serde_json::json;

fn tree() -> common::Env {
    let e = env();
    for f in [
        "Cargo.toml",
        "src/lib.rs",
        "src/deep/er/mod.rs",
        "src/app.ts",
        "tests/it.rs",
        "target/debug/build.rs",
        "node_modules/x/y.rs",
        "py/__pycache__/m.rs",
        ".github/ci.rs",
        "src/.secret.rs",
        "ignored/z.rs",
    ] {
        e.write(f, "");
    }
    e.write(".gitignore", "ignored/\n");
    e
}

#[tokio::test]
async fn a_bare_glob_matches_names_at_any_depth_sorted() {
    let e = tree();
    let (content, value) = e.ok("find_files", json!({"pattern": "*.rs"})).await;
    assert_eq!(content, "src/deep/er/mod.rs\nsrc/lib.rs\ntests/it.rs");
    assert_eq!(
        value,
        json!({"paths": ["src/deep/er/mod.rs", "src/lib.rs", "tests/it.rs"], "truncated": false})
    );
    let (_, value) = e.ok("find_files", json!({"pattern": "Cargo.toml"})).await;
    assert_eq!(strings(&value["paths"]), ["Cargo.toml"]);
}

#[tokio::test]
async fn a_glob_with_a_slash_matches_paths_relative_to_path_or_root() {
    let e = tree();
    let (_, value) = e.ok("find_files", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(strings(&value["paths"]), ["src/lib.rs"]);
    let (_, value) = e.ok("find_files", json!({"pattern": "src/**/*.rs"})).await;
    assert_eq!(
        strings(&value["paths"]),
        ["src/deep/er/mod.rs", "src/lib.rs"]
    );
    // Relative to the directory searched…
    let (_, value) = e
        .ok("find_files", json!({"pattern": "deep/**", "path": "src"}))
        .await;
    assert_eq!(strings(&value["paths"]), ["src/deep/er/mod.rs"]);
    // …or to the workspace root, whichever the model meant.
    let (_, value) = e
        .ok("find_files", json!({"pattern": "src/*.ts", "path": "src"}))
        .await;
    assert_eq!(strings(&value["paths"]), ["src/app.ts"]);
    let (content, value) = e.ok("find_files", json!({"pattern": "*.py"})).await;
    assert_eq!(content, "No files match `*.py` in `.`.");
    assert_eq!(value, json!({"paths": [], "truncated": false}));
}

#[tokio::test]
async fn skipped_directories_are_searched_only_when_named() {
    let e = tree();
    let (_, value) = e
        .ok("find_files", json!({"pattern": "*.rs", "path": "target"}))
        .await;
    assert_eq!(strings(&value["paths"]), ["target/debug/build.rs"]);
    let (_, value) = e
        .ok("find_files", json!({"pattern": "*", "path": ".github"}))
        .await;
    assert_eq!(strings(&value["paths"]), [".github/ci.rs"]);
}

#[tokio::test]
async fn the_cap_says_the_exact_total() {
    let e = env();
    for i in 0..75 {
        e.write(&format!("d{}/f{i:02}.md", i % 3), "");
    }
    let (content, value) = e.ok("find_files", json!({"pattern": "*.md"})).await;
    let paths = strings(&value["paths"]);
    assert_eq!(paths.len(), 50);
    assert_eq!(paths[0], "d0/f00.md");
    assert!(paths.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(value["truncated"], true);
    assert!(
        content.ends_with("\n[showing the first 50 of 75 files; narrow the pattern or path]"),
        "{content}"
    );
}

#[tokio::test]
async fn non_utf8_names_symlinks_and_bad_arguments() {
    let e = env();
    std::fs::create_dir(e.ws.path().join("d")).unwrap();
    std::fs::write(
        e.ws.path().join("d").join(OsStr::from_bytes(b"x\xff.txt")),
        "",
    )
    .unwrap();
    std::os::unix::fs::symlink("d", e.ws.path().join("alias.txt")).unwrap();
    let (content, value) = e.ok("find_files", json!({"pattern": "*.txt"})).await;
    assert!(
        content
            .starts_with("alias.txt@ -> d\nd/x\u{FFFD}.txt (not UTF-8)\n[names marked (not UTF-8)"),
        "{content}"
    );
    assert_eq!(strings(&value["paths"]), ["alias.txt", "d/x\u{FFFD}.txt"]);

    let msg = e
        .fails(
            "find_files",
            json!({"pattern": "a{b"}),
            FailureKind::InvalidArgs,
        )
        .await;
    assert!(msg.starts_with("`pattern` is not a valid glob"), "{msg}");
    e.write("f.txt", "");
    let msg = e
        .fails(
            "find_files",
            json!({"pattern": "*", "path": "f.txt"}),
            FailureKind::InvalidArgs,
        )
        .await;
    assert_eq!(
        msg,
        "`f.txt` is a regular file, not a directory; use read_file to read it"
    );
}
