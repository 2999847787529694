//! End-to-end: the `dsh` binary, as a user or a script runs it. Every test isolates itself
//! from the real user config and state (DSH_CONFIG_HOME and DSH_HOME in temp dirs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use common::{Dirs, json_lines, kind, stderr};
use serde_json::{Value, json};

struct Env {
    dirs: Dirs,
}

impl std::ops::Deref for Env {
    type Target = Dirs;
    fn deref(&self) -> &Dirs {
        &self.dirs
    }
}

impl Env {
    fn new() -> Env {
        let dirs = Dirs::new();
        let ws = &dirs.ws;
        for d in [ws.join("src"), ws.join(".git")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(
            ws.join("src/main.rs"),
            "fn main() {\n    println!(\"hello\");\n}\n",
        )
        .unwrap();
        std::fs::write(ws.join(".env"), "API_KEY=hunter2\n").unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(dirs.outside.join("secret.txt"), "TOP SECRET\n").unwrap();
        Env { dirs }
    }

    fn user_config(&self, text: &str) {
        self.write_user_config(text);
    }

    fn check(&self, tool: &str, args: Value) -> Value {
        let out = self
            .dsh(&["check", tool, &args.to_string()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text.lines().count(), 1, "check prints one line: {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// Runs `dsh batch -` on the calls; returns the result objects and the output.
    fn batch(&self, calls: &[Value], extra: &[&str]) -> (Vec<Value>, Output) {
        let out = self.batch_output(calls, extra, &[]);
        (json_lines(&out), out)
    }

    fn one(&self, name: &str, args: Value, extra: &[&str]) -> Value {
        let (mut r, out) = self.batch(&[json!({"name": name, "args": args})], extra);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(r.len(), 1);
        r.remove(0)
    }

    fn journals(&self) -> Vec<PathBuf> {
        let dir = self.home.join("sessions");
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

#[test]
fn version_and_help_work() {
    let out = Command::new(env!("CARGO_BIN_EXE_dsh"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("dsh "));
    let out = Command::new(env!("CARGO_BIN_EXE_dsh"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("batch"));
}

#[test]
fn the_repl_on_empty_piped_input_says_where_it_runs_and_leaves() {
    let e = Env::new();
    let out = e.dsh(&[]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("dsh "), "{stdout}");
    assert!(stdout.contains("approvals: none (piped)"), "{stdout}");
    assert!(!stdout.contains('\x1b'), "{stdout:?}");
}

#[cfg(unix)]
#[test]
fn every_confinement_escape_is_denied_with_the_path_shown_and_nothing_read() {
    use std::os::unix::fs::symlink;
    let e = Env::new();
    symlink(e.outside.join("secret.txt"), e.ws.join("link-out")).unwrap();
    symlink(&e.outside, e.ws.join("dir-out")).unwrap();
    symlink("/proc/self/environ", e.ws.join("environ")).unwrap();
    symlink(e.outside.join("nope"), e.ws.join("dangling")).unwrap();
    std::fs::hard_link(e.outside.join("secret.txt"), e.ws.join("hard")).unwrap();
    let secret = e.outside.join("secret.txt");
    let cases = [
        "../outside/secret.txt",
        "src/../../outside/secret.txt",
        secret.to_str().unwrap(),
        "/etc/passwd",
        "/proc/self/environ",
        "link-out",
        "dir-out/secret.txt",
        "environ",
        "dangling",
        "hard",
    ];
    for path in cases {
        for yolo in [false, true] {
            let extra: &[&str] = if yolo { &["--yolo"] } else { &[] };
            let r = e.one("read_file", json!({"path": path}), extra);
            assert_eq!(kind(&r), "denied", "{path} yolo={yolo}: {r}");
            assert!(r["content"].as_str().unwrap().contains(path), "{r}");
            assert!(!r["content"].as_str().unwrap().contains("TOP SECRET"));
        }
    }
    // Listing or searching through a symlinked directory is refused too.
    assert_eq!(
        kind(&e.one("list_dir", json!({"path": "dir-out"}), &[])),
        "denied"
    );
    assert_eq!(
        kind(&e.one("grep", json!({"pattern": "SECRET", "path": "dir-out"}), &[])),
        "denied"
    );
    // And a whole-workspace search never follows the links out.
    let r = e.one("grep", json!({"pattern": "TOP SECRET"}), &[]);
    assert!(r["ok"].as_bool().unwrap(), "{r}");
    assert_eq!(r["value"]["matches"], json!([]), "{r}");
}

#[cfg(unix)]
#[test]
fn fifos_and_devices_are_refused_without_being_opened() {
    let e = Env::new();
    let status = Command::new("mkfifo")
        .arg(e.ws.join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let r = e.one("read_file", json!({"path": "pipe"}), &[]);
    assert_eq!(kind(&r), "invalid_args", "{r}");
    let r = e.one("read_file", json!({"path": "/dev/zero"}), &[]);
    assert_eq!(kind(&r), "denied", "{r}");
}

#[cfg(target_os = "linux")]
#[test]
fn non_utf8_names_are_listed_and_found() {
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(e.ws.join("src").join(name), "needle\n").unwrap();
    let r = e.one("list_dir", json!({"path": "src"}), &[]);
    assert!(r["ok"].as_bool().unwrap(), "{r}");
    assert!(r["content"].as_str().unwrap().contains("caf"), "{r}");
    let r = e.one("grep", json!({"pattern": "needle"}), &[]);
    assert!(r["ok"].as_bool().unwrap(), "{r}");
    assert!(r["content"].as_str().unwrap().contains("caf"), "{r}");
}

#[test]
fn check_and_batch_agree_on_a_table_of_calls() {
    let e = Env::new();
    e.user_config(
        r#"
[permissions]
deny = ["read_file(.env)"]
ask = ["list_dir(src)"]
"#,
    );
    let table = [
        ("read_file", json!({"path": "src/main.rs"})),
        ("read_file", json!({"path": ".env"})),
        ("read_file", json!({"path": "src/../.env"})),
        ("read_file", json!({"path": "../outside/secret.txt"})),
        ("list_dir", json!({"path": "src"})),
        ("list_dir", json!({"path": "."})),
        ("grep", json!({"pattern": "hello"})),
        ("find_files", json!({"pattern": "*.rs"})),
        ("no_such_tool", json!({})),
        ("read_file", json!({"path": 7})),
    ];
    for (tool, args) in &table {
        let check = e.check(tool, args.clone());
        let plain = e.one(tool, args.clone(), &[]);
        let yolo = e.one(tool, args.clone(), &["--yolo"]);
        let decision = check["decision"].as_str().unwrap();
        match decision {
            "allow" => {
                assert_ne!(kind(&plain), "unavailable", "{tool} {args}: {plain}");
                assert_ne!(kind(&plain), "denied");
            }
            "ask" => {
                assert_eq!(kind(&plain), "unavailable", "{tool} {args}");
                assert!(plain["content"].as_str().unwrap().contains("--yolo"));
                assert_eq!(kind(&yolo), "ok", "{tool} {args}: {yolo}");
            }
            "deny" => {
                for r in [&plain, &yolo] {
                    let k = kind(r);
                    assert!(
                        ["denied", "unknown_tool", "invalid_args"].contains(&k),
                        "{tool} {args}: {r}"
                    );
                    assert_eq!(r["decided_by"]["gate"], check["gate"], "{tool} {args}");
                }
            }
            other => panic!("unexpected decision {other}"),
        }
    }
    // The table covers all three decisions.
    let decisions: Vec<String> = table
        .iter()
        .map(|(t, a)| {
            e.check(t, a.clone())["decision"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    for d in ["allow", "ask", "deny"] {
        assert!(
            decisions.iter().any(|x| x == d),
            "{d} missing from {decisions:?}"
        );
    }
}

#[test]
fn a_deny_rule_beats_an_allow_rule_from_any_layer() {
    let e = Env::new();
    e.user_config(&format!(
        "[permissions]\ndeny = [\"read_file(.env)\"]\n[trust]\nworkspaces = [{:?}]\n",
        e.ws.display().to_string()
    ));
    e.project_config("[permissions]\nallow = [\"read_file(.env)\", \"read_file\"]\n");
    let r = e.one("read_file", json!({"path": ".env"}), &["--yolo"]);
    assert_eq!(kind(&r), "denied", "{r}");
    assert!(
        r["decided_by"]["reason"].as_str().unwrap().contains("user"),
        "{r}"
    );
}

#[test]
fn a_read_tools_path_rule_applies_to_another_tools_declared_read() {
    let e = Env::new();
    e.project_config("[permissions]\ndeny = [\"read_file(.env)\"]\n");
    let report = e.check("grep", json!({"pattern": "x", "path": ".env"}));
    assert_eq!(report["decision"], "deny", "{report}");
    assert_eq!(report["gate"], "pre_policy", "{report}");
    assert_eq!(report["policy"], "permissions", "{report}");
    let reason = report["reason"].as_str().unwrap();
    assert!(reason.contains("`read_file(.env)`"), "{reason}");
    assert!(reason.contains("`grep` reads .env"), "{reason}");
    // The run says the same: nothing is read.
    let r = e.one(
        "grep",
        json!({"pattern": "API", "path": ".env"}),
        &["--yolo"],
    );
    assert_eq!(kind(&r), "denied", "{r}");
    assert!(!r["content"].as_str().unwrap().contains("hunter2"), "{r}");
}

#[test]
fn an_untrusted_project_cannot_add_an_allow_rule_until_trusted() {
    let e = Env::new();
    e.project_config("[permissions]\nallow = [\"list_dir(src)\"]\nask = [\"list_dir\"]\n");
    // Untrusted: the allow is ignored (with a notice), the ask applies.
    let out = e
        .dsh(&["check", "list_dir", r#"{"path":"src"}"#])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["decision"], "ask", "{report}");
    assert!(stderr(&out).contains("dsh trust"), "{}", stderr(&out));
    // `dsh trust` records it; now the project's allow applies.
    let out = e.dsh(&["trust"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(e.cfg.join("config.toml")).unwrap();
    assert!(text.contains(&e.ws.display().to_string()), "{text}");
    // Rule ask beats rule allow (both from the project): still ask, but for a reason that
    // names the project file.
    let report = e.check("list_dir", json!({"path": "src"}));
    assert_eq!(report["decision"], "ask");
    e.project_config("[permissions]\nallow = [\"list_dir(src)\"]\n");
    let report = e.check("list_dir", json!({"path": "src"}));
    assert_eq!(report["decision"], "allow", "{report}");
}

#[test]
fn config_errors_name_file_line_and_key_and_exit_2() {
    let e = Env::new();
    e.user_config(
        "[permissions]\nallow = [\"read_file(src/**)\"]\n\n[shell]\nsafe_list = [\"ls\"]\n",
    );
    let out = e
        .dsh(&["check", "read_file", r#"{"path":"x"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let msg = stderr(&out);
    assert!(msg.contains("config.toml:5"), "{msg}");
    assert!(msg.contains("safe_list"), "{msg}");

    e.user_config("[permissions]\ndeny = [\"read_file(src/**\"]\n");
    let out = e.dsh(&["batch", "-"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("config.toml:2"), "{}", stderr(&out));
    assert!(e.journals().is_empty(), "nothing ran, nothing recorded");
}

#[test]
fn malformed_batch_input_runs_nothing() {
    let e = Env::new();
    let mut child = e
        .dsh(&["batch", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"name\":\"read_file\",\"args\":{\"path\":\"src/main.rs\"}}\n{not json\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("-:2"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_batch_leaves_a_verified_journal_under_dsh_home() {
    let e = Env::new();
    let (results, out) = e.batch(
        &[
            json!({"name": "read_file", "args": {"path": "src/main.rs"}, "id": "r1"}),
            json!({"name": "read_file", "args": {"path": "../x"}, "id": "r2"}),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(results.len(), 2);
    let journals = e.journals();
    assert_eq!(journals.len(), 1);
    let t = dsh_core::journal::read_journal(&journals[0]).unwrap();
    // Both reads are parallel-safe: the second is voted on (and refused) while the first
    // runs; results still commit in submission order.
    assert_eq!(
        t.kinds(),
        [
            "session_start",
            "tool_call",
            "tool_started",
            "tool_call",
            "tool_result",
            "tool_result",
            "stop",
            "session_end"
        ]
    );
    let ids: Vec<&str> = t
        .of_kind("tool_result")
        .map(|r| r["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["r1", "r2"]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&journals[0])
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// `examples/tour.jsonl` shows each gate at work, as the README says.
#[test]
fn the_tour_shows_each_gate_at_work() {
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let e = Env::new();
    let ws = e.ws.parent().unwrap().join("tour");
    copy_dir(&examples.join("tour"), &ws);
    let out = Command::new(env!("CARGO_BIN_EXE_dsh"))
        .arg("--workspace")
        .arg(&ws)
        .arg("--config")
        .arg(examples.join("tour.toml"))
        .arg("batch")
        .arg(examples.join("tour.jsonl"))
        .env("DSH_HOME", &e.home)
        .env("DSH_CONFIG_HOME", &e.cfg)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(&str, &str, &str)> = results
        .iter()
        .map(|r| {
            (
                r["call_id"].as_str().unwrap(),
                kind(r),
                r["decided_by"]["policy"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("read", "ok", "-"),
            ("escape", "denied", "confinement"),
            ("secret", "denied", "permissions"),
            ("edit-unseen", "not_observed", "-"),
            ("read-greet", "ok", "-"),
            ("edit-seen", "ok", "permissions"),
            ("protected", "denied", "protected_paths"),
            ("needs-approval", "unavailable", "-"),
            ("big", "ok", "-"),
            ("between", "ok", "permissions"),
            ("page", "ok", "-"),
        ]
    );
    let big = &results[8];
    assert!(
        big["content"]
            .as_str()
            .unwrap()
            .contains("saved as `out-big`"),
        "{big}"
    );
    assert!(big["content"].as_str().unwrap().chars().count() <= 2000);
    // The page read back is the spilled output's text at that offset.
    let page = results[10]["content"].as_str().unwrap();
    assert!(page.contains("the quick brown fox"), "{page}");
    assert_eq!(results[10]["value"]["offset"], 3000);
    let greet = std::fs::read_to_string(ws.join("src/greet.py")).unwrap();
    assert!(greet.contains("Howdy"));
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert!(!ws.join("notes.txt").exists());
}

/// The file seam end to end. (`stale_version` after an outside change needs the change to
/// land between a read and an edit of one session; a batch reads all its input first, so that
/// case is proven at the tool level, in dsh-tools' `tests/seam.rs`.)
#[test]
fn observations_belong_to_a_session_and_reads_authorize_edits() {
    let e = Env::new();
    e.user_config("[permissions]\nallow = [\"edit_file(src/**)\", \"write_file(src/**)\"]\n");
    let read = json!({"id": "read", "name": "read_file", "args": {"path": "src/main.rs"}});
    let edit = json!({"id": "edit", "name": "edit_file", "args": {"path": "src/main.rs", "old_string": "hello", "new_string": "bye"}});
    let write = json!({"id": "write", "name": "write_file", "args": {"path": "src/main.rs", "content": "fn main() {}\n"}});
    let (r, _) = e.batch(std::slice::from_ref(&read), &[]);
    assert_eq!(kind(&r[0]), "ok");
    // A later session has observed nothing: neither the edit nor the overwrite may run.
    let (r, _) = e.batch(&[edit.clone(), write.clone()], &[]);
    assert_eq!(
        (kind(&r[0]), kind(&r[1])),
        ("not_observed", "not_observed"),
        "{r:?}"
    );
    assert!(
        std::fs::read_to_string(e.ws.join("src/main.rs"))
            .unwrap()
            .contains("hello")
    );
    // Read, then edit, then overwrite — each change updates the observation.
    let (r, _) = e.batch(&[read, edit, write], &[]);
    let kinds: Vec<&str> = r.iter().map(kind).collect();
    assert_eq!(kinds, ["ok", "ok", "ok"], "{r:?}");
    assert!(
        r[1]["content"]
            .as_str()
            .unwrap()
            .contains("+    println!(\"bye\");"),
        "{}",
        r[1]
    );
    assert_eq!(
        std::fs::read_to_string(e.ws.join("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
}

#[test]
fn batch_json_streams_the_journal_instead_of_results() {
    let e = Env::new();
    let (_, out) = e.batch(
        &[json!({"name": "read_file", "args": {"path": "src/main.rs"}, "id": "r"})],
        &["--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let t = dsh_core::journal::read_journal(&e.journals()[0]).unwrap();
    let journal: Vec<Value> = t
        .records
        .into_iter()
        .map(|e| Value::Object(e.json))
        .collect();
    assert_eq!(lines, journal);
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "session_start",
            "tool_call",
            "tool_started",
            "tool_result",
            "stop",
            "session_end"
        ]
    );
}
