//! Code Mode through `dsh` (issue 25): the tools modes, a program's calls on the journal as
//! the `run_code` call's children, a direct call refused in the `code` mode before any
//! policy, `run_code` beyond any rule's reach, and `check`/`batch` seeing it in `both`.
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
    for i in 1..=5 {
        std::fs::write(d.ws.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    d
}

fn run_code(id: &str, code: &str) -> Reply {
    Turn::tool_call(
        id,
        "run_code",
        &json!({"code": code, "description": "read five files and mark one"}).to_string(),
    )
    .into()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// In the code mode the model is offered `run_code` alone, with the declarations of the tools
/// its programs may call in the system prompt; its program reads five files together and
/// edits one, and each call is on the journal as the program's child (source `code`).
#[test]
fn a_program_reads_five_files_and_edits_one_each_call_on_record_under_it() {
    let d = world();
    d.write_user_config("[permissions]\nallow = [\"edit_file\"]\n");
    let server = ScriptedServer::start(vec![
        run_code(
            "p1",
            "const texts = await Promise.all([1, 2, 3, 4, 5].map(i => tools.read_file({path: `f${i}.txt`})));\n\
             await tools.edit_file({path: 'f3.txt', old_string: 'file 3', new_string: 'file three'});\n\
             return texts.map(t => t.content.includes(`file ${t.path[1]}`));",
        ),
        Reply::text("done"),
    ]);
    let out = scripted_exec(&d, &server.url, &["--tools-mode", "code"], "go")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(d.ws.join("f3.txt")).unwrap(),
        "file three\n"
    );
    let requests = server.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(offered, ["run_code"]);
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("declare const tools"), "{system}");
    assert!(system.contains("read_file(args: {"), "{system}");
    let recs = records(&journals(&d.home)[0]);
    assert_eq!(recs[0]["tools_mode"], "code");
    let subs: Vec<&Value> = recs
        .iter()
        .filter(|r| r["kind"] == "tool_call" && r["parent"] == "p1")
        .collect();
    assert_eq!(subs.len(), 6, "{subs:#?}");
    assert!(subs.iter().all(|r| r["source"] == "code"));
    assert_eq!(subs[5]["name"], "edit_file");
    let result = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "p1")
        .unwrap();
    assert_eq!(result["ok"], true, "{result}");
    // The second request carries the program's result.
    let second = serde_json::to_string(&requests[1]["messages"]).unwrap();
    assert!(second.contains("6 tool calls: 6 ok"), "{second}");
    assert_eq!(
        result["value"]["value"],
        json!([true, true, true, true, true]),
        "{result}"
    );
}

/// In the code mode a direct call is refused at the registry with guidance, before any
/// policy (a deny rule for it is never consulted).
#[test]
fn a_direct_call_in_the_code_mode_is_refused_before_any_policy() {
    let d = world();
    d.write_user_config("[permissions]\ndeny = [\"read_file(f1.txt)\"]\n");
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "read_file", r#"{"path":"f1.txt"}"#).into(),
        Reply::text("ok"),
    ]);
    let out = scripted_exec(&d, &server.url, &["--tools-mode", "code"], "go")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let recs = records(&journals(&d.home)[0]);
    let result = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "c1")
        .unwrap();
    assert_eq!(result["failure_kind"], "unknown_tool", "{result}");
    assert_eq!(result["decided_by"]["gate"], "registry", "{result}");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("call run_code"),
        "{result}"
    );
}

/// `run_code` is reserved: a rule naming it is a configuration error with its place, and in
/// the native mode the model is not offered it; `check` sees it in `both`.
#[test]
fn run_code_is_reserved_and_check_sees_it_in_both() {
    let d = world();
    d.write_user_config("[permissions]\ndeny = [\"run_code\"]\n");
    let out = d
        .dsh(&[
            "check",
            "run_code",
            r#"{"code":"return 1","description":"x"}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("config.toml:2"), "{}", stderr(&out));
    assert!(stderr(&out).contains("reserved"), "{}", stderr(&out));

    let d = world();
    let check = |mode: &str| {
        let out = d
            .dsh(&[
                "--tools-mode",
                mode,
                "check",
                "run_code",
                r#"{"code":"return 1","description":"x"}"#,
            ])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap_or_else(|_| panic!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out)))
    };
    assert_eq!(check("both")["decision"], "allow");
    let native = check("native");
    assert_eq!(native["decision"], "deny", "{native}");
    assert!(
        native["reason"].as_str().unwrap().contains("native"),
        "{native}"
    );
}

