//! What the end-to-end test files share: isolated directories and running the real `dsh`
//! binary in them. Each test file keeps its own fixtures and configuration conventions.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod acp_wire;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// A throwaway world: a workspace, a directory outside it, dsh's state (`DSH_HOME`), the
/// user configuration directory (`DSH_CONFIG_HOME`) and a `HOME`, all in one temp dir, so a
/// test never touches the real user config or state.
pub struct Dirs {
    _root: tempfile::TempDir,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub home: PathBuf,
    pub cfg: PathBuf,
    pub user_home: PathBuf,
}

impl Dirs {
    pub fn new() -> Dirs {
        let root = tempfile::tempdir().unwrap();
        let (ws, outside, user_home) = (
            root.path().join("ws"),
            root.path().join("outside"),
            root.path().join("user-home"),
        );
        for d in [&ws, &outside, &user_home] {
            std::fs::create_dir_all(d).unwrap();
        }
        Dirs {
            ws: ws.canonicalize().unwrap(),
            outside: outside.canonicalize().unwrap(),
            user_home: user_home.canonicalize().unwrap(),
            home: root.path().join("dsh-home"),
            cfg: root.path().join("cfg"),
            _root: root,
        }
    }

    /// The temp dir holding everything.
    pub fn root(&self) -> &Path {
        self._root.path()
    }

    /// `dsh --workspace WS ARGS…` with the isolated environment and no stdin.
    pub fn dsh(&self, args: &[&str]) -> Command {
        let mut c = self.world_command();
        c.arg("--workspace").arg(&self.ws).args(args);
        c
    }

    /// `dsh ARGS…` run in `cwd`, with the isolated environment, no stdin and no
    /// `--workspace` unless `args` has one (so that a command that takes the workspace a
    /// session recorded is tested as a person runs it).
    pub fn dsh_in(&self, cwd: &Path, args: &[&str]) -> Command {
        let mut c = self.world_command();
        c.current_dir(cwd).args(args);
        c
    }

    /// The dsh binary with this world's environment and no stdin.
    fn world_command(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_dsh"));
        c.env("DSH_HOME", &self.home)
            .env("DSH_CONFIG_HOME", &self.cfg)
            .env("HOME", &self.user_home)
            .stdin(Stdio::null());
        c
    }

    /// Writes the user configuration file as given.
    pub fn write_user_config(&self, text: &str) {
        std::fs::create_dir_all(&self.cfg).unwrap();
        std::fs::write(self.cfg.join("config.toml"), text).unwrap();
    }

    /// Writes the workspace's `.dsh/config.toml`.
    pub fn project_config(&self, text: &str) {
        std::fs::create_dir_all(self.ws.join(".dsh")).unwrap();
        std::fs::write(self.ws.join(".dsh/config.toml"), text).unwrap();
    }

    /// Runs `dsh EXTRA… batch -` with the calls on stdin and `envs` added.
    pub fn batch_output(&self, calls: &[Value], extra: &[&str], envs: &[(&str, &str)]) -> Output {
        let mut args = extra.to_vec();
        args.extend(["batch", "-"]);
        let mut cmd = self.dsh(&args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        run_with_calls(cmd, calls)
    }
}

/// Runs `cmd` (a `dsh … batch -`) with `calls` on stdin, one JSON line each.
pub fn run_with_calls(mut cmd: Command, calls: &[Value]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for c in calls {
            writeln!(stdin, "{c}").unwrap();
        }
    }
    child.wait_with_output().unwrap()
}

/// Every stdout line, as JSON.
pub fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A result's `failure_kind`, or `ok`.
pub fn kind(r: &Value) -> &str {
    r["failure_kind"].as_str().unwrap_or("ok")
}

