//! Attacks on Code Mode through `dsh`, as a hostile model (and repository) would make them:
//! reaching a withheld tool or a sub-agent's missing write from a program, a direct call
//! slipping past the registry, `batch` reaching `run_code` in the native mode, a thrown
//! message flooding the record, and the approval prompt made to lie by a program's
//! description.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/pty.rs"]
mod pty;
#[path = "common/repl.rs"]
mod repl_kit;

use common::{Dirs, journals, records, scripted_exec};
use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use serde_json::{Value, json};

fn world() -> Dirs {
    let d = Dirs::new();
    std::fs::write(d.ws.join("f1.txt"), "file 1\n").unwrap();
    d
}

fn run_code(id: &str, code: &str, description: &str) -> Reply {
    Turn::tool_call(
        id,
        "run_code",
        &json!({"code": code, "description": description}).to_string(),
    )
    .into()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn result_of<'a>(recs: &'a [Value], id: &str) -> &'a Value {
    recs.iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == id)
        .unwrap_or_else(|| panic!("no result for {id}: {recs:#?}"))
}

/// The main agent's program in the code mode: `restore_file` (the person's `/undo`) and
/// `run_code` are not in `tools`, and no sub-call to either reaches the journal.
#[test]
fn a_program_reaches_neither_restore_file_nor_run_code() {
    let d = world();
    let server = ScriptedServer::start(vec![
        run_code(
            "p1",
            "const keys = Object.keys(tools);\n\
             let via = 'none';\n\
             for (const k of ['restore_file', 'run_code']) { try { await tools[k]({path: 'f1.txt'}); via = k; } catch (e) {} }\n\
             return [keys.includes('restore_file'), keys.includes('run_code'), via];",
            "look around",
        ),
        Reply::text("done"),
    ]);
    let out = scripted_exec(&d, &server.url, &["--tools-mode", "code"], "go")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let recs = records(&journals(&d.home)[0]);
    assert_eq!(
        result_of(&recs, "p1")["value"]["value"],
        json!([false, false, "none"])
    );
    assert!(
        !recs
            .iter()
            .any(|r| r["kind"] == "tool_call" && r["parent"] == "p1"),
        "{recs:#?}"
    );
}

/// A `search` sub-agent in the code mode: its program's `tools` holds only the profile's
/// reading tools — no write, edit, shell or sub-agent to start a writing one — and its own
/// direct call to a tool is refused at the registry (source `sub_agent`) before any policy.
#[test]
fn a_search_sub_agents_program_cannot_write_and_its_direct_calls_are_refused() {
    let d = world();
    d.write_user_config("[permissions]\nallow = [\"write_file\", \"edit_file\", \"run_shell\"]\n");
    let server = ScriptedServer::start(vec![
        // In the code mode the main agent starts it from a program.
        run_code(
            "p0",
            "const r = await tools.call_sub_agent({profile: 'search', task: 'look'}); return 'started';",
            "ask a search agent",
        ),
        // The sub-agent's model calls a tool directly, then writes a program.
        Turn::tool_call("c1", "read_file", r#"{"path":"f1.txt"}"#).into(),
        run_code(
            "p1",
            "const tried = [];\n\
             for (const [name, args] of [\n\
               ['write_file', {path: 'w.txt', content: 'x'}],\n\
               ['edit_file', {path: 'f1.txt', old_string: 'file', new_string: 'pwned'}],\n\
               ['run_shell', {command: 'touch w.txt'}],\n\
               ['call_sub_agent', {profile: 'code', task: 'write w.txt'}],\n\
             ]) {\n\
               try { await tools[name](args); tried.push(name + ': ran'); } catch (e) { tried.push(name + ': ' + e.name); }\n\
             }\n\
             return {keys: Object.keys(tools).sort(), tried};",
            "search",
        ),
        Reply::text("child done"),
        Reply::text("all done"),
    ]);
    let out = scripted_exec(&d, &server.url, &["--tools-mode", "code"], "go")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!d.ws.join("w.txt").exists());
    assert_eq!(
        std::fs::read_to_string(d.ws.join("f1.txt")).unwrap(),
        "file 1\n"
    );
    let recs = records(&journals(&d.home)[0]);
    assert!(
        recs.iter()
            .any(|r| r["kind"] == "tool_call" && r["call_id"] == "p1" && r["agent"].is_string()),
        "the program is the sub-agent's: {recs:#?}"
    );
    let direct = result_of(&recs, "c1");
    assert_eq!(direct["failure_kind"], "unknown_tool", "{direct}");
    assert_eq!(direct["decided_by"]["gate"], "registry", "{direct}");
    let v = &result_of(&recs, "p1")["value"]["value"];
    let keys: Vec<&str> = v["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    for w in [
        "write_file",
        "edit_file",
        "run_shell",
        "call_sub_agent",
        "run_code",
    ] {
        assert!(!keys.contains(&w), "{keys:?}");
    }
    assert!(
        v["tried"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.as_str().unwrap().ends_with("TypeError")),
        "{v}"
    );
}

