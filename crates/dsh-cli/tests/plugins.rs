//! Plugins (folders with a `plugin.toml`) through the real `dsh` binary (issue 27, stage c):
//! a plugin's tool is called with its arguments as JSON on stdin and its JSON answer is the
//! result's value; it asks unless a rule allows it (headless: `unavailable`) and a deny rule
//! denies it; a path argument it declares (`paths_from`) is confined before it runs; it runs
//! in the sandbox, so its write outside the workspace fails; an answer that does not match
//! its output schema is `invalid_output`; a `plugin.toml` without an output schema is refused
//! with file:line; an untrusted project's plugins are ignored, and a trusted project's run
//! only once approved, asking again when a file of the plugin changes. On Linux these tests
//! fail, never skip, when Landlock is missing.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{Dirs, content, json_lines, kind, stderr, stdout};
use serde_json::{Value, json};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/plugin_tool.py");

/// The plugin's `plugin.toml`: one tool, `word_count`, reading the path it is given.
const PLUGIN_TOML: &str = r#"description = "Word counts"

[[tools]]
name = "word_count"
description = "Counts the words of a file"
command = "python3 \"$DSH_PLUGIN_DIR/plugin_tool.py\""
read_only = true
paths_from = ["path"]
input_schema = { type = "object", properties = { path = { type = "string" }, action = { type = "string" }, target = { type = "string" } }, required = ["path"], additionalProperties = false }
output_schema = { type = "object", properties = { words = { type = "integer" }, wrote = { type = "boolean" }, error = { type = ["string", "null"] }, args = { type = "object" }, dir = { type = ["string", "null"] } }, required = ["words"] }
"#;

/// Writes the plugin `wc` into `parent` (a `plugins` directory) with `toml` as its file.
fn plugin_in(parent: &Path, toml: &str) -> PathBuf {
    let dir = parent.join("wc");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plugin.toml"), toml).unwrap();
    std::fs::copy(SCRIPT, dir.join("plugin_tool.py")).unwrap();
    dir
}

/// A world with the user's own plugin `wc`, `notes.txt` of three words, and `config`.
fn world(config: &str) -> Dirs {
    let d = Dirs::new();
    d.write_user_config(config);
    plugin_in(&d.cfg.join("plugins"), PLUGIN_TOML);
    std::fs::write(d.ws.join("notes.txt"), "one two three\n").unwrap();
    d
}

const ALLOWED: &str = "[permissions]\nallow = [\"word_count\"]\n";

fn call(args: Value) -> Value {
    json!({"name": "word_count", "args": args})
}

