//! `run_shell` driven directly, without the sandbox helper (mode `off`, or `auto` with no
//! helper): the environment, truncation and spilling, deadlines and cancellation killing the
//! whole tree, exit codes, the network refusal, and failing closed under `required`. The
//! sandbox itself is attacked through the real binary in `dsh-cli/tests/sandbox.rs`.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_core::{
    Access, CancellationToken, ExecContext, SandboxState, SpillStore, Tool, ToolCall, ToolError,
    ToolErrorKind, ToolOutput, Workspace,
};
use dsh_tools::sandbox::SandboxMode;
use dsh_tools::shell::env::command_env;
use dsh_tools::shell::head_tail;
use dsh_tools::{NetworkGrant, RunShell, ShellSettings};
use serde_json::{Value, json};
use tempfile::TempDir;

struct Fixture {
    _dir: TempDir,
    ws: PathBuf,
    spill: PathBuf,
    tmp: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        Fixture {
            ws: ws.canonicalize().unwrap(),
            spill: dir.path().join("spill"),
            tmp: dir.path().join("state/tmp/session-1"),
            _dir: dir,
        }
    }

    fn tool(&self, settings: ShellSettings) -> RunShell {
        RunShell::new(
            Arc::new(Workspace::new(&self.ws).unwrap()),
            Arc::new(SpillStore::new(&self.spill)),
            &self.tmp,
            settings,
        )
    }
}

fn off() -> ShellSettings {
    ShellSettings {
        sandbox: SandboxMode::Off,
        ..ShellSettings::default()
    }
}

fn cx(tool: &RunShell, id: &str, args: &Value, cancel: CancellationToken) -> ExecContext {
    ExecContext {
        call: ToolCall::new(id, "run_shell", args.clone()),
        spec: Arc::new(tool.spec()),
        cancel,
        attempt: 1,
        dispatch: None,
        clearance: dsh_core::Clearance::Write,
    }
}

async fn run(tool: &RunShell, args: Value) -> Result<ToolOutput, ToolError> {
    let cx = cx(tool, "c1", &args, CancellationToken::new());
    tool.run(&args, &cx).await
}

fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap();
            !matches!(state, 'Z' | 'X')
        }
    }
}

fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_environment_is_an_allowlist_plus_tmpdir() {
    let source: Vec<(OsString, OsString)> = [
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("LANG", "C.UTF-8"),
        ("OPENAI_API_KEY", "sk-x"),
        ("AWS_SECRET_ACCESS_KEY", "x"),
        ("BASH_ENV", "/x"),
        ("BASH_FUNC_f%%", "() { :; }"),
        ("CARGO_HOME", "/c"),
        ("TMPDIR", "/tmp"),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect();
    let env = command_env(
        source,
        &["CARGO_HOME".into(), "BASH_FUNC_f%%".into(), "ENV".into()],
        Path::new("/state/tmp/s"),
    );
    let names: Vec<&str> = env
        .iter()
        .map(|(k, _)| k.to_str().unwrap())
        .filter(|k| !k.starts_with("GIT_CONFIG"))
        .collect();
    assert_eq!(names, ["CARGO_HOME", "HOME", "LANG", "PATH", "TMPDIR"]);
    let value = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    assert_eq!(value("TMPDIR").unwrap(), "/state/tmp/s");
    // Git's safety settings ride along with every command.
    assert_eq!(value("GIT_CONFIG_COUNT").unwrap(), "4");
    assert_eq!(value("GIT_CONFIG_KEY_0").unwrap(), "safe.bareRepository");
    assert_eq!(value("GIT_CONFIG_VALUE_1").unwrap(), "false");
    assert_eq!(
        value("GIT_CONFIG_PARAMETERS").unwrap(),
        "'safe.bareRepository=explicit' 'core.fsmonitor=false' 'gc.autoDetach=false' \
         'maintenance.autoDetach=false'"
    );
}

#[test]
fn head_tail_splits_two_thirds_one_third_by_characters() {
    assert_eq!(head_tail("short", 10), None);
    assert_eq!(head_tail("exactly10!", 10), None);
    let text: String = "é".repeat(50) + &"x".repeat(50);
    let (head, tail, omitted) = head_tail(&text, 30).unwrap();
    assert_eq!(head, "é".repeat(20));
    assert_eq!(tail, "x".repeat(10));
    assert_eq!(omitted, 70);
}

#[tokio::test]
async fn output_interleaves_and_the_exit_code_is_reported() {
    let f = Fixture::new();
    let tool = f.tool(off());
    let out = run(
        &tool,
        json!({"command": "echo one; echo two >&2; echo three; exit 3"}),
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.sandbox, Some(SandboxState::None));
    assert!(
        out.content
            .starts_with("[warning: not sandboxed (sandbox mode off)"),
        "{}",
        out.content
    );
    assert!(
        out.content.ends_with("one\ntwo\nthree\n[exit code 3]"),
        "{}",
        out.content
    );
    assert_eq!(out.value["exit_code"], 3);
    assert_eq!(out.value["sandbox"], "none");
}

#[tokio::test]
async fn stdin_is_empty_and_the_command_runs_in_the_workspace() {
    let f = Fixture::new();
    let tool = f.tool(off());
    let out = run(&tool, json!({"command": "cat; pwd; echo \"$TMPDIR\""}))
        .await
        .unwrap();
    let expected = format!("{}\n{}\n[exit code 0]", f.ws.display(), f.tmp.display());
    assert!(out.content.ends_with(&expected), "{}", out.content);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&f.tmp).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    drop(tool);
    assert!(!f.tmp.exists(), "the session's TMPDIR goes with the tool");
}

