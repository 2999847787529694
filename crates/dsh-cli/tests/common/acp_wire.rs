//! A raw ACP client for the tests of `dsh acp`: a real `dsh acp` child driven with
//! newline-delimited JSON-RPC lines on its stdin, every line it writes on stdout checked to be
//! one JSON-RPC message. Shared by `acp.rs` and `attack_acp.rs`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Dirs;

/// How long one answer may take before the test fails (a hung dsh, not a slow one).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A `dsh acp` process and the lines it writes.
pub struct Agent {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub lines: mpsc::Receiver<String>,
    /// Every message read so far that was not an answer someone waited for.
    pub seen: Vec<Value>,
    stderr_file: PathBuf,
}

impl Agent {
    pub fn start(d: &Dirs, url: &str, extra: &[&str]) -> Agent {
        Agent::start_with(d, url, extra, &[])
    }

    pub fn start_with(d: &Dirs, url: &str, extra: &[&str], envs: &[(&str, &str)]) -> Agent {
        let mut args = vec![
            "--provider",
            "openai",
            "--base-url",
            url,
            "--model",
            "scripted",
        ];
        args.extend_from_slice(extra);
        args.push("acp");
        let stderr_file = d.root().join(format!(
            "acp-stderr-{}.txt",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let mut c = Command::new(env!("CARGO_BIN_EXE_dsh"));
        c.args(&args)
            .env("DSH_HOME", &d.home)
            .env("DSH_CONFIG_HOME", &d.cfg)
            .env("HOME", &d.user_home)
            .env("OPENAI_API_KEY", "sk-secret-key")
            .envs(envs.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_file).unwrap());
        let mut child = c.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            // Bytes, not `lines()`: a line that is not UTF-8 must fail the test, not end it.
            let mut reader = BufReader::new(stdout);
            loop {
                let mut buf = Vec::new();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let line = String::from_utf8_lossy(&buf).trim_end().to_owned();
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Agent {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            stderr_file,
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_file).unwrap_or_default()
    }

    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, msg: &Value) {
        self.send_bytes(msg.to_string().as_bytes());
    }

    /// The next message dsh writes; every line must be one JSON-RPC message.
    pub fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("dsh answered within the patience\n{}", self.stderr()));
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only protocol messages: {e}: {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        v
    }

    /// Sends a request and reads until its answer (other messages kept in `seen`).
    pub fn request(&mut self, id: &str, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer(&json!(id))
    }

    pub fn answer(&mut self, id: &Value) -> Value {
        let answers = |v: &Value| v.get("method").is_none() && &v["id"] == id;
        if let Some(at) = self.seen.iter().position(answers) {
            return self.seen.remove(at);
        }
        loop {
            let v = self.next();
            if v.get("method").is_none() && &v["id"] == id {
                return v;
            }
            self.seen.push(v);
        }
    }

    /// Reads until a request or notification of `method` (others kept in `seen`).
    pub fn until_method(&mut self, method: &str) -> Value {
        loop {
            let v = self.next();
            if v["method"] == method {
                return v;
            }
            self.seen.push(v);
        }
    }

    /// Reads until a `tool_call_update` with `status` (others kept in `seen`).
    pub fn until_status(&mut self, status: &str) -> Value {
        loop {
            let v = self.next();
            if v["params"]["update"]["sessionUpdate"] == "tool_call_update"
                && v["params"]["update"]["status"] == status
            {
                return v;
            }
            self.seen.push(v);
        }
    }

    pub fn initialize(&mut self) -> Value {
        self.request(
            "init",
            "initialize",
            json!({"protocolVersion": 1, "clientInfo": {"name": "wire-test", "version": "1"}}),
        )
    }

    pub fn new_session(&mut self, cwd: &Path, mcp: Value) -> Value {
        self.request("new", "session/new", json!({"cwd": cwd, "mcpServers": mcp}))
    }

    /// A new session in `cwd`: its id.
    pub fn open(&mut self, cwd: &Path) -> String {
        let new = self.new_session(cwd, json!([]));
        new["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a session: {new}"))
            .to_owned()
    }

    pub fn send_prompt(&mut self, id: &str, session: &str, text: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}),
        );
    }

    pub fn prompt(&mut self, session: &str, text: &str) -> Value {
        self.request(
            "p",
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    /// Answers the client request `asked` with `result`.
    pub fn respond(&mut self, asked: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": result}));
    }

    /// The text of the agent's message chunks seen so far, then forgets them.
    pub fn said(&mut self) -> String {
        let text = self
            .seen
            .iter()
            .filter(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .map(|v| {
                v["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or_default()
            })
            .collect();
        self.seen.clear();
        text
    }

    /// Closes stdin and waits until dsh exits on its own: its exit code.
    pub fn close_and_wait(&mut self) -> Option<i32> {
        drop(self.stdin.take());
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "dsh acp did not exit when its stdin closed\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Closes stdin; dsh must exit 0 on its own, and every line it wrote must have been
    /// JSON-RPC.
    pub fn close(mut self) {
        let code = self.close_and_wait();
        assert_eq!(code, Some(0), "{}", self.stderr());
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carries only protocol messages: {e}: {line}"));
            assert_eq!(v["jsonrpc"], "2.0", "{v}");
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn error_code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("an error: {v}"))
}
