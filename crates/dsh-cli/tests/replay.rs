//! `dsh replay` through the built binary: the session shipped in `examples/sessions/`
//! replayed under the configuration it was recorded with and under a tightened one, from an
//! unrelated working directory, in an isolated world (temp `DSH_HOME`, `DSH_CONFIG_HOME`,
//! `HOME`). The shipped session is recorded by `record_the_example_session` (run with
//! `DSH_RECORD_EXAMPLE=1`), never written by hand.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{Dirs, json_lines, stderr, stdout};
use dsh_testkit::model_server::{ScriptedServer, Turn};
use serde_json::{Value, json};

/// `examples/sessions/NAME`, absolutely.
fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/sessions")
        .canonicalize()
        .unwrap()
        .join(name)
}

fn example_str(name: &str) -> String {
    example(name).to_str().unwrap().to_owned()
}

/// `dsh ARGS…` in the world, run from `d.outside` (a directory unrelated to any recorded
/// workspace), with no `--workspace` unless `args` has one.
fn dsh(d: &Dirs, args: &[&str]) -> Output {
    d.dsh_in(&d.outside, args).output().unwrap()
}

/// `dsh replay` of the shipped session under `examples/sessions/CONFIG`.
fn replay_example(d: &Dirs, config: &str, json: bool) -> Output {
    let session = example_str("fix-typo.jsonl");
    let config = example_str(config);
    let mut args = vec!["replay", session.as_str(), "--config", config.as_str()];
    if json {
        args.push("--json");
    }
    dsh(d, &args)
}

/// The rows of a `--json` replay, and its summary.
fn rows_and_summary(out: &Output) -> (Vec<Value>, Value) {
    let mut lines = json_lines(out);
    let summary = lines.pop().unwrap();
    (lines, summary)
}