fn batch(d: &Dirs, calls: &[Value]) -> Vec<Value> {
    let out = d.batch_output(calls, &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = json_lines(&out);
    assert_eq!(r.len(), calls.len(), "{}", stdout(&out));
    r
}

/// What the plugin's command was given, one line per run (none: it never ran).
fn runs(d: &Dirs) -> Vec<Value> {
    std::fs::read_to_string(d.ws.join("plugin-ran.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_plugin_tool_allowed_by_a_rule_is_called_and_its_json_answer_is_the_value() {
    let d = world(ALLOWED);
    let r = batch(
        &d,
        &[
            call(json!({"path": "notes.txt"})),
            call(json!({"path": "notes.txt", "action": "echo"})),
        ],
    );
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(r[0]["value"], json!({"words": 3}));
    assert_eq!(r[0]["sandbox"], "landlock", "{}", r[0]);
    assert_eq!(content(&r[0]), r#"{"words":3}"#);
    // The arguments arrive on stdin exactly; the plugin knows its folder.
    assert_eq!(
        r[1]["value"]["args"],
        json!({"path": "notes.txt", "action": "echo"})
    );
    let dir = r[1]["value"]["dir"].as_str().unwrap();
    assert!(dir.ends_with("plugins/wc"), "{dir}");
    assert_eq!(runs(&d).len(), 2);
}

#[test]
fn without_a_rule_a_plugin_tool_asks_and_headless_nobody_answers() {
    let d = world("");
    let r = batch(&d, &[call(json!({"path": "notes.txt"}))]);
    assert_eq!(kind(&r[0]), "unavailable", "{r:?}");
    assert!(runs(&d).is_empty(), "it never ran");
}

#[test]
fn its_read_only_claim_does_not_let_it_run_in_read_only_mode_without_a_rule() {
    let d = world("");
    let out = d.batch_output(
        &[call(json!({"path": "notes.txt"}))],
        &["--mode", "read-only"],
        &[],
    );
    let r = json_lines(&out);
    assert_eq!(kind(&r[0]), "denied", "{r:?}");
    assert!(content(&r[0]).contains("plugin `wc`"), "{}", content(&r[0]));
    assert!(runs(&d).is_empty());
}

#[test]
fn a_deny_rule_denies_a_plugin_tool() {
    let d = world("[permissions]\nallow = [\"word_count\"]\ndeny = [\"word_count(secret/**)\"]\n");
    std::fs::create_dir_all(d.ws.join("secret")).unwrap();
    std::fs::write(d.ws.join("secret/a.txt"), "x").unwrap();
    let r = batch(
        &d,
        &[
            call(json!({"path": "secret/a.txt"})),
            call(json!({"path": "notes.txt"})),
        ],
    );
    assert_eq!(kind(&r[0]), "denied", "{r:?}");
    assert!(content(&r[0]).contains("word_count(secret/**)"), "{}", r[0]);
    assert_eq!(kind(&r[1]), "ok", "{r:?}");
    assert_eq!(runs(&d).len(), 1, "only the allowed call ran");

    let d = world("[permissions]\ndeny = [\"word_count\"]\n");
    let r = batch(&d, &[call(json!({"path": "notes.txt"}))]);
    assert_eq!(kind(&r[0]), "denied", "{r:?}");
    assert!(runs(&d).is_empty());
}

#[test]
fn a_declared_path_argument_outside_the_workspace_is_refused_before_it_runs() {
    let d = world(ALLOWED);
    std::fs::write(d.outside.join("x"), "secret words here").unwrap();
    let r = batch(
        &d,
        &[
            call(json!({"path": "../x"})),
            call(json!({"path": d.outside.join("x").display().to_string()})),
        ],
    );
    for refused in &r {
        assert_eq!(kind(refused), "denied", "{r:?}");
        assert!(
            content(refused).contains("only paths inside"),
            "{}",
            content(refused)
        );
    }
    assert!(runs(&d).is_empty(), "the command never ran: {:?}", runs(&d));
}

#[test]
fn a_plugin_runs_in_the_sandbox_so_its_write_outside_the_workspace_fails() {
    let d = world(ALLOWED);
    let target = d.outside.join("escaped.txt");
    let r = batch(
        &d,
        &[call(
            json!({"path": "notes.txt", "action": "escape", "target": target.display().to_string()}),
        )],
    );
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(r[0]["value"]["wrote"], false, "{}", r[0]);
    let error = r[0]["value"]["error"].as_str().unwrap();
    assert!(error.contains("Permission denied"), "{error}");
    assert!(!target.exists(), "the write outside the workspace failed");
    assert_eq!(runs(&d).len(), 1, "it ran, and wrote inside the workspace");
}

#[test]
fn an_answer_that_does_not_match_the_output_schema_is_invalid_output() {
    let d = world(ALLOWED);
    let r = batch(&d, &[call(json!({"path": "notes.txt", "action": "wrong"}))]);
    assert_eq!(kind(&r[0]), "invalid_output", "{r:?}");
    // A failing command is a tool error quoting its stderr.
    let r = batch(&d, &[call(json!({"path": "notes.txt", "action": "nope"}))]);
    assert_eq!(kind(&r[0]), "tool_error", "{r:?}");
    assert!(content(&r[0]).contains("exited with code 3"), "{}", r[0]);
    assert!(content(&r[0]).contains("unknown action"), "{}", r[0]);
}

#[test]
fn a_plugin_without_an_output_schema_is_refused_at_load_naming_file_and_line() {
    let d = world(ALLOWED);
    let toml = PLUGIN_TOML
        .lines()
        .filter(|l| !l.starts_with("output_schema"))
        .collect::<Vec<_>>()
        .join("\n");
    let dir = plugin_in(&d.cfg.join("plugins"), &toml);
    let out = d.batch_output(&[call(json!({"path": "notes.txt"}))], &[], &[]);
    let err = stderr(&out);
    let at = format!("{}:3: tools[0]:", dir.join("plugin.toml").display());
    assert!(err.contains(&at), "{err}");
    assert!(err.contains("has no `output_schema`"), "{err}");
    let r = json_lines(&out);
    assert_eq!(kind(&r[0]), "unknown_tool", "{r:?}");
    let listed = stdout(&d.dsh(&["plugins", "list"]).output().unwrap());
    assert!(listed.contains("refused:"), "{listed}");
}

#[test]
fn a_plugin_tool_may_not_take_a_built_in_name() {
    let d = world(ALLOWED);
    plugin_in(
        &d.cfg.join("plugins"),
        &PLUGIN_TOML.replace("word_count", "read_file"),
    );
    let out = d.batch_output(&[], &[], &[]);
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(err.contains("plugin `wc` is refused"), "{err}");
    assert!(err.contains("plugin.toml:3"), "{err}");
}

#[test]
fn a_plugins_table_in_the_config_says_where_plugins_go() {
    let d = world("[plugins.wc]\ncommand = \"x\"\n");
    let out = d.batch_output(&[], &[], &[]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("plugin.toml"), "{}", stderr(&out));
}

#[test]
fn an_untrusted_projects_plugins_are_ignored_with_the_notice() {
    let d = Dirs::new();
    d.write_user_config(ALLOWED);
    plugin_in(&d.ws.join(".dsh/plugins"), PLUGIN_TOML);
    std::fs::write(d.ws.join("notes.txt"), "one two three\n").unwrap();
    let out = d.batch_output(&[call(json!({"path": "notes.txt"}))], &[], &[]);
    let err = stderr(&out);
    assert!(err.contains("ignored plugins"), "{err}");
    assert!(err.contains("dsh trust"), "{err}");
    let r = json_lines(&out);
    assert_eq!(kind(&r[0]), "unknown_tool", "{r:?}");
    assert!(runs(&d).is_empty());
}

#[test]
fn a_trusted_projects_plugin_runs_only_once_approved_and_asks_again_when_changed() {
    let d = Dirs::new();
    d.write_user_config(ALLOWED);
    let dir = plugin_in(&d.ws.join(".dsh/plugins"), PLUGIN_TOML);
    std::fs::write(d.ws.join("notes.txt"), "one two three\n").unwrap();
    let out = d.dsh(&["trust"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Not approved: skipped with the notice, headless too.
    let out = d.batch_output(&[call(json!({"path": "notes.txt"}))], &[], &[]);
    let err = stderr(&out);
    assert!(err.contains("dsh plugins approve wc"), "{err}");
    assert_eq!(kind(&json_lines(&out)[0]), "unknown_tool");
    assert!(runs(&d).is_empty());
    let listed = stdout(&d.dsh(&["plugins", "list"]).output().unwrap());
    assert!(
        listed.contains("needs approval: dsh plugins approve wc"),
        "{listed}"
    );

    let out = d.dsh(&["plugins", "approve", "wc"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = batch(&d, &[call(json!({"path": "notes.txt"}))]);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert_eq!(r[0]["value"], json!({"words": 3}));

    // A `git pull` changes the script: it waits for approval again.
    let script = dir.join("plugin_tool.py");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("\n# changed\n");
    std::fs::write(&script, text).unwrap();
    let out = d.batch_output(&[call(json!({"path": "notes.txt"}))], &[], &[]);
    assert!(
        stderr(&out).contains("dsh plugins approve wc"),
        "{}",
        stderr(&out)
    );
    assert_eq!(kind(&json_lines(&out)[0]), "unknown_tool");
    assert_eq!(runs(&d).len(), 1, "only the approved run");
}
