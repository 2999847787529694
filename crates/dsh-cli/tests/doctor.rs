//! `dsh doctor` through the real binary: one line per check (`ok`, `warn`, `FAIL`, with the
//! fix), exit 1 only when a check failed. The model endpoint is the testkit's scripted server
//! (listing models, refusing a wrong key) or a closed port; MCP servers are dsh-mcp's mini.py
//! or a program that does not exist. Nothing here depends on the machine's sandbox: the
//! cases that expect exit 0 run with `--sandbox off` (a warning at most), and the sandbox
//! line is only checked to be there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::{Dirs, stderr, stdout};
use dsh_testkit::model_server::{ScriptedServer, ServerHandle};
use serde_json::Value;

/// What could choose a model from the machine running the tests.
const MODEL_VARS: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "DEEPSEEK_BASE_URL",
    "OLLAMA_BASE_URL",
    "DSH_PROVIDER",
    "DSH_MODEL",
];

/// `dsh ARGS… doctor` in `d`'s world, no model variable of the machine's.
fn doctor(d: &Dirs, args: &[&str]) -> Command {
    let mut c = d.dsh(args);
    c.arg("doctor");
    for v in MODEL_VARS {
        c.env_remove(v);
    }
    c
}

/// The scripted model's flags.
fn model_flags(url: &str) -> Vec<&str> {
    vec![
        "--provider",
        "openai",
        "--base-url",
        url,
        "--model",
        "scripted",
    ]
}

/// A scripted OpenAI-compatible server listing `names`.
fn server(names: &[&str]) -> ServerHandle {
    let s = ScriptedServer::start(Vec::new());
    s.serve_models(names);
    s
}

/// `dsh --json doctor` with the scripted model at `url` (key `sk-test`) and `extra` flags.
fn report(d: &Dirs, url: &str, extra: &[&str]) -> (Output, Vec<Value>) {
    let mut args = vec!["--json"];
    args.extend(model_flags(url));
    args.extend_from_slice(extra);
    let out = doctor(d, &args)
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    let checks = checks(&out);
    (out, checks)
}

/// Every stdout line as JSON, each a check with its four keys.
fn checks(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            assert!(v["check"].is_string() && v["verdict"].is_string(), "{v}");
            assert!(
                ["ok", "warn", "fail"].contains(&v["status"].as_str().unwrap()),
                "{v}"
            );
            assert!(v["fix"].is_null() == (v["status"] == "ok"), "{v}");
            v
        })
        .collect()
}

/// The one check named `name`.
fn one<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = checks.iter().filter(|c| c["check"] == name).collect();
    assert_eq!(found.len(), 1, "{name}: {checks:#?}");
    found[0]
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

fn mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dsh-mcp/tests/servers/mini.py")
}

#[test]
fn a_reachable_model_that_is_listed_is_ok_and_the_report_reads_as_lines() {
    let d = Dirs::new();
    let s = server(&["other", "scripted"]);
    let mut args = model_flags(&s.url);
    args.extend(["--sandbox", "off"]);
    let out = doctor(&d, &args)
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.iter().any(|l| l.starts_with("ok    endpoint")
            && l.contains(&s.url)
            && l.contains("accepts the key")
            && l.contains("2 models")),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("ok    model name") && l.contains("scripted is listed")),
        "{text}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("ok    model ")
            && l.contains("openai/scripted")
            && l.contains("OPENAI_API_KEY")),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("warn  sandbox") && l.contains("— fix: ")),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("ok    trust") && l.contains("not trusted")),
        "{text}"
    );
    assert!(!text.contains('\x1b'), "no colour into a pipe: {text:?}");
    let last = lines.last().unwrap();
    assert!(last.contains("0 failed"), "{text}");
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

