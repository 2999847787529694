//! MCP against real servers from the ecosystem, through the real `dsh` binary: the reference
//! "everything" server (npm), mcp-server-time and mcp-server-git (PyPI), and misbehave.py
//! (written with the Python SDK) for the faults. `scripts/mcp/run.sh` installs them pinned
//! and sets `DSH_MCP_*_ARGV` (each server's argv as a JSON array); without those variables
//! every case says it was skipped and returns, so `cargo test --workspace` stays green
//! without the installs — `DSH_MCP_REQUIRED=1` (the script, CI) makes a missing one a
//! failure. Every server gets the offline proxies: none of the tools used may reach the
//! network.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{Dirs, json_lines, kind, stderr};
use serde_json::{Value, json};

/// A server's argv from `var`, or `None` (the case is skipped) when the suite's script did
/// not set it.
fn argv(var: &str) -> Option<Vec<String>> {
    match std::env::var(var) {
        Ok(json) => Some(serde_json::from_str(&json).expect("a JSON array of strings")),
        Err(_) if std::env::var_os("DSH_MCP_REQUIRED").is_some() => {
            panic!("{var} is not set: run scripts/mcp/run.sh")
        }
        Err(_) => {
            eprintln!("skipped: {var} is not set; run scripts/mcp/run.sh");
            None
        }
    }
}

/// `[mcp.servers.NAME]` for `argv`, with `env` (TOML inline-table entries) beside the
/// offline proxies and `extra` lines.
fn server(name: &str, argv: &[String], env: &str, extra: &str) -> String {
    let (program, args) = argv.split_first().unwrap();
    format!(
        "[mcp.servers.{name}]\ncommand = {program:?}\nargs = {args:?}\nenv = {{ HTTP_PROXY = \"http://127.0.0.1:9\", HTTPS_PROXY = \"http://127.0.0.1:9\", NO_PROXY = \"127.0.0.1,localhost\"{env} }}\n{extra}\n"
    )
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "args": args})
}

fn batch(d: &Dirs, calls: &[Value]) -> Vec<Value> {
    let out = d.batch_output(calls, &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = json_lines(&out);
    assert_eq!(results.len(), calls.len(), "{}", stderr(&out));
    results
}

fn text(r: &Value) -> &str {
    r["content"].as_str().unwrap_or_default()
}

#[test]
fn the_everything_server_lists_its_tools_and_answers_with_structured_output() {
    let Some(everything) = argv("DSH_MCP_EVERYTHING_ARGV") else {
        return;
    };
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__everything__*\"]\n{}",
        server("everything", &everything, "", "")
    ));
    let r = batch(
        &d,
        &[
            call("mcp__everything__echo", json!({"message": "hello there"})),
            call(
                "mcp__everything__get-structured-content",
                json!({"location": "Chicago"}),
            ),
            call("mcp__everything__get-tiny-image", json!({})),
            call("mcp__everything__get-sum", json!({"a": 2, "b": "three"})),
        ],
    );
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert!(text(&r[0]).contains("hello there"), "{r:?}");
    assert_eq!(kind(&r[1]), "ok", "{r:?}");
    let value = &r[1]["value"];
    for key in ["temperature", "conditions", "humidity"] {
        assert!(value.get(key).is_some(), "{key} missing in {value}");
    }
    assert_eq!(kind(&r[2]), "ok", "{r:?}");
    assert!(text(&r[2]).contains("[image image/png,"), "{}", text(&r[2]));
    assert!(text(&r[2]).contains("bytes: not shown]"), "{}", text(&r[2]));
    // Its input schema holds: a string where a number goes never reaches the server.
    assert_eq!(kind(&r[3]), "invalid_args", "{r:?}");

    // `check` sees the same tools and rules.
    let verdict = common::check(&d, &[], "mcp__everything__echo", json!({"message": "x"}));
    assert_eq!(verdict["decision"], "allow", "{verdict}");
}

#[test]
fn a_long_running_call_is_cancelled_on_the_server_and_its_progress_is_ignored() {
    let Some(everything) = argv("DSH_MCP_EVERYTHING_ARGV") else {
        return;
    };
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__everything__*\"]\n{}",
        server("everything", &everything, "", "timeout_s = 2")
    ));
    let r = batch(
        &d,
        &[
            call(
                "mcp__everything__trigger-long-running-operation",
                json!({"duration": 60, "steps": 60}),
            ),
            call("mcp__everything__echo", json!({"message": "still here"})),
        ],
    );
    assert_eq!(kind(&r[0]), "timeout", "{r:?}");
    // The progress notifications that go on after the cancellation disturb nothing.
    assert_eq!(kind(&r[1]), "ok", "{r:?}");
    assert!(text(&r[1]).contains("still here"));
}

