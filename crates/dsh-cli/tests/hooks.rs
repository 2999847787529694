//! Hooks in Claude Code's protocol through the real `dsh` binary (SPEC A10, P2, P6; DESIGN
//! §5): each answer style becomes the decision Claude Code's hooks mean, fail closed on a
//! hook's error; an unmodified Claude Code guard works on `run_shell`; a project's hooks run
//! only once approved, and until then the calls they would judge ask; `PostToolUse` attaches
//! context or withholds a result but never flips it; prompts and stops are hooked too. The
//! hooks are real processes (tests/servers/hook.py, claude_guard.py; plain Python 3).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{Dirs, json_lines, kind, records, scripted_exec, shell_call, stderr, stdout};
use dsh_testkit::model_server::{Reply, ScriptedServer, ServerHandle, Turn};
use serde_json::Value;

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/servers")
        .join(name)
}

/// A `[[hooks.EVENT]]` table running tests/servers/hook.py MODE, logging to `log`.
fn hook_table(event: &str, matcher: Option<&str>, mode: &str, log: &Path, extra: &str) -> String {
    format!(
        "[[hooks.{event}]]\n{}command = \"/usr/bin/python3 {} {mode}\"\nenv = {{ HOOK_LOG = {:?}, HOOK_OWN = \"mine\" }}\n{extra}\n",
        matcher
            .map(|m| format!("matcher = {m:?}\n"))
            .unwrap_or_default(),
        script("hook.py").display(),
        log.display().to_string(),
    )
}

fn log_of(d: &Dirs) -> PathBuf {
    d.root().join("hook-events.log")
}