/// The tools and decisions of the rows that changed, as `tool recorded→today`.
fn changed(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .filter(|r| r["changed"] == true)
        .map(|r| {
            format!(
                "{} {}→{}",
                r["tool"].as_str().unwrap(),
                r["recorded"]["decision"].as_str().unwrap(),
                r["today"]["decision"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn the_shipped_session_replays_unchanged_under_the_config_it_was_recorded_with() {
    let d = Dirs::new();
    let out = replay_example(&d, "same.toml", true);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (rows, summary) = rows_and_summary(&out);
    assert_eq!(
        summary,
        json!({"summary":{"calls":10,"changed":0,"tools_mode":"native"}})
    );
    assert_eq!(rows.len(), 10);
    // DESIGN §4's object: these fields, in this order.
    let fields = ["seq", "call_id", "tool", "recorded", "today", "changed"];
    for (r, line) in rows.iter().zip(stdout(&out).lines()) {
        assert_eq!(r.as_object().unwrap().len(), fields.len(), "{line}");
        let at: Vec<usize> = fields
            .iter()
            .map(|f| line.find(&format!("\"{f}\":")).unwrap())
            .collect();
        assert!(at.is_sorted(), "{line}");
        assert_eq!(r["changed"], false, "{r}");
    }
    // The recorded decisions the session holds: reads allowed, `.env` denied by the rule,
    // the edits asked (and approved under --yolo), the allowed git commands.
    let recorded: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["tool"].as_str().unwrap(),
                r["recorded"]["decision"].as_str().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            "list_dir allow",
            "find_text -",
            "grep allow",
            "read_file deny",
            "read_file allow",
            "edit_file ask",
            "read_file allow",
            "edit_file ask",
            "run_shell allow",
            "run_shell allow",
        ]
    );
    // The recorded workspace is gone: the current directory is used, and that is said.
    let err = stderr(&out);
    assert!(err.contains("replaying in the current directory"), "{err}");
    assert!(err.contains("does not exist"), "{err}");

    let text = replay_example(&d, "same.toml", false);
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    let text = stdout(&text);
    assert!(!text.contains("CHANGED"), "{text}");
    assert!(
        text.trim_end()
            .ends_with("10 calls replayed, 0 changed, 1 never reached gate 1 (tools mode native)"),
        "{text}"
    );
}

#[test]
fn a_tightened_config_lists_the_changed_calls_and_exits_4() {
    let d = Dirs::new();
    let out = replay_example(&d, "tightened.toml", true);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let (rows, summary) = rows_and_summary(&out);
    assert_eq!(
        summary,
        json!({"summary":{"calls":10,"changed":3,"tools_mode":"native"}})
    );
    assert_eq!(
        changed(&rows),
        [
            "read_file allow→ask",
            "run_shell allow→deny",
            "run_shell allow→deny"
        ]
    );
    let git = rows.iter().find(|r| r["tool"] == "run_shell").unwrap();
    assert_eq!(git["today"]["gate"], "pre_policy");
    assert_eq!(git["today"]["policy"], "shell");
    assert!(
        git["today"]["reason"]
            .as_str()
            .unwrap()
            .contains("run_shell(git *)"),
        "{git}"
    );

    let text = replay_example(&d, "tightened.toml", false);
    assert_eq!(text.status.code(), Some(4), "{}", stderr(&text));
    let text = stdout(&text);
    let marked: Vec<&str> = text.lines().filter(|l| l.contains("CHANGED")).collect();
    assert_eq!(marked.len(), 3, "{text}");
    assert!(
        marked[0].contains("read_file path=src/lib.rs  allow → ask  CHANGED"),
        "{text}"
    );
    assert!(
        marked[1].contains("run_shell command=\"git diff --stat\"  allow → deny  CHANGED"),
        "{text}"
    );
    assert!(
        marked[2].contains("run_shell command=\"git status --short\"  allow → deny  CHANGED"),
        "{text}"
    );
    assert!(
        text.trim_end()
            .ends_with("10 calls replayed, 3 changed, 1 never reached gate 1 (tools mode native)"),
        "{text}"
    );
}

#[test]
fn a_call_that_never_reached_gate_1_is_never_changed() {
    let d = Dirs::new();
    let out = replay_example(&d, "tightened.toml", true);
    let (rows, _) = rows_and_summary(&out);
    let unreached: Vec<&Value> = rows.iter().filter(|r| r["recorded"].is_null()).collect();
    assert_eq!(unreached.len(), 1, "{rows:?}");
    let r = unreached[0];
    assert_eq!(r["tool"], "find_text");
    assert_eq!(r["changed"], false);
    // Today it is refused at the registry, as it was: still no tool of that name.
    assert_eq!(r["today"]["decision"], "deny");
    assert_eq!(r["today"]["gate"], "registry");
    assert!(
        r["today"]["reason"]
            .as_str()
            .unwrap()
            .contains("there is no tool named `find_text`"),
        "{r}"
    );
}

#[test]
fn an_unknown_session_id_is_a_usage_error_naming_it() {
    let d = Dirs::new();
    let out = dsh(&d, &["replay", "20990101T000000Z-nosuch"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no session matches `20990101T000000Z-nosuch`"),
        "{err}"
    );
    assert!(stdout(&out).is_empty());
}

#[test]
fn a_broken_journal_line_is_named_with_its_file_and_line() {
    let d = Dirs::new();
    let text = std::fs::read_to_string(example("fix-typo.jsonl")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{not json";
    let broken = d.outside.join("broken.jsonl");
    std::fs::write(&broken, lines.join("\n") + "\n").unwrap();
    let out = dsh(&d, &["replay", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}: line 3", broken.display())),
        "{err}"
    );
}

#[test]
fn the_help_lists_replay_and_says_its_exit_codes() {
    let d = Dirs::new();
    let top = stdout(&dsh(&d, &["--help"]));
    assert!(top.contains("replay"), "{top}");
    let help = stdout(&dsh(&d, &["replay", "--help"]));
    assert!(
        help.contains("Exit 0 when no decision changed, 4 when one did"),
        "{help}"
    );
}

/// Records a short `dsh batch` session in `d.ws` and returns its id.
fn batch_session(d: &Dirs) -> String {
    let out = d.batch_output(
        &[json!({"name":"read_file","args":{"path":"notes.txt"}})],
        &[],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let entry = std::fs::read_dir(d.home.join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    entry
        .path()
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn the_recorded_workspace_is_used_when_it_exists_and_workspace_overrides_it() {
    let d = Dirs::new();
    let id = batch_session(&d);
    // Tightened after the run, in the recorded workspace's own project file (a project file
    // may always tighten).
    d.project_config("[permissions]\ndeny = [\"read_file(notes.txt)\"]\n");
    let prefix = &id[..id.len() - 2];
    let out = dsh(&d, &["replay", prefix, "--json"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("current directory"),
        "{}",
        stderr(&out)
    );
    let (rows, _) = rows_and_summary(&out);
    assert_eq!(changed(&rows), ["read_file allow→deny"]);

    // `--workspace` wins: the directory outside has no project file, nothing changed.
    let outside = d.outside.to_str().unwrap();
    let out = dsh(&d, &["replay", &id, "--workspace", outside]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("read_file path=notes.txt  allow → allow"),
        "{}",
        stdout(&out)
    );
}

/// Records `examples/sessions/fix-typo.jsonl`: a small task run by the real `dsh exec`
/// against the scripted model server, under `examples/sessions/same.toml` with `--yolo`.
/// Runs only with `DSH_RECORD_EXAMPLE=1` (it rewrites the shipped file):
///
/// ```sh
/// DSH_RECORD_EXAMPLE=1 cargo test -p dsh-cli --test replay record_the_example_session
/// ```
#[test]
fn record_the_example_session() {
    if std::env::var_os("DSH_RECORD_EXAMPLE").is_none() {
        return;
    }
    let d = Dirs::new();
    std::fs::create_dir_all(d.ws.join("src")).unwrap();
    std::fs::write(
        d.ws.join("README.md"),
        "# greeter\n\nCall `greet` to recieve a greeting.\n",
    )
    .unwrap();
    std::fs::write(
        d.ws.join("src/lib.rs"),
        "/// Returns the greeting you recieve.\npub fn greet() -> &'static str {\n    \"hello\"\n}\n",
    )
    .unwrap();
    std::fs::write(d.ws.join(".env"), "API_TOKEN=not-a-real-token\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=dsh",
            "-c",
            "user.email=dsh@example.invalid",
            "commit",
            "-qm",
            "greeter",
        ],
    ] {
        let git = Command::new("git")
            .args(args)
            .current_dir(&d.ws)
            .env("HOME", &d.user_home)
            .output()
            .unwrap();
        assert!(git.status.success(), "git {args:?}: {}", stderr(&git));
    }
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "list_dir", r#"{"path":"."}"#)
            .with_text("Let me look around.")
            .into(),
        Turn::tool_call("c2", "find_text", r#"{"query":"recieve"}"#).into(),
        Turn::tool_call("c3", "grep", r#"{"pattern":"recieve"}"#)
            .call("c4", "read_file", r#"{"path":".env"}"#)
            .into(),
        Turn::tool_call("c5", "read_file", r#"{"path":"src/lib.rs"}"#).into(),
        Turn::tool_call(
            "c6",
            "edit_file",
            r#"{"path":"src/lib.rs","old_string":"recieve","new_string":"receive"}"#,
        )
        .into(),
        Turn::tool_call("c7", "read_file", r#"{"path":"README.md"}"#).into(),
        Turn::tool_call(
            "c8",
            "edit_file",
            r#"{"path":"README.md","old_string":"recieve","new_string":"receive"}"#,
        )
        .into(),
        Turn::tool_call("c9", "run_shell", r#"{"command":"git diff --stat"}"#)
            .call("c10", "run_shell", r#"{"command":"git status --short"}"#)
            .into(),
        Turn::text("Fixed the typo \"recieve\" in src/lib.rs and README.md.").into(),
    ]);
    let config = example_str("same.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(["--workspace", d.ws.to_str().unwrap()])
        .args(["--config", &config, "--yolo", "exec"])
        .args(["--provider", "openai", "--base-url", &server.url])
        .args(["--model", "scripted"])
        .arg("fix the typo \"recieve\" in this project")
        .current_dir(&d.outside)
        .env("DSH_HOME", &d.home)
        .env("DSH_CONFIG_HOME", &d.cfg)
        .env("HOME", &d.user_home)
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lib = std::fs::read_to_string(d.ws.join("src/lib.rs")).unwrap();
    assert!(lib.contains("you receive"), "{lib}");
    let journal = std::fs::read_dir(d.home.join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::copy(&journal, example("fix-typo.jsonl")).unwrap();
}
