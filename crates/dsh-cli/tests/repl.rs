//! The REPL end to end: the real `dsh` binary in a real pseudo-terminal (the test makes its
//! own), against the scripted model server; assertions read the screen a person would see
//! (a vt100 emulator) and the session's journal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/pty.rs"]
mod pty;
#[path = "common/repl.rs"]
mod repl_kit;

use std::process::{Command, Stdio};
use std::time::Duration;

use dsh_testkit::model_server::{Gate, Reply, ScriptedServer, Turn};
use pty::{PtySpec, key};
use repl_kit::{PROMPT, journal, kind, leave, repl_command, spawn, world};
use serde_json::Value;

#[test]
fn a_turn_streams_its_answer_and_shows_each_tool_call_as_one_line() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "read_file", r#"{"path":"src/main.rs"}"#)
            .with_text("Let me look.")
            .into(),
        Turn::text("# Findings\n\nIt prints **hello**.\n\n- one point\n- another\n")
            .deltas(3)
            .into(),
    ]);
    let pty = spawn(&d, &server, &[]);
    let header = pty.screen().contents();
    assert!(header.contains("openai/scripted"), "{header}");
    assert!(header.contains("approvals: you"), "{header}");
    pty.send_line("what does main do?");
    let screen = pty.wait_for_text("another");
    let text = screen.contents();
    assert!(text.contains("Let me look."), "{text}");
    assert!(text.contains("✓ read_file src/main.rs"), "{text}");
    // Markdown rendered: the heading's marker gone, the heading bold.
    assert!(
        text.contains("Findings") && !text.contains("# Findings"),
        "{text}"
    );
    assert!(screen.is_bold_at("Findings"), "{text}");
    assert!(
        !text.contains("**hello**") && text.contains("hello"),
        "{text}"
    );
    leave(pty, 2);
    let records = journal(&d);
    let kinds: Vec<&str> = records.iter().map(kind).collect();
    assert!(kinds.contains(&"tool_result"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"session_end"), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "user_message").count(), 1);
}

#[test]
fn piped_stdin_is_a_plain_line_reader_without_escape_codes() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "write_file", r#"{"path":"new.txt","content":"x"}"#).into(),
        Reply::text("Could not write it."),
        Reply::text("Second answer."),
    ]);
    let mut child = repl_command(&d, &server, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"write a file\n/tools\nand again\n")
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(out.status.success(), "{stdout}\n{}", common::stderr(&out));
    assert!(!stdout.contains('\x1b'), "escape codes in {stdout:?}");
    assert!(stdout.contains("approvals: none (piped)"), "{stdout}");
    // Headless: the ask ends as unavailable, said in words (the gate is for --json).
    assert!(
        stdout.contains("✗ write_file new.txt · needed approval: "),
        "{stdout}"
    );
    assert!(!stdout.contains("by approval"), "{stdout}");
    assert!(stdout.contains("Could not write it."), "{stdout}");
    assert!(
        stdout.contains("run_shell"),
        "/tools lists the tools: {stdout}"
    );
    assert!(stdout.contains("Second answer."), "{stdout}");
    assert!(!d.ws.join("new.txt").exists());
}

