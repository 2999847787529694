//! The sandbox, really attacked: every escape below is attempted by a command run through
//! `dsh batch --yolo` (approved, as a careless user would), and must fail — or, where the
//! test says so, succeed. On Linux these tests **fail, never skip,** when Landlock is missing:
//! they assert `"sandbox":"landlock"` and the denials themselves. Other OSes compile them out.
//!
//! Every test isolates itself (DSH_HOME, DSH_CONFIG_HOME and HOME in temp dirs). Nothing here
//! relies on file permissions (CI runs as root): the denials are Landlock's and seccomp's.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

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
        std::fs::create_dir_all(dirs.ws.join(".git")).unwrap();
        std::fs::write(dirs.ws.join(".git/config"), "[core]\n").unwrap();
        let env = Env { dirs };
        env.user_config("");
        env
    }

    /// Writes the user configuration. Unless `text` has its own `[permissions]`, every
    /// command is allowed by the rule `run_shell(*)`: these tests attack the sandbox, so the
    /// shell policy (tested in tests/shell_policy.rs) must let the attacks through.
    fn user_config(&self, text: &str) {
        let text = if text.contains("[permissions]") {
            text.to_owned()
        } else {
            format!("[permissions]\nallow = [\"run_shell(*)\"]\n{text}")
        };
        self.write_user_config(&text);
    }

    /// Runs `dsh <extra> batch -` on the calls with `envs` added to dsh's environment.
    fn batch_env(&self, calls: &[Value], extra: &[&str], envs: &[(&str, &str)]) -> Vec<Value> {
        let out = self.batch_output(calls, extra, envs);
        assert_eq!(out.status.code(), Some(0), "dsh failed: {}", stderr(&out));
        let results = json_lines(&out);
        assert_eq!(results.len(), calls.len(), "one result per call");
        results
    }

    fn batch(&self, calls: &[Value], extra: &[&str]) -> Vec<Value> {
        self.batch_env(calls, extra, &[])
    }

    /// One `run_shell` call through `dsh --yolo batch`.
    fn shell(&self, command: &str) -> Value {
        self.shell_args(json!({"command": command}), &["--yolo"])
    }

    /// `bash FILE` for a script holding `command`: the shell policy sees `bash FILE` (allowed
    /// by this test's rule) and never the command, so only the sandbox stands in its way —
    /// a redirection outside the workspace written on the line itself is denied before it
    /// could reach the sandbox.
    fn script(&self, command: &str) -> String {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!(".attack-{n}.sh");
        std::fs::write(self.ws.join(&name), command).unwrap();
        format!("bash {name}")
    }

    fn shell_args(&self, args: Value, extra: &[&str]) -> Value {
        self.batch(&[json!({"name": "run_shell", "args": args})], extra)
            .remove(0)
    }
}

fn content(r: &Value) -> &str {
    r["content"].as_str().unwrap()
}

/// A command that ran to its end inside Landlock, in either profile: a command the policy
/// knows only reads (`seq`, `env | sort`) runs in the read-only one even under a rule.
fn assert_sandboxed(r: &Value) {
    assert_eq!(kind(r), "ok", "{r}");
    assert!(
        matches!(
            r["sandbox"].as_str(),
            Some("landlock" | "landlock-read-only")
        ),
        "Landlock must be available here: {r}"
    );
    assert!(!content(r).contains("[warning"), "{r}");
}

