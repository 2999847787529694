//! Attacks on `dsh acp`, the Agent Client Protocol front end: what it lets run or decides
//! without a person. Each test drives a real `dsh acp` child with raw JSON-RPC lines on its
//! stdin and stdout (newline-delimited, as ACP's stdio transport defines it), against the
//! scripted model server, so it can send what a well-behaved editor never would: options
//! that were not offered, answers after a cancel, answers twice, ids that are paths, garbage
//! lines, invalid UTF-8, responses with a null id, and a disconnect mid-command or
//! mid-question. Every line dsh writes on stdout is checked to be one JSON-RPC message.
//!
//! A defence dsh holds is a passing test that fails if it broke; an attack that succeeds is
//! an ignored test named as a finding. Three findings were fixed (their tests pass now): a
//! line of invalid UTF-8 ended the connection; the "always allow" label carried the model's
//! control and bidi characters; the editor's `/save NAME` took control characters.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::acp_wire::{Agent, PATIENCE, error_code};
use common::{Dirs, journals, records};
use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use serde_json::{Value, json};

fn tool(id: &str, name: &str, args: Value) -> Reply {
    Reply::Stream(Turn::tool_call(id, name, &args.to_string()))
}

fn text(t: &str) -> Reply {
    Reply::Stream(Turn::text(t))
}

/// The records of the one journal under `home` (all journals' records, in file order).
fn all_records(home: &Path) -> Vec<Value> {
    journals(home).iter().flat_map(|j| records(j)).collect()
}

/// The `kind` record for `call_id` in `recs`.
fn record_for<'a>(recs: &'a [Value], kind: &str, call_id: &str) -> Option<&'a Value> {
    recs.iter()
        .find(|r| r["kind"] == kind && r["call_id"] == call_id)
}

