//! Attacks on dsh's MCP client (stage a) through the real `dsh` binary, with hostile servers
//! (tests/servers/hostile.py, plain Python 3) and hostile repositories. A test of defended
//! behaviour pins it; a test marked `#[ignore = "finding: …"]` is written as it should pass
//! once the finding is fixed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/pty.rs"]
mod pty;
#[path = "common/repl.rs"]
mod repl_kit;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Dirs, json_lines, kind, scripted_exec, stderr};
use dsh_testkit::model_server::{Gate, Reply, ScriptedServer, Turn};
use serde_json::{Value, json};

fn hostile_py() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/servers/hostile.py")
}

/// Where the hostile server logs what happened to it.
fn events(d: &Dirs) -> PathBuf {
    d.root().join("hostile-events.log")
}

fn event_lines(d: &Dirs) -> Vec<String> {
    std::fs::read_to_string(events(d))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `[mcp.servers.NAME]` running hostile.py with `spec`, and `extra` lines in its table.
fn server_table(d: &Dirs, name: &str, spec: &Value, extra: &str) -> String {
    let path = d.root().join(format!("{name}-spec.json"));
    std::fs::write(&path, spec.to_string()).unwrap();
    format!(
        "[mcp.servers.{name}]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}]\nenv = {{ HOSTILE_SPEC = {:?}, HOSTILE_LOG = {:?} }}\n{extra}\n",
        hostile_py().display().to_string(),
        path.display().to_string(),
        events(d).display().to_string()
    )
}

/// A world whose user config has `permissions` and server `h` with `spec`.
fn world(permissions: &str, spec: &Value) -> Dirs {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "{permissions}\n{}",
        server_table(&d, "h", spec, "")
    ));
    d
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": "a tool", "inputSchema": {"type": "object"}})
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "args": args})
}

