//! MCP servers' tools through the real `dsh` binary: configured under `[mcp.servers]`, they
//! pass the same gates as built-in tools (SPEC A10, P2): they ask unless a rule allows them,
//! deny rules hold, the read-only mode runs only what the server says reads *and* a rule
//! allows, `auto` never lifts them; an untrusted project's server never starts; a server
//! gets the command environment, never dsh's keys; a slow server does not hold up `exec`.
//! The server is a real process (dsh-mcp's tests/servers/mini.py, plain Python 3).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::{Dirs, json_lines, kind, records, scripted_exec, stderr};
use dsh_testkit::model_server::{Reply, ScriptedServer};
use serde_json::{Value, json};

fn mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dsh-mcp/tests/servers/mini.py")
}

/// Where the server logs what happened to it.
fn events(d: &Dirs) -> PathBuf {
    d.root().join("mini-events.log")
}

/// `[mcp.servers.mini]` with `extra` lines in its table and `env` beside its log.
fn server_table_with(d: &Dirs, extra: &str, env: &str) -> String {
    format!(
        "[mcp.servers.mini]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}]\nenv = {{ MINI_LOG = {:?}{env} }}\n{extra}\n",
        mini().display().to_string(),
        events(d).display().to_string()
    )
}

fn server_table(d: &Dirs, extra: &str) -> String {
    server_table_with(d, extra, "")
}

fn configured(permissions: &str) -> Dirs {
    let d = Dirs::new();
    d.write_user_config(&format!("{permissions}\n{}", server_table(&d, "")));
    d
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "args": args})
}