/// The option ids a permission request offers.
fn option_ids(asked: &Value) -> Vec<String> {
    asked["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap().to_owned())
        .collect()
}

/// A command that asks in the `ask` mode and for which "always allow" is not offered (two
/// commands: no one rule can lift it): it creates `name` in the workspace.
fn two_command_touch(name: &str) -> Value {
    json!({"command": format!("touch {name} && touch {name}.2")})
}

/// Attack: answer a permission question with an option that was not offered
/// (`allow_always` where only allow once and reject were), with the right option in the
/// wrong case, with a number, a selection without an option, an unknown outcome, an empty
/// result, a JSON-RPC error. Must hold: none of them is a yes — the call does not run, its
/// `approval` is journaled `cancelled` and its result `cancelled_before`; and the same call
/// answered `allow_once` does run (the test can tell).
#[test]
fn unoffered_options_and_malformed_answers_are_nobodys_yes() {
    let d = Dirs::new();
    let answers: Vec<(&str, Value)> = vec![
        (
            "allow_always, not offered",
            json!({"result": {"outcome": {"outcome": "selected", "optionId": "allow_always"}}}),
        ),
        (
            "ALLOW_ONCE",
            json!({"result": {"outcome": {"outcome": "selected", "optionId": "ALLOW_ONCE"}}}),
        ),
        (
            "a number",
            json!({"result": {"outcome": {"outcome": "selected", "optionId": 1}}}),
        ),
        (
            "no option",
            json!({"result": {"outcome": {"outcome": "selected"}}}),
        ),
        (
            "an unknown outcome",
            json!({"result": {"outcome": {"outcome": "approved", "optionId": "allow_once"}}}),
        ),
        ("an empty result", json!({"result": {}})),
        (
            "a kind instead of an id",
            json!({"result": {"outcome": {"outcome": "selected", "optionId": "allow_once ", "kind": "allow_once"}}}),
        ),
        (
            "an error",
            json!({"error": {"code": -32603, "message": "the editor crashed"}}),
        ),
        (
            "cancelled",
            json!({"result": {"outcome": {"outcome": "cancelled"}}}),
        ),
    ];
    let mut script = Vec::new();
    for (i, _) in answers.iter().enumerate() {
        script.push(tool(
            &format!("c{i}"),
            "run_shell",
            two_command_touch(&format!("m{i}")),
        ));
        script.push(text("next"));
    }
    script.push(tool("ok", "run_shell", two_command_touch("yes")));
    script.push(text("done"));
    let model = ScriptedServer::start(script);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    for (i, (what, answer)) in answers.iter().enumerate() {
        let pid = format!("p{i}");
        a.send_prompt(&pid, &id, "touch it");
        let asked = a.until_method("session/request_permission");
        let offered = option_ids(&asked);
        assert_eq!(offered, ["allow_once", "reject_once"], "{asked}");
        let mut reply = answer.clone();
        reply["jsonrpc"] = json!("2.0");
        reply["id"] = asked["id"].clone();
        a.send(&reply);
        let done = a.answer(&json!(pid));
        assert_eq!(done["result"]["stopReason"], "end_turn", "{what}: {done}");
        assert!(
            !d.ws.join(format!("m{i}")).exists(),
            "{what} ran the call: it was a yes"
        );
    }
    a.send_prompt("pok", &id, "touch it");
    let asked = a.until_method("session/request_permission");
    a.respond(
        &asked,
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    a.answer(&json!("pok"));
    assert!(d.ws.join("yes").exists(), "allow_once runs the call");
    a.close();

    let recs = all_records(&d.home);
    for (i, (what, _)) in answers.iter().enumerate() {
        let call = format!("c{i}");
        let approval = record_for(&recs, "approval", &call).unwrap_or_else(|| panic!("{what}"));
        assert_eq!(approval["outcome"], "cancelled", "{what}: {approval}");
        let result = record_for(&recs, "tool_result", &call).unwrap();
        assert_eq!(
            result["failure_kind"], "cancelled_before",
            "{what}: {result}"
        );
    }
    assert_eq!(
        record_for(&recs, "approval", "ok").unwrap()["outcome"],
        "allowed_once"
    );
}

/// Attack: the turn is cancelled while its permission question is open, then the client
/// answers it `allow_once` anyway (late), twice, and answers a request id that was never
/// asked. Must hold: the call is recorded `cancelled_before` and never runs (a side-effect
/// file), the stray answers are ignored, and dsh goes on serving.
#[test]
fn a_late_answer_after_cancel_never_runs_the_call() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![
        tool(
            "late",
            "write_file",
            json!({"path": "late.txt", "content": "ran\n"}),
        ),
        tool(
            "next",
            "write_file",
            json!({"path": "next.txt", "content": "ran\n"}),
        ),
        text("written"),
    ]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    a.send_prompt("p1", &id, "write late.txt");
    let asked = a.until_method("session/request_permission");
    a.send(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": id}}));
    let done = a.answer(&json!("p1"));
    assert_eq!(done["result"]["stopReason"], "cancelled", "{done}");
    let yes = json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}});
    a.respond(&asked, yes.clone());
    a.respond(&asked, yes.clone());
    a.send(&json!({"jsonrpc": "2.0", "id": 987_654, "result": yes}));
    a.send(&json!({"jsonrpc": "2.0", "id": "never-asked", "result": yes}));
    // Still serving, and the next call asks afresh (the stray answers approve nothing).
    a.send_prompt("p2", &id, "write next.txt");
    let asked2 = a.until_method("session/request_permission");
    assert_ne!(asked2["id"], asked["id"]);
    a.respond(&asked2, yes.clone());
    let done = a.answer(&json!("p2"));
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(d.ws.join("next.txt").exists());
    assert!(
        !d.ws.join("late.txt").exists(),
        "the late answer ran a cancelled call"
    );
    a.close();
    let recs = all_records(&d.home);
    let approvals: Vec<&Value> = recs
        .iter()
        .filter(|r| r["kind"] == "approval" && r["call_id"] == "late")
        .collect();
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(approvals[0]["outcome"], "cancelled");
    assert_eq!(
        record_for(&recs, "tool_result", "late").unwrap()["failure_kind"],
        "cancelled_before"
    );
    assert!(
        !recs
            .iter()
            .any(|r| r["kind"] == "tool_started" && r["call_id"] == "late"),
        "the cancelled call never started"
    );
}