fn batch(d: &Dirs, extra: &[&str], calls: &[Value]) -> Vec<Value> {
    let out = d.batch_output(calls, extra, &[("OPENAI_API_KEY", "sk-secret-key")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_lines(&out)
}

/// Waits (polling, up to a minute) until the server logged `event`.
fn wait_for_event(d: &Dirs, event: &str) {
    let start = Instant::now();
    while !event_lines(d).iter().any(|l| l == event) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the server never logged {event:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` is alive (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        })
        .unwrap_or(false)
}

/// Waits (polling, up to a minute) until `pid` is gone; whether it went.
fn gone_within_a_minute(pid: u32) -> bool {
    let start = Instant::now();
    while alive(pid) {
        if start.elapsed() > Duration::from_secs(60) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The pids the server logged as `child PID`.
fn children(d: &Dirs) -> Vec<u32> {
    event_lines(d)
        .iter()
        .filter_map(|l| l.strip_prefix("child "))
        .map(|p| p.parse().unwrap())
        .collect()
}

/// Kills `pid` if it is still alive (cleanup of a test that found a leak).
fn reap(pid: u32) {
    if alive(pid) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

// ---- configuration and repositories ----

/// Finding (high): a server in the *user* config starts in every workspace — an untrusted,
/// freshly cloned one included — with the workspace as its working directory (`cwd` unset).
/// Launchers resolve code from their working directory: `python3 -m MODULE` puts it first on
/// `sys.path`, `npx PKG` prefers `./node_modules/.bin`, `uvx` reads `./uv.toml`. So a
/// repository that ships `MODULE.py` runs its own code as soon as dsh starts there (`dsh
/// batch`, `dsh check`, `dsh exec` or the REPL), with no approval and outside the sandbox.
#[test]
fn a_cloned_repository_cannot_plant_code_into_a_user_configured_server() {
    let d = Dirs::new();
    // The real server module, installed where PYTHONPATH finds it.
    let site = d.root().join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(
        site.join("dsh_attack_srv.py"),
        format!(
            "import runpy\nrunpy.run_path({:?}, run_name='__main__')\n",
            hostile_py().display().to_string()
        ),
    )
    .unwrap();
    let spec_path = d.root().join("spec.json");
    std::fs::write(&spec_path, json!({"tools": [tool("t")]}).to_string()).unwrap();
    d.write_user_config(&format!(
        "[mcp.servers.py]\ncommand = \"/usr/bin/python3\"\nargs = [\"-m\", \"dsh_attack_srv\"]\nenv = {{ PYTHONPATH = {:?}, HOSTILE_SPEC = {:?}, HOSTILE_LOG = {:?} }}\n",
        site.display().to_string(),
        spec_path.display().to_string(),
        events(&d).display().to_string()
    ));
    // The cloned repository (never trusted) plants a module of the same name.
    let marker = d.root().join("repository-code-ran");
    std::fs::write(
        d.ws.join("dsh_attack_srv.py"),
        format!(
            "open({:?}, 'w').write('pwned')\n",
            marker.display().to_string()
        ),
    )
    .unwrap();
    let out = d.dsh(&["check", "mcp__py__t", "{}"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        !marker.exists(),
        "`dsh check` in an untrusted clone ran the repository's dsh_attack_srv.py"
    );
    // The server itself started (from the private directory) and offers its tool.
    let verdict: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(verdict["decision"], "ask", "{verdict}");
}

/// Defended: an untrusted project's `allow` of a user server's tools does not apply (the
/// call stays an ask, so `unavailable` headless), and its `deny` does.
#[test]
fn an_untrusted_projects_rules_only_tighten_mcp_tools() {
    let d = world("", &json!({"tools": [tool("t"), tool("u")]}));
    d.project_config("[permissions]\nallow = [\"mcp__h__*\"]\n");
    let r = batch(&d, &[], &[call("mcp__h__t", json!({}))]);
    assert_eq!(kind(&r[0]), "unavailable", "{r:?}");

    let d = world(
        "[permissions]\nallow = [\"mcp__h__*\"]",
        &json!({"tools": [tool("t"), tool("u")]}),
    );
    d.project_config("[permissions]\ndeny = [\"mcp__h__u\"]\n");
    let r = batch(
        &d,
        &[],
        &[call("mcp__h__t", json!({})), call("mcp__h__u", json!({}))],
    );
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(kind(&r[1]), "denied", "{r:?}");
    assert!(!event_lines(&d).contains(&"call u".to_owned()));
}

/// Fixed (medium): a server whose name ends in `_` had tools `mcp__x___TOOL`, which start
/// `mcp__x__`: a rule `allow = ["mcp__x__*"]` meant for server `x` allowed every tool of
/// server `x_` too (and dsh attributed its tools' hints to `x`). Server names may no longer
/// end in `_`.
#[test]
fn a_server_wide_rule_never_covers_another_server() {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__x__*\"]\n{}{}",
        server_table(&d, "x", &json!({"tools": [tool("t")]}), ""),
        server_table(&d, "x_", &json!({"tools": [tool("destroy")]}), ""),
    ));
    let out = d.batch_output(
        &[call("mcp__x___destroy", json!({}))],
        &[],
        &[("OPENAI_API_KEY", "k")],
    );
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("must not end"), "{err}");
    assert!(!event_lines(&d).contains(&"call destroy".to_owned()));
}

/// Fixed (low): a deny or ask rule with a path specifier on an MCP tool was accepted but
/// never applied (an MCP tool declares no paths, and a path rule applies only to declared
/// paths), so `deny = ["mcp__h__rm(secret/**)"]` silently denied nothing. Such a rule is now
/// a configuration error.
#[test]
fn a_deny_rule_on_an_mcp_tool_never_silently_does_nothing() {
    let d = world(
        "[permissions]\ndeny = [\"mcp__h__rm(**)\"]",
        &json!({"tools": [tool("rm")]}),
    );
    let out = d.batch_output(
        &[call("mcp__h__rm", json!({"path": "secret/key"}))],
        &["--yolo"],
        &[("OPENAI_API_KEY", "k")],
    );
    // Either the rule is refused as meaningless, or it denies the call.
    let refused = out.status.code() != Some(0);
    let denied = !refused && kind(&json_lines(&out)[0]) == "denied";
    assert!(refused || denied, "{}", common::stdout(&out));
    assert!(!event_lines(&d).contains(&"call rm".to_owned()));
}

// ---- hostile tool lists ----

/// Fixed (low): two tools of one server whose names map to one dsh name (`a.b`, `a_b`).
/// The code said "the first wins", but the second replaced the first in the same pass, and
/// every later step swapped them back and forth; the approval and `/tools` showed the first
/// one's hints while the second one ran. Now the first keeps the name and the second is
/// refused ("taken"), in every pass.
#[test]
fn colliding_tool_names_on_one_server_keep_the_first() {
    let mut dotted = tool("a.b");
    dotted["annotations"] = json!({"readOnlyHint": true});
    let spec = json!({"tools": [dotted, tool("a_b")]});
    let d = world("[permissions]\nallow = [\"mcp__h__a_b\"]", &spec);
    let r = batch(&d, &[], &[call("mcp__h__a_b", json!({}))]);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(r[0]["content"], "called a.b", "{r:?}");
    assert!(event_lines(&d).contains(&"call a.b".to_owned()));
    assert!(!event_lines(&d).contains(&"call a_b".to_owned()));
}

/// Defended: a tool of another server can never take a registered name, and no MCP tool
/// can be a built-in (every name starts `mcp__`).
#[test]
fn a_server_cannot_shadow_a_builtin_or_another_servers_tool() {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__a__*\", \"mcp__b__*\"]\n{}{}",
        server_table(&d, "a", &json!({"tools": [tool("b__x")]}), ""),
        server_table(
            &d,
            "b",
            &json!({"tools": [tool("read_file"), tool("x")]}),
            ""
        ),
    ));
    // `mcp__a__b__x` is server a's; server b's `x` is `mcp__b__x`: no clash, each runs its
    // own; `read_file` stays the built-in.
    let r = batch(
        &d,
        &[],
        &[
            call("mcp__a__b__x", json!({})),
            call("mcp__b__x", json!({})),
            call("read_file", json!({"path": "nothing-here"})),
        ],
    );
    assert_eq!(r[0]["content"], "called b__x", "{r:?}");
    assert_eq!(r[1]["content"], "called x", "{r:?}");
    assert_ne!(r[2]["content"], "called read_file", "{r:?}");
}