#[test]
fn esc_interrupts_a_running_tool_and_the_call_is_recorded_as_cancelled() {
    let d = world();
    d.write_user_config("[permissions]\nallow = [\"run_shell(sleep *)\"]\n");
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", r#"{"command":"sleep 30"}"#).into(),
        Reply::text("after the interrupt"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("sleep a while");
    pty.wait_for_text("run_shell sleep 30");
    // Started: its line shows the elapsed time, not "waiting".
    pty.wait_for("the call running", |s| {
        s.contains("run_shell sleep 30") && !s.contains("waiting")
    });
    pty.send(key::ESC);
    pty.wait_for_text("cancelled while it ran");
    pty.wait_for_text("interrupted");
    pty.wait_for_count(PROMPT, 2);
    // The next prompt is a new turn on the same session.
    pty.send_line("go on");
    pty.wait_for_text("after the interrupt");
    leave(pty, 3);
    let records = journal(&d);
    let result = records.iter().find(|r| kind(r) == "tool_result").unwrap();
    assert_eq!(result["failure_kind"], "cancelled_after", "{result}");
    let stops: Vec<&str> = records
        .iter()
        .filter(|r| kind(r) == "stop")
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    assert_eq!(stops, ["interrupted", "final_answer"]);
}

#[test]
fn slash_commands_help_tools_log_clear_and_exit() {
    let d = world();
    let server = ScriptedServer::start(vec![Reply::text("first"), Reply::text("second")]);
    let mut pty = spawn(&d, &server, &[]);
    pty.send_line("/help");
    pty.wait_for_text("/log [N]");
    pty.send_line("/tools");
    let s = pty.wait_for_text("every tool of the session but call_sub_agent");
    let text = s.contents();
    assert!(text.contains("read_output"), "{text}");
    assert!(text.contains("parallel-safe"), "{text}");
    // The sub-agent profiles, and which may run side by side (from their tools'
    // declarations).
    assert!(
        text.contains("search           yes        read_file, list_dir, grep"),
        "{text}"
    );
    assert!(text.contains("code             no"), "{text}");
    pty.send_line("/exti");
    pty.wait_for_text("did you mean /exit?");
    pty.send_line("hello");
    pty.wait_for_text("first");
    pty.send_line("/log 3");
    pty.wait_for_text("assistant: first");
    pty.send_line("/clear");
    pty.wait_for_text("history cleared");
    pty.send_line("again");
    pty.wait_for_text("second");
    pty.send_line("/exit");
    assert!(pty.wait_exit().success());
    // After /clear the request carries only the new turn.
    let requests = server.requests();
    let last = requests.last().unwrap();
    let messages = last["messages"].as_array().unwrap();
    let users: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["again"]);
    let records = journal(&d);
    assert!(
        records.iter().any(|r| kind(r) == "history_cleared"),
        "{:?}",
        records.iter().map(kind).collect::<Vec<_>>()
    );
}