#[test]
fn the_time_server_answers_with_its_output_schema() {
    let Some(time) = argv("DSH_MCP_TIME_ARGV") else {
        return;
    };
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__time__get_current_time\"]\n{}",
        server("time", &time, "", "")
    ));
    let r = batch(
        &d,
        &[
            call("mcp__time__get_current_time", json!({"timezone": "UTC"})),
            call(
                "mcp__time__convert_time",
                json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"}),
            ),
        ],
    );
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(r[0]["value"]["timezone"], "UTC", "{r:?}");
    // No rule names it: it asks, and headless nobody answers.
    assert_eq!(kind(&r[1]), "unavailable", "{r:?}");
}

fn git(dir: &Path, args: &[&str]) {
    common::git(dir, args);
}

#[test]
fn the_git_servers_write_tool_asks_while_a_rule_lets_its_read_tool_run() {
    let Some(git_server) = argv("DSH_MCP_GIT_ARGV") else {
        return;
    };
    let d = Dirs::new();
    git(&d.ws, &["init", "-q", "-b", "main"]);
    std::fs::write(d.ws.join("a.txt"), "a\n").unwrap();
    git(&d.ws, &["add", "a.txt"]);
    git(
        &d.ws,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-qm",
            "first",
        ],
    );
    std::fs::write(d.ws.join("b.txt"), "b\n").unwrap();
    let mut argv = git_server.clone();
    argv.extend(["--repository".to_owned(), d.ws.display().to_string()]);
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__git__git_status\"]\ndeny = [\"mcp__git__git_log\"]\n{}",
        server("git", &argv, "", "")
    ));
    let repo = d.ws.display().to_string();
    let r = batch(
        &d,
        &[
            call("mcp__git__git_status", json!({"repo_path": repo})),
            call(
                "mcp__git__git_add",
                json!({"repo_path": repo, "files": ["b.txt"]}),
            ),
            call("mcp__git__git_log", json!({"repo_path": repo})),
        ],
    );
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert!(text(&r[0]).contains("b.txt"), "{}", text(&r[0]));
    assert_eq!(kind(&r[1]), "unavailable", "{r:?}");
    assert!(
        text(&r[1]).contains(r#"allow = ["mcp__git__git_add"]"#),
        "{}",
        text(&r[1])
    );
    assert_eq!(kind(&r[2]), "denied", "{r:?}");
    // Nothing was staged.
    let out = std::process::Command::new("git")
        .args(["-C", &repo, "diff", "--cached", "--name-only"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
}

#[test]
fn a_misbehaving_server_ends_each_call_in_one_result_and_the_session_goes_on() {
    let Some(misbehave) = argv("DSH_MCP_MISBEHAVE_ARGV") else {
        return;
    };
    let d = Dirs::new();
    let log = d.root().join("misbehave.log");
    let starts = d.root().join("misbehave.starts");
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__bad__*\"]\n[limits]\nspill_chars = 20000\n{}",
        server(
            "bad",
            &misbehave,
            &format!(
                ", MISBEHAVE_LOG = {:?}, MISBEHAVE_STARTS = {:?}",
                log.display().to_string(),
                starts.display().to_string()
            ),
            "timeout_s = 3"
        )
    ));
    let r = batch(
        &d,
        &[
            call("mcp__bad__count", json!({})),
            call("mcp__bad__die", json!({})),
            call("mcp__bad__count", json!({})),
            call("mcp__bad__hang", json!({})),
            call("mcp__bad__garbage", json!({})),
            call("mcp__bad__slow", json!({"seconds": 60})),
            call("mcp__bad__huge", json!({"mb": 2})),
            call("mcp__bad__echo", json!({"text": "after it all"})),
        ],
    );
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(text(&r[0]), "1");
    // Killed mid-call: one failure naming the server, then started again for the next call.
    assert_eq!(kind(&r[1]), "tool_error", "{r:?}");
    assert!(
        text(&r[1]).contains("MCP server `bad` ended while running `die`"),
        "{}",
        text(&r[1])
    );
    assert_eq!(kind(&r[2]), "ok", "{r:?}");
    assert_eq!(text(&r[2]), "2", "the first count ran once, this one once");
    let started = std::fs::read_to_string(&starts).unwrap();
    assert_eq!(started.lines().count(), 2, "{started}");
    // Never answers; answers garbage: each a timeout, the session going on.
    assert_eq!(kind(&r[3]), "timeout", "{r:?}");
    assert_eq!(kind(&r[4]), "timeout", "{r:?}");
    // Cancelled when its time is up: the server was told.
    assert_eq!(kind(&r[5]), "timeout", "{r:?}");
    let events = std::fs::read_to_string(&log).unwrap();
    assert!(events.contains("cancelled id="), "{events}");
    assert!(!events.contains("finished slow"), "{events}");
    // 2 MiB of text: bounded for the model (spilled, pageable), whole on disk.
    assert_eq!(kind(&r[6]), "ok", "{r:?}");
    assert!(text(&r[6]).len() < 100_000, "{} bytes", text(&r[6]).len());
    assert!(text(&r[6]).contains("read_output"), "not spilled");
    assert_eq!(kind(&r[7]), "ok", "{r:?}");
    assert_eq!(r[7]["value"], json!({"result": "after it all"}));
}