/// Whether the process `pid` is still running (a zombie waiting for init does not run).
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
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_helper_finds_a_full_landlock_on_this_machine() {
    let out = Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(["sandbox-exec", "--probe"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("landlock=full "),
        "this machine must have Landlock ABI ≥ 6: {text}{}",
        stderr(&out)
    );
}

#[test]
fn a_helper_that_cannot_set_up_runs_nothing_and_says_why() {
    let e = Env::new();
    let marker = e.outside.join("ran");
    let out = Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(["sandbox-exec", "--write", "/no/such/dir", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).starts_with("dsh sandbox-exec: /no/such/dir"));
    assert!(!marker.exists());
}

#[test]
fn writing_outside_the_workspace_fails() {
    let e = Env::new();
    let target = e.outside.join("pwned");
    for command in [
        format!("echo x > {}", target.display()),
        format!("touch {}", target.display()),
        format!("mkdir {}", e.outside.join("dir").display()),
        format!("ln -s /etc/passwd {}", e.outside.join("link").display()),
        // Through a symlink planted inside the workspace.
        format!(
            "ln -s {} escape && echo x > escape/pwned",
            e.outside.display()
        ),
        "echo x > /tmp/dsh-sandbox-escape-$$ && echo WROTE /tmp".to_owned(),
    ] {
        let r = e.shell(&e.script(&command));
        assert_sandboxed(&r);
        assert_ne!(r["exit_code"], 0, "{command}: {r}");
        assert!(!content(&r).contains("WROTE"), "{r}");
    }
    assert_eq!(std::fs::read_dir(&e.outside).unwrap().count(), 0);
}

#[test]
fn truncating_or_removing_files_outside_fails() {
    let e = Env::new();
    let victim = e.outside.join("victim.txt");
    std::fs::write(&victim, "keep me\n").unwrap();
    for command in [
        format!("truncate -s 0 {}", victim.display()),
        format!(": > {}", victim.display()),
        format!("rm -f {}", victim.display()),
        format!("mv {} here.txt", victim.display()),
    ] {
        let r = e.shell(&e.script(&command));
        assert_sandboxed(&r);
        assert_ne!(r["exit_code"], 0, "{command}: {r}");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
}

#[test]
fn writing_to_home_fails() {
    let e = Env::new();
    let r = e.shell(&e.script(
        "echo \"home=$HOME\"; echo x > \"$HOME/.bashrc\"; mkdir -p ~/.cache/x; echo rc=$?",
    ));
    assert_sandboxed(&r);
    assert!(
        content(&r).contains(&format!("home={}", e.user_home.display())),
        "HOME is passed through: {r}"
    );
    assert!(content(&r).contains("rc=1"), "{r}");
    assert_eq!(std::fs::read_dir(&e.user_home).unwrap().count(), 0);
}

#[test]
fn writing_inside_the_workspace_and_tmpdir_succeeds() {
    let e = Env::new();
    let r = e.shell(
        "set -e; mkdir -p src/a && echo hi > src/a/f.txt && mv src/a/f.txt src/g.txt; \
         echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"; mktemp >/dev/null; echo done > /dev/null; \
         echo to-stderr > /dev/stderr; echo \"tmp=$TMPDIR\"",
    );
    assert_sandboxed(&r);
    assert_eq!(r["exit_code"], 0, "{r}");
    assert_eq!(
        std::fs::read_to_string(e.ws.join("src/g.txt")).unwrap(),
        "hi\n"
    );
    let text = content(&r);
    assert!(text.contains("t\n") && text.contains("to-stderr"), "{r}");
    // TMPDIR is the session's own, under DSH_HOME, not the system's.
    let tmp = e.home.join("tmp");
    assert!(text.contains(&format!("tmp={}", tmp.display())), "{r}");
}

#[test]
fn device_nodes_cannot_be_created_even_in_the_workspace() {
    let e = Env::new();
    // As root this would succeed without the sandbox: a node for /dev/null's device.
    let r = e.shell("mknod ./null c 1 3; echo rc=$?");
    assert_sandboxed(&r);
    assert!(content(&r).contains("rc=1"), "{r}");
    assert!(!e.ws.join("null").exists());
}

#[test]
fn landlock_cannot_protect_git_inside_the_workspace() {
    // A documented limit of the workspace-write profile, asserted so that the documentation
    // stays true: the workspace is writable as a whole, `.git` included. The protected-paths
    // guard covers the file tools, and the shell policy refuses redirections and the
    // destinations it knows (`tee .git/config`) into protected paths; a script that writes
    // the file itself (`bash FILE`, allowed by this test's `run_shell(*)` rule) is bounded
    // only by Landlock, which cannot single out `.git` inside the writable workspace (the
    // hardened profile, for `auto`, can: tests/sandbox_hardened.rs).
    let e = Env::new();
    let refused = e.shell("echo '[alias]' >> .git/config");
    assert_eq!(kind(&refused), "denied", "{refused}");
    let refused = e.shell("echo '[alias]' | tee -a .git/config");
    assert_eq!(kind(&refused), "denied", "{refused}");
    let r = e.shell(&e.script("echo '[alias]' >> .git/config"));
    assert_sandboxed(&r);
    assert!(
        std::fs::read_to_string(e.ws.join(".git/config"))
            .unwrap()
            .contains("[alias]")
    );
    let r = e.batch(
        &[json!({"name": "write_file", "args": {"path": ".git/config", "content": "x"}})],
        &["--yolo"],
    );
    assert_eq!(kind(&r[0]), "denied", "{}", r[0]);
}

#[test]
fn tcp_connections_fail_and_the_listener_never_accepts() {
    let e = Env::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let r = e.shell(&e.script(&format!(
        "exec 3>/dev/tcp/127.0.0.1/{port} && echo CONNECTED; echo rc=$?"
    )));
    assert_sandboxed(&r);
    assert!(!content(&r).contains("CONNECTED"), "{r}");
    assert!(content(&r).contains("rc=1"), "{r}");
    match listener.accept() {
        Err(err) if err.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the listener was reached: {other:?}"),
    }
}

/// The real python3 executable (not a version manager's shim, which needs more than the
/// sandbox's environment offers).
fn python3() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is needed for this test");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn python_inet_sockets_are_refused_but_unix_sockets_work() {
    let e = Env::new();
    let py = python3();
    let script = "import socket\n\
        a, b = socket.socketpair(socket.AF_UNIX)\n\
        a.send(b'unix ok'); print(b.recv(7).decode())\n\
        for fam in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET):\n\
        \x20   try:\n\
        \x20       socket.socket(fam, socket.SOCK_DGRAM if fam != socket.AF_NETLINK else socket.SOCK_RAW)\n\
        \x20       print('OPENED', fam)\n\
        \x20   except OSError as e:\n\
        \x20       print('refused', fam, e.errno)\n";
    std::fs::write(e.ws.join("net.py"), script).unwrap();
    // The Python audit (stage 3 of the shell policy) refuses `import socket` before the
    // sandbox is reached; this test attacks the sandbox, so it runs the interpreter under a
    // name the audit does not recognise (allowed here by `run_shell(*)`).
    std::os::unix::fs::symlink(&py, e.ws.join("interp")).unwrap();
    let r = e.shell("./interp net.py");
    assert_sandboxed(&r);
    let text = content(&r);
    assert!(text.contains("unix ok"), "{r}");
    assert!(!text.contains("OPENED"), "{r}");
    assert_eq!(text.matches("refused").count(), 4, "{r}");
}

#[test]
fn signalling_dsh_or_its_parent_fails_and_dsh_survives() {
    let e = Env::new();
    let me = std::process::id();
    let r = e.shell(&format!(
        "kill -TERM $PPID; echo ppid=$?; kill -0 {me}; echo test=$?; kill -KILL $PPID; echo again=$?"
    ));
    // dsh lived to report the result.
    assert_sandboxed(&r);
    let text = content(&r);
    assert!(text.contains("ppid=1"), "{r}");
    assert!(text.contains("test=1"), "{r}");
    assert!(text.contains("again=1"), "{r}");
    assert!(text.contains("Operation not permitted"), "{r}");
}

#[test]
fn the_network_is_refused_with_yolo_and_lifted_only_by_the_user_config() {
    let e = Env::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let args = json!({
        "command": e.script(&format!("exec 3>/dev/tcp/127.0.0.1/{port} && echo CONNECTED")),
        "network": true
    });
    let r = e.shell_args(args.clone(), &["--yolo"]);
    assert_eq!(kind(&r), "denied", "{r}");
    assert!(content(&r).contains("sandbox.allow_network"), "{r}");
    assert!(listener.accept().is_err());

    // A project file cannot lift it, even trusted… (an untrusted one is ignored by config).
    std::fs::create_dir_all(e.ws.join(".dsh")).unwrap();
    std::fs::write(
        e.ws.join(".dsh/config.toml"),
        "[permissions]\nallow = [\"run_shell\"]\n",
    )
    .unwrap();
    let r = e.shell_args(args.clone(), &["--yolo"]);
    assert_eq!(kind(&r), "denied", "{r}");

    // …the user's own configuration can.
    e.user_config("[sandbox]\nallow_network = true\n");
    let r = e.shell_args(args, &["--yolo"]);
    assert_sandboxed(&r);
    assert!(content(&r).contains("CONNECTED"), "{r}");
    assert_eq!(r["value"]["network"], true);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match listener.accept() {
            Ok(_) => break,
            Err(err) if err.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(err) => panic!("the allowed connection never arrived: {err}"),
        }
    }
    // The next command without `network: true` is banned again.
    let r = e.shell(&e.script(&format!(
        "exec 3>/dev/tcp/127.0.0.1/{port} && echo CONNECTED"
    )));
    assert!(!content(&r).contains("CONNECTED"), "{r}");
}