/// Attack: a model proposes writes to paths shaped to widen the "always allow" rule it is
/// offered (`*`, `**`, `?`, `[`, `)`, `{`): the option must not be offered for them. And
/// for a plain path that is chosen, the rule written is exactly the one shown in the
/// option's label, anchored to the one path, in this workspace's section of the user
/// configuration (an untrusted workspace), and the running session judges it.
#[test]
fn always_allow_is_never_wider_than_the_call() {
    let d = Dirs::new();
    let globby = [
        "*.txt",
        "src/**",
        "a?.txt",
        "[ab].txt",
        "x).txt",
        "{a,b}.txt",
        "a\\*.txt",
    ];
    let mut script = Vec::new();
    for (i, p) in globby.iter().enumerate() {
        script.push(tool(
            &format!("g{i}"),
            "write_file",
            json!({"path": p, "content": "x\n"}),
        ));
        script.push(text("next"));
    }
    script.push(tool(
        "plain",
        "write_file",
        json!({"path": "plain.txt", "content": "1\n"}),
    ));
    script.push(text("next"));
    // The rule now allows the same path without asking, and nothing else.
    script.push(tool(
        "again",
        "write_file",
        json!({"path": "plain.txt", "content": "2\n"}),
    ));
    script.push(tool(
        "other",
        "write_file",
        json!({"path": "sub/plain.txt", "content": "3\n"}),
    ));
    script.push(text("done"));
    let model = ScriptedServer::start(script);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    let reject = json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}});
    for (i, p) in globby.iter().enumerate() {
        let pid = format!("g{i}");
        a.send_prompt(&pid, &id, "write");
        let asked = a.until_method("session/request_permission");
        assert!(
            !option_ids(&asked).contains(&"allow_always".to_owned()),
            "always offered for {p:?}: {asked}"
        );
        a.respond(&asked, reject.clone());
        a.answer(&json!(pid));
    }
    a.send_prompt("plain", &id, "write plain");
    let asked = a.until_method("session/request_permission");
    let always = asked["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["optionId"] == "allow_always")
        .unwrap_or_else(|| panic!("always offered for a plain path: {asked}"))
        .clone();
    let label = always["name"].as_str().unwrap();
    assert!(label.contains("`write_file(/plain.txt)`"), "{label}");
    assert!(label.contains(&d.cfg.display().to_string()), "{label}");
    a.respond(
        &asked,
        json!({"outcome": {"outcome": "selected", "optionId": "allow_always"}}),
    );
    a.answer(&json!("plain"));
    a.send_prompt("again", &id, "write again");
    let asked = a.until_method("session/request_permission");
    // Only the other path asks.
    assert_eq!(
        asked["params"]["toolCall"]["toolCallId"], "other",
        "{asked}"
    );
    a.respond(&asked, reject.clone());
    a.answer(&json!("again"));
    assert_eq!(
        std::fs::read_to_string(d.ws.join("plain.txt")).unwrap(),
        "2\n"
    );
    assert!(!d.ws.join("sub/plain.txt").exists());
    a.close();
    let config = std::fs::read_to_string(d.cfg.join("config.toml")).unwrap();
    assert!(config.contains("write_file(/plain.txt)"), "{config}");
    assert!(
        !config.lines().any(|l| l.trim() == "[permissions]"),
        "an untrusted workspace's rule goes to its own section, not [permissions]: {config}"
    );
    assert!(
        !d.ws.join(".dsh").exists(),
        "nothing written to the project"
    );
}

/// Attack: the workspace directory's own name is a TOML injection (quotes, a newline, a
/// new `[permissions]` table allowing every command). "Always allow" in it writes its rule
/// to the user configuration in this workspace's section: the name must stay a key, never
/// become a table that allows everything everywhere.
#[test]
fn a_workspace_named_like_toml_cannot_inject_rules_into_the_user_config() {
    let d = Dirs::new();
    let ws = d.root().join(
        "ws\".permissions]\nallow = [\"run_shell\"]\n[permissions]\nallow = [\"run_shell\"]\n#",
    );
    std::fs::create_dir(&ws).unwrap();
    let model = ScriptedServer::start(vec![
        tool(
            "w",
            "write_file",
            json!({"path": "a.txt", "content": "x\n"}),
        ),
        text("done"),
        tool("sh", "run_shell", two_command_touch("pwned")),
        text("done"),
    ]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&ws);
    a.send_prompt("p1", &id, "write");
    let asked = a.until_method("session/request_permission");
    assert!(option_ids(&asked).contains(&"allow_always".to_owned()));
    a.respond(
        &asked,
        json!({"outcome": {"outcome": "selected", "optionId": "allow_always"}}),
    );
    a.answer(&json!("p1"));
    let config = std::fs::read_to_string(d.cfg.join("config.toml")).unwrap();
    assert!(
        !config.lines().any(|l| l.trim() == "[permissions]"),
        "the workspace's name became a table: {config}"
    );
    // A second session in the outside directory: a shell command still asks.
    let other = a.open(&d.outside);
    a.send_prompt("p2", &other, "touch");
    let asked = a.until_method("session/request_permission");
    a.respond(
        &asked,
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    a.answer(&json!("p2"));
    assert!(!d.outside.join("pwned").exists());
    a.close();
}

/// Attack: `session/load` with ids that are paths, names or pieces: `../`, an absolute
/// journal path, the id with `.jsonl`, an empty id, a prefix of the real id, a `/save`
/// name, a NUL. Must hold: each is refused as "no recorded session" (nothing outside
/// `DSH_HOME/sessions` read as a journal, no name resolved), and the real id loads.
#[test]
fn session_load_takes_only_a_recorded_id() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![text("first"), text("second")]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    a.prompt(&id, "hello");
    let saved = a.prompt(&id, "/save keepme");
    assert_eq!(saved["result"]["stopReason"], "end_turn");
    a.close();
    let journal = journals(&d.home)[0].clone();
    // A journal-shaped file outside DSH_HOME.
    let planted = d.outside.join("planted.jsonl");
    std::fs::copy(&journal, &planted).unwrap();

    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let bad = [
        format!("../sessions/{id}"),
        journal.display().to_string(),
        planted.display().to_string(),
        format!("{id}.jsonl"),
        String::new(),
        id[..id.len() / 2].to_owned(),
        "keepme".to_owned(),
        format!("{id}\u{0}"),
        format!("{id}/"),
    ];
    for given in &bad {
        let r = a.request(
            "l",
            "session/load",
            json!({"sessionId": given, "cwd": d.ws, "mcpServers": []}),
        );
        assert_eq!(error_code(&r), -32602, "{given:?} loaded: {r}");
    }
    let ok = a.request(
        "l",
        "session/load",
        json!({"sessionId": id, "cwd": d.ws, "mcpServers": []}),
    );
    assert!(ok["result"].is_object(), "{ok}");
    a.close();
}

