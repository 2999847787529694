//! Attacks on plugins (issue 27, stage c) through the real `dsh` binary: each test fails if
//! a promise of the README's "Plugins" section is broken. The hostile plugin is
//! `tests/servers/attack_plugin.py`; its behaviour is named on its command line.
//!
//! - a `paths_from` argument is judged before the command runs: a symlink inside the
//!   workspace pointing out, a list with one bad path, values that are not strings, and
//!   protected paths spelled as a case-folding file system reads them never reach it;
//! - it runs sandboxed as `run_shell` runs: no API key in any environment it can read, no
//!   descriptor beyond stdin, stdout and stderr, no process left once the call ended, a
//!   10 MB argument it never reads does not hang the call, an answer over 4 MiB or not JSON
//!   is a `tool_error`, and inside the workspace it may write no more than a `run_shell`
//!   command allowed the same way;
//! - a project's plugin runs only as approved: a changed script its folder links to, or one
//!   its command names, asks again;
//! - a tool named `mcp__…` is refused.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{Dirs, content, json_lines, kind, stderr, stdout};
use serde_json::{Value, json};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/servers/attack_plugin.py"
);

/// A `plugin.toml` declaring one tool `name` that runs the hostile script in `mode`, with
/// `extra` TOML lines (`paths_from`, `read_only`, `timeout_s`, an input schema).
fn toml(name: &str, mode: &str, extra: &str) -> String {
    let input = if extra.contains("input_schema") {
        String::new()
    } else {
        "input_schema = { type = \"object\" }\n".to_owned()
    };
    format!(
        "[[tools]]\nname = \"{name}\"\ndescription = \"attack\"\n\
         command = \"python3 \\\"$DSH_PLUGIN_DIR/attack_plugin.py\\\" {mode}\"\n\
         output_schema = {{ type = \"object\" }}\n{input}{extra}\n"
    )
}

/// The plugin folder `parent/NAME` holding `text` as its `plugin.toml` and the script.
fn plugin(parent: &Path, name: &str, text: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plugin.toml"), text).unwrap();
    std::fs::copy(SCRIPT, dir.join("attack_plugin.py")).unwrap();
    dir
}

/// A world with the user's plugin `p` declaring `text`, the tools named in `allow` allowed.
fn world(text: &str, allow: &[&str]) -> Dirs {
    let d = Dirs::new();
    d.write_user_config(&format!("[permissions]\nallow = {allow:?}\n"));
    plugin(&d.cfg.join("plugins"), "p", text);
    d
}

fn batch(d: &Dirs, calls: &[Value], envs: &[(&str, &str)]) -> Vec<Value> {
    let out = d.batch_output(calls, &[], envs);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = json_lines(&out);
    assert_eq!(r.len(), calls.len(), "{}", stdout(&out));
    r
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "args": args})
}