#[test]
fn the_environment_is_scrubbed() {
    let e = Env::new();
    let bash_env = e.outside.join("bash_env.sh");
    std::fs::write(&bash_env, "echo BASH_ENV_RAN\n").unwrap();
    e.user_config("[shell]\npass_env = [\"MY_SETTING\", \"ANTHROPIC_API_KEY\"]\n");
    let calls = [json!({"name": "run_shell", "args": {
        "command": "env | sort; type evil 2>&1 || echo no-evil; echo \"setting=$MY_SETTING\""
    }})];
    let r = e
        .batch_env(
            &calls,
            &["--yolo"],
            &[
                ("OPENAI_API_KEY", "sk-SECRET-1"),
                ("ANTHROPIC_API_KEY", "sk-SECRET-2"),
                ("DEEPSEEK_API_KEY", "sk-SECRET-3"),
                ("BASH_ENV", bash_env.to_str().unwrap()),
                ("ENV", bash_env.to_str().unwrap()),
                ("BASH_FUNC_evil%%", "() { echo EVIL_RAN; }"),
                ("SOME_TOKEN", "tok-SECRET-4"),
                ("MY_SETTING", "passed"),
            ],
        )
        .remove(0);
    assert_sandboxed(&r);
    let text = content(&r);
    for leaked in [
        "SECRET",
        "BASH_ENV",
        "BASH_ENV_RAN",
        "EVIL_RAN",
        "BASH_FUNC",
        "DSH_HOME",
    ] {
        assert!(!text.contains(leaked), "{leaked} leaked: {r}");
    }
    assert!(text.contains("no-evil"), "{r}");
    assert!(text.contains("setting=passed"), "pass_env passes: {r}");
    assert!(text.contains("PATH="), "{r}");
}