#[tokio::test]
async fn a_signal_death_is_said_as_such() {
    let f = Fixture::new();
    let tool = f.tool(off());
    let out = run(&tool, json!({"command": "kill -TERM $$"}))
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(143));
    assert_eq!(out.value["signal"], 15);
    assert!(
        out.content.contains("killed by signal 15 (SIGTERM)"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn long_output_is_cut_to_head_and_tail_and_spilled_whole() {
    let f = Fixture::new();
    let tool = f.tool(ShellSettings {
        max_output_chars: 300,
        ..off()
    });
    let out = run(&tool, json!({"command": "seq 1 1000"})).await.unwrap();
    assert!(out.content.contains("\n1\n2\n3\n"), "{}", out.content);
    assert!(out.content.contains("999\n1000\n[exit code 0]"));
    assert!(out.content.contains("`out-c1`"), "{}", out.content);
    assert!(
        out.content
            .contains(r#"read_output{"id":"out-c1","offset":200}"#)
    );
    assert_eq!(out.value["truncated"], true);
    assert_eq!(out.value["spill_id"], "out-c1");
    let full = std::fs::read_to_string(f.spill.join("out-c1.txt")).unwrap();
    let expected: String = (1..=1000).map(|i| format!("{i}\n")).collect();
    assert_eq!(full, expected);
}

#[tokio::test]
async fn a_flood_of_output_stays_bounded() {
    let f = Fixture::new();
    let tool = f.tool(off());
    let out = run(
        &tool,
        json!({"command": "head -c 20000000 /dev/zero | tr '\\0' a"}),
    )
    .await
    .unwrap();
    assert_eq!(out.value["output_bytes"], 20_000_000);
    assert!(out.content.chars().count() < 3600, "{}", out.content.len());
    let spilled = std::fs::metadata(f.spill.join("out-c1.txt")).unwrap().len();
    assert!(spilled < 6 << 20, "the capture is bounded: {spilled}");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_tree_before_returning() {
    let f = Fixture::new();
    let tool = f.tool(off());
    let start = Instant::now();
    let err = run(
        &tool,
        json!({"command": "echo before; sleep 100 & echo $! > bg.pid; (sleep 100 & echo $! > gc.pid; wait) & sleep 100",
               "timeout_s": 1}),
    )
    .await
    .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert_eq!(err.exit_code, Some(137));
    assert!(
        err.message.starts_with("timed out after 1 s"),
        "{}",
        err.message
    );
    assert!(err.message.contains("before"), "{}", err.message);
    for file in ["bg.pid", "gc.pid"] {
        let pid = read_pid(&f.ws.join(file));
        assert!(!running(pid), "{file} {pid} survived");
    }
}

#[tokio::test]
async fn background_children_die_with_the_command() {
    let f = Fixture::new();
    let tool = f.tool(off());
    let out = run(
        &tool,
        json!({"command": "sleep 100 & echo $! > bg.pid; echo done"}),
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(!running(read_pid(&f.ws.join("bg.pid"))));
}

#[tokio::test]
async fn cancellation_kills_the_tree_and_returns() {
    let f = Fixture::new();
    let tool = f.tool(off());
    let args = json!({"command": "sleep 100 & echo $! > bg.pid; sleep 100"});
    let cancel = CancellationToken::new();
    let cx = cx(&tool, "c1", &args, cancel.clone());
    // Cancel once the command is known to run (it wrote its background child's pid).
    let pid_file = f.ws.join("bg.pid");
    let canceller = tokio::spawn(async move {
        // Bounded: a command that never starts fails the test instead of hanging it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::read_to_string(&pid_file).map_or(true, |s| !s.ends_with('\n')) {
            assert!(Instant::now() < deadline, "the command never started");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        cancel.cancel();
    });
    let start = Instant::now();
    let err = tool.run(&args, &cx).await.unwrap_err();
    canceller.await.unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(err.message.contains("cancelled"), "{}", err.message);
    assert!(!running(read_pid(&f.ws.join("bg.pid"))));
}

#[tokio::test]
async fn the_network_is_refused_unless_the_settings_grant_it() {
    let f = Fixture::new();
    let tool = f.tool(off());
    let err = run(&tool, json!({"command": "touch ran", "network": true}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Denied);
    assert!(
        err.message.contains("sandbox.allow_network"),
        "{}",
        err.message
    );
    assert!(!f.ws.join("ran").exists());
    let tool = f.tool(ShellSettings {
        network: NetworkGrant::UserConfig,
        ..off()
    });
    let out = run(&tool, json!({"command": "touch ran", "network": true}))
        .await
        .unwrap();
    assert_eq!(out.value["network"], true);
    assert!(f.ws.join("ran").exists());
}

#[tokio::test]
async fn timeouts_out_of_range_are_invalid() {
    let f = Fixture::new();
    let tool = f.tool(off());
    for t in [0, 601] {
        let err = run(&tool, json!({"command": "true", "timeout_s": t}))
            .await
            .unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::InvalidArgs, "{t}");
    }
}

#[tokio::test]
async fn required_without_a_helper_fails_closed() {
    let f = Fixture::new();
    let tool = f.tool(ShellSettings {
        sandbox: SandboxMode::Required,
        ..ShellSettings::default()
    });
    let err = run(&tool, json!({"command": "touch ran"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Failed);
    assert!(err.message.contains("did not run"), "{}", err.message);
    assert!(!f.ws.join("ran").exists());
}

#[tokio::test]
async fn auto_without_a_helper_runs_with_a_warning() {
    let f = Fixture::new();
    let tool = f.tool(ShellSettings::default());
    let out = run(&tool, json!({"command": "true"})).await.unwrap();
    assert_eq!(out.sandbox, Some(SandboxState::None));
    assert!(
        out.content
            .starts_with("[warning: not sandboxed: no sandbox helper"),
        "{}",
        out.content
    );
}

#[test]
fn the_declaration_names_the_command_and_the_network() {
    let f = Fixture::new();
    let tool = f.tool(off());
    let spec = tool.spec();
    assert!(!spec.read_only);
    assert!(!spec.idempotent);
    assert!(spec.timeout.unwrap() > Duration::from_secs(600));
    assert_eq!(tool.parallel_safe(&json!({"command": "ls"})), Ok(false));
    assert_eq!(
        tool.accesses(&json!({"command": "curl x", "network": true})),
        vec![
            Access::Execute {
                command: "curl x".into()
            },
            Access::Network { target: "*".into() }
        ]
    );
    assert_eq!(tool.accesses(&json!({"command": 7})), vec![]);
}