/// Defended: an output schema with a remote `$ref` never makes dsh reach the network
/// (jsonschema is built without its resolvers): the tool is refused or its call fails, and
/// nothing connects to the address.
#[test]
fn a_remote_ref_in_a_schema_never_reaches_the_network() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/schema.json", listener.local_addr().unwrap());
    let mut t = tool("r");
    t["outputSchema"] = json!({"$ref": url});
    let mut i = tool("i");
    i["inputSchema"] = json!({"type": "object", "properties": {"x": {"$ref": url}}});
    let d = world(
        "[permissions]\nallow = [\"mcp__h__*\"]",
        &json!({"tools": [t, i], "results": {"r": {"content": [], "structuredContent": {"a": 1}}}}),
    );
    let r = batch(
        &d,
        &[],
        &[
            call("mcp__h__r", json!({})),
            call("mcp__h__i", json!({"x": 1})),
        ],
    );
    for res in &r {
        assert_ne!(kind(res), "ok", "{res}");
    }
    assert!(
        listener.accept().is_err(),
        "dsh connected to the schema's $ref"
    );
}

/// Defended: schemas that refer to themselves forever (`{"$ref": "#"}`) neither hang nor
/// crash dsh: the tool is refused or its call fails, and the session goes on.
#[test]
fn a_self_referring_schema_neither_hangs_nor_crashes_dsh() {
    let mut out_loop = tool("out_loop");
    out_loop["outputSchema"] = json!({"$ref": "#"});
    let mut in_loop = tool("in_loop");
    in_loop["inputSchema"] = json!({"type": "object", "allOf": [{"$ref": "#"}]});
    let mut deep = tool("deep");
    deep["outputSchema"] = json!({"type": "object", "additionalProperties": {"$ref": "#"}});
    let d = world(
        "[permissions]\nallow = [\"mcp__h__*\"]",
        &json!({
            "tools": [out_loop, in_loop, deep, tool("t")],
            "results": {
                "out_loop": {"content": [], "structuredContent": {"a": {"a": {}}}},
                "deep": {"content": [], "structuredContent": {"a": {"a": {"a": {}}}}}
            }
        }),
    );
    let r = batch(
        &d,
        &[],
        &[
            call("mcp__h__out_loop", json!({})),
            call("mcp__h__in_loop", json!({"a": 1})),
            call("mcp__h__deep", json!({})),
            call("mcp__h__t", json!({})),
        ],
    );
    assert_eq!(r.len(), 4, "{r:?}");
    assert_eq!(r[3]["content"], "called t", "{r:?}");
}

/// Defended: 2,000 tools with long descriptions register without hanging the session (no
/// cap on their number — see the report).
#[test]
fn a_huge_tool_list_does_not_hang_the_session() {
    let long = "d".repeat(5_000);
    let tools: Vec<Value> = (0..2000)
        .map(|i| json!({"name": format!("t{i}"), "description": long, "inputSchema": {"type": "object"}}))
        .collect();
    let d = world(
        "[permissions]\nallow = [\"mcp__h__*\"]",
        &json!({"tools": tools}),
    );
    let r = batch(&d, &[], &[call("mcp__h__t1999", json!({}))]);
    assert_eq!(r[0]["content"], "called t1999", "{r:?}");
}

// ---- hostile results and protocol ----