fn logged(d: &Dirs) -> Vec<Value> {
    std::fs::read_to_string(log_of(d))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn batch(d: &Dirs, lines: &[&str]) -> Vec<Value> {
    let calls: Vec<Value> = lines.iter().map(|l| shell_call(l)).collect();
    let out = d.batch_output(&calls, &[], &[("OPENAI_API_KEY", "sk-hidden-from-hooks")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_lines(&out)
}

fn reason(r: &Value) -> &str {
    r["decided_by"]["reason"].as_str().unwrap()
}

#[test]
fn each_answer_style_decides_as_claude_code_hooks_mean_it_and_errors_fail_closed() {
    let d = Dirs::new();
    d.write_user_config(&hook_table(
        "PreToolUse",
        Some("Bash"),
        "styles",
        &log_of(&d),
        "timeout_ms = 1500",
    ));
    let r = batch(
        &d,
        &[
            "echo allow-me",
            "echo deny-me",
            "echo ask-me",
            "echo exit2-me",
            "echo crash-me",
            "echo hang-me",
            "echo garbage-me",
            "echo rewrite-me",
            "echo block-me",
            "echo quiet",
        ],
    );
    // allow: the hook's rule-tier allow decides.
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(r[0]["decided_by"]["policy"], "hooks");
    assert!(reason(&r[0]).contains("the hook knows this one"), "{r:?}");
    // deny, with the hook's reason, named.
    assert_eq!(kind(&r[1]), "denied");
    assert_eq!(r[1]["decided_by"]["policy"], "hooks");
    assert!(
        reason(&r[1]).contains("the hook refuses deny-me"),
        "{}",
        reason(&r[1])
    );
    assert!(
        reason(&r[1]).contains("hook.py styles"),
        "names the hook: {}",
        reason(&r[1])
    );
    // ask outranks the shell's default allow of `echo`; nobody to ask here.
    assert_eq!(kind(&r[2]), "unavailable", "{:?}", r[2]);
    assert!(
        r[2]["content"]
            .as_str()
            .unwrap()
            .contains("the hook wants a person"),
        "{:?}",
        r[2]
    );
    // exit 2: denied with stderr as the reason.
    assert_eq!(kind(&r[3]), "denied");
    assert!(
        reason(&r[3]).contains("exit 2 says no"),
        "{}",
        reason(&r[3])
    );
    // A crash, a hang past the timeout, garbage: hook errors, fail closed.
    assert_eq!(kind(&r[4]), "denied");
    assert!(
        reason(&r[4]).contains("exited with code 1 (Traceback: something broke)"),
        "{}",
        reason(&r[4])
    );
    assert_eq!(kind(&r[5]), "denied");
    assert!(
        reason(&r[5]).contains("did not answer within 1500 ms"),
        "{}",
        reason(&r[5])
    );
    assert_eq!(kind(&r[6]), "denied");
    assert!(reason(&r[6]).contains("invalid JSON"), "{}", reason(&r[6]));
    // updatedInput is ignored and said so; the call runs as it was asked.
    assert_eq!(kind(&r[7]), "ok");
    assert!(
        reason(&r[7]).contains("updatedInput was ignored"),
        "{}",
        reason(&r[7])
    );
    assert!(
        r[7]["content"].as_str().unwrap().contains("rewrite-me"),
        "{:?}",
        r[7]
    );
    // The legacy `decision: "block"`.
    assert_eq!(kind(&r[8]), "denied");
    assert!(reason(&r[8]).contains("legacy block"), "{}", reason(&r[8]));
    // Silence abstains: the shell policy decides.
    assert_eq!(kind(&r[9]), "ok");
    assert_ne!(r[9]["decided_by"]["policy"], "hooks");

    // What the hook saw: Claude's names beside dsh's, the command environment without
    // dsh's keys, with CLAUDE_PROJECT_DIR and its own variables.
    let seen = logged(&d);
    let first = &seen[0];
    assert_eq!(first["hook_event_name"], "PreToolUse");
    assert_eq!(first["tool_name"], "Bash");
    assert_eq!(first["tool_input"]["command"], "echo allow-me");
    assert_eq!(first["dsh_tool_name"], "run_shell");
    assert_eq!(first["dsh_tool_input"]["command"], "echo allow-me");
    assert_eq!(first["cwd"], d.ws.display().to_string());
    assert!(first["session_id"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(
        first["_env"]["CLAUDE_PROJECT_DIR"],
        d.ws.display().to_string()
    );
    assert_eq!(first["_env"]["HOOK_OWN"], "mine");
    assert!(first["_env"].get("OPENAI_API_KEY").is_none(), "{first}");
    // The hook errors left the journal intact.
    common::verify_all(&d);
}

#[test]
fn on_error_abstain_lets_the_call_go_on() {
    let d = Dirs::new();
    d.write_user_config(&hook_table(
        "PreToolUse",
        None,
        "styles",
        &log_of(&d),
        "on_error = \"abstain\"",
    ));
    let r = batch(&d, &["echo crash-me", "echo deny-me"]);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(
        kind(&r[1]),
        "denied",
        "a decision is still a decision: {r:?}"
    );
}

/// A trusted workspace whose `.claude/settings.json` has Claude Code's own guard on `Bash`.
fn claude_project() -> Dirs {
    let d = Dirs::new();
    d.write_user_config("");
    std::fs::create_dir_all(d.ws.join(".claude/hooks")).unwrap();
    std::fs::copy(
        script("claude_guard.py"),
        d.ws.join(".claude/hooks/bash_validator.py"),
    )
    .unwrap();
    std::fs::write(
        d.ws.join(".claude/settings.json"),
        r#"{
  "permissions": {"allow": ["Bash(npm test)"]},
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {"type": "command", "command": "python3 \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/bash_validator.py", "timeout": 10}
        ]
      }
    ]
  }
}
"#,
    )
    .unwrap();
    let out = d.dsh(&["trust"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    d
}

#[test]
fn an_unmodified_claude_code_guard_works_on_run_shell_once_approved() {
    let d = claude_project();
    // Not approved yet: it does not run, and the calls it would judge ask (headless:
    // unavailable) instead of running unguarded.
    let r = batch(&d, &["grep -r foo .", "ls"]);
    assert_eq!(kind(&r[0]), "unavailable", "{r:?}");
    assert!(
        r[0]["content"]
            .as_str()
            .unwrap()
            .contains("dsh hooks approve"),
        "{r:?}"
    );
    assert_eq!(kind(&r[1]), "unavailable", "{r:?}");

    let out = d.dsh(&["hooks", "list"]).output().unwrap();
    let listed = stdout(&out);
    assert!(listed.contains("1. PreToolUse [Bash]"), "{listed}");
    assert!(
        listed.contains("needs approval: dsh hooks approve 1"),
        "{listed}"
    );
    let out = d.dsh(&["hooks", "approve", "1"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    let r = batch(&d, &["grep -r foo .", "ls"]);
    assert_eq!(kind(&r[0]), "denied", "{r:?}");
    assert!(
        reason(&r[0]).contains("Use 'rg' (ripgrep) instead of 'grep'"),
        "{}",
        reason(&r[0])
    );
    assert_eq!(kind(&r[1]), "ok", "{r:?}");

    // A `git pull` that changes the script asks again.
    let path = d.ws.join(".claude/hooks/bash_validator.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("\n# changed\n");
    std::fs::write(&path, text).unwrap();
    let r = batch(&d, &["ls"]);
    assert_eq!(kind(&r[0]), "unavailable", "{r:?}");
}

#[test]
fn an_untrusted_projects_hooks_are_ignored_with_the_notice() {
    let d = Dirs::new();
    d.write_user_config("");
    std::fs::create_dir_all(d.ws.join(".claude")).unwrap();
    std::fs::write(
        d.ws.join(".claude/settings.json"),
        r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "touch pwned"}]}]}}"#,
    )
    .unwrap();
    let out = d.batch_output(&[shell_call("ls")], &[], &[]);
    let err = stderr(&out);
    assert!(err.contains("ignored hooks (1 hook)"), "{err}");
    assert!(err.contains("dsh trust"), "{err}");
    assert_eq!(kind(&json_lines(&out)[0]), "ok");
    assert!(!d.ws.join("pwned").exists());
}

