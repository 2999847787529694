//! Ordinary work runs (issue "ordinary work runs", stage b, item 1 and 5; SPEC A4, P2, P3,
//! P12): a program on no list asks — a person, `--yolo` or an allow rule lets it run in the
//! workspace-write sandbox — instead of being refused; `[shell] unlisted = "deny"` keeps the
//! strict allowlist; what such a program would write outside the workspace or into a
//! protected path is refused whatever anyone says; `dsh exec` prints a line per tool call on
//! stderr and says how many calls nobody was asked about.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Dirs, check_shell, json_lines, kind, scripted_exec, stderr};
use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use serde_json::{Value, json};

/// The shell policy's vote in a check.
fn shell_vote(c: &Value) -> &Value {
    c["votes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["policy"] == "shell")
        .unwrap()
}

/// Build, test and file work across languages: none is refused, each asks.
const ORDINARY: &[&str] = &[
    "cargo build",
    "cargo test --workspace",
    "cargo clippy --all-targets",
    "cargo fmt --check",
    "cargo run --bin app",
    "rustc --version",
    "go build ./...",
    "go test ./...",
    "go vet ./...",
    "gofmt -l .",
    "npm install",
    "npm test",
    "npm run build",
    "yarn install",
    "yarn test",
    "pnpm install",
    "pnpm run lint",
    "node --version",
    "uv sync",
    "uv run pytest",
    "poetry install",
    "ruff check .",
    "mypy src",
    "pytest -q",
    "pip install -e .",
    "cmake -S . -B build",
    "cmake --build build",
    "ctest --test-dir build",
    "gcc -o app main.c",
    "make",
    "make test",
    "mkdir -p build/out",
    "cp src/a.rs src/b.rs",
    "mv notes.txt docs/notes.txt",
    "rm -rf build",
    "rm target/*.o",
    "touch src/new.rs",
    "tar czf out.tgz src",
    "tar xzf vendor.tgz -C vendor",
    "ln -s ../README.md docs/README.md",
    "chmod +x scripts/run.sh",
    "awk '{print $1}' data.txt",
    "find . -name '*.tmp' -delete",
];

#[test]
fn ordinary_commands_ask_instead_of_being_refused() {
    let d = Dirs::new();
    let mut wrong = Vec::new();
    for line in ORDINARY {
        let c = check_shell(&d, &[], line);
        if c["decision"] != "ask" {
            wrong.push(format!("{line}: {c}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(ORDINARY.len() >= 40);
    // A rule lifts such an ask: it is the lists' verdict (tier default), not a structural one.
    let c = check_shell(&d, &[], "cargo test --workspace");
    assert_eq!(shell_vote(&c)["tier"], "default", "{c}");
    assert!(c["reason"].as_str().unwrap().contains("so it asks"), "{c}");
    d.write_user_config("[permissions]\nallow = [\"run_shell(cargo *)\"]\n");
    assert_eq!(
        check_shell(&d, &[], "cargo test --workspace")["decision"],
        "allow"
    );
    // The strict allowlist, for teams that want it.
    d.write_user_config("[shell]\nunlisted = \"deny\"\n");
    let c = check_shell(&d, &[], "cargo test");
    assert_eq!(c["decision"], "deny", "{c}");
    assert!(
        c["reason"]
            .as_str()
            .unwrap()
            .contains("unlisted = \"deny\""),
        "{c}"
    );
}

/// The same table in the other modes: `read-only` refuses each and `auto` lets each run
/// without a person (in its hardened sandbox), both by the mode's vote.
#[test]
fn ordinary_commands_are_refused_in_read_only_and_run_unasked_in_auto() {
    let d = Dirs::new();
    let mut wrong = Vec::new();
    for (mode, want) in [("read-only", "deny"), ("auto", "allow")] {
        for line in ORDINARY {
            let args = json!({ "command": line }).to_string();
            let out = d
                .dsh(&["--mode", mode, "check", "run_shell", &args])
                .output()
                .unwrap();
            let c = json_lines(&out).remove(0);
            if c["decision"] != want || c["policy"] != "mode" {
                wrong.push(format!("--mode {mode} {line}: {c}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn approved_file_work_runs_in_the_workspace_write_sandbox() {
    let d = Dirs::new();
    std::fs::create_dir_all(d.ws.join("src")).unwrap();
    std::fs::write(d.ws.join("src/a.txt"), "a\n").unwrap();
    let lines = [
        "mkdir -p build/out",
        "cp src/a.txt build/out/b.txt",
        "touch build/c.txt",
        "tar cf out.tar build",
        "rm -rf build",
    ];
    let calls: Vec<Value> = lines
        .iter()
        .map(|l| json!({"name": "run_shell", "args": {"command": l}}))
        .collect();
    // Headless without --yolo: nobody to ask, nothing ran.
    let out = d.batch_output(&calls[..1], &[], &[]);
    assert_eq!(kind(&json_lines(&out)[0]), "unavailable");
    assert!(!d.ws.join("build").exists());
    let out = d.batch_output(&calls, &["--yolo"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for (line, r) in lines.iter().zip(json_lines(&out)) {
        assert_eq!(kind(&r), "ok", "{line}: {r}");
        assert_eq!(r["sandbox"], "landlock", "{line}: {r}");
        assert_eq!(r["exit_code"], 0, "{line}: {r}");
    }
    assert!(d.ws.join("out.tar").exists());
    assert!(!d.ws.join("build").exists());
}

#[test]
fn destinations_outside_or_protected_are_refused_even_with_yolo() {
    let d = Dirs::new();
    std::fs::write(d.ws.join("x"), "#!/bin/sh\necho planted\n").unwrap();
    std::fs::create_dir_all(d.ws.join(".git/hooks")).unwrap();
    let lines = [
        "cp x .git/hooks/pre-commit",
        "mv x .dsh/config.toml",
        "sed -i s/a/b/ AGENTS.md",
        "cp x ../outside/y",
        "rm -rf ~",
        "tar xf a.tar -C /",
        "install -m 755 x /usr/local/bin/x",
        "rm .g*/hooks/*",
        "curl -s https://example.com",
    ];
    let calls: Vec<Value> = lines
        .iter()
        .map(|l| json!({"name": "run_shell", "args": {"command": l}}))
        .collect();
    for line in lines {
        assert_eq!(check_shell(&d, &[], line)["decision"], "deny", "{line}");
    }
    let out = d.batch_output(&calls, &["--yolo"], &[]);
    for (line, r) in lines.iter().zip(json_lines(&out)) {
        assert_eq!(kind(&r), "denied", "{line}: {r}");
    }
    assert!(!d.ws.join(".git/hooks/pre-commit").exists());
    assert!(d.ws.join("x").exists());
}

#[test]
fn exec_prints_a_line_per_tool_call_and_the_calls_nobody_was_asked_about() {
    let d = Dirs::new();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", r#"{"command":"seq 1 2"}"#).into(),
        Turn::tool_call("c2", "run_shell", r#"{"command":"cargo build"}"#).into(),
        Turn::tool_call("c3", "run_shell", r#"{"command":"cp x ../y"}"#).into(),
        Reply::text("done"),
    ]);
    let out = scripted_exec(&d, &server.url, &[], "work")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("✓ run_shell seq 1 2 · exit 0")),
        "{err}"
    );
    assert!(
        lines.iter().any(
            |l| l.starts_with("✗ run_shell cargo build · needed approval:")
                && l.contains("so it asks")
                && l.contains("run_shell(cargo build *)")
        ),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("✗ run_shell cp x ../y · refused:")
                && l.contains("outside the workspace")),
        "{err}"
    );
    assert!(
        lines
            .last()
            .unwrap()
            .contains("1 call needed a person's approval"),
        "{err}"
    );
    // --quiet keeps stderr for errors only.
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", r#"{"command":"seq 1 2"}"#).into(),
        Reply::text("done"),
    ]);
    let out = scripted_exec(&d, &server.url, &["--quiet"], "work")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("run_shell"), "{}", stderr(&out));
}