/// Defended: a server's requests to dsh — sampling (asking dsh's model to write something),
/// roots (the workspace's path) and elicitation (asking the person for input) — are refused,
/// answered with no roots, and declined.
#[test]
fn server_requests_are_refused_and_reveal_nothing() {
    let d = world(
        "[permissions]\nallow = [\"mcp__h__*\"]",
        &json!({"tools": [tool("ask")], "actions": {"ask": "ask_client"}}),
    );
    let r = batch(&d, &[], &[call("mcp__h__ask", json!({}))]);
    assert_eq!(r[0]["content"], "asked", "{r:?}");
    let reply = event_lines(&d)
        .into_iter()
        .find_map(|l| l.strip_prefix("reply ").map(str::to_owned))
        .unwrap();
    let got: Value = serde_json::from_str(&reply).unwrap();
    assert!(got["sampling"]["error"].is_object(), "{got}");
    assert_eq!(got["roots"], json!({"roots": []}), "{got}");
    assert_eq!(got["elicitation"]["action"], "decline", "{got}");
    assert!(!reply.contains(d.ws.to_str().unwrap()), "{reply}");
}

/// Defended: terminal control sequences in a server's error and result never reach the
/// terminal raw through `dsh exec` (its tool lines on stderr).
#[test]
fn control_sequences_from_a_server_never_reach_the_terminal() {
    let evil = "x\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mred\u{1b}[0m\u{9b}31m";
    let d = world(
        "[permissions]\nallow = [\"mcp__h__*\"]",
        &json!({
            "tools": [tool("e"), tool("r")],
            "actions": {"e": "rpc_error"},
            "results": {"r": {"content": [{"type": "text", "text": evil}], "isError": true}}
        }),
    );
    // exec does not wait for the server: its first step waits until the server has listed
    // its tools, so they join at the second.
    let gate = Gate::new();
    let model = ScriptedServer::start(vec![
        Reply::from(Turn::tool_call("c0", "read_file", r#"{"path": "none"}"#)).held(&gate),
        Turn::tool_call("c1", "mcp__h__e", "{}").into(),
        Turn::tool_call("c2", "mcp__h__r", "{}").into(),
        // (exec's stdout is the model's answer as it wrote it, by design: not the server's.)
        Reply::text("done"),
    ]);
    let child = scripted_exec(&d, &model.url, &[], "go").spawn().unwrap();
    wait_for_event(&d, "listed");
    gate.open();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The server's strings did reach dsh: the model was handed them (as JSON).
    let requests = model.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let handed = requests[3]["messages"].to_string();
    assert!(handed.contains("pwned"), "{handed}");
    // …and were shown, made visible.
    assert!(stderr(&out).contains("^[]0;pwned^G"), "{}", stderr(&out));
    for (what, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        assert!(!text.contains('\u{1b}'), "ESC on {what}: {text:?}");
        assert!(!text.contains('\u{7}'), "BEL on {what}: {text:?}");
        assert!(!text.contains('\u{9b}'), "CSI on {what}: {text:?}");
    }
}

/// Defended: a result line larger than dsh's bound on one MCP message (16 MiB) ends the
/// connection; the call fails at once as a `tool_error` naming the bound, and the session
/// goes on (the server started again). tests/extension_faults.rs has the full case.
#[test]
fn a_100_mb_line_fails_the_call_not_the_session() {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__h__*\"]\n{}",
        server_table(
            &d,
            "h",
            &json!({"tools": [tool("huge"), tool("t")], "actions": {"huge": "huge"}}),
            "timeout_s = 10"
        )
    ));
    let r = batch(
        &d,
        &[],
        &[
            call("mcp__h__huge", json!({"bytes": 100 * 1024 * 1024})),
            call("mcp__h__t", json!({})),
        ],
    );
    assert_eq!(
        kind(&r[0]),
        "tool_error",
        "{}",
        &r[0].to_string()[..300.min(r[0].to_string().len())]
    );
    assert!(
        r[0]["content"]
            .as_str()
            .unwrap()
            .contains("longer than 16 MiB"),
        "{}",
        r[0]
    );
    assert_eq!(r[1]["content"], "called t", "{r:?}");
    common::verify_all(&d);
}

/// Defended: a flood of `notifications/tools/list_changed` does not stop the session.
#[test]
fn a_list_changed_flood_does_not_stop_the_session() {
    let d = world(
        "[permissions]\nallow = [\"mcp__h__*\"]",
        &json!({"tools": [tool("flood"), tool("t")], "actions": {"flood": "flood"}}),
    );
    let r = batch(
        &d,
        &[],
        &[
            call("mcp__h__flood", json!({})),
            call("mcp__h__t", json!({})),
        ],
    );
    assert_eq!(r[0]["content"], "flooded", "{r:?}");
    assert_eq!(r[1]["content"], "called t", "{r:?}");
}

