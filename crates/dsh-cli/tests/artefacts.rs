//! Issue 21, items 5 and 7, against the built binary:
//! - a journal whose process died before its first record was complete is a crash artefact,
//!   not a session (DESIGN §6): `sessions verify` says so once (exit 0), `sessions list` and
//!   `--continue` leave it out without a word, `--resume` of it is refused as one (exit 2),
//!   and `sessions prune` removes it — and nothing else;
//! - `--resume ID` keeps the workspace the session recorded, from whatever directory it is
//!   run; `--workspace DIR` moves it on purpose, with a notice; a recorded workspace that is
//!   gone means the current directory, with a notice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use common::{Dirs, journals, records, scripted_exec, stderr, stdout};
use dsh_testkit::model_server::{ScriptedServer, Turn};
use serde_json::Value;

/// `dsh ARGS…` run in `cwd`, with the isolated environment and no `--workspace`.
fn dsh_in(d: &Dirs, cwd: &Path, args: &[&str]) -> Command {
    let mut c = d.dsh_in(cwd, args);
    c.env("OPENAI_API_KEY", "sk-test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn model_flags(url: &str) -> [&str; 6] {
    [
        "--provider",
        "openai",
        "--base-url",
        url,
        "--model",
        "scripted",
    ]
}

fn id_of(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

/// A journal file named by a session id, holding `bytes`, last changed an hour ago (crash
/// artefacts changed moments ago are left for a while: they may be sessions starting).
fn journal_file(d: &Dirs, id: &str, bytes: &[u8], old: bool) -> PathBuf {
    let dir = d.home.join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{id}.jsonl"));
    std::fs::write(&path, bytes).unwrap();
    if old {
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
    }
    path
}

/// One finished session of `d.ws`, answered "done"; its journal.
fn finished_session(d: &Dirs, prompt: &str) -> PathBuf {
    let before = journals(&d.home);
    let server = ScriptedServer::start(vec![Turn::text("done").into()]);
    let out = scripted_exec(d, &server.url, &[], prompt).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    journals(&d.home)
        .into_iter()
        .find(|p| !before.contains(p))
        .unwrap()
}

const EMPTY: &str = "20250101T000000Z-0000000a";
const EMPTY_LINE: &str = "20250101T000000Z-0000000b";
const TORN: &str = "20250101T000000Z-0000000c";
const LOCKED: &str = "20250101T000000Z-0000000d";
const RECENT: &str = "20250101T000000Z-0000000e";
const DAMAGED: &str = "20250101T000000Z-0000000f";
/// A `session_start` cut off by a kill before its newline.
const TORN_BYTES: &[u8] = br#"{"v":1,"seq":1,"ts":"2025-01-01T00:00:00.000Z","session":"20250101T000000Z-0000000c","kind":"session_start","workspa"#;

#[test]
fn crash_artefacts_are_named_once_by_verify_left_out_of_list_and_removed_by_prune() {
    let d = Dirs::new();
    let complete = finished_session(&d, "the task");
    let empty = journal_file(&d, EMPTY, b"", true);
    let empty_line = journal_file(&d, EMPTY_LINE, b"\n", true);
    let torn = journal_file(&d, TORN, TORN_BYTES, true);
    // Held open by a running process (this one): it may still get its first record.
    let locked = journal_file(&d, LOCKED, b"", true);
    let lock = std::fs::File::open(&locked).unwrap();
    lock.try_lock().unwrap();
    // A first line damaged with records after it: a changed journal, not a crash artefact.
    let mut damaged_bytes = b"garbage\n".to_vec();
    damaged_bytes.extend(
        std::fs::read(&complete)
            .unwrap()
            .split_inclusive(|b| *b == b'\n')
            .nth(1)
            .unwrap(),
    );
    let damaged = journal_file(&d, DAMAGED, &damaged_bytes, true);
    let artefact_ids = [EMPTY, EMPTY_LINE, TORN, LOCKED, RECENT];
    let torn_what = format!(
        "its first line is torn, {} bytes without a newline",
        TORN_BYTES.len()
    );

    // verify: one line naming it a crash artefact, exit 0.
    for (id, what) in [
        (EMPTY, "the file is empty"),
        (EMPTY_LINE, "its only line is empty"),
        (TORN, &torn_what),
    ] {
        let out = d.dsh(&["sessions", "verify", id]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{id}: {}", stderr(&out));
        let text = stdout(&out);
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains(id)
                && text.contains(&format!("a crash artefact, not a session: {what}"))
                && text.contains("`dsh sessions prune` removes it")
                && !text.contains("BROKEN"),
            "{text}"
        );
        assert_eq!(stderr(&out), "");
    }
    let out = d.dsh(&["sessions", "verify", LOCKED]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("a running dsh process holds it open"),
        "{}",
        stdout(&out)
    );
    let out = d.dsh(&["sessions", "verify", DAMAGED]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("BROKEN at line 1"),
        "{}",
        stdout(&out)
    );

    // list, as text and as JSON: the session, no artefact, no word about them.
    for json in [false, true] {
        let mut args = vec!["sessions", "list"];
        if json {
            args.push("--json");
        }
        let out = d.dsh(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let (text, err) = (stdout(&out), stderr(&out));
        assert!(text.contains(&id_of(&complete)), "{text}");
        for id in artefact_ids {
            assert!(
                !text.contains(id) && !err.contains(id),
                "{id}: {text}\n{err}"
            );
        }
        if json {
            assert_eq!(text.lines().count(), 1, "{text}");
        }
    }

    // --continue skips them silently; --resume of one says it is one (exit 2).
    let before = journals(&d.home);
    let server = ScriptedServer::start(vec![Turn::text("continued").into()]);
    let out = scripted_exec(&d, &server.url, &["--continue"], "go on")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for id in artefact_ids {
        assert!(!stderr(&out).contains(id), "{}", stderr(&out));
    }
    let continued = journals(&d.home)
        .into_iter()
        .find(|p| !before.contains(p))
        .unwrap();
    assert_eq!(
        records(&continued)[0]["resumed_from"]["session"],
        id_of(&complete)
    );
    let server = ScriptedServer::start(vec![Turn::text("never asked").into()]);
    let out = scripted_exec(&d, &server.url, &["--resume", TORN], "go on")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("is a crash artefact with no session to resume")
            && err.contains("`dsh sessions prune` removes it"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 0);

    // Just created (right before prune, however slow the machine): it may be a session
    // starting.
    let recent = journal_file(&d, RECENT, b"", false);
    // prune: the three, said one line each, then a summary; nothing else goes.
    let out = d.dsh(&["sessions", "prune"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    for (line, (path, what)) in lines.iter().zip([
        (&empty, "the file is empty"),
        (&empty_line, "its only line is empty"),
        (&torn, &torn_what),
    ]) {
        assert_eq!(
            *line,
            format!("removed {}: a crash artefact ({what})", path.display())
        );
    }
    assert!(
        lines[3].starts_with(&format!("left {}", locked.display()))
            && lines[3].ends_with("but a running dsh process holds it open"),
        "{text}"
    );
    assert!(
        lines[4].starts_with(&format!("left {}", recent.display()))
            && lines[4].contains("it may be a session that is starting"),
        "{text}"
    );
    assert_eq!(lines[5], "3 crash artefact(s) removed, 2 left");
    assert_eq!(journals(&d.home), {
        let mut kept = vec![complete, continued, locked, recent, damaged];
        kept.sort();
        kept
    });
    drop(lock);
}

/// A workspace holding a file only it has, a finished session of it, and a directory
/// elsewhere to resume from.
fn recorded_session(d: &Dirs) -> String {
    std::fs::write(
        d.ws.join("only-here.txt"),
        "the recorded workspace's file\n",
    )
    .unwrap();
    id_of(&finished_session(d, "remember this place"))
}

/// A model that reads `only-here.txt`, then answers "read".
fn reader() -> dsh_testkit::model_server::ServerHandle {
    ScriptedServer::start(vec![
        Turn::tool_call("r1", "read_file", r#"{"path":"only-here.txt"}"#).into(),
        Turn::text("read").into(),
    ])
}

/// The new journal's workspace and its `read_file` result.
fn workspace_and_read(d: &Dirs, before: &[PathBuf]) -> (Value, Value) {
    let new = journals(&d.home)
        .into_iter()
        .find(|p| !before.contains(p))
        .unwrap();
    let recs = records(&new);
    let result = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "r1")
        .unwrap()
        .clone();
    (recs[0]["workspace"].clone(), result)
}

#[test]
fn resume_from_another_directory_keeps_the_recorded_workspace() {
    let d = Dirs::new();
    let id = recorded_session(&d);

    // `dsh exec --resume`, from a directory without the file.
    let before = journals(&d.home);
    let server = reader();
    let mut args = vec!["exec"];
    args.extend(model_flags(&server.url));
    args.extend(["--resume", &id, "read it"]);
    let out = dsh_in(&d, &d.outside, &args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("workspace"), "{}", stderr(&out));
    let (workspace, read) = workspace_and_read(&d, &before);
    assert_eq!(workspace, d.ws.to_str().unwrap());
    assert_eq!(read["ok"], true, "{read}");
    assert!(
        read["content"]
            .as_str()
            .unwrap()
            .contains("the recorded workspace's file"),
        "{read}"
    );

    // The REPL (`dsh --resume`, stdin piped), resuming that resumed session in turn.
    let resumed = id_of(
        journals(&d.home)
            .iter()
            .find(|p| !before.contains(p))
            .unwrap(),
    );
    let before = journals(&d.home);
    let server = reader();
    let mut args = model_flags(&server.url).to_vec();
    args.extend(["--resume", &resumed]);
    let mut child = dsh_in(&d, &d.outside, &args)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"read it again\n")
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("workspace"), "{}", stderr(&out));
    let (workspace, read) = workspace_and_read(&d, &before);
    assert_eq!(workspace, d.ws.to_str().unwrap());
    assert_eq!(read["ok"], true, "{read}");

    // --continue is still this directory's newest session: there is none here.
    let server = ScriptedServer::start(vec![Turn::text("never asked").into()]);
    let mut args = vec!["exec"];
    args.extend(model_flags(&server.url));
    args.extend(["--continue", "go on"]);
    let out = dsh_in(&d, &d.outside, &args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("can be continued"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn workspace_moves_a_resumed_session_on_purpose_with_a_notice() {
    let d = Dirs::new();
    let id = recorded_session(&d);
    let before = journals(&d.home);
    let server = reader();
    let outside = d.outside.to_str().unwrap();
    let mut args = vec!["exec", "--workspace", outside];
    args.extend(model_flags(&server.url));
    args.extend(["--resume", &id, "read it"]);
    let out = dsh_in(&d, d.root(), &args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let notice = format!(
        "dsh: resuming in {outside}, not in the recorded workspace {} (--workspace moves it)",
        d.ws.display()
    );
    let err = stderr(&out);
    assert_eq!(err.lines().filter(|l| *l == notice).count(), 1, "{err}");
    let (workspace, read) = workspace_and_read(&d, &before);
    assert_eq!(workspace, outside);
    // The file stayed behind with the old workspace.
    assert_eq!(read["failure_kind"], "not_found", "{read}");

    // Naming the recorded workspace itself moves nothing and says nothing.
    let server = reader();
    let ws = d.ws.to_str().unwrap();
    let mut args = vec!["exec", "--workspace", ws];
    args.extend(model_flags(&server.url));
    args.extend(["--resume", &id, "read it"]);
    let out = dsh_in(&d, d.root(), &args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("workspace"), "{}", stderr(&out));
}

#[test]
fn a_resumed_session_whose_workspace_is_gone_runs_in_the_current_directory_with_a_notice() {
    let d = Dirs::new();
    let gone = d.root().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let gone = gone.canonicalize().unwrap();
    let server = ScriptedServer::start(vec![Turn::text("done").into()]);
    let mut args = vec!["exec", "--workspace", gone.to_str().unwrap()];
    args.extend(model_flags(&server.url));
    args.push("work here");
    let out = dsh_in(&d, d.root(), &args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = id_of(&journals(&d.home)[0]);
    std::fs::remove_dir(&gone).unwrap();

    let before = journals(&d.home);
    let server = ScriptedServer::start(vec![Turn::text("here").into()]);
    let mut args = vec!["exec"];
    args.extend(model_flags(&server.url));
    args.extend(["--resume", &id, "go on"]);
    let out = dsh_in(&d, &d.outside, &args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let notice = format!(
        "dsh: resuming in the current directory {} because the recorded workspace {} does not exist (--workspace DIR chooses one)",
        d.outside.display(),
        gone.display()
    );
    assert!(
        stderr(&out).lines().any(|l| l == notice),
        "{}",
        stderr(&out)
    );
    let new = journals(&d.home)
        .into_iter()
        .find(|p| !before.contains(p))
        .unwrap();
    assert_eq!(records(&new)[0]["workspace"], d.outside.to_str().unwrap());
}