#[test]
fn json_gives_one_object_per_check_and_a_sandbox_line_whatever_the_machine() {
    let d = Dirs::new();
    let s = server(&["scripted"]);
    let (out, checks) = report(&d, &s.url, &[]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    for name in [
        "config",
        "trust",
        "model",
        "endpoint",
        "model name",
        "sandbox",
        "auto",
        "mcp",
        "hooks",
        "plugins",
    ] {
        one(&checks, name);
    }
    assert!(!stdout(&out).contains("failed:"), "no summary line in JSON");
}

#[test]
fn a_model_the_endpoint_does_not_list_fails_with_the_names_it_lists() {
    let d = Dirs::new();
    let s = server(&["gpt-a", "gpt-b"]);
    let (out, checks) = report(&d, &s.url, &["--sandbox", "off"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let c = one(&checks, "model name");
    assert_eq!(c["status"], "fail", "{c}");
    assert!(text(c, "verdict").contains("gpt-a, gpt-b"), "{c}");
    assert!(text(c, "fix").contains("--model"), "{c}");
}

#[test]
fn an_endpoint_that_lists_nothing_is_a_warning_only() {
    let d = Dirs::new();
    let s = server(&[]);
    let (out, checks) = report(&d, &s.url, &["--sandbox", "off"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(one(&checks, "model name")["status"], "warn");
}

#[test]
fn an_unreachable_endpoint_fails_naming_the_url() {
    let d = Dirs::new();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let (out, checks) = report(&d, &url, &["--sandbox", "off"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let c = one(&checks, "endpoint");
    assert_eq!(c["status"], "fail", "{c}");
    assert!(text(c, "verdict").contains(&url), "{c}");
    assert!(text(c, "fix").contains("--base-url"), "{c}");
    assert!(
        !checks.iter().any(|c| c["check"] == "model name"),
        "{checks:#?}"
    );
}

#[test]
fn a_wrong_key_is_refused_and_the_right_one_accepted() {
    let d = Dirs::new();
    let s = server(&["scripted"]);
    s.require_key("sk-right");
    let (out, refused) = report(&d, &s.url, &["--sandbox", "off"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let c = one(&refused, "endpoint");
    assert_eq!(c["status"], "fail", "{c}");
    assert!(
        text(c, "verdict").contains("refused") && text(c, "verdict").contains("401"),
        "{c}"
    );
    assert!(text(c, "fix").contains("OPENAI_API_KEY"), "{c}");

    let mut args = vec!["--json", "--sandbox", "off"];
    args.extend(model_flags(&s.url));
    let out = doctor(&d, &args)
        .env("OPENAI_API_KEY", "sk-right")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(one(&checks(&out), "endpoint")["status"], "ok");
}

#[test]
fn an_anthropic_endpoint_refuses_a_wrong_x_api_key() {
    let d = Dirs::new();
    let s = ScriptedServer::start_anthropic(Vec::new());
    s.serve_models(&["claude-scripted-20250101"]);
    s.require_key("sk-ant-right");
    let args = [
        "--json",
        "--sandbox",
        "off",
        "--provider",
        "anthropic",
        "--base-url",
        &s.url,
        "--model",
        "claude-scripted",
    ];
    let out = doctor(&d, &args)
        .env("ANTHROPIC_API_KEY", "sk-ant-wrong")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let c = one(&checks(&out), "endpoint").clone();
    assert!(text(&c, "verdict").contains("invalid x-api-key"), "{c}");
    assert!(text(&c, "fix").contains("ANTHROPIC_API_KEY"), "{c}");

    // The right key: the model is listed under its dated name.
    let out = doctor(&d, &args)
        .env("ANTHROPIC_API_KEY", "sk-ant-right")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let checks = checks(&out);
    let c = one(&checks, "model name");
    assert!(
        text(c, "verdict").contains("listed as claude-scripted-20250101"),
        "{c}"
    );
}

#[test]
fn a_missing_key_fails_naming_the_variable_without_calling_anyone() {
    let d = Dirs::new();
    let out = doctor(&d, &["--json", "--provider", "anthropic"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let checks = checks(&out);
    let c = one(&checks, "model");
    assert_eq!(c["status"], "fail", "{c}");
    assert!(text(c, "verdict").contains("ANTHROPIC_API_KEY"), "{c}");
    assert!(text(c, "fix").contains("export ANTHROPIC_API_KEY"), "{c}");
    assert!(
        !checks.iter().any(|c| c["check"] == "endpoint"),
        "{checks:#?}"
    );
}

#[test]
fn with_nothing_configured_it_says_it_tries_a_local_ollama() {
    let d = Dirs::new();
    let out = doctor(&d, &["--json"]).output().unwrap();
    let checks = checks(&out);
    let c = one(&checks, "model");
    assert!(
        text(c, "verdict").contains("ollama/")
            && text(c, "verdict").contains("no model is configured"),
        "{c}"
    );
    // Whether an Ollama answers is the machine's: only that it was asked.
    one(&checks, "endpoint");
}

#[test]
fn a_broken_config_file_fails_with_its_file_and_line() {
    let d = Dirs::new();
    d.write_user_config("[limits]\nmax_steps = \"many\"\n");
    let out = doctor(&d, &["--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let checks = checks(&out);
    let c = one(&checks, "config");
    assert_eq!(c["status"], "fail", "{c}");
    let file = d.cfg.join("config.toml").display().to_string();
    assert!(text(c, "verdict").contains(&format!("{file}:2")), "{c}");
    assert!(text(c, "verdict").contains("max_steps"), "{c}");
    one(&checks, "sandbox");
}

#[test]
fn an_untrusted_projects_ignored_settings_are_a_warning() {
    let d = Dirs::new();
    d.project_config("[sandbox]\nallow_network = true\n");
    let s = server(&["scripted"]);
    let (out, checks) = report(&d, &s.url, &["--sandbox", "off"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let warned: Vec<&Value> = checks
        .iter()
        .filter(|c| c["check"] == "config" && c["status"] == "warn")
        .collect();
    assert!(
        warned.iter().any(|c| text(c, "fix").contains("dsh trust")),
        "{checks:#?}"
    );
}

#[test]
fn mcp_servers_ready_failed_and_waiting_for_approval() {
    let d = Dirs::new();
    let s = server(&["scripted"]);
    let trusted = d.dsh(&["trust"]).output().unwrap();
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    // A server of the project's, not approved: a warning, and the exit stays 0.
    let file = serde_json::json!({"mcpServers": {"proj": {
        "command": "/usr/bin/python3", "args": [mini().display().to_string()]}}});
    std::fs::write(d.ws.join(".mcp.json"), file.to_string()).unwrap();
    let mut user = std::fs::read_to_string(d.cfg.join("config.toml")).unwrap();
    user.push_str(&format!(
        "\n[mcp.servers.mini]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}]\n",
        mini().display().to_string()
    ));
    d.write_user_config(&user);
    let (out, checks) = report(&d, &s.url, &["--sandbox", "off"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let c = one(&checks, "mcp proj");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(text(c, "fix").contains("dsh mcp approve proj"), "{c}");
    let c = one(&checks, "mcp mini");
    assert_eq!(c["status"], "ok", "{c}");
    assert!(
        text(c, "verdict").contains("ready") && text(c, "verdict").contains("tool"),
        "{c}"
    );

    // One that cannot start: a failure, exit 1.
    user.push_str("\n[mcp.servers.broken]\ncommand = \"/nonexistent/dsh-doctor-server\"\nstartup_timeout_s = 5\n");
    d.write_user_config(&user);
    let (out, checks) = report(&d, &s.url, &["--sandbox", "off"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let c = one(&checks, "mcp broken");
    assert_eq!(c["status"], "fail", "{c}");
    assert!(text(c, "verdict").contains("failed"), "{c}");
    assert_eq!(one(&checks, "mcp mini")["status"], "ok");
}

#[test]
fn an_unapproved_project_hook_is_a_warning_naming_its_number() {
    let d = Dirs::new();
    let s = server(&["scripted"]);
    d.write_user_config("[[hooks.SessionStart]]\ncommand = \"true\"\n");
    d.project_config("[[hooks.PreToolUse]]\nmatcher = \"Bash\"\ncommand = \"./guard.sh\"\n");
    let trusted = d.dsh(&["trust"]).output().unwrap();
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    let (out, checks) = report(&d, &s.url, &["--sandbox", "off"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(one(&checks, "hook 1")["status"], "ok");
    let c = one(&checks, "hook 2");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(text(c, "fix").contains("dsh hooks approve 2"), "{c}");
    // Said once, not again among the configuration's notices.
    assert!(
        !checks
            .iter()
            .any(|c| c["check"] == "config" && text(c, "verdict").contains("hooks approve")),
        "{checks:#?}"
    );
}

/// The human report against a reachable scripted model, an unreachable one and a wrong key,
/// printed (`--nocapture` shows them) and checked line by line for their verdicts.
#[test]
fn three_endpoints_as_a_person_reads_them() {
    let s = server(&["scripted"]);
    s.require_key("sk-test");
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}/v1", l.local_addr().unwrap().port())
    };
    for (url, key, code, endpoint) in [
        (s.url.as_str(), "sk-test", 0, "ok    endpoint"),
        (closed.as_str(), "sk-test", 1, "FAIL  endpoint"),
        (s.url.as_str(), "sk-wrong", 1, "FAIL  endpoint"),
    ] {
        let d = Dirs::new();
        let mut args = model_flags(url);
        args.extend(["--sandbox", "off"]);
        let out = doctor(&d, &args)
            .env("OPENAI_API_KEY", key)
            .output()
            .unwrap();
        let text = stdout(&out);
        println!(
            "$ OPENAI_API_KEY={key} dsh {} doctor\n{text}exit {:?}\n",
            args.join(" "),
            out.status.code()
        );
        assert_eq!(out.status.code(), Some(code), "{text}");
        assert!(text.lines().any(|l| l.starts_with(endpoint)), "{text}");
    }
}