#[test]
fn keys_typed_before_an_approval_prompt_do_not_answer_it() {
    let d = world();
    let gate = Gate::new();
    let server = ScriptedServer::start(vec![
        Reply::from(Turn::tool_call(
            "c1",
            "write_file",
            r#"{"path":"new.txt","content":"x"}"#,
        ))
        .held(&gate),
        Reply::text("done"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("write it");
    assert!(server.wait_for_requests(1, Duration::from_secs(30)));
    // Typed while the model is still answering: before any question exists.
    pty.send("y");
    gate.open();
    // Armed: the keys line shows once what was typed before is read and dropped.
    let screen = pty.wait_for_text("[y] approve once");
    assert!(
        screen.contains("wants to run write_file"),
        "{}",
        screen.contents()
    );
    // Still asking: the early "y" did not approve.
    assert!(!d.ws.join("new.txt").exists());
    pty.send("n");
    pty.wait_for_text("done");
    leave(pty, 2);
    assert!(!d.ws.join("new.txt").exists());
    let records = journal(&d);
    let approval = records.iter().find(|r| kind(r) == "approval").unwrap();
    assert_eq!(approval["outcome"], "rejected", "{approval}");
}

#[test]
fn approve_once_runs_the_call_and_the_prompt_shows_the_diff_it_would_apply() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c0", "read_file", r#"{"path":"src/main.rs"}"#).into(),
        Turn::tool_call(
            "c1",
            "edit_file",
            r#"{"path":"src/main.rs","old_string":"hello","new_string":"goodbye"}"#,
        )
        .into(),
        Reply::text("edited"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("change the greeting");
    let screen = pty.wait_for_text("[y] approve once");
    let text = screen.contents();
    assert!(text.contains("agent main wants to run edit_file"), "{text}");
    assert!(text.contains("the change it would make:"), "{text}");
    assert!(text.contains("-    println!(\"hello\");"), "{text}");
    assert!(text.contains("+    println!(\"goodbye\");"), "{text}");
    assert!(text.contains("asked by"), "{text}");
    pty.send("y");
    let screen = pty.wait_for_text("edited");
    assert!(screen.contains("approved once"), "{}", screen.contents());
    // The finished line shows the diff it applied.
    assert!(
        screen.contains("✓ edit_file src/main.rs"),
        "{}",
        screen.contents()
    );
    leave(pty, 2);
    assert!(
        std::fs::read_to_string(d.ws.join("src/main.rs"))
            .unwrap()
            .contains("goodbye")
    );
}

#[test]
fn deny_with_a_message_hands_the_message_to_the_model() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "write_file", r#"{"path":"new.txt","content":"x"}"#).into(),
        Reply::text("understood"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("write it");
    pty.wait_for_text("[m] deny with a message");
    pty.send("m");
    pty.wait_for_text("message for the model");
    pty.send("use notes.md instead");
    pty.wait_for_text("use notes.md instead");
    pty.send(key::ENTER);
    let screen = pty.wait_for_text("understood");
    assert!(
        screen.contains("denied, telling the model: use notes.md instead"),
        "{}",
        screen.contents()
    );
    leave(pty, 2);
    assert!(!d.ws.join("new.txt").exists());
    // The model's next request carries the message as the call's result.
    let requests = server.requests();
    let tool_msg = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("use notes.md instead"),
        "{tool_msg}"
    );
    let approval = journal(&d)
        .into_iter()
        .find(|r| kind(r) == "approval")
        .unwrap();
    assert_eq!(approval["outcome"], "rejected");
    assert_eq!(approval["message"], "use notes.md instead");
}

#[test]
fn always_allow_writes_the_rule_to_the_user_config_and_the_next_identical_call_runs_unasked() {
    let d = world();
    d.write_user_config("# my settings\n[limits]\nmax_steps = 40 # keep this\n");
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", r#"{"command":"make build"}"#).into(),
        Reply::text("first done"),
        Turn::tool_call("c2", "run_shell", r#"{"command":"make build"}"#).into(),
        Reply::text("second done"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("make it");
    let screen = pty.wait_for_text("[y] approve once");
    let text = screen.contents();
    assert!(text.contains("[a] always allow   "), "offered: {text}");
    assert!(text.contains("`run_shell(make build *)`"), "{text}");
    assert!(
        text.contains("    make build"),
        "the command as it will run: {text}"
    );
    assert!(text.contains("policy change"), "{text}");
    // (The line wraps on a 120-column screen.)
    let unwrapped = text.replace('\n', "");
    let section = format!("[workspaces.\"{}\".permissions] allow", d.ws.display());
    assert!(unwrapped.contains(&section), "{text}");
    // A policy change is never one keystroke: a second `a` confirms it.
    pty.send("a");
    pty.wait_for_text("press a again");
    pty.send("a");
    pty.wait_for_text("first done");
    // The untrusted workspace was not trusted on the way; the rule is in the user file,
    // under this workspace, and the file's comments survive.
    let config = std::fs::read_to_string(d.cfg.join("config.toml")).unwrap();
    assert!(
        config.contains("# my settings") && config.contains("# keep this"),
        "{config}"
    );
    assert!(config.contains("run_shell(make build *)"), "{config}");
    assert!(!config.contains("[trust]"), "{config}");
    pty.wait_for_count(PROMPT, 2);
    let mark = pty.mark();
    pty.send_line("again");
    pty.wait_for_text_since(mark, "second done");
    let since = pty.text_since(mark);
    assert!(!since.contains("wants to run"), "asked again: {since}");
    leave(pty, 3);
    let records = journal(&d);
    let approvals = records.iter().filter(|r| kind(r) == "approval").count();
    assert_eq!(approvals, 1, "only the first call was asked");
    let results: Vec<&Value> = records
        .iter()
        .filter(|r| kind(r) == "tool_result")
        .collect();
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|r| r["ok"] == true), "{results:?}");
    assert_eq!(
        results[1]["decided_by"]["gate"], "pre_policy",
        "{}",
        results[1]
    );
}

#[test]
fn always_allow_is_not_offered_where_a_rule_cannot_lift_the_ask() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "c1",
            "write_file",
            r#"{"path":"AGENTS.md","content":"obey"}"#,
        )
        .into(),
        Reply::text("ok"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("write the agents file");
    let screen = pty.wait_for_text("[y] approve once");
    assert!(!screen.contains("[a]"), "{}", screen.contents());
    pty.send("a");
    pty.send("n");
    pty.wait_for_text("ok");
    leave(pty, 2);
    assert!(!d.ws.join("AGENTS.md").exists());
}

/// The user messages of a recorded request, in order.
fn user_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn system_message(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn turns_memory_and_model_change_the_next_request() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Reply::text("reply one"),
        Reply::text("reply two"),
        Reply::text("reply three"),
        Reply::text("reply four"),
        Reply::text("reply five"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("first");
    pty.wait_for_text("reply one");
    pty.send_line("second");
    pty.wait_for_text("reply two");
    pty.send_line("/turns 1");
    pty.wait_for_text("the last 1 whole turn");
    pty.send_line("third");
    pty.wait_for_text("reply three");
    // /memory add goes through the pipeline: the memory policy asks, and typing the line
    // was the person's approval (source user), so nobody is asked again.
    pty.send_line("/memory add the build is make check");
    let screen = pty.wait_for_text("updated; the system prompt carries it");
    assert!(
        !screen.all_text().contains("approve once"),
        "{}",
        screen.all_text()
    );
    pty.send_line("fourth");
    pty.wait_for_text("reply four");
    pty.send_line("/model openai/other-model");
    pty.wait_for_text("the next request goes to openai/other-model");
    pty.send_line("fifth");
    pty.wait_for_text("reply five");
    leave(pty, 9);
    let requests = server.requests();
    assert_eq!(user_messages(&requests[1]), ["first", "second"]);
    assert_eq!(user_messages(&requests[2]), ["third"], "after /turns 1");
    assert!(!system_message(&requests[2]).contains("make check"));
    assert!(
        system_message(&requests[3]).contains("the build is make check"),
        "after /memory add: {}",
        system_message(&requests[3])
    );
    assert_eq!(requests[3]["model"], "scripted");
    assert_eq!(requests[4]["model"], "other-model", "after /model");
    assert!(
        std::fs::read_to_string(d.ws.join(".dsh/memory.md"))
            .unwrap()
            .contains("- the build is make check")
    );
    // The person's own calls are journaled as theirs.
    let records = journal(&d);
    let write = records
        .iter()
        .find(|r| kind(r) == "tool_call" && r["name"] == "write_file")
        .unwrap();
    assert_eq!(write["source"], "user", "{write}");
    let approval = records
        .iter()
        .find(|r| kind(r) == "approval" && r["call_id"] == write["call_id"])
        .unwrap();
    assert_eq!(approval["outcome"], "allowed_once", "{approval}");
    let result = records
        .iter()
        .find(|r| kind(r) == "tool_result" && r["call_id"] == write["call_id"])
        .unwrap();
    assert_eq!(
        result["decided_by"]["policy"], "typed by the person",
        "{result}"
    );
    // Replayed, the person's own calls are judged as theirs: nothing changed.
    let id = common::journals(&d.home)[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = d.dsh(&["replay", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("CHANGED"), "{text}");
}

#[test]
fn the_model_picker_moves_with_the_arrow_keys() {
    let d = world();
    let server = ScriptedServer::start(vec![Reply::text("picked")]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("/model");
    pty.wait_for_text("pick a model");
    // The configured model first, then each provider's default: openai's is second.
    pty.send(key::DOWN);
    pty.wait_for_text("› openai/gpt-4.1-mini");
    pty.send(key::ENTER);
    pty.wait_for_text("base URL (Enter keeps it)");
    pty.wait_for_count(PROMPT, 3);
    pty.send(key::ENTER);
    pty.wait_for_text("the environment variable holding the API key");
    pty.wait_for_count(PROMPT, 4);
    pty.send(key::ENTER);
    pty.wait_for_text("the next request goes to openai/gpt-4.1-mini");
    pty.send_line("go");
    pty.wait_for_text("picked");
    leave(pty, 6);
    assert_eq!(server.requests()[0]["model"], "gpt-4.1-mini");
}

#[test]
fn save_then_load_restores_the_conversation_in_a_later_repl() {
    let d = world();
    let server = ScriptedServer::start(vec![Reply::text("noted"), Reply::text("restored")]);
    let mut pty = spawn(&d, &server, &[]);
    pty.send_line("remember the word kumquat");
    pty.wait_for_text("noted");
    pty.send_line("/save fruit");
    pty.wait_for_text("saved as fruit");
    pty.send_line("/exit");
    assert!(pty.wait_exit().success());
    drop(pty);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("/load fruit");
    pty.wait_for_text("resuming session");
    pty.send_line("what was the word?");
    pty.wait_for_text("restored");
    pty.send_line("/sessions");
    pty.wait_for_text("(this one)");
    leave(pty, 4);
    let requests = server.requests();
    assert_eq!(
        user_messages(&requests[1]),
        ["remember the word kumquat", "what was the word?"]
    );
}

#[test]
fn stats_and_the_extension_commands_say_what_there_is() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "read_file", r#"{"path":"src/main.rs"}"#)
            .usage(100, 10)
            .into(),
        Reply::from(Turn::text("done").usage(150, 5)),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("read it");
    pty.wait_for_text("done");
    pty.send_line("/stats");
    let s = pty.wait_for_text("1 tool call:");
    let text = s.contents();
    assert!(
        text.contains("agent main: 2 model calls · 250 tokens in"),
        "{text}"
    );
    assert!(text.contains("15 out"), "{text}");
    assert!(text.contains("read_file      1 ok"), "{text}");
    pty.send_line("/mcp");
    pty.wait_for_text("no MCP servers configured (add [mcp.servers.NAME]");
    pty.send_line("/skills");
    pty.wait_for_text("no skills: a skill is a folder with a SKILL.md");
    pty.send_line("/plugins");
    pty.wait_for_text("no plugins: a plugin is a folder with a plugin.toml");
    leave(pty, 6);
}

#[test]
fn verify_hands_a_failing_check_back_to_the_model() {
    let d = world();
    d.write_user_config(
        "[verify]\ncommand = \"git status\"\nmax_rounds = 1\n[permissions]\nallow = [\"write_file(notes.txt)\", \"run_shell(git status)\"]\n",
    );
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "write_file", r#"{"path":"notes.txt","content":"x"}"#).into(),
        Reply::text("wrote it"),
        Reply::text("I see the check failed"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("/verify on");
    pty.wait_for_text("runs; a failure goes back to the model");
    pty.send_line("write notes");
    // Not a git repository: `git status` fails, and the model hears of it.
    pty.wait_for_text("I see the check failed");
    leave(pty, 3);
    let requests = server.requests();
    let last = user_messages(requests.last().unwrap());
    assert!(
        last.last()
            .unwrap()
            .contains("The verify command `git status` failed"),
        "{last:?}"
    );
    // The configured command is the configuration's, not the person's: judged like the
    // model's calls, and journaled as such.
    let records = journal(&d);
    let check = records
        .iter()
        .find(|r| kind(r) == "tool_call" && r["name"] == "run_shell")
        .unwrap();
    assert_eq!(check["source"], "config", "{check}");
}

#[test]
fn a_prompt_typed_while_a_turn_runs_is_queued_and_runs_next() {
    let d = world();
    let gate = Gate::new();
    let server = ScriptedServer::start(vec![
        Reply::text("first answer").held(&gate),
        Reply::text("second answer"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("first question");
    assert!(server.wait_for_requests(1, Duration::from_secs(30)));
    pty.send("next question");
    pty.wait_for_text("› next question");
    pty.send(key::ENTER);
    pty.wait_for_text("queued for after this turn: next question");
    gate.open();
    pty.wait_for_text("second answer");
    leave(pty, 3);
    assert_eq!(
        user_messages(&server.requests()[1]),
        ["first question", "next question"]
    );
}

#[test]
fn ctrl_c_interrupts_a_turn_and_twice_on_an_empty_prompt_leaves() {
    let d = world();
    let gate = Gate::new();
    let server = ScriptedServer::start(vec![Reply::text("never shown").held(&gate)]);
    let mut pty = spawn(&d, &server, &[]);
    pty.send_line("think hard");
    assert!(server.wait_for_requests(1, Duration::from_secs(30)));
    pty.send(key::CTRL_C);
    pty.wait_for_text("interrupted");
    pty.wait_for_count(PROMPT, 2);
    pty.send(key::CTRL_C);
    pty.wait_for_text("Ctrl-C again");
    // The next prompt must be up (the line editor in raw mode) before the key is sent:
    // between two prompts the terminal turns Ctrl-C into SIGINT, which ends the REPL as
    // interrupted (exit 130) — a race a loaded machine lost.
    pty.wait_for_count(PROMPT, 3);
    pty.send(key::CTRL_C);
    assert!(pty.wait_exit().success());
    gate.open();
    let stops: Vec<String> = journal(&d)
        .iter()
        .filter(|r| kind(r) == "stop")
        .map(|r| r["reason"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(stops, ["interrupted"]);
}

#[test]
fn reload_goes_on_in_a_new_journal_linked_to_the_old_one() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Reply::text("before"),
        Turn::tool_call("c1", "write_file", r#"{"path":"new.txt","content":"x"}"#).into(),
        Reply::text("after"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("hello");
    pty.wait_for_text("before");
    // A rule added to the configuration applies after /reload: no question.
    d.write_user_config("[permissions]\nallow = [\"write_file(new.txt)\"]\n");
    pty.send_line("/reload");
    pty.wait_for_text("resuming session");
    pty.send_line("again");
    pty.wait_for_text("after");
    leave(pty, 4);
    assert_eq!(user_messages(&server.requests()[1]), ["hello", "again"]);
    assert!(d.ws.join("new.txt").exists());
    let sessions: Vec<_> = std::fs::read_dir(d.home.join("sessions"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(sessions.len(), 2);
}

#[test]
fn reasoning_is_one_dimmed_line_until_verbose_on() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Reply::from(Turn::text("answer one").reasoning(format!(
            "first I think about the problem {}\nthe hidden end",
            "and so on ".repeat(20)
        ))),
        Reply::from(Turn::text("answer two").reasoning("second thoughts here\nand a second line")),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("q1");
    let s = pty.wait_for_text("answer one");
    assert!(
        s.contains("✻ reasoning (247 chars; /verbose on shows it): first I think"),
        "{}",
        s.contents()
    );
    assert!(!s.contains("the hidden end"), "{}", s.contents());
    pty.send_line("/verbose on");
    pty.wait_for_text("reasoning is shown in full");
    pty.send_line("q2");
    let s = pty.wait_for_text("answer two");
    assert!(s.contains("and a second line"), "{}", s.contents());
    leave(pty, 4);
}

#[test]
fn no_color_shows_the_answer_as_plain_text() {
    let d = world();
    let server = ScriptedServer::start(vec![Reply::text("# Title\n\nsome **bold** words\n")]);
    let mut c = repl_command(&d, &server, &[]);
    c.env("NO_COLOR", "1");
    let pty = PtySpec::from_command(&c).size(40, 120).spawn();
    pty.wait_for_text(PROMPT);
    pty.send_line("go");
    let s = pty.wait_for_text("some **bold** words");
    assert!(s.contains("# Title"), "{}", s.contents());
    assert!(!s.is_bold_at("Title"), "{}", s.contents());
    leave(pty, 2);
}

#[test]
fn typing_into_an_open_question_does_not_answer_it() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "write_file", r#"{"path":"notes.md","content":"x"}"#).into(),
        Reply::text("left alone"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("write notes");
    pty.wait_for_text("[y] approve once");
    // Someone typing their next prompt: the `p` is no answer, and what follows in the same
    // burst (with its `a` and `e`s) is dropped until the question has been quiet again.
    pty.send("please also add tests");
    pty.wait_for_text("(21 keys typed before this question were discarded)");
    pty.wait_for_text("[y] approve once");
    assert!(!d.ws.join("notes.md").exists());
    pty.send("n");
    pty.wait_for_text("left alone");
    leave(pty, 2);
    assert!(!d.ws.join("notes.md").exists());
    let config = std::fs::read_to_string(d.cfg.join("config.toml")).unwrap_or_default();
    assert!(!config.contains("notes.md"), "{config}");
}

#[test]
fn always_allow_for_a_file_is_that_file_only() {
    let d = world();
    std::fs::create_dir_all(d.ws.join("sub")).unwrap();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "write_file", r#"{"path":"notes.md","content":"x"}"#).into(),
        Turn::tool_call(
            "c2",
            "write_file",
            r#"{"path":"sub/notes.md","content":"y"}"#,
        )
        .into(),
        Reply::text("done"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("write both");
    let s = pty.wait_for_text("[a] always allow   ");
    assert!(s.contains("`write_file(/notes.md)`"), "{}", s.contents());
    pty.send("a");
    pty.wait_for_text("press a again");
    pty.send("a");
    // The same name deeper down is another file: asked again.
    pty.wait_for("the second question, armed", |s| {
        s.contains("path: sub/notes.md") && s.contains("[y] approve once")
    });
    pty.send("n");
    pty.wait_for_text("done");
    leave(pty, 2);
    assert!(d.ws.join("notes.md").exists());
    assert!(!d.ws.join("sub/notes.md").exists());
}

#[test]
fn v_shows_the_whole_call_before_it_is_answered() {
    let d = world();
    let content: String = (1..=120).map(|i| format!("line number {i}\n")).collect();
    let args = serde_json::json!({"path": "big.txt", "content": content}).to_string();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "write_file", &args).into(),
        Reply::text("written"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("write a big file");
    let s = pty.wait_for_text("[v] view all");
    // The prompt shows the first lines of the diff, not all 120.
    assert!(s.contains("more diff lines"), "{}", s.contents());
    pty.send("v");
    pty.wait_for_all_text("── end of the call ──");
    let all = pty.screen().all_text();
    assert!(all.contains("  line number 120"), "{all}");
    assert!(all.contains("+line number 120"), "{all}");
    pty.wait_for_text("[y] approve once");
    pty.send("y");
    pty.wait_for_text("written");
    // The first prompt has scrolled away: the next one is the last line.
    pty.wait_for("the next prompt", |s| {
        s.contents().trim_end().ends_with(PROMPT)
    });
    let mut pty = pty;
    pty.send(key::CTRL_D);
    assert!(pty.wait_exit().success());
    assert_eq!(
        std::fs::read_to_string(d.ws.join("big.txt")).unwrap(),
        content
    );
}

#[test]
fn a_hang_up_at_the_prompt_ends_the_session_and_the_process() {
    let d = world();
    let server = ScriptedServer::start(vec![]);
    let mut pty = spawn(&d, &server, &[]);
    let pid = pty.pid().unwrap().to_string();
    assert!(
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
    // The line editor is still blocked on the terminal; the process does not wait for it.
    let status = pty.wait_exit();
    assert_eq!(status.exit_code(), 129, "{}", pty.report());
    let last = journal(&d).pop().unwrap();
    assert_eq!(kind(&last), "session_end");
    assert_eq!(last["reason"], "hung_up");
}

#[test]
fn a_sub_agents_question_names_it_and_stats_roll_its_spend_up() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "m1",
            "call_sub_agent",
            r#"{"profile":"code","task":"write notes.txt"}"#,
        )
        .usage(100, 10)
        .into(),
        Turn::tool_call("c1", "write_file", r#"{"path":"notes.txt","content":"hi"}"#)
            .usage(40, 4)
            .into(),
        Reply::from(Turn::text("wrote notes.txt").usage(50, 5)),
        Reply::from(Turn::text("the sub-agent wrote it").usage(200, 20)),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("delegate the note");
    let screen = pty.wait_for_text("[y] approve once");
    let text = screen.contents();
    assert!(
        text.contains("agent sub-1 wants to run write_file"),
        "{text}"
    );
    assert!(text.contains("sub-agent sub-1 (code) starts"), "{text}");
    pty.send("y");
    pty.wait_for_text("the sub-agent wrote it");
    pty.send_line("/stats");
    let s = pty.wait_for_text("all agents:");
    let text = s.contents();
    assert!(
        text.contains("agent main: 2 model calls · 300 tokens in"),
        "{text}"
    );
    assert!(
        text.contains("agent sub-1: 2 model calls · 90 tokens in"),
        "{text}"
    );
    assert!(
        text.contains("all agents: 4 model calls · 390 tokens in · 39 out"),
        "{text}"
    );
    leave(pty, 2);
    assert_eq!(
        std::fs::read_to_string(d.ws.join("notes.txt")).unwrap(),
        "hi"
    );
    // The session's stop record counts the child's spend too.
    let records = journal(&d);
    let stop = records
        .iter()
        .find(|r| kind(r) == "stop" && r.get("agent").is_none())
        .unwrap();
    assert_eq!(stop["prompt_tokens"], 390, "{stop}");
}

/// The permission mode (issue "ordinary work runs", item 4): shown in the header, switched
/// with Shift-Tab (read-only → ask → auto, never into yolo) and `/mode`, each switch recorded
/// as `mode_changed`, and the next call judged under it.
#[test]
fn the_mode_is_shown_switched_with_shift_tab_and_mode_and_journaled() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", r#"{"command":"make build"}"#).into(),
        Reply::text("first done"),
    ]);
    let pty = spawn(&d, &server, &[]);
    let header = pty.screen().contents();
    assert!(header.contains("mode ask"), "{header}");
    // Shift-Tab: ask → auto, then auto → read-only.
    let mark = pty.mark();
    pty.send(key::SHIFT_TAB);
    pty.wait_for_text_since(mark, "mode auto");
    let mark = pty.mark();
    pty.send(key::SHIFT_TAB);
    pty.wait_for_text_since(mark, "mode read-only");
    // yolo is never entered mid-session.
    let mark = pty.mark();
    pty.send_line("/mode yolo");
    pty.wait_for_text_since(mark, "only by a flag");
    // Under read-only, a confirm-list program is denied, saying so, without a question.
    let mark = pty.mark();
    pty.send_line("build it");
    pty.wait_for_text_since(mark, "first done");
    let since = pty.text_since(mark);
    assert!(since.contains("read-only mode"), "{since}");
    assert!(!since.contains("approve once"), "asked: {since}");
    let mark = pty.mark();
    pty.send_line("/mode ask");
    pty.wait_for_text_since(mark, "mode ask");
    // (Shift-Tab repaints its prompt in place, so prompts are not counted here: the
    // screen's last line is the prompt that follows `mode ask`.)
    pty.wait_for("the prompt after /mode ask", |screen| {
        let rows = screen.rows();
        let filled: Vec<&String> = rows.iter().filter(|r| !r.trim().is_empty()).collect();
        filled.len() >= 2
            && filled[filled.len() - 1].trim() == PROMPT
            && filled[filled.len() - 2].trim() == "mode ask"
    });
    let mut pty = pty;
    pty.send(key::CTRL_D);
    let status = pty.wait_exit();
    assert!(status.success(), "exit: {status:?}\n{}", pty.report());
    let records = journal(&d);
    assert_eq!(records[0]["mode"], "ask", "{}", records[0]);
    let modes: Vec<(&str, &str)> = records
        .iter()
        .filter(|r| kind(r) == "mode_changed")
        .map(|r| (r["mode"].as_str().unwrap(), r["by"].as_str().unwrap()))
        .collect();
    assert_eq!(
        modes,
        [
            ("auto", "person"),
            ("read-only", "person"),
            ("ask", "person")
        ]
    );
    let result = records.iter().find(|r| kind(r) == "tool_result").unwrap();
    assert_eq!(result["decided_by"]["policy"], "mode", "{result}");
}
