//! `dsh acp` against `dsh exec` on the same scripted task (issue 28, "Measure"): the release
//! binary as an ACP agent, driven line by line over its stdin and stdout by this bench (no
//! SDK in the loop), against a [`ScriptedServer`] that answers at once.
//!
//! - From `initialize` to the first `session/update` of a turn: `initialize`, `session/new`,
//!   `session/prompt`, until the first update that belongs to the turn (the answer's first
//!   chunk). The process is spawned before the clock starts; its start-up is `--version`'s.
//! - Per step: a prompt of 20 tool calls (read_file and list_dir, as `e2e`'s task) and a
//!   prompt of none, each in a fresh `dsh acp`, from the prompt sent to its answer;
//!   (20-call − 0-call) / 20. `dsh exec` runs the same two scripts in the same runs,
//!   alternated, for the ratio.
//! - Peak RSS: the `dsh acp` process's `VmHWM` after the 20-call prompt.
//!
//! ```sh
//! cargo bench -p dsh-cli --bench acp            # ACP_RUNS=N (default 15)
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "common/env.rs"]
mod env;
#[path = "common/process.rs"]
mod process;
#[path = "common/task.rs"]
mod task;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use dsh_testkit::model_server::ScriptedServer;
use env::{BIN, Env};
use process::{median, peak_rss_kib, run};
use serde_json::{Value, json};
use task::script;

const TOOL_CALLS: usize = 20;

struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Acp {
    fn start(env: &Env, url: &str) -> Acp {
        let mut child = Command::new(BIN)
            .args(["--provider", "openai", "--base-url", url])
            .args(["--model", "scripted", "acp"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DSH_HOME", &env.home)
            .env("DSH_CONFIG_HOME", &env.cfg)
            .env("OPENAI_API_KEY", "sk-bench")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Acp {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, id: &str, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("dsh acp answers");
        serde_json::from_str(&line).unwrap()
    }

    /// Reads until the answer to `id`; the instant of the first update of the turn, if
    /// one came (`available_commands_update` is the session's, not the turn's).
    fn until_answer(&self, id: &str) -> (Value, Option<Instant>) {
        let mut first = None;
        loop {
            let v = self.next();
            if v["method"] == "session/update" {
                if v["params"]["update"]["sessionUpdate"] != "available_commands_update" {
                    first.get_or_insert_with(Instant::now);
                }
                continue;
            }
            if v["id"] == id {
                return (v, first);
            }
        }
    }

    fn session(&mut self, env: &Env) -> String {
        self.send(
            "i",
            "initialize",
            json!({"protocolVersion": 1, "clientInfo": {"name": "bench", "version": "1"}}),
        );
        self.until_answer("i");
        self.send("n", "session/new", json!({"cwd": env.ws, "mcpServers": []}));
        let (new, _) = self.until_answer("n");
        new["result"]["sessionId"].as_str().unwrap().to_owned()
    }

    /// One prompt to its answer: the wall time, and when the first update came.
    fn prompt(&mut self, session: &str) -> (Duration, Duration) {
        let begun = Instant::now();
        self.send(
            "p",
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "look at every module"}]}),
        );
        let (answer, first) = self.until_answer("p");
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        (begun.elapsed(), first.unwrap() - begun)
    }

    fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    }

    fn close(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success());
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo test --benches` runs benches with `--bench` absent: nothing to measure then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runs: usize = std::env::var("ACP_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(15);
    let env = Env::new(TOOL_CALLS, "", None);

    let mut first_update = Vec::new();
    let mut setups = Vec::new();
    let mut acp = [Vec::new(), Vec::new()];
    let mut exec = [Vec::new(), Vec::new()];
    let mut rss = Vec::new();
    for _ in 0..runs {
        for (k, steps) in [0, TOOL_CALLS].into_iter().enumerate() {
            // ACP: a fresh process; the clock for the first update starts at `initialize`.
            let server = ScriptedServer::start(script(steps));
            let mut a = Acp::start(&env, &server.url);
            let begun = Instant::now();
            let session = a.session(&env);
            let setup = begun.elapsed();
            let (wall, first) = a.prompt(&session);
            if steps == 0 {
                setups.push(setup);
                first_update.push(setup + first);
            } else {
                rss.extend(a.peak_rss_kib());
            }
            acp[k].push(wall);
            a.close();
            assert_eq!(server.remaining(), 0);

            // exec: the same script, the whole process.
            let server = ScriptedServer::start(script(steps));
            exec[k].push(run(env.exec(&server.url)).wall);
            assert_eq!(server.remaining(), 0);
        }
    }
    let steps = u32::try_from(TOOL_CALLS).unwrap();
    let per_step =
        |v: &[Vec<Duration>; 2]| median(v[1].clone()).saturating_sub(median(v[0].clone())) / steps;
    let (acp_step, exec_step) = (per_step(&acp), per_step(&exec));
    println!("== dsh acp against dsh exec (medians of {runs} runs) ==");
    println!(
        "initialize -> first session/update of a turn   {}",
        ms(median(first_update))
    );
    println!(
        "  of which initialize + session/new             {}",
        ms(median(setups))
    );
    println!(
        "acp prompt, 0 tool calls        {}   20 tool calls {}",
        ms(median(acp[0].clone())),
        ms(median(acp[1].clone()))
    );
    println!(
        "exec process, 0 tool calls      {}   20 tool calls {}",
        ms(median(exec[0].clone())),
        ms(median(exec[1].clone()))
    );
    println!(
        "per step: acp {}, exec {} (acp/exec {:.2})",
        ms(acp_step),
        ms(exec_step),
        acp_step.as_secs_f64() / exec_step.as_secs_f64()
    );
    rss.sort_unstable();
    if let Some(m) = rss.get(rss.len() / 2) {
        println!("dsh acp peak RSS (VmHWM) after the 20-call prompt: {m} KiB");
    }
    let server = ScriptedServer::start(script(TOOL_CALLS));
    if let Some(k) = peak_rss_kib(&env.exec(&server.url)) {
        println!("dsh exec peak RSS (GNU time %M), the same 20 calls: {k} KiB");
    }
}
