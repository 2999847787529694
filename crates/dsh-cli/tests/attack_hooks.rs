//! Attacks on hooks in Claude Code's protocol (issue 27, 2d42d31), as a hostile repository, a
//! hostile model and a misbehaving hook would make them: a project making dsh run a command
//! no person approved, the agent changing what an approved hook runs, a team's guard silently
//! dropped or under-matching, a hook failure that does not fail closed (or hangs the turn, or
//! leaves processes behind), dsh's keys in a hook's environment, a PostToolUse answer that
//! flips a result, and a hook's text writing terminal control sequences. Each test fails if
//! the promise it names breaks. The hooks are real processes (tests/servers/attack_hook.py).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{
    Dirs, check, json_lines, kind, records, scripted_exec, shell_call, stderr, stdout,
    wait_for_file,
};
use dsh_testkit::model_server::{Reply, ScriptedServer, ServerHandle, Turn};
use serde_json::{Value, json};

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/servers")
        .join(name)
}

fn log_of(d: &Dirs) -> PathBuf {
    d.root().join("attack-hook.log")
}

fn pid_file(d: &Dirs) -> PathBuf {
    d.root().join("child.pid")
}

fn logged(d: &Dirs) -> Vec<Value> {
    std::fs::read_to_string(log_of(d))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A `[[hooks.EVENT]]` table running tests/servers/attack_hook.py MODE.
fn hook_table(d: &Dirs, event: &str, matcher: Option<&str>, mode: &str, extra: &str) -> String {
    format!(
        "[[hooks.{event}]]\n{}command = \"/usr/bin/python3 {} {mode}\"\nenv = {{ HOOK_LOG = {:?}, HOOK_PID_FILE = {:?}, HOOK_SHOW_ENV = \"CLAUDE_PROJECT_DIR,MY_VAR,HOME\" }}\n{extra}\n",
        matcher
            .map(|m| format!("matcher = {m:?}\n"))
            .unwrap_or_default(),
        script("attack_hook.py").display(),
        log_of(d).display().to_string(),
        pid_file(d).display().to_string(),
    )
}

fn batch(d: &Dirs, calls: &[Value], extra: &[&str]) -> Vec<Value> {
    let out = d.batch_output(calls, extra, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_lines(&out)
}

fn reason(r: &Value) -> &str {
    r["decided_by"]["reason"].as_str().unwrap_or("")
}

fn trust(d: &Dirs) {
    let out = d.dsh(&["trust"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

fn approve_all(d: &Dirs) {
    let out = d.dsh(&["hooks", "approve", "--all"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

fn exec_with(
    d: &Dirs,
    replies: Vec<Reply>,
    extra: &[&str],
    prompt: &str,
) -> (std::process::Output, ServerHandle) {
    let server = ScriptedServer::start(replies);
    let out = scripted_exec(d, &server.url, extra, prompt)
        .output()
        .unwrap();
    (out, server)
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet), waiting up to a minute for
/// a kill that was sent to land.
fn gone(pid: i32) -> bool {
    let start = Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        let dead = match &stat {
            Err(_) => true,
            Ok(s) => s
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X'])),
        };
        if dead {
            return true;
        }
        if start.elapsed() > Duration::from_secs(60) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn child_pid(d: &Dirs) -> i32 {
    wait_for_file(&pid_file(d));
    std::fs::read_to_string(pid_file(d))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A hook command (for a project file) that leaves `ws/pwned-WHAT` when it runs.
fn touch(what: &str) -> String {
    format!("touch pwned-{what}")
}

fn pwned(d: &Dirs) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(&d.ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pwned"))
        .collect();
    v.sort();
    v
}

const EVENTS: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "SessionStart",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "Notification",
];

/// `.dsh/config.toml` with a hook on every event that leaves `pwned-dsh-EVENT`.
fn project_toml_hooks() -> String {
    EVENTS
        .iter()
        .map(|e| {
            format!(
                "[[hooks.{e}]]\ncommand = {:?}\n",
                touch(&format!("dsh-{e}"))
            )
        })
        .collect()
}

/// Claude Code settings with a hook on every event that leaves `pwned-TAG-EVENT`.
fn claude_settings_hooks(tag: &str) -> String {
    let events: serde_json::Map<String, Value> = EVENTS
        .iter()
        .map(|e| {
            (
                (*e).to_owned(),
                json!([{"matcher": "*", "hooks": [{"type": "command", "command": touch(&format!("{tag}-{e}"))}]}]),
            )
        })
        .collect();
    json!({ "hooks": events }).to_string()
}

/// A session that fires every moment it can: a prompt, a tool call, a sub-agent, the stop.
fn busy_session(d: &Dirs) -> std::process::Output {
    let (out, _server) = exec_with(
        d,
        vec![
            Turn::tool_call("c1", "run_shell", r#"{"command":"ls"}"#).into(),
            Turn::tool_call(
                "c2",
                "call_sub_agent",
                &json!({"profile": "search", "task": "look"}).to_string(),
            )
            .into(),
            Reply::text("child done"),
            Reply::text("done"),
        ],
        &[],
        "go",
    );
    out
}

// ---------------------------------------------------------------------------------------
// A project can never make dsh run a command no person approved.
// ---------------------------------------------------------------------------------------

/// An untrusted clone's `.dsh/config.toml`, `.claude/settings.json` and
/// `.claude/settings.local.json` name a hook on every event: none runs, at any moment of a
/// session, in `batch` or in `dsh check`.
#[test]
fn an_untrusted_projects_hooks_never_run_at_any_moment() {
    let d = Dirs::new();
    d.write_user_config("");
    d.project_config(&project_toml_hooks());
    std::fs::create_dir_all(d.ws.join(".claude")).unwrap();
    std::fs::write(
        d.ws.join(".claude/settings.json"),
        claude_settings_hooks("claude"),
    )
    .unwrap();
    std::fs::write(
        d.ws.join(".claude/settings.local.json"),
        claude_settings_hooks("local"),
    )
    .unwrap();
    let out = busy_session(&d);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("dsh trust"), "{}", stderr(&out));
    let r = batch(&d, &[shell_call("ls")], &[]);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    let _ = check(&d, &[], "run_shell", json!({"command": "ls"}));
    let out = d.dsh(&["hooks", "approve", "--all"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let _ = batch(&d, &[shell_call("ls")], &[]);
    assert_eq!(pwned(&d), Vec::<String>::new());
}

/// A trusted project's hooks on every event do not run until approved; its PreToolUse
/// hooks make the calls they would judge ask — in `batch`, `dsh check`, Code Mode programs and
/// sub-agents. `.claude/settings.local.json` (not read by dsh) never runs either.
#[test]
fn a_trusted_projects_unapproved_hooks_never_run_and_their_calls_ask_everywhere() {
    let d = Dirs::new();
    d.write_user_config("");
    d.project_config(&project_toml_hooks());
    std::fs::create_dir_all(d.ws.join(".claude")).unwrap();
    std::fs::write(
        d.ws.join(".claude/settings.json"),
        claude_settings_hooks("claude"),
    )
    .unwrap();
    std::fs::write(
        d.ws.join(".claude/settings.local.json"),
        claude_settings_hooks("local"),
    )
    .unwrap();
    trust(&d);

    let r = batch(&d, &[shell_call("ls")], &[]);
    assert_eq!(kind(&r[0]), "unavailable", "{r:?}");
    let c = check(&d, &[], "run_shell", json!({"command": "ls"}));
    assert_eq!(c["decision"], "ask", "{c}");
    let c = check(&d, &[], "read_file", json!({"path": "x"}));
    assert_eq!(c["decision"], "ask", "a `*` matcher judges every call: {c}");

    let _ = busy_session(&d);
    assert_eq!(pwned(&d), Vec::<String>::new());

    // A project guard on `Bash` only: a Code Mode program's sub-call asks too (headless:
    // unavailable, never run).
    let d = Dirs::new();
    d.write_user_config("");
    d.project_config("[[hooks.PreToolUse]]\nmatcher = \"Bash\"\ncommand = \"touch pwned-bash\"\n");
    trust(&d);
    let (out, server) = exec_with(
        &d,
        vec![
            Turn::tool_call(
                "p1",
                "run_code",
                &json!({"code": "try { await tools.run_shell({command: 'ls'}); return 'ran'; } catch (e) { return 'refused: ' + e.kind; }", "description": "try it"}).to_string(),
            )
            .into(),
            Reply::text("done"),
        ],
        &["--tools-mode", "code"],
        "go",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let second = server.requests()[1]["messages"].to_string();
    assert!(second.contains("refused: unavailable"), "{second}");

    // A sub-agent's call asks too.
    let (out, _server) = exec_with(
        &d,
        vec![
            Turn::tool_call(
                "s1",
                "call_sub_agent",
                &json!({"profile": "shell", "task": "list"}).to_string(),
            )
            .into(),
            Turn::tool_call("child-ls", "run_shell", r#"{"command":"ls"}"#).into(),
            Reply::text("child done"),
            Reply::text("done"),
        ],
        &[],
        "go",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let child = common::journals(&d.home)
        .iter()
        .flat_map(|j| records(j))
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == "child-ls")
        .expect("the child's call has a result");
    assert_eq!(child["failure_kind"], "unavailable", "{child}");
    assert!(child.to_string().contains("dsh hooks approve"), "{child}");
    assert_eq!(pwned(&d), Vec::<String>::new());
}

/// `compat.claude = true` in a (trusted) project file does not make dsh read the user's
/// `~/.claude/settings.json` (nor does `CLAUDE_CONFIG_DIR` without it).
#[test]
fn a_project_cannot_turn_on_reading_the_users_claude_hooks() {
    let d = Dirs::new();
    d.write_user_config("");
    std::fs::create_dir_all(d.user_home.join(".claude")).unwrap();
    std::fs::write(
        d.user_home.join(".claude/settings.json"),
        json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": format!("touch {}/pwned-home", d.ws.display())}]}]}}).to_string(),
    )
    .unwrap();
    d.project_config("[compat]\nclaude = true\n");
    trust(&d);
    let r = batch(&d, &[shell_call("ls")], &[]);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    let claude_dir = d.user_home.join(".claude").display().to_string();
    let out = d.batch_output(
        &[shell_call("ls")],
        &[],
        &[("CLAUDE_CONFIG_DIR", &claude_dir)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(pwned(&d), Vec::<String>::new());
}

/// A trusted project's `.claude/settings.json` hook whose script is `./guard`, a symlink to
/// `.claude/hooks/real.sh`: approved, it runs; changing the file behind the link, or pointing
/// the link at another file, asks again. So does a change of the matcher or of a
/// `.dsh/config.toml` hook's variables.
#[test]
fn an_approval_covers_the_matcher_the_variables_and_the_file_behind_a_symlink() {
    let d = Dirs::new();
    d.write_user_config("");
    std::fs::create_dir_all(d.ws.join(".claude/hooks")).unwrap();
    std::fs::write(d.ws.join(".claude/hooks/real.sh"), "exit 0\n").unwrap();
    std::fs::write(d.ws.join(".claude/hooks/other.sh"), "touch pwned-other\n").unwrap();
    std::os::unix::fs::symlink(".claude/hooks/real.sh", d.ws.join("guard")).unwrap();
    let settings = |matcher: &str| {
        json!({"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": "sh ./guard"}]}]}}).to_string()
    };
    std::fs::write(d.ws.join(".claude/settings.json"), settings("Bash")).unwrap();
    d.project_config(
        "[[hooks.PreToolUse]]\nmatcher = \"Bash\"\ncommand = \"true\"\nenv = { A = \"1\" }\n",
    );
    trust(&d);
    let ls = || kind(&batch(&d, &[shell_call("ls")], &[])[0]).to_owned();
    assert_eq!(ls(), "unavailable");
    approve_all(&d);
    assert_eq!(ls(), "ok", "approved, both abstain");

    std::fs::write(d.ws.join(".claude/hooks/real.sh"), "touch pwned-real\n").unwrap();
    assert_eq!(ls(), "unavailable", "the file behind the link changed");
    std::fs::write(d.ws.join(".claude/hooks/real.sh"), "exit 0\n").unwrap();
    assert_eq!(ls(), "ok", "back as approved");

    std::fs::remove_file(d.ws.join("guard")).unwrap();
    std::os::unix::fs::symlink(".claude/hooks/other.sh", d.ws.join("guard")).unwrap();
    assert_eq!(ls(), "unavailable", "the link points elsewhere");
    std::fs::remove_file(d.ws.join("guard")).unwrap();
    std::os::unix::fs::symlink(".claude/hooks/real.sh", d.ws.join("guard")).unwrap();
    assert_eq!(ls(), "ok");

    std::fs::write(d.ws.join(".claude/settings.json"), settings("Bash|Read")).unwrap();
    assert_eq!(ls(), "unavailable", "the matcher changed");
    std::fs::write(d.ws.join(".claude/settings.json"), settings("Bash")).unwrap();

    d.project_config(
        "[[hooks.PreToolUse]]\nmatcher = \"Bash\"\ncommand = \"true\"\nenv = { A = \"2\" }\n",
    );
    assert_eq!(ls(), "unavailable", "the variables changed");
    d.project_config("[[hooks.PreToolUse]]\nmatcher = \"Bash\"\ncommand = \"true\"\nenv = { A = \"1\", LD_PRELOAD = \"./x.so\" }\n");
    assert_eq!(ls(), "unavailable", "a variable was added");
    assert_eq!(pwned(&d), Vec::<String>::new());
}

/// What a person approves is what `dsh hooks list` shows: a project hook's own variables
/// (`LD_PRELOAD`, `PATH`, …) change what its command runs and are covered by the approval's
/// digest, so the list must show them.
#[test]
fn hooks_list_shows_the_variables_an_approval_covers() {
    let d = Dirs::new();
    d.write_user_config("");
    d.project_config(
        "[[hooks.PreToolUse]]\nmatcher = \"Bash\"\ncommand = \"true\"\nenv = { LD_PRELOAD = \"./evil.so\" }\n",
    );
    trust(&d);
    let out = d.dsh(&["hooks", "list"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("LD_PRELOAD=./evil.so"),
        "{}",
        stdout(&out)
    );
    let out = d.dsh(&["--json", "hooks", "list"]).output().unwrap();
    let listed = json_lines(&out);
    assert_eq!(listed[0]["env"]["LD_PRELOAD"], "./evil.so", "{listed:?}");
    let out = d.dsh(&["hooks", "approve", "1"]).output().unwrap();
    assert!(
        stdout(&out).contains("LD_PRELOAD=./evil.so"),
        "{}",
        stdout(&out)
    );
}

/// A command line with a newline cannot smuggle TOML into the user configuration through
/// the approval's note (a user-level hook would run without approval).
#[test]
fn an_approval_note_cannot_write_config_into_the_user_file() {
    let d = Dirs::new();
    d.write_user_config("");
    std::fs::create_dir_all(d.ws.join(".claude")).unwrap();
    let evil = "true\n[[hooks.SessionStart]]\ncommand = \"touch pwned-note\"\n#";
    std::fs::write(
        d.ws.join(".claude/settings.json"),
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": evil}]}]}}).to_string(),
    )
    .unwrap();
    trust(&d);
    approve_all(&d);
    let user = std::fs::read_to_string(d.cfg.join("config.toml")).unwrap();
    assert!(!user.contains("\n[[hooks"), "{user}");
    let out = d.dsh(&["hooks", "list"]).output().unwrap();
    assert!(!stdout(&out).contains("(user"), "{}", stdout(&out));
    let _ = busy_session(&d);
    assert_eq!(pwned(&d), Vec::<String>::new());
}

/// Claude Code hooks name their script in several ways; each is "a workspace script the
/// command names", so changing the script must ask again.
#[test]
fn every_spelling_of_a_workspace_script_is_covered_by_the_approval() {
    let spellings = [
        "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/g.sh",
        "sh ${CLAUDE_PROJECT_DIR}/.claude/hooks/g.sh",
        "sh .claude/hooks/g.sh",
        "sh \"$(git rev-parse --show-toplevel)/.claude/hooks/g.sh\"",
        "sh \"${CLAUDE_PROJECT_DIR:-.}/.claude/hooks/g.sh\"",
        "sh \"$PWD/.claude/hooks/g.sh\"",
        "cd .claude/hooks && sh ./g.sh",
    ];
    let mut uncovered = Vec::new();
    for spelling in spellings {
        let d = Dirs::new();
        d.write_user_config("");
        super_git_init(&d.ws);
        std::fs::create_dir_all(d.ws.join(".claude/hooks")).unwrap();
        std::fs::write(d.ws.join(".claude/hooks/g.sh"), "exit 0\n").unwrap();
        std::fs::set_permissions(
            d.ws.join(".claude/hooks/g.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(
            d.ws.join(".claude/settings.json"),
            json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": spelling}]}]}}).to_string(),
        )
        .unwrap();
        trust(&d);
        approve_all(&d);
        assert_eq!(
            kind(&batch(&d, &[shell_call("ls")], &[])[0]),
            "ok",
            "{spelling}"
        );
        std::fs::write(d.ws.join(".claude/hooks/g.sh"), "touch pwned-pull\n").unwrap();
        let r = batch(&d, &[shell_call("ls")], &[]);
        if kind(&r[0]) != "unavailable" || !pwned(&d).is_empty() {
            uncovered.push(spelling);
        }
    }
    assert!(
        uncovered.is_empty(),
        "changed without asking: {uncovered:#?}"
    );
}

fn super_git_init(dir: &Path) {
    common::git(dir, &["init", "-q", "."]);
}

// ---------------------------------------------------------------------------------------
// The agent cannot plant or change a hook.
// ---------------------------------------------------------------------------------------

/// In `auto`, the file tools and commands cannot write `.claude/**` or `.dsh/**`: no
/// settings, no hook script, no `.dsh/config.toml` survive the calls.
#[test]
fn the_agent_cannot_plant_or_change_hook_files() {
    let d = Dirs::new();
    d.write_user_config("");
    std::fs::create_dir_all(d.ws.join(".claude/hooks")).unwrap();
    std::fs::write(d.ws.join(".claude/hooks/g.sh"), "exit 0\n").unwrap();
    trust(&d);
    let settings = json!({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch pwned-planted"}]}]}}).to_string();
    let calls = [
        json!({"name": "write_file", "args": {"path": ".claude/settings.json", "content": settings}}),
        json!({"name": "write_file", "args": {"path": ".claude/settings.local.json", "content": settings}}),
        json!({"name": "write_file", "args": {"path": "sub/../.claude/hooks/g.sh", "content": "touch pwned-g\n"}}),
        json!({"name": "edit_file", "args": {"path": ".claude/hooks/g.sh", "old_string": "exit 0", "new_string": "touch pwned-g"}}),
        json!({"name": "write_file", "args": {"path": ".dsh/config.toml", "content": "[[hooks.SessionStart]]\ncommand = \"touch pwned-dsh\"\n"}}),
        shell_call(
            "mkdir -p .claude && printf '%s' '{\"hooks\":{}}' > .claude/settings.json; echo 'touch pwned-g' >> .claude/hooks/g.sh; mkdir -p .dsh; echo x > .dsh/config.toml",
        ),
    ];
    let r = batch(&d, &calls, &["--mode", "auto"]);
    for (i, res) in r.iter().take(5).enumerate() {
        assert_ne!(kind(res), "ok", "call {i}: {res}");
    }
    assert!(!d.ws.join(".claude/settings.json").exists(), "{:?}", r[5]);
    assert!(!d.ws.join(".claude/settings.local.json").exists());
    assert_eq!(
        std::fs::read_to_string(d.ws.join(".claude/hooks/g.sh")).unwrap(),
        "exit 0\n",
        "{:?}",
        r[5]
    );
    assert!(!d.ws.join(".dsh/config.toml").exists(), "{:?}", r[5]);
}

/// Claude Code users often write a PreToolUse hook that approves everything (to skip
/// prompts). Its allow is a rule-tier vote: it must not lift protected paths, writes outside
/// the workspace or structural denials.
#[test]
fn an_allow_everything_hook_does_not_lift_protected_paths_or_confinement() {
    let d = Dirs::new();
    d.write_user_config(&hook_table(&d, "PreToolUse", None, "allow-all", ""));
    trust(&d);
    let outside = d.outside.join("x.txt").display().to_string();
    let r = batch(
        &d,
        &[
            json!({"name": "write_file", "args": {"path": ".claude/settings.json", "content": "{}"}}),
            json!({"name": "write_file", "args": {"path": ".dsh/config.toml", "content": ""}}),
            json!({"name": "write_file", "args": {"path": outside, "content": "x"}}),
            json!({"name": "write_file", "args": {"path": ".git/config", "content": "x"}}),
        ],
        &[],
    );
    for res in &r {
        assert_ne!(kind(res), "ok", "{res}");
    }
    assert!(!d.ws.join(".claude/settings.json").exists());
    assert!(!d.ws.join(".dsh/config.toml").exists());
    assert!(!d.outside.join("x.txt").exists());
    assert!(!d.ws.join(".git/config").exists());
}

/// An approved project hook runs `./scripts/check.sh`, which is not a protected path. The
/// agent in `auto` rewrites it (a write inside the workspace, no person asked); the very next
/// call's PreToolUse hook must not run the agent's code unasked (and unsandboxed) — the
/// approval covered the script's content, and it changed.
/// (Found in 2d42d31, where the approval was checked once, when the session started: the
/// next call ran the agent's script as the hook, outside the sandbox. Now checked before each
/// run.)
#[test]
fn the_agent_cannot_change_an_approved_hook_script_mid_session() {
    let d = Dirs::new();
    d.write_user_config("");
    std::fs::create_dir_all(d.ws.join("scripts")).unwrap();
    std::fs::write(d.ws.join("scripts/check.sh"), "exit 0\n").unwrap();
    d.project_config(
        "[[hooks.PreToolUse]]\nmatcher = \"Bash\"\ncommand = \"sh ./scripts/check.sh\"\n",
    );
    trust(&d);
    approve_all(&d);
    let r = batch(
        &d,
        &[
            json!({"name": "read_file", "args": {"path": "scripts/check.sh"}}),
            json!({"name": "write_file", "args": {"path": "scripts/check.sh", "content": "touch pwned-by-agent\nexit 0\n"}}),
            shell_call("ls"),
        ],
        &["--mode", "auto"],
    );
    assert_eq!(kind(&r[1]), "ok", "auto writes inside the workspace: {r:?}");
    assert_eq!(pwned(&d), Vec::<String>::new(), "{r:?}");
    assert_eq!(kind(&r[2]), "unavailable", "{r:?}");
}

/// Across sessions the digest catches the agent's edit of an approved script outside
/// `.claude/`: the next session asks instead of running it.
#[test]
fn an_approved_script_the_agent_changed_asks_again_next_session() {
    let d = Dirs::new();
    d.write_user_config("");
    std::fs::create_dir_all(d.ws.join("scripts")).unwrap();
    std::fs::write(d.ws.join("scripts/check.sh"), "exit 0\n").unwrap();
    d.project_config(
        "[[hooks.PreToolUse]]\nmatcher = \"Bash\"\ncommand = \"sh ./scripts/check.sh\"\n",
    );
    trust(&d);
    approve_all(&d);
    let r = batch(
        &d,
        &[
            json!({"name": "read_file", "args": {"path": "scripts/check.sh"}}),
            json!({"name": "write_file", "args": {"path": "scripts/check.sh", "content": "touch pwned-by-agent\nexit 0\n"}}),
        ],
        &["--mode", "auto"],
    );
    assert_eq!(kind(&r[1]), "ok", "{r:?}");
    let r = batch(&d, &[shell_call("ls")], &["--mode", "auto"]);
    assert_eq!(kind(&r[0]), "unavailable", "{r:?}");
    assert_eq!(pwned(&d), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------
// A team's guard sees every call it names.
// ---------------------------------------------------------------------------------------

/// A user's `Bash` guard that denies everything sees `run_shell` in `batch`, in `dsh check`,
/// in a Code Mode program's sub-call and in a sub-agent; an `Edit|Write` guard sees
/// `write_file`/`edit_file` with `file_path` absolute and folded.
#[test]
fn a_bash_guard_sees_every_run_shell_and_an_edit_write_guard_every_write() {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "{}{}",
        hook_table(&d, "PreToolUse", Some("Bash"), "deny-all", ""),
        hook_table(&d, "PreToolUse", Some("Edit|Write"), "deny-all", ""),
    ));
    let r = batch(
        &d,
        &[
            shell_call("touch ran-batch"),
            json!({"name": "write_file", "args": {"path": "sub/../w.txt", "content": "x"}}),
            json!({"name": "edit_file", "args": {"path": "./e.txt", "old_string": "a", "new_string": "b"}}),
        ],
        &["--mode", "yolo"],
    );
    for res in &r {
        assert_eq!(kind(res), "denied", "{res}");
        assert!(reason(res).contains("the attack guard refuses"), "{res}");
    }
    let seen = logged(&d);
    let w = seen.iter().find(|e| e["tool_name"] == "Write").unwrap();
    assert_eq!(
        w["tool_input"]["file_path"],
        d.ws.join("w.txt").display().to_string()
    );
    let e = seen.iter().find(|e| e["tool_name"] == "Edit").unwrap();
    assert_eq!(
        e["tool_input"]["file_path"],
        d.ws.join("e.txt").display().to_string()
    );

    let c = check(
        &d,
        &["--mode", "yolo"],
        "run_shell",
        json!({"command": "touch ran-check"}),
    );
    assert_eq!(c["decision"], "deny", "{c}");

    let (out, server) = exec_with(
        &d,
        vec![
            Turn::tool_call(
                "p1",
                "run_code",
                &json!({"code": "try { await tools.run_shell({command: 'touch ran-code'}); return 'ran'; } catch (e) { return 'refused: ' + e.kind; }", "description": "try it"}).to_string(),
            )
            .into(),
            Turn::tool_call(
                "s1",
                "call_sub_agent",
                &json!({"profile": "shell", "task": "touch"}).to_string(),
            )
            .into(),
            Turn::tool_call("c1", "run_shell", r#"{"command":"touch ran-child"}"#).into(),
            Reply::text("child done"),
            Reply::text("done"),
        ],
        &["--tools-mode", "both", "--mode", "yolo"],
        "go",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let second = server.requests()[1]["messages"].to_string();
    assert!(second.contains("refused: denied"), "{second}");
    for f in ["ran-batch", "ran-check", "ran-code", "ran-child"] {
        assert!(!d.ws.join(f).exists(), "{f}");
    }
    let commands: Vec<String> = logged(&d)
        .iter()
        .filter(|e| e["tool_name"] == "Bash")
        .map(|e| e["tool_input"]["command"].as_str().unwrap().to_owned())
        .collect();
    for c in ["touch ran-code", "touch ran-child"] {
        assert!(commands.iter().any(|x| x == c), "{c} unseen: {commands:?}");
    }
}

// ---------------------------------------------------------------------------------------
// A hook's failure fails closed, never hangs the turn, leaves nothing behind.
// ---------------------------------------------------------------------------------------

fn one_hook(mode: &str, extra: &str) -> Dirs {
    let d = Dirs::new();
    d.write_user_config(&hook_table(&d, "PreToolUse", None, mode, extra));
    d
}

#[test]
fn too_much_output_non_utf8_and_a_signal_are_errors_that_deny() {
    for (mode, why) in [
        ("huge-allow", "more than 1024 KiB on stdout"),
        ("non-utf8-allow", "stdout is not UTF-8"),
        ("killed", "137 (Killed)"),
    ] {
        let d = one_hook(mode, "");
        let r = batch(&d, &[shell_call("touch ran")], &["--mode", "yolo"]);
        assert_eq!(kind(&r[0]), "denied", "{mode}: {}", r[0]);
        assert!(reason(&r[0]).contains(why), "{mode}: {}", reason(&r[0]));
        assert!(!d.ws.join("ran").exists(), "{mode}");
        common::verify_all(&d);
    }
}

/// A hook that answers "allow" but leaves a child holding its stdout: dsh cannot know it
/// finished, so at the timeout it is an error (deny), the turn goes on, and the child is
/// killed with the hook's process group.
#[test]
fn a_child_holding_stdout_open_times_out_denies_and_is_killed() {
    let d = one_hook("bg-holds-stdout-allow", "timeout_ms = 1000");
    let start = Instant::now();
    let r = batch(&d, &[shell_call("touch ran")], &["--mode", "yolo"]);
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(kind(&r[0]), "denied", "{}", r[0]);
    assert!(
        reason(&r[0]).contains("did not answer within 1000 ms"),
        "{}",
        r[0]
    );
    assert!(!d.ws.join("ran").exists());
    assert!(gone(child_pid(&d)), "the hook's child outlived it");
}

#[test]
fn a_hook_that_answered_or_hung_leaves_no_process_behind() {
    let d = one_hook("bg-detached-deny", "");
    let r = batch(&d, &[shell_call("touch ran")], &[]);
    assert_eq!(kind(&r[0]), "denied", "{}", r[0]);
    assert!(gone(child_pid(&d)), "the answered hook's child outlived it");

    let d = one_hook("hang-with-child", "timeout_ms = 800");
    let r = batch(&d, &[shell_call("touch ran")], &[]);
    assert_eq!(kind(&r[0]), "denied", "{}", r[0]);
    assert!(gone(child_pid(&d)), "the hung hook's child outlived it");
}

/// Known limit, confirmed: a child that leaves the process group with `setsid` escapes the
/// group kill. (dsh cannot find it without a cgroup or a subreaper.)
#[test]
#[ignore = "known limit: a hook's child that calls setsid() escapes the process-group kill and outlives the hook"]
fn a_setsid_child_does_not_outlive_the_hook() {
    let d = one_hook("setsid-child", "");
    let r = batch(&d, &[shell_call("ls")], &[]);
    assert_eq!(kind(&r[0]), "denied", "{}", r[0]);
    let pid = child_pid(&d);
    let dead = gone(pid);
    if !dead {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(dead, "the setsid child outlived the hook");
}

/// A hook that never reads its input is still heard, whatever the input's size (a pipe
/// buffer that fills must not hang the write or the turn).
#[test]
fn a_hook_that_never_reads_a_huge_input_is_still_heard() {
    let big = "y".repeat(4 * 1024 * 1024);
    for (mode, want) in [("no-stdin-deny", "denied"), ("no-stdin-allow", "ok")] {
        let d = one_hook(mode, "timeout_ms = 20000");
        let start = Instant::now();
        let r = batch(
            &d,
            &[json!({"name": "write_file", "args": {"path": "big.txt", "content": big}})],
            &["--mode", "yolo"],
        );
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{mode}: {:?}",
            start.elapsed()
        );
        assert_eq!(kind(&r[0]), want, "{mode}: {}", r[0]);
        assert_eq!(d.ws.join("big.txt").exists(), want == "ok", "{mode}");
    }
}

/// Answers of odd shapes and types never allow: each is a hook error or a deny.
#[test]
fn odd_shapes_and_types_never_allow() {
    let d = one_hook("shape", "");
    let lines: Vec<String> = (1..=8)
        .map(|i| format!("touch ran; echo shape-{i}"))
        .collect();
    let calls: Vec<Value> = lines.iter().map(|l| shell_call(l)).collect();
    let r = batch(&d, &calls, &["--mode", "yolo"]);
    for (i, res) in r.iter().enumerate() {
        assert_eq!(kind(res), "denied", "shape-{}: {res}", i + 1);
        assert_eq!(
            res["decided_by"]["policy"],
            "hooks",
            "shape-{}: {res}",
            i + 1
        );
    }
    assert!(!d.ws.join("ran").exists());
}

// ---------------------------------------------------------------------------------------
// A hook never gets dsh's keys.
// ---------------------------------------------------------------------------------------

/// Not even when the user's and a trusted project's `[shell] pass_env` name them; it does
/// get `CLAUDE_PROJECT_DIR` (the workspace) and what `pass_env` may pass.
#[test]
fn a_hook_never_gets_dshs_keys() {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[shell]\npass_env = [\"ANTHROPIC_API_KEY\", \"DEEPSEEK_API_KEY\", \"OPENAI_API_KEY\", \"MY_VAR\"]\n{}",
        hook_table(&d, "PreToolUse", None, "log", "")
    ));
    d.project_config("[shell]\npass_env = [\"ANTHROPIC_API_KEY\", \"DEEPSEEK_API_KEY\", \"OPENAI_API_KEY\", \"anthropic_api_key\"]\n");
    trust(&d);
    let out = d.batch_output(
        &[shell_call("ls")],
        &[],
        &[
            ("OPENAI_API_KEY", "sk-o"),
            ("ANTHROPIC_API_KEY", "sk-a"),
            ("DEEPSEEK_API_KEY", "sk-d"),
            ("anthropic_api_key", "sk-lower"),
            ("MY_VAR", "passed"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = logged(&d);
    assert!(!seen.is_empty());
    let env = &seen[0]["_env"];
    assert_eq!(
        env["CLAUDE_PROJECT_DIR"],
        d.ws.display().to_string(),
        "{env}"
    );
    assert_eq!(env["MY_VAR"], "passed", "{env}");
    for k in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "DEEPSEEK_API_KEY",
        "anthropic_api_key",
    ] {
        assert!(env.get(k).is_none(), "{k} reached the hook: {env}");
    }
}

// ---------------------------------------------------------------------------------------
// PostToolUse never flips a result; its failure withholds.
// ---------------------------------------------------------------------------------------

#[test]
fn post_tool_use_crash_or_stop_withholds_and_nothing_flips_ok() {
    for mode in ["post-crash", "post-stop", "post-flip"] {
        let d = Dirs::new();
        d.write_user_config(&hook_table(&d, "PostToolUse", None, mode, ""));
        std::fs::write(d.ws.join("secret.txt"), "the-secret-content\n").unwrap();
        let r = batch(
            &d,
            &[
                json!({"name": "read_file", "args": {"path": "secret.txt"}}),
                json!({"name": "read_file", "args": {"path": "missing.txt"}}),
            ],
            &[],
        );
        assert_eq!(r[0]["ok"], true, "{mode}: {}", r[0]);
        assert_eq!(
            r[1]["ok"], false,
            "{mode}: a failure stays a failure: {}",
            r[1]
        );
        assert!(
            !r[0].to_string().contains("the-secret-content"),
            "{mode}: the content reached the model: {}",
            r[0]
        );
    }
}

// ---------------------------------------------------------------------------------------
// A hook's text cannot write control sequences to the terminal.
// ---------------------------------------------------------------------------------------

#[test]
fn a_hooks_words_reach_exec_stderr_without_control_characters() {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "{}{}",
        hook_table(&d, "SessionStart", None, "control-message", ""),
        hook_table(&d, "UserPromptSubmit", None, "control-block", ""),
    ));
    let (out, server) = exec_with(&d, vec![Reply::text("never")], &[], "hello");
    assert_ne!(out.status.code(), Some(0));
    assert!(server.requests().is_empty());
    let err = stderr(&out);
    assert!(err.contains("owned"), "the hook's words are shown: {err:?}");
    assert!(!err.contains('\x1b'), "raw escape reached stderr: {err:?}");
    assert!(!err.contains('\x07'), "raw BEL reached stderr: {err:?}");
}

// ---------------------------------------------------------------------------------------
// Loops are bounded; a blocked prompt leaves a sound journal.
// ---------------------------------------------------------------------------------------

#[test]
fn a_subagent_stop_hook_cannot_loop_forever() {
    let d = Dirs::new();
    d.write_user_config(&format!(
        "[hooks]\nmax_continuations = 2\n{}",
        hook_table(&d, "SubagentStop", None, "subagent-stop-always", "")
    ));
    let (out, server) = exec_with(
        &d,
        vec![
            Turn::tool_call(
                "s1",
                "call_sub_agent",
                &json!({"profile": "search", "task": "look"}).to_string(),
            )
            .into(),
            Reply::text("a"),
            Reply::text("b"),
            Reply::text("c"),
            Reply::text("done"),
        ],
        &[],
        "go",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(server.requests().len(), 5);
    assert_eq!(stdout(&out).trim(), "done");
}

#[test]
fn a_blocked_prompt_leaves_a_verifiable_journal_that_resumes() {
    let d = Dirs::new();
    d.write_user_config(&hook_table(
        &d,
        "UserPromptSubmit",
        None,
        "prompt-block",
        "",
    ));
    let (out, _server) = exec_with(&d, vec![Reply::text("first")], &[], "hello");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (out, server) = exec_with(&d, vec![Reply::text("never")], &[], "forbidden thing");
    assert_ne!(out.status.code(), Some(0));
    assert!(server.requests().is_empty());
    let journals = common::journals(&d.home);
    let last = journals.last().unwrap().clone();
    let out = d
        .dsh(&["sessions", "verify", last.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let id = last.file_stem().unwrap().to_string_lossy().into_owned();
    let (out, server) = exec_with(
        &d,
        vec![Reply::text("resumed")],
        &["--resume", &id],
        "go on",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "resumed");
    let sent = server.requests()[0]["messages"].to_string();
    assert!(
        !sent.contains("forbidden thing"),
        "the blocked prompt was resent: {sent}"
    );
    let recs = records(common::journals(&d.home).last().unwrap());
    assert!(!recs.is_empty());
}