/// In the native mode a `dsh batch` line naming `run_code` is refused before it runs, like
/// `dsh check` says.
#[test]
fn batch_in_the_native_mode_cannot_run_a_program() {
    let d = world();
    let line = json!({
        "name": "run_code",
        "args": {"code": "await tools.write_file({path: 'b.txt', content: 'x'}); return 1;", "description": "x"}
    });
    let file = d.root().join("calls.jsonl");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let out = d.dsh(&["batch", file.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let result: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["tool"] == "run_code")
        .unwrap_or_else(|| panic!("{text}{}", stderr(&out)));
    assert_eq!(result["ok"], false, "{result}");
    assert!(result.to_string().contains("native"), "{result}");
    assert!(!d.ws.join("b.txt").exists());
}

/// What a program throws is carried into its result whole (see dsh-code's
/// `a_huge_thrown_message_is_bounded`), but in a session the spill disposition moves a
/// message of megabytes out of the journal record and the model's next request.
#[test]
fn a_huge_thrown_message_does_not_flood_the_record_or_the_model() {
    let d = world();
    let server = ScriptedServer::start(vec![
        run_code("p1", "throw new Error('x'.repeat(8 << 20));", "flood"),
        Reply::text("done"),
    ]);
    let out = scripted_exec(&d, &server.url, &["--tools-mode", "code"], "go")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let recs = records(&journals(&d.home)[0]);
    let r = result_of(&recs, "p1");
    assert!(
        r.to_string().len() < 1 << 20,
        "the journal holds {} bytes of the result",
        r.to_string().len()
    );
    let second = serde_json::to_string(&server.requests()[1]["messages"]).unwrap();
    assert!(
        second.len() < 1 << 20,
        "the model was sent {} bytes",
        second.len()
    );
}

/// The approval prompt for a program's call: the program's description is shown with its
/// control characters escaped — it can neither clear the screen nor move the cursor.
#[test]
fn a_description_with_control_characters_is_shown_escaped() {
    let d = world();
    let server = ScriptedServer::start(vec![
        run_code(
            "p1",
            "await tools.write_file({path: 'evil-target.txt', content: 'x'}); return 'ok';",
            "tidy up\u{1b}[2J\u{1b}[H\rread notes.txt\u{202e}",
        ),
        Reply::text("program finished"),
    ]);
    let pty = repl_kit::spawn(&d, &server, &["--tools-mode", "code"]);
    pty.send_line("make it");
    let s = pty.wait_for_text("[y] approve once");
    assert!(s.contains("^[[2J^[[H^Mread notes.txt"), "{}", s.dump());
    assert!(s.contains("evil-target.txt"), "{}", s.dump());
    pty.send("n");
    pty.wait_for_text("program finished");
    repl_kit::leave_at_prompt(pty);
    assert!(!d.ws.join("evil-target.txt").exists());
}

/// A long description fills the approval prompt (it is not capped like an argument, and the
/// live region's middle rows — the question's arguments — are cut on a small terminal), yet
/// the path of the write asked about stays on screen: the open call's own line, above the
/// question, names it.
#[test]
fn a_long_description_cannot_push_the_path_off_the_prompt() {
    let d = world();
    let description = format!("append one line to notes.txt {}", ".".repeat(8000));
    let server = ScriptedServer::start(vec![
        run_code(
            "p1",
            "await tools.write_file({path: 'evil-target.txt', content: 'x'}); return 'ok';",
            &description,
        ),
        Reply::text("program finished"),
    ]);
    let pty = repl_kit::spawn(&d, &server, &["--tools-mode", "code"]);
    pty.send_line("make it");
    let s = pty.wait_for_text("[y] approve once");
    let shown = s.contains("evil-target.txt");
    pty.send("n");
    pty.wait_for_text("program finished");
    repl_kit::leave_at_prompt(pty);
    assert!(shown, "the path of the write asked about is not on screen");
}