#[test]
fn a_timeout_kills_a_backgrounded_grandchild() {
    let e = Env::new();
    let start = Instant::now();
    let r = e.shell_args(
        json!({"command": "sleep 100 & echo $! > bg.pid; (sleep 100 & echo $! > gc.pid; wait) & sleep 100",
               "timeout_s": 1}),
        &["--yolo"],
    );
    let elapsed = start.elapsed();
    assert_eq!(kind(&r), "timeout", "{r}");
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    assert!(content(&r).contains("timed out after 1 s"), "{r}");
    for file in ["bg.pid", "gc.pid"] {
        let pid = read_pid(&e.ws.join(file));
        assert!(!running(pid), "{file}: {pid} survived the timeout");
    }
}

#[test]
fn background_children_are_killed_when_the_command_ends() {
    let e = Env::new();
    // The second escapes the process group the way timeout(1) does; the session still holds it.
    let r = e.shell(
        "sleep 100 & echo $! > bg.pid; timeout 100 sleep 100 & echo $! > grp.pid; \
         nohup sleep 100 >/dev/null 2>&1 & echo $! > nohup.pid; echo started",
    );
    assert_sandboxed(&r);
    assert!(content(&r).contains("started"), "{r}");
    for file in ["bg.pid", "grp.pid", "nohup.pid"] {
        let pid = read_pid(&e.ws.join(file));
        assert!(!running(pid), "{file}: {pid} survived the command");
    }
    // And nothing can leave the session to survive.
    let r = e.shell("setsid sleep 100; echo rc=$?");
    assert!(content(&r).contains("rc=1"), "{r}");
}