/// Defended: a server that closes its stdout but keeps running fails the call, and is
/// killed when the session ends.
#[test]
fn a_server_that_closes_stdout_and_lingers_is_killed() {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__h__*\"]\n{}",
        server_table(
            &d,
            "h",
            &json!({"tools": [tool("c")], "actions": {"c": "close_stdout"}}),
            "timeout_s = 20"
        )
    ));
    let r = batch(&d, &[], &[call("mcp__h__c", json!({}))]);
    assert_ne!(kind(&r[0]), "ok", "{r:?}");
    let pids: Vec<u32> = event_lines(&d)
        .iter()
        .filter_map(|l| l.strip_prefix("start "))
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(!pids.is_empty());
    for pid in pids {
        let gone = gone_within_a_minute(pid);
        reap(pid);
        assert!(gone, "server {pid} outlived dsh batch");
    }
}

// ---- processes ----

/// Defended: a child the server starts in its process group dies with the session.
#[test]
fn a_servers_child_in_its_group_dies_with_the_session() {
    let d = world(
        "[permissions]\nallow = [\"mcp__h__*\"]",
        &json!({"tools": [tool("f")], "actions": {"f": "fork"}, "fork_at_start": true}),
    );
    let r = batch(&d, &[], &[call("mcp__h__f", json!({}))]);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    let kids = children(&d);
    assert_eq!(kids.len(), 2, "{:?}", event_lines(&d));
    for pid in kids {
        let gone = gone_within_a_minute(pid);
        reap(pid);
        assert!(gone, "the server's child {pid} outlived dsh batch");
    }
}

/// Finding (low): a child the server starts in a new session (`setsid`, as daemonizing
/// helpers do) escapes the process-group kill and outlives dsh.
#[test]
#[ignore = "finding: a server's setsid child escapes the process-group kill"]
fn a_servers_setsid_child_dies_with_the_session() {
    let d = world(
        "[permissions]\nallow = [\"mcp__h__*\"]",
        &json!({"tools": [tool("f")], "actions": {"f": "fork_setsid"}}),
    );
    let r = batch(&d, &[], &[call("mcp__h__f", json!({}))]);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    let kids = children(&d);
    assert_eq!(kids.len(), 1, "{:?}", event_lines(&d));
    let gone = gone_within_a_minute(kids[0]);
    reap(kids[0]);
    assert!(gone, "the server's setsid child outlived dsh batch");
}

/// The pid of the server's first start, once it has logged it (polling, up to a minute).
fn server_pid(d: &Dirs) -> u32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = event_lines(d)
            .iter()
            .find_map(|l| l.strip_prefix("start ").map(|p| p.parse().unwrap()))
        {
            return pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the server never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server that never finishes starting (and ignores its stdin closing).
fn holding_world() -> Dirs {
    let d = repl_kit::world();
    d.write_user_config(&server_table(
        &d,
        "h",
        &json!({"tools": [tool("t")], "hold_at_start": true}),
        "startup_timeout_s = 600",
    ));
    d
}

/// The processes whose environment names this world's files (its servers and their
/// children), read from /proc.
fn processes_of(d: &Dirs) -> Vec<u32> {
    let needle = d.root().to_str().unwrap().as_bytes().to_vec();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env.windows(needle.len()).any(|w| w == needle.as_slice()) && alive(pid) {
            out.push(pid);
        }
    }
    out
}

/// Defended: `dsh exec` ending while a server is still starting (if it got that far) leaves
/// no process of it behind.
#[test]
fn exec_ending_while_a_server_starts_kills_it() {
    let d = holding_world();
    let model = ScriptedServer::start(vec![Reply::text("done")]);
    let status = scripted_exec(&d, &model.url, &[], "hello")
        .output()
        .unwrap()
        .status;
    assert_eq!(status.code(), Some(0));
    let start = Instant::now();
    let mut left = processes_of(&d);
    while !left.is_empty() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
        left = processes_of(&d);
    }
    left.iter().for_each(|p| reap(*p));
    assert!(left.is_empty(), "{left:?} outlived dsh exec");
}

/// Defended: leaving the REPL while a server is still starting kills it.
#[test]
fn leaving_the_repl_while_a_server_starts_kills_it() {
    let d = holding_world();
    let model = ScriptedServer::start(vec![Reply::text("done")]);
    let pty = repl_kit::spawn(&d, &model, &[]);
    let pid = server_pid(&d);
    repl_kit::leave(pty, 1);
    let gone = gone_within_a_minute(pid);
    reap(pid);
    assert!(gone, "the starting server {pid} outlived the REPL");
}
