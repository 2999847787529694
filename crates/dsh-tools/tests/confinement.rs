//! Every way out of the workspace, tried with every read-only tool (SPEC A2): `..`, absolute
//! paths, symlinks to files and directories outside, hard links. Each is `denied` naming the
//! path, and the secret outside never reaches the content. Nothing here relies on file
//! permissions (CI runs as root).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::symlink;
use std::sync::Arc;

use common::{env, grep_hits, strings};
use dsh_core::{FailureKind, Gate};
use serde_json::json;

const SECRET: &str = "TOP-SECRET-7f3a";

/// A workspace with `link` → outside file, `dirlink` → outside dir, `hard` = hard link to an
/// outside file, and an ordinary `inside.txt`.
fn setup() -> common::Env {
    let e = env();
    let secret = e.write_outside("secret.txt", format!("{SECRET}\n"));
    e.write_outside("sub/deep.txt", format!("{SECRET}\n"));
    e.write("inside.txt", "harmless\n");
    symlink(&secret, e.ws.path().join("link")).unwrap();
    symlink(e.outside.path(), e.ws.path().join("dirlink")).unwrap();
    std::fs::hard_link(
        e.outside.path().join("sub/deep.txt"),
        e.ws.path().join("hard"),
    )
    .unwrap();
    e
}

#[tokio::test]
async fn read_file_denies_every_escape_and_names_the_path() {
    let e = setup();
    let abs = e.outside.path().join("secret.txt");
    let cases = [
        ("../secret.txt", "`../secret.txt` is outside the workspace"),
        ("src/../../x", "`src/../../x` is outside the workspace"),
        ("/etc/passwd", "`/etc/passwd` is outside the workspace"),
        (abs.to_str().unwrap(), "is outside the workspace"),
        ("link", "`link` is outside the workspace"),
        (
            "dirlink/secret.txt",
            "`dirlink/secret.txt` is outside the workspace",
        ),
        ("hard", "`hard` has 2 hard links"),
    ];
    for (path, says) in cases {
        let r = e.call("read_file", json!({"path": path})).await;
        assert_eq!(
            r.failure_kind(),
            Some(FailureKind::Denied),
            "{path}: {}",
            r.to_json()
        );
        assert_eq!(r.decided_by().gate, Gate::Execute);
        assert!(r.content().contains(says), "{path}: {}", r.content());
        assert!(!r.content().contains(SECRET));
        assert!(r.value().is_none());
    }
    // The whole journal (calls and results) never saw the secret either.
    assert!(e.journal.lines().iter().all(|l| !l.contains(SECRET)));
    // And the workspace's own file still reads.
    let (content, _) = e.ok("read_file", json!({"path": "inside.txt"})).await;
    assert_eq!(content, "     1\tharmless");
}

#[tokio::test]
async fn list_dir_denies_escapes_and_lists_symlinks_without_following_them() {
    let e = setup();
    for path in ["..", "/", "/tmp", "dirlink", "dirlink/sub"] {
        let msg = e
            .fails("list_dir", json!({"path": path}), FailureKind::Denied)
            .await;
        assert!(
            msg.contains(&format!("`{path}` is outside the workspace")),
            "{msg}"
        );
    }
    let (content, value) = e.ok("list_dir", json!({"path": "."})).await;
    let target = e.outside.path().display().to_string();
    assert_eq!(
        content,
        format!("dirlink@ -> {target}\nhard\ninside.txt\nlink@ -> {target}/secret.txt")
    );
    assert_eq!(value["entries"][0]["kind"], "symlink");
    assert_eq!(value["entries"][0]["target"], target);
    assert!(
        !content.contains("sub"),
        "the outside directory was listed: {content}"
    );
}