#[test]
fn the_old_spelling_is_an_error_naming_the_new_one() {
    let d = Dirs::new();
    d.write_user_config("[[hooks.pre_tool_use]]\ncommand = \"x\"\n");
    let out = d.batch_output(&[shell_call("ls")], &[], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("[[hooks.PreToolUse]]"), "{err}");
    assert!(err.contains("config.toml:1"), "{err}");
}

fn exec_with(d: &Dirs, script: Vec<Reply>, prompt: &str) -> (std::process::Output, ServerHandle) {
    let server = ScriptedServer::start(script);
    let out = scripted_exec(d, &server.url, &[], prompt).output().unwrap();
    (out, server)
}

/// The main journal's records.
fn journal(d: &Dirs) -> Vec<Value> {
    records(&common::journals(&d.home)[0])
}

#[test]
fn post_tool_use_context_reaches_the_next_request_but_cannot_flip_a_failure() {
    let d = Dirs::new();
    d.write_user_config(&hook_table(
        "PostToolUse",
        Some("Read"),
        "post-context",
        &log_of(&d),
        "",
    ));
    let (out, server) = exec_with(
        &d,
        vec![
            Turn::tool_call("c1", "read_file", r#"{"path":"missing.txt"}"#).into(),
            Reply::text("done"),
        ],
        "read it",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let second = server.requests()[1]["messages"].to_string();
    assert!(
        second.contains("[from hooks]") && second.contains("remember to run the tests"),
        "{second}"
    );
    let recs = journal(&d);
    let result = recs.iter().find(|r| r["kind"] == "tool_result").unwrap();
    assert_eq!(result["ok"], false, "the failure stays a failure: {result}");
    let attached = recs
        .iter()
        .find(|r| r["kind"] == "context_attached")
        .unwrap();
    assert_eq!(attached["policy"], "hooks");
    // The hook saw the result it judged.
    let seen = logged(&d);
    assert_eq!(seen[0]["hook_event_name"], "PostToolUse");
    assert_eq!(seen[0]["tool_response"]["ok"], false);
}

#[test]
fn a_post_tool_use_block_withholds_the_result_but_it_stays_a_success() {
    let d = Dirs::new();
    d.write_user_config(&hook_table(
        "PostToolUse",
        None,
        "post-block",
        &log_of(&d),
        "",
    ));
    let (out, server) = exec_with(
        &d,
        vec![
            Turn::tool_call("c1", "run_shell", r#"{"command":"echo secret-output"}"#).into(),
            Reply::text("done"),
        ],
        "run echo",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let messages = server.requests()[1]["messages"].clone();
    let tool = messages
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .to_string();
    assert!(tool.contains("the linter failed on this change"), "{tool}");
    assert!(!tool.contains("secret-output"), "{tool}");
    let recs = journal(&d);
    let result = recs.iter().find(|r| r["kind"] == "tool_result").unwrap();
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["decided_by"]["policy"], "hooks");
}

#[test]
fn prompt_hooks_add_context_or_block_and_session_start_adds_context() {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "{}{}",
        hook_table("UserPromptSubmit", None, "prompt", &log_of(&d), ""),
        hook_table("SessionStart", None, "session-start", &log_of(&d), "")
    ));
    let (out, server) = exec_with(&d, vec![Reply::text("ok")], "build it");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = server.requests()[0]["messages"].to_string();
    assert!(first.contains("the build uses make, not cargo"), "{first}");
    assert!(first.contains("the team's conventions: tabs"), "{first}");
    let seen = logged(&d);
    assert!(
        seen.iter()
            .any(|e| e["hook_event_name"] == "SessionStart" && e["source"] == "startup"),
        "{seen:?}"
    );
    assert!(seen.iter().any(|e| e["prompt"] == "build it"), "{seen:?}");

    // A blocked prompt is never sent.
    let (out, server) = exec_with(&d, vec![Reply::text("never")], "do forbidden things");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("prompts about forbidden things are not sent"),
        "{}",
        stderr(&out)
    );
    assert!(server.requests().is_empty());
}