/// Attack: `session/new` with a cwd that is not a directory, does not exist, or — under
/// `--workspace DIR` — escapes DIR through `..` or a symlink. Must hold: each is refused
/// with a JSON-RPC error and dsh goes on serving.
#[test]
fn session_new_refuses_a_cwd_that_is_not_a_directory_or_escapes_the_pin() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![]);
    std::fs::write(d.ws.join("file.txt"), "x").unwrap();
    std::os::unix::fs::symlink(&d.outside, d.ws.join("link-out")).unwrap();
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    for cwd in [d.ws.join("file.txt"), d.ws.join("missing")] {
        let r = a.new_session(&cwd, json!([]));
        assert_eq!(error_code(&r), -32602, "{}: {r}", cwd.display());
    }
    a.close();

    let ws = d.ws.display().to_string();
    let mut a = Agent::start(&d, &model.url, &["--workspace", &ws]);
    a.initialize();
    for cwd in [
        d.ws.join("link-out"),
        d.ws.join("..").join("outside"),
        d.ws.join("link-out/.."),
        PathBuf::from("/"),
    ] {
        let r = a.new_session(&cwd, json!([]));
        assert_eq!(error_code(&r), -32602, "{}: {r}", cwd.display());
    }
    assert!(a.open(&d.ws).len() > 4);
    a.close();
}

/// Attack: the client's MCP server, started for an untrusted workspace whose project
/// configuration asks to pass secrets to commands, looks at its working directory and its
/// environment. Must hold: it starts in the session's private directory, not the workspace
/// (a planted launcher there would run), and gets none of dsh's keys or other secrets of
/// dsh's environment, but does get the variables the client gave it.
#[test]
fn a_client_mcp_server_gets_no_secrets_and_not_the_untrusted_workspace() {
    let d = Dirs::new();
    d.project_config("[shell]\npass_env = [\"AWS_SECRET_ACCESS_KEY\", \"GITHUB_TOKEN\"]\n");
    let out = d.root().join("probe");
    std::fs::create_dir(&out).unwrap();
    let model = ScriptedServer::start(vec![]);
    let mut a = Agent::start_with(
        &d,
        &model.url,
        &[],
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-secret"),
            ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
            ("GITHUB_TOKEN", "ghp-secret"),
            ("DSH_EXTRA_SECRET", "dsh-secret"),
        ],
    );
    a.initialize();
    let script = format!(
        "pwd > {0}/cwd.tmp && mv {0}/cwd.tmp {0}/cwd; env > {0}/env.tmp && mv {0}/env.tmp {0}/env; exec /usr/bin/python3 {1}",
        out.display(),
        mini().display()
    );
    let servers = json!([{
        "name": "probe",
        "command": "/bin/sh",
        "args": ["-c", script],
        "env": [{"name": "CLIENT_GIVEN", "value": "given"}],
    }]);
    let new = a.new_session(&d.ws, servers);
    assert!(new["result"]["sessionId"].is_string(), "{new}");
    // Waiting for the server to start (bounded).
    common::wait_for_file(&out.join("cwd"));
    common::wait_for_file(&out.join("env"));
    let cwd = std::fs::read_to_string(out.join("cwd")).unwrap();
    let env = std::fs::read_to_string(out.join("env")).unwrap();
    assert_ne!(
        Path::new(cwd.trim()),
        d.ws,
        "the untrusted workspace is the server's cwd"
    );
    assert!(
        !Path::new(cwd.trim()).starts_with(&d.ws),
        "cwd inside the workspace: {cwd}"
    );
    for secret in [
        "sk-secret-key",
        "sk-ant-secret",
        "aws-secret",
        "ghp-secret",
        "dsh-secret",
    ] {
        assert!(!env.contains(secret), "{secret} passed: {env}");
    }
    assert!(env.contains("CLIENT_GIVEN=given"), "{env}");
    a.close();
}