#[tokio::test]
async fn grep_and_find_files_deny_escapes_and_never_search_through_links() {
    let e = setup();
    for tool in ["grep", "find_files"] {
        for path in ["..", "/etc", "dirlink", "dirlink/sub"] {
            let msg = e
                .fails(
                    tool,
                    json!({"pattern": "x", "path": path}),
                    FailureKind::Denied,
                )
                .await;
            assert!(
                msg.contains("outside the workspace"),
                "{tool} {path}: {msg}"
            );
        }
    }
    // grep naming an escaping file directly.
    for path in ["link", "hard"] {
        let msg = e
            .fails(
                "grep",
                json!({"pattern": "SECRET", "path": path}),
                FailureKind::Denied,
            )
            .await;
        assert!(msg.contains(&format!("`{path}`")), "{msg}");
    }
    // Walking the workspace: the symlinks are not followed and the hard link is skipped, said.
    let (content, value) = e.ok("grep", json!({"pattern": "SECRET|harmless"})).await;
    assert_eq!(grep_hits(&value), ["inside.txt:1"]);
    assert_eq!(
        content,
        "inside.txt:1:harmless\n\
         [1 files with several hard links were skipped: they may be files outside the workspace]"
    );
    assert!(!content.contains(SECRET));
    // find_files lists the symlinks as symlinks, and nothing beneath `dirlink`.
    let (content, value) = e.ok("find_files", json!({"pattern": "*"})).await;
    assert_eq!(
        strings(&value["paths"]),
        ["dirlink", "hard", "inside.txt", "link"]
    );
    assert!(content.contains("dirlink@ -> "), "{content}");
    assert!(!content.contains("deep.txt"), "{content}");
}

#[tokio::test]
async fn a_gitignore_symlinked_to_an_endless_device_is_not_read() {
    let e = env();
    e.write("a.txt", "needle\n");
    e.write("sub/b.txt", "needle\n");
    // ripgrep's walker would read /dev/zero forever looking for the end of the first line.
    symlink("/dev/zero", e.ws.path().join(".gitignore")).unwrap();
    symlink("/dev/zero", e.ws.path().join("sub/.ignore")).unwrap();
    let (_, value) = e.ok("grep", json!({"pattern": "needle"})).await;
    assert_eq!(grep_hits(&value), ["a.txt:1", "sub/b.txt:1"]);
    // A FIFO named .gitignore would block a reader forever.
    std::fs::remove_file(e.ws.path().join(".gitignore")).unwrap();
    common::mkfifo(&e.ws.path().join(".gitignore"));
    let (_, value) = e.ok("find_files", json!({"pattern": "*.txt"})).await;
    assert_eq!(strings(&value["paths"]), ["a.txt", "sub/b.txt"]);
}

#[tokio::test]
async fn a_fifo_in_the_tree_does_not_block_grep() {
    let e = env();
    e.write("a.txt", "needle\n");
    common::mkfifo(&e.ws.path().join("pipe.txt"));
    let (_, value) = e.ok("grep", json!({"pattern": "needle"})).await;
    assert_eq!(grep_hits(&value), ["a.txt:1"]);
}

#[tokio::test]
async fn a_path_longer_than_path_max_is_invalid_args_for_every_tool_quoted_capped() {
    let e = env();
    let long = "a/".repeat(dsh_core::PATH_MAX);
    // Through the pipeline: refused at the registry, before any policy or tool.
    for (tool, args) in [
        ("read_file", json!({"path": long})),
        ("list_dir", json!({"path": long})),
        ("grep", json!({"pattern": "x", "path": long})),
        ("find_files", json!({"pattern": "*", "path": long})),
    ] {
        let r = e.call(tool, args).await;
        assert_eq!(r.failure_kind(), Some(FailureKind::InvalidArgs), "{tool}");
        assert_eq!(r.decided_by().gate, Gate::Registry, "{tool}");
        let reason = &r.decided_by().reason;
        assert!(reason.contains("(8192 bytes)"), "{tool}: {reason}");
        assert!(reason.len() < 500, "{tool}: {} bytes", reason.len());
    }
    // A tool run without the pipeline refuses it the same way, from `Workspace::resolve`.
    let ws = Arc::new(dsh_core::Workspace::new(e.ws.path()).unwrap());
    let tool = dsh_tools::ReadFile::new(ws, &dsh_tools::ReadCaps::default());
    let cx = dsh_core::ExecContext {
        call: dsh_core::ToolCall::new("1", "read_file", json!({})),
        spec: Arc::new(dsh_core::Tool::spec(&tool)),
        cancel: dsh_core::CancellationToken::new(),
        attempt: 1,
        dispatch: None,
        clearance: dsh_core::Clearance::Write,
    };
    let err = dsh_core::Tool::run(&tool, &json!({"path": long}), &cx)
        .await
        .unwrap_err();
    assert_eq!(err.kind, dsh_core::ToolErrorKind::InvalidArgs);
    assert!(err.message.contains("PATH_MAX"), "{}", err.message);
    assert!(err.message.len() < 500, "{}", err.message);
}