/// A child process killed when dropped.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_everything_server_over_streamable_http_with_a_header_from_the_environment() {
    let Some(mut everything) = argv("DSH_MCP_EVERYTHING_ARGV") else {
        return;
    };
    *everything.last_mut().unwrap() = "streamableHttp".to_owned();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (program, args) = everything.split_first().unwrap();
    let _server = Running(
        std::process::Command::new(program)
            .args(args)
            .env("PORT", port.to_string())
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the server never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[permissions]\nallow = [\"mcp__web__*\"]\n[mcp.servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders_env = {{ X-Dsh-Test = \"DSH_TEST_HEADER\" }}\n\n[mcp.servers.unset]\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders_env = {{ Authorization = \"DSH_NOT_SET_ANYWHERE\" }}\n"
    ));
    let out = d.batch_output(
        &[
            call("mcp__web__echo", json!({"message": "over http"})),
            call("mcp__unset__echo", json!({"message": "x"})),
        ],
        &[],
        &[("DSH_TEST_HEADER", "yes")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = json_lines(&out);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert!(text(&r[0]).contains("over http"));
    // A server whose header variable is not set is not started, and says why.
    assert_eq!(kind(&r[1]), "unknown_tool", "{r:?}");
    assert!(
        stderr(&out).contains("DSH_NOT_SET_ANYWHERE (header Authorization) it names is not set"),
        "{}",
        stderr(&out)
    );
}

/// The MCP Inspector's CLI (`--cli`) against `dsh mcp serve` in `d`'s workspace: its JSON
/// answer on stdout and its exit code.
fn inspect(inspector: &[String], d: &Dirs, method: &[&str]) -> (Value, Option<i32>) {
    let (program, args) = inspector.split_first().unwrap();
    let out = std::process::Command::new(program)
        .args(args)
        .args(["--format", "json", "-q"])
        .args(method)
        .arg("-e")
        .arg(format!("DSH_HOME={}", d.home.display()))
        .arg("-e")
        .arg(format!("DSH_CONFIG_HOME={}", d.cfg.display()))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_dsh"))
        .args(["--workspace", &d.ws.display().to_string(), "mcp", "serve"])
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let answer = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (answer, out.status.code())
}

#[test]
fn the_mcp_inspector_lists_dshs_tools_reads_a_file_and_is_told_why_a_write_is_refused() {
    let Some(inspector) = argv("DSH_MCP_INSPECTOR_ARGV") else {
        return;
    };
    let d = Dirs::new();
    std::fs::write(d.ws.join("notes.txt"), "inspected\n").unwrap();
    let (listed, code) = inspect(&inspector, &d, &["--method", "tools/list"]);
    assert_eq!(code, Some(0), "{listed}");
    let tools = listed["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for wanted in ["read_file", "write_file", "grep", "run_shell"] {
        assert!(names.contains(&wanted), "{wanted} missing: {names:?}");
    }
    assert!(!names.contains(&"call_sub_agent"), "{names:?}");
    let read = tools.iter().find(|t| t["name"] == "read_file").unwrap();
    assert!(read["outputSchema"].is_object(), "{read}");
    assert_eq!(read["annotations"]["readOnlyHint"], true);

    let (answer, code) = inspect(
        &inspector,
        &d,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "read_file",
            "--tool-args-json",
            r#"{"path":"notes.txt"}"#,
        ],
    );
    assert_eq!(code, Some(0), "{answer}");
    assert!(answer.to_string().contains("inspected"), "{answer}");
    assert!(
        answer["result"]["structuredContent"].is_object(),
        "{answer}"
    );

    let (answer, _) = inspect(
        &inspector,
        &d,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "write_file",
            "--tool-args-json",
            r#"{"path":"x.txt","content":"x"}"#,
        ],
    );
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("needs approval") && text.contains("add an allow rule"),
        "{text}"
    );
    assert!(!d.ws.join("x.txt").exists());
    // Each run was a session naming the Inspector as its client.
    let journals = common::journals(&d.home);
    assert_eq!(journals.len(), 3, "{journals:?}");
    let start = &common::records(&journals[0])[0];
    assert!(
        start["client"].as_str().is_some_and(|c| !c.is_empty()),
        "{start}"
    );
}
