//! Checkpoints and `/undo` (issue 24, stage d), end to end in a real pseudo-terminal: the file
//! tools' changes put back turn by turn, a created file removed, a file changed by someone
//! else left alone, the model never offered the restore and told what changed, and the
//! journal holding each change's checkpoint and the person's restore calls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/pty.rs"]
mod pty;
#[path = "common/repl.rs"]
mod repl_kit;

use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use repl_kit::{journal, kind, spawn, wait_at_prompt, world};
use serde_json::Value;

const ALLOW_FILE_TOOLS: &str = "[permissions]\nallow = [\"write_file\", \"edit_file\"]\n";

fn edit(id: &str, path: &str, old: &str, new: &str) -> Reply {
    Turn::tool_call(
        id,
        "edit_file",
        &serde_json::json!({"path": path, "old_string": old, "new_string": new}).to_string(),
    )
    .into()
}

fn read(id: &str, path: &str) -> Reply {
    Turn::tool_call(
        id,
        "read_file",
        &serde_json::json!({ "path": path }).to_string(),
    )
    .into()
}

fn write(id: &str, path: &str, content: &str) -> Reply {
    Turn::tool_call(
        id,
        "write_file",
        &serde_json::json!({"path": path, "content": content}).to_string(),
    )
    .into()
}

fn file(d: &common::Dirs, path: &str) -> Option<String> {
    std::fs::read_to_string(d.ws.join(path)).ok()
}

/// The user messages of a request, as sent.
fn user_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

