//! Attacks on the redaction disposition (issue 27, gate 5) through the real `dsh` binary:
//! each test fails if a secret — a known credential's value or a well-known token shape —
//! reaches the model, the journal or a file under `DSH_HOME` by a path the README does not
//! name as a limit (the model writing a secret itself, a re-encoded secret, the REPL's live
//! output). A secret counts as leaked when any 12 consecutive characters of it show.
//!
//! - hooks: a `PreToolUse` hook's deny reason, a `PostToolUse` hook's `additionalContext`
//!   and its block reason;
//! - cuts made before gate 5: a `grep` match line and a `read_file` line cut mid-secret, a
//!   command's output over the capture's 4 MiB head and 1 MiB tail, a failing plugin's
//!   stderr tail;
//! - a plugin's answer spelling a token with JSON `\u` escapes; a redacted answer that no
//!   longer fits the output schema's pattern (`ok` must not change);
//! - an error quoting the call's arguments (`invalid_args`, `unknown_tool`);
//! - Code Mode: a program that assembles a token and logs it; a sub-agent's final answer.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{Dirs, journals, json_lines, kind, records, scripted_exec, stderr, stdout};
use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use serde_json::{Value, json};

/// A GitHub token (a shape the redactor knows).
const TOKEN: &str = "ghp_Q7w9E2r4T6y8U1i3O5p7A9s2D4f6G8h1J3k5";
/// A known credential's value (no shape: only knowing it redacts it).
const KEY: &str = "Zq8XvT41mNwPq7Rs3Ty9Lk2Hd6Fb";
const KEY_VAR: &str = "MY_SERVICE_API_KEY";
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/servers/attack_plugin.py"
);

/// Whether 12 consecutive characters of `secret` show in `text`.
fn leaks(text: &str, secret: &str) -> Option<String> {
    let chars: Vec<char> = secret.chars().collect();
    chars
        .windows(12)
        .map(|w| w.iter().collect::<String>())
        .find(|piece| text.contains(piece.as_str()))
}

/// Every file under `dir`, with its text (lossy).
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                out.push((p.display().to_string(), text));
            }
        }
    }
    out
}

/// Asserts no part of `secrets` is in the batch's stdout or any file under `DSH_HOME`.
fn assert_nowhere(d: &Dirs, out: &std::process::Output, secrets: &[&str]) {
    for s in secrets {
        if let Some(p) = leaks(&stdout(out), s) {
            panic!("the result shows {p:?}: {}", stdout(out));
        }
        for (path, text) in files_under(&d.home) {
            if let Some(p) = leaks(&text, s) {
                panic!("{path} holds {p:?}");
            }
        }
    }
}