/// `dsh exec EXTRA… PROMPT` against the scripted OpenAI-compatible server at `url`, in
/// `d`'s isolated environment, with stdout and stderr piped.
pub fn scripted_exec(d: &Dirs, url: &str, extra: &[&str], prompt: &str) -> Command {
    let mut args = vec![
        "exec",
        "--provider",
        "openai",
        "--base-url",
        url,
        "--model",
        "scripted",
    ];
    args.extend_from_slice(extra);
    args.push(prompt);
    let mut c = d.dsh(&args);
    c.env("OPENAI_API_KEY", "sk-test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Every journal under `home/sessions`, sorted by name (so by start time).
pub fn journals(home: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(home.join("sessions"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs `dsh sessions verify` on every journal (`*.jsonl`) under `d.home/sessions`, asserting
/// there is at least one and that each is intact and ended (exit 0, nothing broken, no torn
/// line, a `session_end`): how many were verified.
pub fn verify_all(d: &Dirs) -> usize {
    let all: Vec<PathBuf> = journals(&d.home)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert!(
        !all.is_empty(),
        "no journal under {}",
        d.home.join("sessions").display()
    );
    for path in &all {
        let out = d
            .dsh(&["sessions", "verify", path.to_str().unwrap()])
            .output()
            .unwrap();
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(0), "{}: {said}", path.display());
        assert!(said.contains("intact"), "{}: {said}", path.display());
        assert!(!said.contains("torn"), "{}: {said}", path.display());
        assert!(!said.contains("did not end"), "{}: {said}", path.display());
    }
    all.len()
}

/// A journal's records as JSON, in order.
pub fn records(path: &Path) -> Vec<Value> {
    dsh_core::journal::read_journal(path)
        .unwrap()
        .records
        .into_iter()
        .map(|e| Value::Object(e.json))
        .collect()
}

/// One `run_shell` call of `line`, as a `dsh batch` input line.
pub fn shell_call(line: &str) -> Value {
    serde_json::json!({"name": "run_shell", "args": {"command": line}})
}

/// A result's `content`, or "" when it has none.
pub fn content(r: &Value) -> &str {
    r["content"].as_str().unwrap_or("")
}

/// `git ARGS…` in `dir`, with a test identity and `HOME` set to `dir` (no global config of
/// the machine's), asserting success.
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
}

/// Waits (polling the file system, up to a minute) until `p` exists.
pub fn wait_for_file(p: &Path) {
    let start = std::time::Instant::now();
    while !p.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "{} never appeared",
            p.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `dsh EXTRA… check TOOL ARGS` (exit 0 asserted): its one JSON line, and its stderr.
pub fn check_with_stderr(
    d: &Dirs,
    extra: &[&str],
    tool: &str,
    args: impl std::borrow::Borrow<Value>,
) -> (Value, String) {
    let args = args.borrow().to_string();
    let mut a = extra.to_vec();
    a.extend(["check", tool, &args]);
    let out = d.dsh(&a).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (json_lines(&out).remove(0), stderr(&out))
}

/// `dsh EXTRA… check TOOL ARGS` (exit 0 asserted): its one JSON line.
pub fn check(d: &Dirs, extra: &[&str], tool: &str, args: impl std::borrow::Borrow<Value>) -> Value {
    check_with_stderr(d, extra, tool, args).0
}

/// `dsh EXTRA… check run_shell {"command": LINE}`: its one JSON line.
pub fn check_shell(d: &Dirs, extra: &[&str], line: &str) -> Value {
    check(
        d,
        extra,
        "run_shell",
        serde_json::json!({ "command": line }),
    )
}

/// `dsh EXTRA… batch -` on one `run_shell` call per line: one result per line (exit 0
/// asserted).
pub fn batch_lines(d: &Dirs, extra: &[&str], lines: &[&str]) -> Vec<Value> {
    let calls: Vec<Value> = lines.iter().map(|l| shell_call(l)).collect();
    let out = d.batch_output(&calls, extra, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = json_lines(&out);
    assert_eq!(results.len(), lines.len());
    results
}

/// The peak resident set (`VmHWM`) of process `pid` (`"self"` for this one), in KiB; `None`
/// once it has exited or when the line cannot be read.
#[allow(dead_code)]
pub fn vm_hwm_kib(pid: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