/// Two turns change files; `/undo` puts back the second's change, a second `/undo` the
/// first's (removing the file it created); the model is never offered `restore_file`, and
/// its next request says what the undo changed. Every change has its checkpoint record and
/// every restore is a `user` call.
#[test]
fn undo_puts_back_each_turns_files_and_removes_the_files_a_turn_created() {
    let d = world();
    std::fs::write(d.ws.join("notes.txt"), "version zero\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let server = ScriptedServer::start(vec![
        read("c1", "notes.txt"),
        edit("c2", "notes.txt", "zero", "one"),
        write("c3", "new.txt", "made by turn one\n"),
        Reply::text("turn one done"),
        edit("c4", "notes.txt", "one", "two"),
        Reply::text("turn two done"),
        Reply::text("fine"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("first change");
    pty.wait_for_text("turn one done");
    wait_at_prompt(&pty);
    pty.send_line("second change");
    pty.wait_for_text("turn two done");
    wait_at_prompt(&pty);
    assert_eq!(file(&d, "notes.txt").as_deref(), Some("version two\n"));

    pty.send_line("/undo");
    let s = pty.wait_for_text("restored notes.txt");
    assert!(s.contains("“second change”"), "{}", s.dump());
    assert!(
        s.contains("is not covered"),
        "says what it does not cover: {}",
        s.dump()
    );
    wait_at_prompt(&pty);
    assert_eq!(file(&d, "notes.txt").as_deref(), Some("version one\n"));
    assert!(d.ws.join("new.txt").exists(), "turn one is not undone yet");

    pty.send_line("/undo");
    let s = pty.wait_for_text("removed new.txt");
    assert!(s.contains("“first change”"), "{}", s.dump());
    wait_at_prompt(&pty);
    assert_eq!(file(&d, "notes.txt").as_deref(), Some("version zero\n"));
    assert!(!d.ws.join("new.txt").exists());

    pty.send_line("/undo");
    pty.wait_for_text("nothing to undo");
    wait_at_prompt(&pty);
    pty.send_line("what now?");
    pty.wait_for_text("fine");
    repl_kit::leave_at_prompt(pty);

    let requests = server.requests();
    for r in &requests {
        let offered: Vec<&str> = r["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        assert!(offered.contains(&"write_file"), "{offered:?}");
        assert!(!offered.contains(&"restore_file"), "{offered:?}");
    }
    let last = user_messages(requests.last().unwrap());
    let notes: Vec<&String> = last
        .iter()
        .filter(|m| m.starts_with("[from user] I undid"))
        .collect();
    assert_eq!(notes.len(), 2, "{last:?}");
    assert!(notes[0].contains("restored notes.txt"), "{notes:?}");
    assert!(notes[1].contains("removed new.txt"), "{notes:?}");
    assert_eq!(last.last().unwrap(), "what now?");

    let records = journal(&d);
    let checkpoints: Vec<&Value> = records.iter().filter(|r| kind(r) == "checkpoint").collect();
    // c2, c3, c4, then the two restores of notes.txt and the removal of new.txt.
    assert_eq!(checkpoints.len(), 6, "{checkpoints:#?}");
    assert_eq!(checkpoints[0]["call_id"], "c2");
    assert_eq!(checkpoints[1]["path"], "new.txt");
    assert_eq!(checkpoints[1]["before"], Value::Null, "created");
    assert_eq!(checkpoints[5]["after"], Value::Null, "removed");
    let restores: Vec<&Value> = records
        .iter()
        .filter(|r| kind(r) == "tool_call" && r["name"] == "restore_file")
        .collect();
    assert_eq!(restores.len(), 3, "{restores:#?}");
    assert!(
        restores.iter().all(|r| r["source"] == "user"),
        "{restores:#?}"
    );
    // The pre-image a restore used is the content before the change, kept by digest.
    let zero = checkpoints[0]["before"].as_str().unwrap();
    let kept = std::fs::read_dir(d.home.join("checkpoints"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path().join(zero))
        .find(|p| p.exists())
        .expect("the pre-image is kept under its digest");
    assert_eq!(std::fs::read_to_string(kept).unwrap(), "version zero\n");

    // Replayed, the person's restores are judged as theirs: nothing changed.
    let path = common::journals(&d.home)[0].clone();
    let replay = |journal: &std::path::Path| {
        let out = d
            .dsh(&["replay", journal.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.code() == Some(0) || out.status.code() == Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect::<Vec<Value>>()
    };
    let rows = replay(&path);
    let restores: Vec<&Value> = rows
        .iter()
        .filter(|r| r["tool"] == "restore_file")
        .collect();
    assert_eq!(restores.len(), 3, "{rows:#?}");
    assert_eq!(rows.last().unwrap()["summary"]["changed"], 0, "{rows:#?}");
}

/// `/undo 2` goes back two turns at once; a file someone else changed after the turn is
/// named and left as they left it, while the turn's other file is put back.
#[test]
fn undo_leaves_a_file_changed_by_someone_else_and_goes_back_n_turns() {
    let d = world();
    std::fs::write(d.ws.join("a.txt"), "a zero\n").unwrap();
    std::fs::write(d.ws.join("b.txt"), "b zero\n").unwrap();
    d.write_user_config(ALLOW_FILE_TOOLS);
    let server = ScriptedServer::start(vec![
        read("c1", "a.txt"),
        read("c2", "b.txt"),
        edit("c3", "a.txt", "zero", "one"),
        Reply::text("first done"),
        edit("c4", "b.txt", "zero", "one"),
        Reply::text("second done"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("change a");
    pty.wait_for_text("first done");
    wait_at_prompt(&pty);
    pty.send_line("change b");
    pty.wait_for_text("second done");
    wait_at_prompt(&pty);
    // The person edits b.txt in their editor after the turn.
    std::fs::write(d.ws.join("b.txt"), "b one, and my own line\n").unwrap();

    pty.send_line("/undo 2");
    let s = pty.wait_for_text("left b.txt alone");
    assert!(
        s.contains("changed since by something else"),
        "{}",
        s.dump()
    );
    assert!(s.contains("restored a.txt"), "{}", s.dump());
    assert!(s.contains("and 1 turn before it"), "{}", s.dump());
    repl_kit::leave_at_prompt(pty);
    assert_eq!(file(&d, "a.txt").as_deref(), Some("a zero\n"));
    assert_eq!(
        file(&d, "b.txt").as_deref(),
        Some("b one, and my own line\n"),
        "the person's change is kept"
    );
}