#[test]
fn long_output_keeps_head_and_tail_and_pages_back_by_its_id() {
    let e = Env::new();
    let results = e.batch(
        &[
            json!({"id": "big", "name": "run_shell", "args": {"command": "seq 1 20000"}}),
            json!({"name": "read_output", "args": {"id": "out-big", "offset": 0, "limit": 10}}),
            json!({"name": "read_output", "args": {"id": "out-big", "offset": 108_882}}),
        ],
        &["--yolo"],
    );
    let r = &results[0];
    assert_sandboxed(r);
    let text = content(r);
    assert!(text.starts_with("1\n2\n3\n"), "{r}");
    assert!(text.contains("19999\n20000\n[exit code 0]"), "{r}");
    assert!(text.contains("characters omitted"), "{r}");
    assert!(text.contains("`out-big`"), "{r}");
    assert!(text.chars().count() < 3000 + 400, "{}", text.len());
    assert_eq!(r["value"]["truncated"], true);
    assert_eq!(r["value"]["spill_id"], "out-big");
    // seq 1 20000 prints 108_894 characters.
    assert_eq!(r["value"]["output_chars"], 108_894);
    assert!(
        content(&results[1]).starts_with("1\n2\n3\n4\n5\n"),
        "{}",
        results[1]
    );
    assert!(
        content(&results[2]).starts_with("19999\n20000\n"),
        "{}",
        results[2]
    );
}

#[test]
fn exit_codes_and_signals_are_reported() {
    let e = Env::new();
    let r = e.shell("echo partial; exit 3");
    assert_sandboxed(&r);
    assert_eq!(r["ok"], true);
    assert_eq!(r["exit_code"], 3);
    assert!(content(&r).ends_with("[exit code 3]"), "{r}");
    let r = e.shell("kill -SEGV $$");
    assert_sandboxed(&r);
    assert_eq!(r["exit_code"], 139);
    assert_eq!(r["value"]["signal"], 11);
    assert!(content(&r).contains("killed by signal 11 (SIGSEGV)"), "{r}");
}

#[test]
fn sandbox_required_runs_with_landlock() {
    let e = Env::new();
    let r = e.shell_args(
        json!({"command": e.script(&format!("echo x > {}/f; echo in > f", e.outside.display()))}),
        &["--yolo", "--sandbox", "required"],
    );
    assert_sandboxed(&r);
    assert!(!e.outside.join("f").exists());
    assert!(e.ws.join("f").exists());
}