/// `dsh batch` in the `both` mode runs a program line; its sub-calls are the batch's calls'
/// children and are judged like any (a write with no person to ask is unavailable, and the
/// program sees that).
#[test]
fn batch_runs_a_program_whose_calls_are_judged_like_any() {
    let d = world();
    let line = json!({
        "name": "run_code",
        "args": {
            "code": "const a = await tools.read_file({path: 'f1.txt'});\ntry { await tools.write_file({path: 'new.txt', content: 'x'}); } catch (e) { return [a.path, e.kind]; }",
            "description": "read and try a write"
        }
    });
    let file = d.root().join("calls.jsonl");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let out = d
        .dsh(&["--tools-mode", "both", "batch", file.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let result: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["tool"] == "run_code")
        .unwrap_or_else(|| panic!("{text}{}", stderr(&out)));
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(
        result["value"]["value"],
        json!(["f1.txt", "unavailable"]),
        "{result}"
    );
    assert!(!d.ws.join("new.txt").exists());
}

/// A program's call that asks is asked of the person like any, saying it comes from a
/// program and what the program says it does; the person's yes lets that one call run.
#[test]
fn a_programs_call_is_asked_with_what_the_program_says_it_does() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "p1",
            "run_code",
            &json!({
                "code": "await tools.write_file({path: 'made.txt', content: 'by a program'}); return 'ok';",
                "description": "write the made file"
            })
            .to_string(),
        )
        .into(),
        Reply::text("program finished"),
    ]);
    let pty = repl_kit::spawn(&d, &server, &["--tools-mode", "code"]);
    pty.send_line("make it");
    let s = pty.wait_for_text("[y] approve once");
    assert!(
        s.contains("from a program (run_code), which says it will: write the made file"),
        "{}",
        s.dump()
    );
    assert!(s.contains("write_file"), "{}", s.dump());
    pty.send("y");
    pty.wait_for_text("program finished");
    repl_kit::leave_at_prompt(pty);
    assert_eq!(
        std::fs::read_to_string(d.ws.join("made.txt")).unwrap(),
        "by a program"
    );
}

/// In the native mode a profile may name `run_code`: its agent is offered it, and its
/// programs reach only that profile's tools (`tools.*` holds no write to call).
#[test]
fn a_profile_naming_run_code_gets_programs_confined_to_its_tools() {
    let d = world();
    d.write_user_config(
        "[agents.scripter]\ndescription = \"reads with programs\"\ntools = [\"read_file\", \"run_code\"]\n",
    );
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "s1",
            "call_sub_agent",
            &json!({"profile": "scripter", "task": "read f1"}).to_string(),
        )
        .into(),
        run_code(
            "p1",
            "const a = await tools.read_file({path: 'f1.txt'});\n\
             try { await tools.write_file({path: 'w.txt', content: 'x'}); return 'wrote'; }\n\
             catch (e) { return [a.path, e.name, Object.keys(tools).sort()]; }",
        ),
        Reply::text("child done"),
        Reply::text("all done"),
    ]);
    let out = scripted_exec(&d, &server.url, &[], "go").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!d.ws.join("w.txt").exists());
    let requests = server.requests();
    let offered = |i: usize| -> Vec<String> {
        requests[i]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
            .collect()
    };
    assert!(
        !offered(0).contains(&"run_code".to_owned()),
        "{:?}",
        offered(0)
    );
    assert_eq!(offered(1), ["read_file", "run_code"]);
    let recs = records(&journals(&d.home)[0]);
    let result = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "p1")
        .unwrap();
    assert_eq!(
        result["value"]["value"],
        json!(["f1.txt", "TypeError", ["read_file"]]),
        "{result}"
    );
}

/// The program's time stands still while a person is asked: with a one-second limit, an
/// answer given after longer still lets the program finish.
#[test]
fn a_programs_clock_stops_while_a_person_is_asked() {
    let d = world();
    d.write_user_config("[tools]\ncode_timeout_s = 1\n");
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "p1",
            "run_code",
            &json!({
                "code": "await tools.write_file({path: 'slow.txt', content: 'answered late'}); return 'ok';",
                "description": "write after a slow answer"
            })
            .to_string(),
        )
        .into(),
        Reply::text("program finished"),
    ]);
    let pty = repl_kit::spawn(&d, &server, &["--tools-mode", "code"]);
    pty.send_line("make it");
    pty.wait_for_text("[y] approve once");
    // The person takes longer than the program's whole limit to answer (time passing is
    // what is tested here, not a synchronization).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    pty.send("y");
    pty.wait_for_text("program finished");
    repl_kit::leave_at_prompt(pty);
    assert_eq!(
        std::fs::read_to_string(d.ws.join("slow.txt")).unwrap(),
        "answered late"
    );
    let recs = records(&journals(&d.home)[0]);
    let result = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "p1")
        .unwrap();
    assert_eq!(result["ok"], true, "{result}");
}

/// `/tools` says the tools mode and, where the model is offered `run_code`, what its
/// programs may call.
#[test]
fn tools_shows_the_tools_mode_and_what_programs_may_call() {
    let d = world();
    let server = ScriptedServer::start(vec![]);
    let pty = repl_kit::spawn(&d, &server, &["--tools-mode", "code"]);
    pty.send_line("/tools");
    let s = pty.wait_for_text("run_code's programs may call:");
    assert!(s.contains("tools mode code"), "{}", s.dump());
    assert!(
        s.rows()
            .iter()
            .any(|r| r.contains("run_code's programs may call:") && r.contains("read_file")),
        "{}",
        s.dump()
    );
    repl_kit::leave_at_prompt(pty);
}