#[test]
fn a_stop_hook_sends_the_agent_back_at_most_max_continuations_times() {
    let d = Dirs::new();
    d.write_user_config(&hook_table("Stop", None, "stop-once", &log_of(&d), ""));
    let (out, server) = exec_with(
        &d,
        vec![Reply::text("done"), Reply::text("tests pass, done")],
        "fix it",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "tests pass, done");
    let second = server.requests()[1]["messages"].to_string();
    assert!(second.contains("run the tests before you stop"), "{second}");
    let seen = logged(&d);
    assert_eq!(seen[0]["stop_hook_active"], false);
    assert_eq!(seen[1]["stop_hook_active"], true);

    // A hook that always says go on is held to the limit.
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[hooks]\nmax_continuations = 2\n{}",
        hook_table("Stop", None, "stop-always", &log_of(&d), "")
    ));
    let (out, server) = exec_with(
        &d,
        vec![Reply::text("a"), Reply::text("b"), Reply::text("c")],
        "go",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(server.requests().len(), 3);
    assert!(
        stderr(&out).contains("max_continuations"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_secret_a_prompt_hook_prints_reaches_neither_the_model_nor_the_journal() {
    let d = Dirs::new();
    d.write_user_config(&hook_table(
        "UserPromptSubmit",
        None,
        "leaky-context",
        &log_of(&d),
        "",
    ));
    let (out, server) = exec_with(&d, vec![Reply::text("ok")], "deploy");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let secret = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
    let first = server.requests()[0]["messages"].to_string();
    assert!(first.contains("the deploy token is [redacted"), "{first}");
    assert!(!first.contains(secret), "{first}");
    let journal = std::fs::read_to_string(&common::journals(&d.home)[0]).unwrap();
    assert!(journal.contains("context_attached"), "{journal}");
    assert!(!journal.contains(secret), "{journal}");
}
