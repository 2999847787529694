//! Long tasks against the scripted server (issue 10, Measure): for 20-, 100- and 300-call
//! tasks, the total bytes of the requests dsh sends, the share of them a provider's prompt
//! cache would serve (each request's longest prefix — tools, then messages — equal to the
//! previous request's), and the wall time of the whole run (median of 5, release binary).
//!
//! ```sh
//! cargo bench -p dsh-cli --bench long_task
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_dsh");
const RUNS: usize = 5;

struct Env {
    _root: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    cfg: PathBuf,
}

impl Env {
    fn new() -> Env {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        for i in 0..10 {
            let body: String = (0..30).map(|l| format!("// m{i} line {l}\n")).collect();
            std::fs::write(ws.join(format!("src/m{i}.rs")), body).unwrap();
        }
        let cfg = root.path().join("cfg");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(cfg.join("config.toml"), "").unwrap();
        Env {
            ws: ws.canonicalize().unwrap(),
            home: root.path().join("home"),
            cfg,
            _root: root,
        }
    }

    fn exec(&self, url: &str) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.arg("--workspace")
            .arg(&self.ws)
            .args(["exec", "--provider", "openai", "--base-url", url])
            .args(["--model", "scripted", "walk the modules"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DSH_HOME", &self.home)
            .env("DSH_CONFIG_HOME", &self.cfg)
            .env("OPENAI_API_KEY", "sk-bench")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }
}

/// `calls` tool-call turns (reads and listings, never the same call twice in a row), then a
/// final answer.
fn script(calls: usize) -> Vec<Reply> {
    let mut replies: Vec<Reply> = (0..calls)
        .map(|i| {
            let (name, args) = if i % 2 == 0 {
                ("read_file", format!(r#"{{"path":"src/m{}.rs"}}"#, i % 10))
            } else {
                ("list_dir", r#"{"path":"src"}"#.to_owned())
            };
            Turn::tool_call(&format!("c{i}"), name, &args)
                .usage(1000, 20)
                .into()
        })
        .collect();
    replies.push(Turn::text("done").usage(1000, 5).into());
    replies
}

fn bytes(v: &Value) -> usize {
    v.to_string().len()
}

/// Total request bytes, and the bytes each request shares as a prefix with the one before.
fn prefix_share(requests: &[Value]) -> (usize, usize) {
    let (mut total, mut cached) = (0, 0);
    let mut previous: Option<&Value> = None;
    for r in requests {
        let tools = &r["tools"];
        let messages = r["messages"].as_array().unwrap();
        total += bytes(tools) + messages.iter().map(bytes).sum::<usize>();
        if let Some(p) = previous
            && p["tools"] == *tools
        {
            let pm = p["messages"].as_array().unwrap();
            let common = pm.iter().zip(messages).take_while(|(a, b)| a == b).count();
            cached += bytes(tools) + messages[..common].iter().map(bytes).sum::<usize>();
        }
        previous = Some(r);
    }
    (total, cached)
}

fn main() {
    println!(
        "| calls | requests | request bytes | cache-servable share | wall (median of {RUNS}) |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for calls in [20, 100, 300] {
        let mut walls: Vec<Duration> = Vec::new();
        let mut figures = None;
        for _ in 0..RUNS {
            let env = Env::new();
            let server = ScriptedServer::start(script(calls));
            let begun = Instant::now();
            let status = env.exec(&server.url).status().unwrap();
            walls.push(begun.elapsed());
            assert!(status.success(), "{calls}-call run failed");
            let requests = server.requests();
            assert_eq!(requests.len(), calls + 1);
            figures = Some((requests.len(), prefix_share(&requests)));
        }
        walls.sort();
        let (n, (total, cached)) = figures.unwrap();
        println!(
            "| {calls} | {n} | {total} | {:.1} % | {:.0} ms |",
            100.0 * cached as f64 / total as f64,
            walls[RUNS / 2].as_secs_f64() * 1000.0
        );
    }
}