#[test]
fn sandbox_off_runs_unconfined_and_says_so_in_the_result_and_the_journal() {
    let e = Env::new();
    let target = e.outside.join("written");
    let r = e.shell_args(
        json!({"command": e.script(&format!("echo x > {}", target.display()))}),
        &["--yolo", "--sandbox", "off"],
    );
    assert_eq!(kind(&r), "ok", "{r}");
    assert_eq!(r["sandbox"], "none");
    assert_eq!(r["value"]["sandbox"], "none");
    assert!(content(&r).starts_with("[warning: not sandboxed"), "{r}");
    assert!(target.exists(), "off really is off");
    let dir = e.home.join("sessions");
    let journal = std::fs::read_dir(dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(journal).unwrap();
    let result = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["kind"] == "tool_result")
        .unwrap();
    assert!(
        result.to_string().contains("warning: not sandboxed"),
        "{result}"
    );
    assert!(
        result.to_string().contains(r#""sandbox":"none""#),
        "{result}"
    );
}

#[test]
fn the_config_sandbox_mode_applies_and_the_flag_overrides_it() {
    let e = Env::new();
    e.user_config("[sandbox]\nmode = \"off\"\n");
    let r = e.shell("true");
    assert_eq!(r["sandbox"], "none", "{r}");
    let r = e.shell_args(json!({"command": "true"}), &["--yolo", "--sandbox", "auto"]);
    assert_sandboxed(&r);
}

#[test]
fn the_shell_policy_decides_and_check_and_batch_agree() {
    let e = Env::new();
    e.user_config(&format!(
        "[permissions]\nallow = [\"run_shell(ls)\"]\n[trust]\nworkspaces = [{:?}]\n",
        e.ws.display().to_string()
    ));
    std::fs::create_dir_all(e.ws.join(".dsh")).unwrap();
    std::fs::write(
        e.ws.join(".dsh/config.toml"),
        "[permissions]\nallow = [\"run_shell(ls)\"]\n",
    )
    .unwrap();
    let check = |args: &str| -> Value {
        let out = e.dsh(&["check", "run_shell", args]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // An allow rule lets `ls` run headless, without --yolo.
    let c = check(r#"{"command":"ls"}"#);
    assert_eq!(c["decision"], "allow", "{c}");
    assert_eq!(c["policy"], "shell", "{c}");
    let r = e.shell_args(json!({"command": "ls"}), &[]);
    assert_eq!(kind(&r), "ok", "{r}");
    // It does not carry a second command along, even with --yolo.
    let c = check(r#"{"command":"ls; rm -rf ~"}"#);
    assert_eq!(c["decision"], "deny", "{c}");
    let r = e.shell_args(json!({"command": "ls; touch ../ran"}), &["--yolo"]);
    assert_eq!(kind(&r), "denied", "{r}");
    assert!(!e.root().join("ran").exists());
    // A program on no list asks: --yolo approves it, and the sandbox bounds it.
    let r = e.shell_args(json!({"command": "ls; touch ran"}), &["--yolo"]);
    assert_eq!(kind(&r), "ok", "{r}");
    assert_eq!(r["sandbox"], "landlock", "{r}");
    // `network: true` is denied at gate 1, so check says what batch --yolo does.
    let c = check(r#"{"command":"ls","network":true}"#);
    assert_eq!(c["decision"], "deny", "{c}");
    let r = e.shell_args(json!({"command": "ls", "network": true}), &["--yolo"]);
    assert_eq!(kind(&r), "denied", "{r}");
}

#[test]
fn nothing_leaves_the_commands_process_group() {
    // A chain of processes that each change group and fork would outrun the sweeps that
    // kill what a command leaves: `setpgid` is refused, while `timeout` still works.
    let e = Env::new();
    let r = e.shell(&e.script(
        "perl -e 'setpgrp(0, 0) ? print \"LEFT-THE-GROUP\" : print \"SETPGID-REFUSED\"'; timeout 5 true && echo TIMEOUT-OK",
    ));
    assert_sandboxed(&r);
    let text = content(&r);
    assert!(text.contains("SETPGID-REFUSED"), "{text}");
    assert!(!text.contains("LEFT-THE-GROUP"), "{text}");
    assert!(text.contains("TIMEOUT-OK"), "{text}");
}