fn batch(d: &Dirs, calls: &[Value]) -> (std::process::Output, Vec<Value>) {
    let out = d.batch_output(calls, &[], &[(KEY_VAR, KEY)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = json_lines(&out);
    assert_eq!(r.len(), calls.len(), "{}", stdout(&out));
    (out, r)
}

fn shell(line: &str) -> Value {
    json!({"name": "run_shell", "args": {"command": line}})
}

/// A world whose workspace holds `tok.txt` (the token) and `key.txt` (the key), so commands
/// and hooks can print them without the call or the configuration naming them.
fn world(config: &str) -> Dirs {
    let d = Dirs::new();
    d.write_user_config(config);
    std::fs::write(d.ws.join("tok.txt"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(d.ws.join("key.txt"), format!("{KEY}\n")).unwrap();
    d
}

const ALLOW_ECHO: &str = "[permissions]\nallow = [\"run_shell(echo *)\"]\n";

#[test]
fn a_pre_tool_use_hooks_deny_reason_is_redacted() {
    let d = world(&format!(
        "{ALLOW_ECHO}[[hooks.PreToolUse]]\nmatcher = \"run_shell\"\n\
         command = \"cat tok.txt key.txt >&2; exit 2\"\n"
    ));
    let (out, r) = batch(&d, &[shell("echo hi")]);
    assert_eq!(kind(&r[0]), "denied", "{}", r[0]);
    assert_nowhere(&d, &out, &[TOKEN, KEY]);
}

#[test]
fn a_post_tool_use_hooks_additional_context_is_redacted() {
    let d = world(&format!(
        "{ALLOW_ECHO}[[hooks.PostToolUse]]\nmatcher = \"run_shell\"\n\
         command = '''printf '{{\"hookSpecificOutput\":{{\"hookEventName\":\"PostToolUse\",\"additionalContext\":\"token %s key %s\"}}}}' \"$(cat tok.txt)\" \"$(cat key.txt)\"'''\n"
    ));
    let (out, r) = batch(&d, &[shell("echo hi")]);
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    let journal = std::fs::read_to_string(&journals(&d.home)[0]).unwrap();
    assert!(journal.contains("context_attached"), "{journal}");
    assert!(
        journal.contains("token [redacted: GitHub token]"),
        "{journal}"
    );
    assert_nowhere(&d, &out, &[TOKEN, KEY]);
}

#[test]
fn a_post_tool_use_hooks_block_reason_is_redacted() {
    let d = world(&format!(
        "{ALLOW_ECHO}[[hooks.PostToolUse]]\nmatcher = \"run_shell\"\n\
         command = \"cat tok.txt key.txt >&2; exit 2\"\n"
    ));
    let (out, r) = batch(&d, &[shell("echo hi")]);
    assert_eq!(r[0]["ok"], true, "a hook never flips success: {}", r[0]);
    assert!(
        r[0]["content"].as_str().unwrap().contains("withheld"),
        "{}",
        r[0]
    );
    assert_nowhere(&d, &out, &[TOKEN, KEY]);
}

#[test]
fn a_grep_match_line_cut_inside_a_secret_shows_no_part_of_it() {
    let d = world("");
    // grep shows 300 characters of a line: the cut falls 20 characters into each secret
    // (a token is a word of its own: the shapes match at word boundaries).
    std::fs::write(
        d.ws.join("long.txt"),
        format!(
            "{} {TOKEN}\nmarker{}{KEY}\n",
            "x".repeat(279),
            "y".repeat(274)
        ),
    )
    .unwrap();
    let (out, r) = batch(
        &d,
        &[json!({"name": "grep", "args": {"pattern": "xxxx|marker", "path": "long.txt"}})],
    );
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    assert_nowhere(&d, &out, &[TOKEN, KEY]);
}

#[test]
fn a_read_file_line_cut_inside_a_secret_shows_no_part_of_it() {
    let d = world("");
    // read_file shows 2000 characters of a line: the cut falls 20 characters in.
    std::fs::write(
        d.ws.join("long.txt"),
        // A token is a word of its own (the shapes match at word boundaries).
        format!("{} {TOKEN}\n{}{KEY}\n", "x".repeat(1979), "y".repeat(1980)),
    )
    .unwrap();
    let (out, r) = batch(
        &d,
        &[json!({"name": "read_file", "args": {"path": "long.txt"}})],
    );
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    assert_nowhere(&d, &out, &[TOKEN, KEY]);
}

/// A command's output over 5 MiB is kept as its first 4 MiB and last 1 MiB before
/// `run_shell` scrubs it: a secret across either cut must not survive in halves (in the
/// saved output under `DSH_HOME`, which `read_output` pages to the model).
#[test]
fn a_secret_across_the_capture_cut_of_a_huge_output_leaves_no_half_behind() {
    let d = world("[permissions]\nallow = [\"run_shell(python3 huge.py)\"]\n");
    let program = r#"
import sys
key = open("key.txt").read().strip()
mib = 1 << 20
half = len(key) // 2
w = sys.stdout.write
w("." * (4 * mib - half)); w(key)
w("-" * mib)
w(key); w("." * (mib - (len(key) - half)))
"#;
    std::fs::write(d.ws.join("huge.py"), program).unwrap();
    let (out, r) = batch(&d, &[shell("python3 huge.py")]);
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    assert_eq!(r[0]["value"]["truncated"], true, "{}", r[0]);
    assert_nowhere(&d, &out, &[KEY]);
}

fn plugin_world(tools: &str) -> Dirs {
    let d = world("");
    let names: Vec<&str> = tools
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .map(|l| l.trim_end_matches('"'))
        .collect();
    d.write_user_config(&format!("[permissions]\nallow = {names:?}\n"));
    let dir = d.cfg.join("plugins/p");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plugin.toml"), tools).unwrap();
    std::fs::copy(SCRIPT, dir.join("attack_plugin.py")).unwrap();
    d
}

fn plugin_tool(name: &str, mode: &str, output_schema: &str) -> String {
    format!(
        "[[tools]]\nname = \"{name}\"\ndescription = \"x\"\n\
         command = \"python3 \\\"$DSH_PLUGIN_DIR/attack_plugin.py\\\" {mode}\"\n\
         input_schema = {{ type = \"object\" }}\noutput_schema = {output_schema}\n"
    )
}

/// A failing plugin's error quotes the last 2000 characters of its stderr, cut before gate 5.
#[test]
fn a_failing_plugins_stderr_tail_cut_inside_a_secret_shows_no_part_of_it() {
    let d = plugin_world(&plugin_tool(
        "split",
        "stderr-split",
        "{ type = \"object\" }",
    ));
    std::fs::write(d.ws.join("split.txt"), KEY).unwrap();
    let (out, r) = batch(&d, &[json!({"name": "split", "args": {}})]);
    assert_eq!(kind(&r[0]), "tool_error", "{}", r[0]);
    assert_nowhere(&d, &out, &[KEY]);
}

#[test]
fn a_plugins_answer_spelling_a_token_in_json_escapes_is_redacted() {
    let d = plugin_world(&plugin_tool("esc", "escaped", "{ type = \"object\" }"));
    let (out, r) = batch(&d, &[json!({"name": "esc", "args": {}})]);
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    assert_eq!(r[0]["value"]["t"], "[redacted: GitHub token]", "{}", r[0]);
    assert_nowhere(&d, &out, &[TOKEN]);
}

/// The answer is checked against the output schema as the plugin gave it: the marker that
/// replaces the token no longer matches `^ghp_`, and `ok` must not change for that.
#[test]
fn redacting_an_answer_never_makes_it_invalid_output() {
    let d = plugin_world(&plugin_tool(
        "tok",
        "token-value",
        "{ type = \"object\", properties = { t = { type = \"string\", pattern = \"^ghp_\", maxLength = 40 } }, required = [\"t\"] }",
    ));
    let (out, r) = batch(&d, &[json!({"name": "tok", "args": {}})]);
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    assert_eq!(r[0]["value"]["t"], "[redacted: GitHub token]", "{}", r[0]);
    assert_nowhere(&d, &out, &[TOKEN]);
}

/// The model wrote the secret in the arguments (journaled as written: a documented limit);
/// an error quoting them is tool output all the same, and is redacted.
#[test]
fn an_error_quoting_the_calls_arguments_is_redacted() {
    let d = world("");
    let out = d.batch_output(
        &[
            json!({"name": "read_file", "args": {"path": "tok.txt", "bogus": TOKEN}}),
            json!({"name": "no_such_tool", "args": {"t": TOKEN}}),
            json!({"name": "read_file", "args": {"path": TOKEN}}),
        ],
        &[],
        &[(KEY_VAR, KEY)],
    );
    let r = json_lines(&out);
    assert_eq!(r.len(), 3, "{}", stdout(&out));
    for res in &r {
        assert_ne!(kind(res), "ok", "{res}");
        let shown = format!("{}{}", res["content"], res["decided_by"]);
        assert!(leaks(&shown, TOKEN).is_none(), "{res}");
    }
    for rec in records(&journals(&d.home)[0]) {
        if rec["kind"] == "tool_result" {
            assert!(leaks(&rec.to_string(), TOKEN).is_none(), "{rec}");
        }
    }
}

/// A Code Mode program assembles a token no tool output holds whole and logs and returns
/// it: `run_code`'s own result passes gate 5 too.
#[test]
fn a_code_mode_program_that_assembles_a_token_has_it_redacted() {
    let d = world("");
    let codes: Vec<String> = TOKEN.chars().map(|c| (c as u32).to_string()).collect();
    std::fs::write(
        d.ws.join("codes.txt"),
        format!("codes: {}\n", codes.join(" ")),
    )
    .unwrap();
    let program = "const r = await tools.read_file({path: 'codes.txt'});\n\
        const line = r.content.split('\\n').find(l => l.includes('codes:'));\n\
        const t = String.fromCharCode(...line.split('codes:')[1].trim().split(' ').map(Number));\n\
        console.log('token ' + t);\n\
        return {t};";
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "p1",
            "run_code",
            &json!({"code": program, "description": "assemble"}).to_string(),
        )
        .into(),
        Reply::text("done"),
    ]);
    let out = scripted_exec(&d, &server.url, &["--tools-mode", "code"], "go")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let recs = records(&journals(&d.home)[0]);
    let result = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "p1")
        .unwrap();
    assert_eq!(result["ok"], true, "{result}");
    assert!(
        result.to_string().contains("[redacted: GitHub token]"),
        "the program did not assemble the token: {result}"
    );
    let journal = std::fs::read_to_string(&journals(&d.home)[0]).unwrap();
    assert!(!journal.contains(TOKEN), "the journal holds the token");
    for r in server.requests() {
        assert!(!r.to_string().contains(TOKEN), "a request holds the token");
    }
    for (path, text) in files_under(&d.home) {
        assert!(!text.contains(TOKEN), "{path} holds the token");
    }
}

/// A sub-agent's final answer is the parent's `call_sub_agent` result: redacted at the
/// parent's gate 5 (the sub-agent's own message is the model's writing, journaled as is).
#[test]
fn a_sub_agents_final_answer_reaches_the_parent_redacted() {
    let d = world("");
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "c1",
            "call_sub_agent",
            &json!({"profile": "search", "task": "find the token"}).to_string(),
        )
        .into(),
        Reply::text(format!("the token is {TOKEN}")),
        Reply::text("done"),
    ]);
    let out = scripted_exec(&d, &server.url, &[], "go").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let recs = records(&journals(&d.home)[0]);
    let result = recs
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "c1" && r.get("agent").is_none())
        .unwrap();
    assert_eq!(result["ok"], true, "{result}");
    assert!(!result.to_string().contains(TOKEN), "{result}");
    let last = server.requests().last().unwrap().clone();
    let tool_msg = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "c1")
        .unwrap()
        .to_string();
    assert!(tool_msg.contains("[redacted: GitHub token]"), "{tool_msg}");
}