/// Whether the `ran` plugin ran (its log in the workspace).
fn ran(d: &Dirs) -> usize {
    std::fs::read_to_string(d.ws.join("plugin-ran.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn a_path_argument_through_a_symlink_out_of_the_workspace_is_refused_before_it_runs() {
    let d = world(
        &toml(
            "probe",
            "ran",
            "read_only = true\npaths_from = [\"path\", \"paths\"]\n\
             input_schema = { type = \"object\", properties = { path = {}, paths = {} } }",
        ),
        &["probe"],
    );
    std::fs::write(d.outside.join("secret.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(&d.outside, d.ws.join("out")).unwrap();
    std::os::unix::fs::symlink(d.outside.join("secret.txt"), d.ws.join("s.txt")).unwrap();
    std::fs::write(d.ws.join("ok.txt"), "inside").unwrap();
    let r = batch(
        &d,
        &[
            call("probe", json!({"path": "out/secret.txt"})),
            call("probe", json!({"path": "s.txt"})),
            call(
                "probe",
                json!({"paths": ["ok.txt", "../outside/secret.txt"]}),
            ),
            call("probe", json!({"paths": ["ok.txt", "out/secret.txt"]})),
            // Not a string or a list of strings: refused, never run with an unjudged path.
            call("probe", json!({"path": {"p": "../outside/secret.txt"}})),
            call(
                "probe",
                json!({"paths": ["ok.txt", ["../outside/secret.txt"]]}),
            ),
            call("probe", json!({"path": 7})),
            // NUL and a fullwidth solidus: no trick turns them into a way out.
            call(
                "probe",
                json!({"path": "ok.txt\u{0}/../../outside/secret.txt"}),
            ),
            call("probe", json!({"path": "..\u{ff0f}outside"})),
        ],
        &[],
    );
    for (i, res) in r.iter().enumerate().take(8) {
        assert_ne!(kind(res), "ok", "call {i} ran: {res}");
    }
    // `..／outside` is a name inside the workspace.
    assert_eq!(kind(&r[8]), "ok", "{}", r[8]);
    assert_eq!(ran(&d), 1, "only the harmless spelling ran: {r:?}");
}

#[test]
fn a_write_path_argument_naming_a_protected_path_in_any_spelling_never_runs() {
    let d = world(
        &toml(
            "put",
            "ran",
            "paths_from = [\"path\"]\n\
             input_schema = { type = \"object\", properties = { path = { type = \"string\" } } }",
        ),
        &["put"],
    );
    std::fs::create_dir_all(d.ws.join(".git")).unwrap();
    let spellings = [
        ".dsh/config.toml",
        ".DSH/config.toml",
        ".git/hooks/pre-commit",
        ".Git/config",
        ".git./config",
        "./.git/config",
        "sub/../.git/config",
        ".claude/settings.json",
        "\u{FF0E}git/config", // fullwidth full stop: a different name, may run
    ];
    let calls: Vec<Value> = spellings
        .iter()
        .map(|p| call("put", json!({"path": p})))
        .collect();
    let r = batch(&d, &calls, &[]);
    for (p, res) in spellings.iter().zip(&r).take(spellings.len() - 1) {
        assert_eq!(kind(res), "denied", "{p}: {res}");
    }
    assert!(ran(&d) <= 1, "a protected path reached the plugin: {r:?}");
}

/// The probe must know the key to look for it: it gets it reversed through `[shell]
/// pass_env` under a name that is not a credential, and looks for the key in every
/// environment it can read (its own, its parent's, every process's).
#[test]
fn a_plugin_cannot_read_dsh_s_environment_through_proc() {
    let d = Dirs::new();
    d.write_user_config(
        "[permissions]\nallow = [\"env_probe\"]\n[shell]\npass_env = [\"PROBE_VALUE\"]\n",
    );
    plugin(
        &d.cfg.join("plugins"),
        "p",
        &toml("env_probe", "environ", ""),
    );
    let key = "probe-Zq8XvT41mNwPq7Rs3Ty9";
    let reversed: String = key.chars().rev().collect();
    let r = batch(
        &d,
        &[call("env_probe", json!({}))],
        &[
            ("OPENAI_API_KEY", key),
            ("MY_SERVICE_API_KEY", key),
            ("PROBE_VALUE", &reversed),
        ],
    );
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    assert_eq!(r[0]["value"]["probe_set"], true, "{}", r[0]);
    assert_eq!(
        r[0]["value"]["found"],
        json!([]),
        "the plugin read dsh's API key: {}",
        r[0]
    );
}

#[test]
fn a_plugin_gets_no_descriptor_beyond_stdin_stdout_and_stderr() {
    let d = world(&toml("fds", "fds", ""), &["fds"]);
    let r = batch(&d, &[call("fds", json!({}))], &[]);
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    assert_eq!(r[0]["value"]["extra"], json!({}), "{}", r[0]);
}

#[test]
fn a_grandchild_in_a_new_session_does_not_outlive_the_call() {
    let d = world(&toml("daemon", "daemon", ""), &["daemon"]);
    let fifo = d.ws.join("held.fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let r = batch(&d, &[call("daemon", json!({}))], &[]);
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    // With no process holding the FIFO, a non-blocking read sees end of file at once; a
    // survivor holding it open makes the read would-block.
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let mut buf = [0u8; 1];
    let survived = match f.read(&mut buf) {
        Ok(0) => false,
        Ok(_) => true,
        Err(e) => {
            assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
            true
        }
    };
    if survived {
        // End it: it reads `q` from the FIFO.
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        std::io::Write::write_all(&mut w, b"q").unwrap();
    }
    assert!(!survived, "a process the plugin started outlived the call");
}

#[test]
fn a_hung_plugin_is_killed_at_its_deadline() {
    let d = world(
        "[[tools]]\nname = \"hang\"\ndescription = \"hangs\"\ncommand = \"sleep 1000 & sleep 1000\"\ntimeout_s = 1\ninput_schema = { type = \"object\" }\noutput_schema = { type = \"object\" }\n",
        &["hang"],
    );
    let started = std::time::Instant::now();
    let r = batch(&d, &[call("hang", json!({}))], &[]);
    assert_eq!(kind(&r[0]), "timeout", "{}", r[0]);
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    common::verify_all(&d);
}

#[test]
fn a_ten_megabyte_argument_the_plugin_never_reads_does_not_hang_the_call() {
    let d = world(&toml("unread", "unread", ""), &["unread"]);
    let big = "x".repeat(10 << 20);
    let r = batch(&d, &[call("unread", json!({"blob": big}))], &[]);
    assert_eq!(kind(&r[0]), "ok", "{}", content(&r[0]));
    assert_eq!(r[0]["value"], json!({"ok": true}));
}

#[test]
fn an_answer_over_four_mebibytes_or_not_json_is_a_tool_error() {
    let text = format!(
        "{}{}",
        toml("huge", "huge", ""),
        toml("notjson", "notjson", "")
    );
    let d = world(&text, &["huge", "notjson"]);
    let r = batch(
        &d,
        &[call("huge", json!({})), call("notjson", json!({}))],
        &[],
    );
    assert_eq!(kind(&r[0]), "tool_error", "{}", content(&r[0]));
    assert!(content(&r[0]).contains("4 MiB"), "{}", content(&r[0]));
    assert!(
        content(&r[0]).len() < 10_000,
        "the answer is not quoted whole"
    );
    assert_eq!(kind(&r[1]), "tool_error", "{}", content(&r[1]));
    common::verify_all(&d);
}

/// A plugin allowed by a rule runs in the workspace-write profile, exactly as a `run_shell`
/// command allowed by a rule: protected paths inside the workspace are kept by the gates
/// (they judge declared paths), not by the sandbox. The plugin may not write more than that
/// command; what both can write is asserted, so a change in either shows.
#[test]
fn inside_the_workspace_a_plugin_writes_no_more_than_a_run_shell_command_allowed_alike() {
    let d = world(
        &toml("protected", "protected", ""),
        &["protected", "run_shell"],
    );
    let setup = |d: &Dirs| {
        std::fs::create_dir_all(d.ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(d.ws.join(".dsh")).unwrap();
        std::fs::write(d.ws.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(d.ws.join(".dsh/config.toml"), "").unwrap();
        let _ = std::fs::remove_file(d.ws.join(".git/hooks/pre-commit"));
    };
    setup(&d);
    // The same writes as a script of their own (run_shell's Python audit refuses the hostile
    // script's `os.fork`; plugins are not audited).
    std::fs::write(
        d.ws.join("protected.py"),
        "import json\nwrote = {}\n\
         for p in ['.git/config', '.git/hooks/pre-commit', '.dsh/config.toml']:\n\
         \x20   try:\n\
         \x20       open(p, 'a').write('# written by the command')\n\
         \x20       wrote[p] = True\n\
         \x20   except OSError as e:\n\
         \x20       wrote[p] = str(e)\n\
         print(json.dumps({'wrote': wrote}))\n",
    )
    .unwrap();
    let r = batch(&d, &[call("protected", json!({}))], &[]);
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    let plugin = r[0]["value"]["wrote"].clone();
    setup(&d);
    let r = batch(
        &d,
        &[json!({"name": "run_shell", "args": {"command": "python3 protected.py"}})],
        &[],
    );
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    let out = content(&r[0]);
    let shell: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    for p in [".git/config", ".git/hooks/pre-commit", ".dsh/config.toml"] {
        let (by_plugin, by_shell) = (&plugin[p], &shell["wrote"][p]);
        assert!(
            by_plugin != &json!(true) || by_shell == &json!(true),
            "{p}: the plugin wrote it ({by_plugin}), run_shell could not ({by_shell})"
        );
    }
    // Today both write them: the sandbox's workspace-write profile does not keep protected
    // paths (only `auto`'s hardened profile does).
    assert_eq!(
        plugin,
        json!({".git/config": true, ".git/hooks/pre-commit": true, ".dsh/config.toml": true})
    );
}

fn trusted_project(d: &Dirs, text: &str) -> PathBuf {
    d.write_user_config("[permissions]\nallow = [\"probe\"]\n");
    let dir = plugin(&d.ws.join(".dsh/plugins"), "p", text);
    let out = d.dsh(&["trust"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    dir
}

fn approve(d: &Dirs) {
    let out = d.dsh(&["plugins", "approve", "p"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A script the plugin's folder links to (outside it, in the workspace, which the agent may
/// write) changes after the approval: the plugin must wait for approval again.
#[test]
fn a_project_plugin_whose_linked_script_changed_asks_again() {
    let d = Dirs::new();
    let dir = trusted_project(
        &d,
        "[[tools]]\nname = \"probe\"\ndescription = \"x\"\n\
         command = \"python3 \\\"$DSH_PLUGIN_DIR/tool.py\\\" ran\"\n\
         input_schema = { type = \"object\" }\noutput_schema = { type = \"object\" }\n",
    );
    std::fs::create_dir_all(d.ws.join("scripts")).unwrap();
    std::fs::copy(SCRIPT, d.ws.join("scripts/tool.py")).unwrap();
    std::os::unix::fs::symlink("../../../scripts/tool.py", dir.join("tool.py")).unwrap();
    approve(&d);
    let r = batch(&d, &[call("probe", json!({}))], &[]);
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);
    assert_eq!(ran(&d), 1);

    // The agent (or a `git pull`) rewrites the script behind the link.
    let mut text = std::fs::read_to_string(d.ws.join("scripts/tool.py")).unwrap();
    text = text.replace(
        "if mode == \"ran\":",
        "if mode == \"ran\":\n    open('pwned', 'w')",
    );
    std::fs::write(d.ws.join("scripts/tool.py"), text).unwrap();
    let out = d.batch_output(&[call("probe", json!({}))], &[], &[]);
    assert!(
        !d.ws.join("pwned").exists(),
        "the changed script ran without a new approval"
    );
    assert!(
        stderr(&out).contains("dsh plugins approve p"),
        "{}",
        stderr(&out)
    );
}

/// The same with the script named by the command line (a path in the workspace, as a
/// hook's approval covers it).
#[test]
fn a_project_plugin_whose_command_names_a_changed_workspace_script_asks_again() {
    let d = Dirs::new();
    trusted_project(
        &d,
        "[[tools]]\nname = \"probe\"\ndescription = \"x\"\n\
         command = \"python3 scripts/tool.py ran\"\n\
         input_schema = { type = \"object\" }\noutput_schema = { type = \"object\" }\n",
    );
    std::fs::create_dir_all(d.ws.join("scripts")).unwrap();
    std::fs::copy(SCRIPT, d.ws.join("scripts/tool.py")).unwrap();
    approve(&d);
    let r = batch(&d, &[call("probe", json!({}))], &[]);
    assert_eq!(kind(&r[0]), "ok", "{}", r[0]);

    let mut text = std::fs::read_to_string(d.ws.join("scripts/tool.py")).unwrap();
    text = text.replace(
        "if mode == \"ran\":",
        "if mode == \"ran\":\n    open('pwned', 'w')",
    );
    std::fs::write(d.ws.join("scripts/tool.py"), text).unwrap();
    let out = d.batch_output(&[call("probe", json!({}))], &[], &[]);
    assert!(
        !d.ws.join("pwned").exists(),
        "the changed script ran without a new approval"
    );
    assert!(
        stderr(&out).contains("dsh plugins approve p"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_tool_named_like_an_mcp_tool_or_with_odd_characters_is_refused() {
    for name in ["mcp__x__y", "Read_file", "read-file", "word\u{0430}count"] {
        let d = world(&toml(name, "ran", ""), &[]);
        let listed = stdout(&d.dsh(&["plugins", "list"]).output().unwrap());
        assert!(listed.contains("refused:"), "{name}: {listed}");
        let out = d.batch_output(&[call(name, json!({}))], &[], &[]);
        let r = json_lines(&out);
        assert_ne!(r.first().map(kind), Some("ok"), "{name}: {r:?}");
        assert_eq!(ran(&d), 0, "{name}");
    }
}