fn batch(d: &Dirs, extra: &[&str], calls: &[Value]) -> Vec<Value> {
    let out = d.batch_output(calls, extra, &[("OPENAI_API_KEY", "sk-secret-key")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_lines(&out)
}

#[test]
fn an_mcp_tool_asks_unless_a_rule_allows_it_and_a_deny_rule_holds() {
    let d = configured("");
    let r = batch(&d, &[], &[call("mcp__mini__echo", json!({"text": "hi"}))]);
    assert_eq!(kind(&r[0]), "unavailable", "{r:?}");
    let text = r[0]["content"].as_str().unwrap();
    assert!(text.contains(r#"allow = ["mcp__mini__echo"]"#), "{text}");

    let d = configured("[permissions]\nallow = [\"mcp__mini__echo\"]");
    let r = batch(
        &d,
        &[],
        &[
            call("mcp__mini__echo", json!({"text": "hi"})),
            call("mcp__mini__count", json!({})),
        ],
    );
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(r[0]["value"], json!({"echo": "hi"}));
    assert_eq!(kind(&r[1]), "unavailable", "a rule names one tool: {r:?}");

    // A server-wide allow, and a deny that outranks it.
    let d = configured("[permissions]\nallow = [\"mcp__mini__*\"]\ndeny = [\"mcp__mini__count\"]");
    let r = batch(
        &d,
        &["--yolo"],
        &[
            call("mcp__mini__echo", json!({"text": "hi"})),
            call("mcp__mini__count", json!({})),
        ],
    );
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(kind(&r[1]), "denied", "{r:?}");
    assert_eq!(r[1]["decided_by"]["policy"], "permissions");
    assert!(
        !std::fs::read_to_string(events(&d))
            .unwrap()
            .contains("count")
    );
}

#[test]
fn yolo_runs_an_mcp_tool_no_rule_names() {
    let d = configured("");
    let r = batch(&d, &["--yolo"], &[call("mcp__mini__count", json!({}))]);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(r[0]["content"], "1");
}

#[test]
fn read_only_mode_runs_only_what_the_server_says_reads_and_a_rule_allows() {
    let d = configured("[permissions]\nallow = [\"mcp__mini__echo\", \"mcp__mini__count\"]");
    let r = batch(
        &d,
        &["--mode", "read-only"],
        &[
            call("mcp__mini__echo", json!({"text": "hi"})),
            call("mcp__mini__count", json!({})),
        ],
    );
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(kind(&r[1]), "denied", "{r:?}");
    let why = r[1]["decided_by"]["reason"].as_str().unwrap();
    assert!(
        why.contains("read-only mode") && why.contains("does not say it only reads"),
        "{why}"
    );

    // The server's word alone is not enough.
    let d = configured("");
    let r = batch(
        &d,
        &["--mode", "read-only"],
        &[call("mcp__mini__echo", json!({"text": "hi"}))],
    );
    assert_eq!(kind(&r[0]), "denied", "{r:?}");
    let why = r[0]["decided_by"]["reason"].as_str().unwrap();
    assert!(why.contains("its word alone"), "{why}");
}

#[test]
fn auto_mode_never_lifts_an_mcp_tool_and_check_says_what_batch_does() {
    let d = configured("");
    let r = batch(
        &d,
        &["--mode", "auto"],
        &[call("mcp__mini__count", json!({}))],
    );
    assert_eq!(kind(&r[0]), "unavailable", "{r:?}");

    let verdict = common::check(&d, &[], "mcp__mini__echo", json!({"text": "x"}));
    assert_eq!(verdict["decision"], "ask", "{verdict}");
    let d = configured("[permissions]\nallow = [\"mcp__mini__*\"]");
    let verdict = common::check(&d, &[], "mcp__mini__echo", json!({"text": "x"}));
    assert_eq!(verdict["decision"], "allow", "{verdict}");
    let verdict = common::check(&d, &["--mode", "read-only"], "mcp__mini__count", json!({}));
    assert_eq!(verdict["decision"], "deny", "{verdict}");
}

#[test]
fn an_untrusted_projects_server_never_starts_and_a_trusted_ones_waits_for_approval() {
    let d = Dirs::new();
    d.project_config(&server_table(&d, ""));
    let out = d.batch_output(
        &[call("mcp__mini__echo", json!({"text": "x"}))],
        &["--yolo"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(kind(&json_lines(&out)[0]), "unknown_tool");
    assert!(
        stderr(&out).contains("mcp.servers (mini)"),
        "{}",
        stderr(&out)
    );
    assert!(!events(&d).exists(), "the untrusted project's server ran");

    // Trusted: the project's server still runs a program the repository chose, so it waits
    // for a person's approval of its command line.
    let out = d.dsh(&["trust"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = d.batch_output(
        &[call("mcp__mini__echo", json!({"text": "x"}))],
        &["--yolo"],
        &[],
    );
    assert_eq!(kind(&json_lines(&out)[0]), "unknown_tool");
    assert!(
        stderr(&out).contains("run `dsh mcp approve mini`"),
        "{}",
        stderr(&out)
    );
    assert!(!events(&d).exists(), "the project's server ran unapproved");

    // Approved by a person, it runs.
    let out = d.dsh(&["mcp", "approve", "mini"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = d.batch_output(
        &[call("mcp__mini__echo", json!({"text": "x"}))],
        &["--yolo"],
        &[],
    );
    assert_eq!(kind(&json_lines(&out)[0]), "ok", "{}", stderr(&out));
}

/// A trusted workspace with `.mcp.json` naming the mini server, its environment reading
/// `DSH_T_VAR`, with `extra` arguments.
fn mcp_json(d: &Dirs, extra: &[&str]) {
    let mut args = vec![mini().display().to_string()];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let file = json!({"mcpServers": {
        "mini": {
            "command": "/usr/bin/python3",
            "args": args,
            "env": {"MINI_LOG": events(d).display().to_string(), "FROM_ENV": "${DSH_T_VAR}"}
        },
        "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"}
    }});
    std::fs::write(
        d.ws.join(".mcp.json"),
        serde_json::to_string_pretty(&file).unwrap(),
    )
    .unwrap();
}

#[test]
fn a_projects_mcp_json_server_starts_once_approved_and_a_change_asks_again() {
    let d = Dirs::new();
    mcp_json(&d, &[]);
    // Untrusted: ignored, with the notice.
    let calls = [call("mcp__mini__env", json!({}))];
    let env = [("DSH_T_VAR", "from-the-env")];
    let out = d.batch_output(&calls, &["--yolo"], &env);
    assert_eq!(kind(&json_lines(&out)[0]), "unknown_tool");
    assert!(
        stderr(&out).contains("mcp.servers (mini)"),
        "{}",
        stderr(&out)
    );
    assert!(!events(&d).exists());

    assert_eq!(d.dsh(&["trust"]).output().unwrap().status.code(), Some(0));
    let out = d.batch_output(&calls, &["--yolo"], &env);
    assert_eq!(kind(&json_lines(&out)[0]), "unknown_tool");
    let err = stderr(&out);
    assert!(err.contains("dsh mcp approve mini"), "{err}");
    assert!(
        err.contains("\"old\" left out: the SSE transport is not supported"),
        "{err}"
    );
    assert!(!events(&d).exists(), "started before a person approved it");
    let listed = common::stdout(&d.dsh(&["mcp", "list"]).output().unwrap());
    assert!(
        listed.contains("[needs approval: dsh mcp approve mini]"),
        "{listed}"
    );

    let out = d.dsh(&["mcp", "approve", "mini"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = common::stdout(&out);
    assert!(
        said.contains("FROM_ENV (from $DSH_T_VAR)"),
        "the approval names what it reads: {said}"
    );
    let user = std::fs::read_to_string(d.cfg.join("config.toml")).unwrap();
    assert!(user.contains("# MCP server mini of "), "{user}");

    let out = d.batch_output(&calls, &["--yolo"], &env);
    let r = json_lines(&out);
    assert_eq!(kind(&r[0]), "ok", "{}", stderr(&out));
    let names: Vec<&str> = r[0]["content"].as_str().unwrap().split(' ').collect();
    assert!(names.contains(&"FROM_ENV"), "{names:?}");
    let listed = common::stdout(&d.dsh(&["mcp", "list"]).output().unwrap());
    assert!(listed.contains("[approved]"), "{listed}");

    // A `git pull` that changes its command line: not started until approved again.
    mcp_json(&d, &["--changed"]);
    let before = std::fs::read_to_string(events(&d)).unwrap();
    let out = d.batch_output(&calls, &["--yolo"], &env);
    assert_eq!(
        kind(&json_lines(&out)[0]),
        "unknown_tool",
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(events(&d)).unwrap(), before);
}

#[test]
fn the_agent_cannot_plant_an_mcp_json() {
    let d = Dirs::new();
    let r = batch(
        &d,
        &["--yolo"],
        &[call(
            "write_file",
            json!({"path": ".mcp.json", "content": "{\"mcpServers\": {}}"}),
        )],
    );
    assert_eq!(kind(&r[0]), "denied", "{r:?}");
    assert!(!d.ws.join(".mcp.json").exists());
    let r = batch(
        &d,
        &["--yolo"],
        &[common::shell_call("echo '{}' > .mcp.json")],
    );
    assert_eq!(kind(&r[0]), "denied", "{r:?}");
    assert!(!d.ws.join(".mcp.json").exists());
}

#[test]
fn a_server_gets_the_command_environment_never_dshs_keys() {
    let d = configured("[permissions]\nallow = [\"mcp__mini__env\"]");
    let r = batch(&d, &[], &[call("mcp__mini__env", json!({}))]);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    let names: Vec<&str> = r[0]["content"].as_str().unwrap().split(' ').collect();
    assert!(!names.contains(&"OPENAI_API_KEY"), "{names:?}");
    assert!(!names.contains(&"DSH_HOME"), "{names:?}");
    for wanted in ["PATH", "HOME", "TMPDIR", "MINI_LOG"] {
        assert!(names.contains(&wanted), "{wanted} missing: {names:?}");
    }
}

#[test]
fn a_server_that_cannot_start_leaves_the_others_working_and_its_stderr_is_logged() {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__mini__*\", \"mcp__broken__*\"]\n{}\n[mcp.servers.broken]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}]\nenv = {{ MINI_FAIL_START = \"no credentials\" }}\n",
        server_table(&d, ""),
        mini().display().to_string()
    ));
    let r = batch(
        &d,
        &[],
        &[
            call("mcp__mini__count", json!({})),
            call("mcp__broken__count", json!({})),
        ],
    );
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(kind(&r[1]), "unknown_tool", "{r:?}");
    let logs: Vec<PathBuf> = walk(&d.home.join("logs"));
    let broken = logs.iter().find(|p| p.ends_with("mcp/broken.log")).unwrap();
    assert!(
        std::fs::read_to_string(broken)
            .unwrap()
            .contains("no credentials")
    );
    let ok = logs.iter().find(|p| p.ends_with("mcp/mini.log")).unwrap();
    assert!(
        std::fs::read_to_string(ok)
            .unwrap()
            .contains("mini started pid=")
    );
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_server_that_hangs_at_start_does_not_hold_up_exec() {
    let d = Dirs::new();
    d.write_user_config(&server_table_with(
        &d,
        "startup_timeout_s = 600",
        ", MINI_HOLD = \"1\"",
    ));
    let model = ScriptedServer::start(vec![Reply::text("done")]);
    let mut child = scripted_exec(&d, &model.url, &[], "hello").spawn().unwrap();
    // A hang detector, not a timing claim: waiting for the server would take 600 s.
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "exec waited for the server"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    let tools = model.requests()[0]["tools"].to_string();
    assert!(!tools.contains("mcp__"), "{tools}");
    assert!(tools.contains("read_file"));
    // The journal closed normally, and the server was stopped with the session.
    let journal = common::journals(&d.home).remove(0);
    assert_eq!(records(&journal).last().unwrap()["kind"], "session_end");
}

#[test]
fn mcp_add_list_and_remove_edit_the_user_config_and_keep_its_comments() {
    let d = Dirs::new();
    d.write_user_config("# mine\n[limits]\nmax_steps = 50  # enough\n");
    let out = d
        .dsh(&[
            "mcp",
            "add",
            "mini",
            "--env",
            "A=1",
            "--",
            "/usr/bin/python3",
            &mini().display().to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(common::stdout(&out).contains("added MCP server mini"));
    let text = std::fs::read_to_string(d.cfg.join("config.toml")).unwrap();
    assert!(
        text.starts_with("# mine\n[limits]\nmax_steps = 50  # enough\n"),
        "{text}"
    );

    let out = d.dsh(&["mcp", "list"]).output().unwrap();
    let listed = common::stdout(&out);
    assert!(listed.starts_with("mini  /usr/bin/python3 "), "{listed}");
    assert!(
        listed.contains("config.toml:5: mcp.servers.mini"),
        "{listed}"
    );

    // The added server works, its tools asking until a rule allows them.
    let r = batch(&d, &["--yolo"], &[call("mcp__mini__env", json!({}))]);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert!(
        r[0]["content"]
            .as_str()
            .unwrap()
            .split(' ')
            .any(|n| n == "A")
    );

    let out = d.dsh(&["mcp", "add", "mini", "--", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("configured already"),
        "{}",
        stderr(&out)
    );

    let out = d.dsh(&["mcp", "remove", "mini"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(d.cfg.join("config.toml")).unwrap();
    assert_eq!(text, "# mine\n[limits]\nmax_steps = 50  # enough\n");
    let out = d.dsh(&["mcp", "remove", "mini"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn exec_says_which_servers_were_not_started_and_why() {
    let d = Dirs::new();
    d.project_config(&server_table(&d, ""));
    assert_eq!(d.dsh(&["trust"]).output().unwrap().status.code(), Some(0));
    let model = ScriptedServer::start(vec![Reply::text("done")]);
    let out = scripted_exec(&d, &model.url, &[], "hello")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("dsh: MCP server mini not started: named by the project"),
        "{err}"
    );
    assert!(err.contains("dsh mcp approve mini"), "{err}");
    assert!(!events(&d).exists());
}