fn mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dsh-mcp/tests/servers/mini.py")
}

/// Whether a process whose command line is exactly `words` is running (zombies have an
/// empty command line, so they do not count).
fn running(words: &[&str]) -> bool {
    let want: Vec<u8> = words
        .iter()
        .flat_map(|w| [w.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc").unwrap().any(|e| {
        let Ok(e) = e else { return false };
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want)
    })
}

/// Waits (bounded) until a process runs `words` (a started command takes a moment to exec).
fn wait_running(words: &[&str]) {
    let start = Instant::now();
    while !running(words) {
        assert!(start.elapsed() < PATIENCE, "{words:?} never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded) until no process runs `words`; whether none does.
fn gone(words: &[&str]) -> bool {
    let start = Instant::now();
    while running(words) {
        if start.elapsed() > Duration::from_secs(20) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Attack: the client goes away (stdin closed) while a command runs. Must hold: dsh exits
/// on its own, the command is killed (nothing left running), its result is journaled as
/// cancelled before the journal's `session_end`, the journal verifies, and nothing but
/// protocol went to stdout.
#[test]
fn a_disconnect_mid_command_kills_it_and_ends_the_journal() {
    let d = Dirs::new();
    d.write_user_config("[permissions]\nallow = [\"run_shell(sleep *)\"]\n");
    let model = ScriptedServer::start(vec![
        tool("s", "run_shell", json!({"command": "sleep 3141"})),
        text("never"),
    ]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    a.send_prompt("p", &id, "sleep");
    a.until_status("in_progress");
    wait_running(&["sleep", "3141"]);
    let code = a.close_and_wait();
    assert_eq!(code, Some(0), "{}", a.stderr());
    assert!(gone(&["sleep", "3141"]), "the command outlived dsh acp");
    let recs = all_records(&d.home);
    let result = record_for(&recs, "tool_result", "s").unwrap_or_else(|| panic!("{recs:#?}"));
    assert!(
        result["failure_kind"]
            .as_str()
            .is_some_and(|k| k.starts_with("cancelled")),
        "{result}"
    );
    assert_eq!(recs.last().unwrap()["kind"], "session_end", "{recs:#?}");
    common::verify_all(&d);
}

/// Attack: the client goes away while a permission question is open. Must hold: the
/// question is nobody's yes — the call is journaled `cancelled_before` and never runs —
/// dsh exits, and the journal ends with `session_end` and verifies.
#[test]
fn a_disconnect_with_an_open_question_runs_nothing() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![
        tool(
            "q",
            "write_file",
            json!({"path": "asked.txt", "content": "x\n"}),
        ),
        text("never"),
    ]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    a.send_prompt("p", &id, "write");
    a.until_method("session/request_permission");
    let code = a.close_and_wait();
    assert_eq!(code, Some(0), "{}", a.stderr());
    assert!(!d.ws.join("asked.txt").exists());
    let recs = all_records(&d.home);
    assert_eq!(
        record_for(&recs, "approval", "q").unwrap()["outcome"],
        "cancelled"
    );
    assert_eq!(
        record_for(&recs, "tool_result", "q").unwrap()["failure_kind"],
        "cancelled_before"
    );
    assert_eq!(recs.last().unwrap()["kind"], "session_end", "{recs:#?}");
    common::verify_all(&d);
}

/// Attack: protocol abuse — a response with a null id (what the TypeScript SDK sends back
/// for a line it cannot parse: answering it would start an endless ping-pong), a batch
/// (JSON array), a request before `initialize`, `initialize` twice, a notification of an
/// unknown method, a 4 MB line, an empty object, a number, a blank line. Must hold: dsh answers nothing to
/// responses and notifications, answers requests with JSON-RPC errors, writes only
/// JSON-RPC, and keeps serving (the next request is answered, the next message).
#[test]
fn protocol_abuse_gets_errors_or_silence_and_dsh_goes_on_serving() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![text("Still here.")]);
    let mut a = Agent::start(&d, &model.url, &[]);
    // Before `initialize`: a request is answered (an error or not), never ignored.
    let early = a.request(
        "early",
        "session/new",
        json!({"cwd": d.ws, "mcpServers": []}),
    );
    assert!(early.get("result").is_some() || early.get("error").is_some());
    a.initialize();
    let again = a.initialize();
    assert!(again["result"].is_object(), "{again}");

    // Each message that needs no answer, followed by a ping (an unknown method): the very
    // next message must be the ping's answer.
    let silent: Vec<(&str, Vec<u8>)> = vec![
        (
            "a null-id error response",
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#
                .to_vec(),
        ),
        (
            "a null-id result",
            br#"{"jsonrpc":"2.0","id":null,"result":{}}"#.to_vec(),
        ),
        (
            "a response to nothing",
            br#"{"jsonrpc":"2.0","id":424242,"result":{"outcome":{"outcome":"cancelled"}}}"#
                .to_vec(),
        ),
        (
            "an error response to nothing",
            br#"{"jsonrpc":"2.0","id":"never","error":{"code":-32603,"message":"x"}}"#.to_vec(),
        ),
        (
            "an unknown notification",
            br#"{"jsonrpc":"2.0","method":"no/such/notification","params":{}}"#.to_vec(),
        ),
        (
            "a cancel for no session",
            br#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}"#
                .to_vec(),
        ),
    ];
    for (i, (what, line)) in silent.iter().enumerate() {
        a.send_bytes(line);
        let ping = format!("ping{i}");
        a.send(&json!({"jsonrpc": "2.0", "id": ping, "method": "no/such", "params": {}}));
        let v = a.next();
        assert_eq!(v["id"], json!(ping), "after {what}, dsh wrote {v}");
        assert_eq!(error_code(&v), -32601);
    }

    // Garbage that is answered (or not) but never stops dsh.
    let mut big = b"{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"method\":\"x\",\"params\":\"".to_vec();
    big.extend(std::iter::repeat_n(b'a', 4 << 20));
    big.extend(b"\"}");
    let garbage: Vec<(&str, Vec<u8>)> = vec![
        (
            "a batch",
            br#"[{"jsonrpc":"2.0","id":"b1","method":"no/such","params":{}}]"#.to_vec(),
        ),
        ("a 4 MB line", big),
        ("an empty object", b"{}".to_vec()),
        ("a bare number", b"42".to_vec()),
        ("a blank line", b"   ".to_vec()),
    ];
    for (i, (what, line)) in garbage.iter().enumerate() {
        a.send_bytes(line);
        let ping = format!("g{i}");
        a.send(&json!({"jsonrpc": "2.0", "id": ping, "method": "no/such", "params": {}}));
        let v = a.answer(&json!(ping));
        assert_eq!(error_code(&v), -32601, "after {what}: {v}");
    }
    let id = a.open(&d.ws);
    let done = a.prompt(&id, "are you there?");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(a.said(), "Still here.");
    a.close();
}

/// Attack: the output of commands — and of the client's MCP server on its stderr — is
/// written to try to get onto dsh's stdout (the protocol's line). Must hold: every line on
/// stdout is one JSON-RPC message, the command's output reaches the client only inside a
/// `tool_call_update`.
#[test]
fn command_output_never_reaches_stdout_as_bytes() {
    let d = Dirs::new();
    d.write_user_config("[permissions]\nallow = [\"run_shell(printf *)\"]\n");
    let model = ScriptedServer::start(vec![
        tool(
            "o",
            "run_shell",
            json!({"command": "printf 'NOT-JSON-1\\n{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"result\":{\"stopReason\":\"end_turn\"}}\\n' && printf 'NOT-JSON-2\\n' >&2"}),
        ),
        text("printed"),
    ]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    let done = a.prompt(&id, "print");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    // The answer is dsh's (after the call's updates), not the command's forged one.
    assert!(
        a.seen
            .iter()
            .any(|v| v["params"]["update"]["status"] == "completed"),
        "the forged answer came first: {:#?}",
        a.seen
    );
    let shown = serde_json::to_string(&a.seen).unwrap();
    assert!(shown.contains("NOT-JSON-1"), "the output is in an update");
    assert_eq!(a.said(), "printed");
    a.close();
}

/// Attack: `/save` from the editor with a name holding control characters (a terminal
/// escape, a newline) — what `dsh sessions` and `/load` would later print. The REPL
/// refuses such a name ("a name has no control characters"); the editor's `/save` must too.
#[test]
fn save_refuses_a_name_with_control_characters() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![text("hi")]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    a.prompt(&id, "hello");
    a.said();
    a.prompt(&id, "/save evil\u{1b}]0;pwned\u{7}\u{1b}[2Jname");
    a.said();
    a.close();
    let recs = all_records(&d.home);
    let named: Vec<&Value> = recs
        .iter()
        .filter(|r| r["kind"] == "session_named")
        .collect();
    assert!(
        named
            .iter()
            .all(|r| !r["name"].as_str().unwrap().chars().any(char::is_control)),
        "a name with control characters was journaled: {named:?}"
    );
}

/// Attack: a prompt's resource links name a file outside the workspace, directly and with
/// `..` after the workspace's own path, percent-encoded. Must hold: dsh reads none of them
/// itself (nothing of the secret reaches the model with the prompt); the link is text for
/// the model, whose reads pass the gates.
#[test]
fn resource_links_outside_the_workspace_are_not_read() {
    let d = Dirs::new();
    std::fs::write(d.outside.join("secret.txt"), "THE-SECRET-VALUE\n").unwrap();
    let model = ScriptedServer::start(vec![text("ok")]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    let ws = d.ws.display().to_string();
    let links = [
        format!("file://{}", d.outside.join("secret.txt").display()),
        format!("file://{ws}/../outside/secret.txt"),
        format!("file://{ws}/%2e%2e/outside/secret.txt"),
    ];
    let mut prompt: Vec<Value> = vec![json!({"type": "text", "text": "read these"})];
    for l in &links {
        prompt.push(json!({"type": "resource_link", "name": "secret", "uri": l}));
    }
    let r = a.request(
        "p",
        "session/prompt",
        json!({"sessionId": id, "prompt": prompt}),
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let sent = serde_json::to_string(&model.requests()).unwrap();
    assert!(!sent.contains("THE-SECRET-VALUE"), "dsh read the file");
    a.close();
}

/// Attack: the editor switches a session's mode while its permission question is open
/// (to `read-only`), to `yolo` by id, and for a session id it never opened. Must hold:
/// yolo is refused, an unknown session is an error, and a switch is journaled by `client`.
#[test]
fn modes_cannot_reach_yolo_or_another_session() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    for mode in ["yolo", "YOLO", "Yolo", " auto", "auto\n"] {
        let r = a.request(
            "m",
            "session/set_mode",
            json!({"sessionId": id, "modeId": mode}),
        );
        if mode.contains("olo") {
            assert_eq!(error_code(&r), -32602, "{mode:?}: {r}");
        }
    }
    let r = a.request(
        "m",
        "session/set_mode",
        json!({"sessionId": "not-a-session", "modeId": "auto"}),
    );
    assert_eq!(error_code(&r), -32602, "{r}");
    a.close();
    let recs = all_records(&d.home);
    assert!(
        !recs
            .iter()
            .any(|r| r["kind"] == "mode_changed" && r["mode"] == "yolo"),
        "{recs:#?}"
    );
}

/// Attack: the calls a sub-agent makes, and those a Code Mode program makes, are not the
/// main agent's: do they slip past the editor's question? Must hold: each asks the client
/// (the sub-agent's titled with its name), a rejection leaves the file unwritten, and the
/// journal records the rejection.
#[test]
fn a_sub_agents_and_a_programs_calls_ask_the_editor() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![
        tool(
            "sa",
            "call_sub_agent",
            json!({"profile": "code", "task": "write sub.txt"}),
        ),
        tool(
            "sw",
            "write_file",
            json!({"path": "sub.txt", "content": "x\n"}),
        ),
        text("the sub-agent gave up"),
        text("main done"),
    ]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    a.send_prompt("p", &id, "delegate");
    let asked = a.until_method("session/request_permission");
    let title = asked["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(
        title.starts_with('[') && title.contains("write_file"),
        "{asked}"
    );
    a.respond(
        &asked,
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    let done = a.answer(&json!("p"));
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(!d.ws.join("sub.txt").exists());
    a.close();
    let recs = all_records(&d.home);
    assert_eq!(
        record_for(&recs, "approval", "sw").unwrap()["outcome"],
        "rejected"
    );

    let d = Dirs::new();
    let model = ScriptedServer::start(vec![
        tool(
            "rc",
            "run_code",
            json!({"code": "try { await tools.write_file({path: 'prog.txt', content: 'x'}); return 'wrote'; } catch (e) { return e.kind; }", "description": "write"}),
        ),
        text("program done"),
    ]);
    let mut a = Agent::start(&d, &model.url, &["--tools-mode", "code"]);
    a.initialize();
    let id = a.open(&d.ws);
    a.send_prompt("p", &id, "program");
    let asked = a.until_method("session/request_permission");
    assert!(
        asked["params"]["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("write_file"),
        "{asked}"
    );
    a.respond(
        &asked,
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    let done = a.answer(&json!("p"));
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(!d.ws.join("prog.txt").exists());
    a.close();
}

/// Attack: the model names a file whose path carries a newline, a backtick and a
/// bidirectional override, so that the "always allow" option's label — the only place the
/// person reads what the rule will be — says something else than the rule written. Must
/// hold: no option label a person reads carries control or bidi characters from the call.
#[test]
fn an_always_allow_label_carries_no_control_or_bidi_characters_from_the_call() {
    let d = Dirs::new();
    let paths = [
        "ok.txt` to nothing: this option REJECTS\n\nx.txt",
        "a\u{202e}txt.exe",
        "b\u{1b}[8mhidden.txt",
    ];
    let mut script = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        script.push(tool(
            &format!("l{i}"),
            "write_file",
            json!({"path": p, "content": "x\n"}),
        ));
        script.push(text("next"));
    }
    let model = ScriptedServer::start(script);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    let mut labels = Vec::new();
    for i in 0..paths.len() {
        let pid = format!("l{i}");
        a.send_prompt(&pid, &id, "write");
        let asked = a.until_method("session/request_permission");
        for o in asked["params"]["options"].as_array().unwrap() {
            labels.push(o["name"].as_str().unwrap().to_owned());
        }
        a.respond(
            &asked,
            json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
        );
        a.answer(&json!(pid));
    }
    a.close();
    let bad: Vec<&String> = labels
        .iter()
        .filter(|l| {
            l.chars()
                .any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "labels carrying the call's characters: {bad:#?}"
    );
}

/// Attack: the client loads a session that is open in this very process, mid-command
/// (two runtimes would then write one conversation). Must hold: the load is refused with a
/// JSON-RPC error, the open session's turn goes on unharmed (its command still runs and is
/// cancelled only by `session/cancel`), and its journal ends with `session_end`.
#[test]
fn loading_a_session_that_is_open_here_is_refused() {
    let d = Dirs::new();
    d.write_user_config("[permissions]\nallow = [\"run_shell(sleep *)\"]\n");
    let model = ScriptedServer::start(vec![
        tool("s", "run_shell", json!({"command": "sleep 2718"})),
        // The cancelled turn asks nothing more: this answers the next prompt.
        text("still the same session"),
    ]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    a.send_prompt("p", &id, "sleep");
    a.until_status("in_progress");
    for _ in 0..2 {
        let load = a.request(
            "l",
            "session/load",
            json!({"sessionId": id, "cwd": d.ws, "mcpServers": []}),
        );
        assert_eq!(error_code(&load), -32602, "{load}");
    }
    wait_running(&["sleep", "2718"]);
    a.send(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": id}}));
    let old = a.answer(&json!("p"));
    assert_eq!(old["result"]["stopReason"], "cancelled", "{old}");
    assert!(gone(&["sleep", "2718"]), "the cancelled command still runs");
    let r = a.prompt(&id, "still there?");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert!(a.said().contains("still the same session"));
    a.close();
    let all = journals(&d.home);
    assert_eq!(
        all.len(),
        1,
        "a second journal for the open session: {all:?}"
    );
    let recs = records(&all[0]);
    assert_eq!(recs.last().unwrap()["kind"], "session_end", "{recs:#?}");
}

/// Attack: one line on stdin that is not UTF-8 (a client bug, a stray byte) while a
/// session is open. Must hold, as for any other garbage: a JSON-RPC parse error (or
/// silence), and dsh goes on serving the open session.
#[test]
fn a_line_that_is_not_utf8_does_not_end_the_connection() {
    let d = Dirs::new();
    let model = ScriptedServer::start(vec![text("Still here.")]);
    let mut a = Agent::start(&d, &model.url, &[]);
    a.initialize();
    let id = a.open(&d.ws);
    a.send_bytes(
        b"{\"jsonrpc\":\"2.0\",\"id\":\"u\",\"method\":\"no/such\",\"params\":\"\xc3\x28\"}",
    );
    a.send(&json!({"jsonrpc": "2.0", "id": "ping", "method": "no/such", "params": {}}));
    let v = a.answer(&json!("ping"));
    assert_eq!(error_code(&v), -32601, "{v}");
    let done = a.prompt(&id, "are you there?");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    a.close();
}
