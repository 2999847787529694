//! Code Mode against native tool calls (issue 25, "Measure"): the release `dsh exec` runs the
//! same task — N cheap tool calls (`read_file` of a small module and `list_dir`, alternating),
//! then a final answer — against a [`ScriptedServer`] that answers at once, once as N turns
//! of one native tool call each and once as one `run_code` program making the N calls in a
//! loop (`--tools-mode code`). Printed side by side for N = 20 and N = 100: model requests,
//! the bytes of all request bodies, the medians of wall and CPU time, and peak RSS. Then the
//! cost of a program that makes no call (`return 1`), `dsh batch` of one `run_code` line
//! against the same batch of one `read_file` line: the interpreter's start-up, in time and
//! peak RSS.
//!
//! ```sh
//! cargo bench -p dsh-cli --bench code_mode
//! ```
//!
//! `CODE_MODE_RUNS` sets the runs per figure (default 15).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "common/env.rs"]
mod env;
#[path = "common/process.rs"]
mod process;

use std::process::{Command, Stdio};
use std::time::Duration;

use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use env::{BIN, Env};
use process::{Usage, median, peak_rss_kib, run};

fn native_script(n: usize) -> Vec<Reply> {
    let mut replies: Vec<Reply> = (0..n)
        .map(|i| {
            let turn = if i % 2 == 0 {
                Turn::tool_call(
                    &format!("c{i}"),
                    "read_file",
                    &format!(r#"{{"path":"src/m{i}.rs"}}"#),
                )
            } else {
                Turn::tool_call(&format!("c{i}"), "list_dir", r#"{"path":"src"}"#)
            };
            turn.usage(1000, 20).deltas(64).into()
        })
        .collect();
    replies.push(Turn::text("done: every module looked at").into());
    replies
}

fn code_script(n: usize) -> Vec<Reply> {
    let code = format!(
        "const seen = [];\n\
         for (let i = 0; i < {n}; i++) {{\n\
           const r = i % 2 === 0\n\
             ? await tools.read_file({{path: `src/m${{i}}.rs`}})\n\
             : await tools.list_dir({{path: 'src'}});\n\
           seen.push(r.path);\n\
         }}\n\
         return seen.length;"
    );
    let args = serde_json::json!({"code": code, "description": "look at every module"});
    vec![
        Turn::tool_call("p1", "run_code", &args.to_string())
            .usage(1000, 20)
            .deltas(64)
            .into(),
        Turn::text("done: every module looked at").into(),
    ]
}

struct Figures {
    requests: usize,
    request_bytes: usize,
    wall: Duration,
    cpu: Duration,
    rss_kib: Option<u64>,
}

fn measure(n: usize, code: bool, runs: usize) -> Figures {
    let env = Env::new(n, "", None);
    let script = || {
        if code {
            code_script(n)
        } else {
            native_script(n)
        }
    };
    let exec = |url: &str| {
        let mut cmd = env.exec(url);
        if code {
            // Global flags go before the verb.
            let args: Vec<_> = cmd.get_args().map(ToOwned::to_owned).collect();
            let mut with = Command::new(BIN);
            with.args(["--tools-mode", "code"]).args(args).env_clear();
            for (k, v) in cmd.get_envs() {
                if let Some(v) = v {
                    with.env(k, v);
                }
            }
            with.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            cmd = with;
        }
        cmd
    };
    let mut usages: Vec<Usage> = Vec::new();
    let mut requests = 0;
    let mut request_bytes = 0;
    for _ in 0..runs {
        let server = ScriptedServer::start(script());
        usages.push(run(exec(&server.url)));
        assert_eq!(server.remaining(), 0, "the whole script was used");
        let bodies = server.requests();
        requests = bodies.len();
        request_bytes = bodies.iter().map(|b| b.to_string().len()).sum();
        let records = env.last_journal();
        let ok = records
            .iter()
            .filter(|r| r["kind"] == "tool_result" && r["ok"] == true)
            .count();
        assert_eq!(ok, if code { n + 1 } else { n }, "every call ran");
    }
    let server = ScriptedServer::start(script());
    let rss_kib = peak_rss_kib(&exec(&server.url));
    Figures {
        requests,
        request_bytes,
        wall: median(usages.iter().map(|u| u.wall).collect()),
        cpu: median(usages.iter().map(|u| u.cpu).collect()),
        rss_kib,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn batch_line(env: &Env, line: &str, runs: usize) -> (Duration, Duration, Option<u64>) {
    let file = env.ws.parent().unwrap().join("calls.jsonl");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let cmd = || {
        let mut c = Command::new(BIN);
        c.args(["--tools-mode", "both", "--workspace"])
            .arg(&env.ws)
            .arg("batch")
            .arg(&file)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DSH_HOME", &env.home)
            .env("DSH_CONFIG_HOME", &env.cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    let usages: Vec<Usage> = (0..runs).map(|_| run(cmd())).collect();
    (
        median(usages.iter().map(|u| u.wall).collect()),
        median(usages.iter().map(|u| u.cpu).collect()),
        peak_rss_kib(&cmd()),
    )
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs: usize = std::env::var("CODE_MODE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    println!("Code Mode against native tool calls, medians of {runs} runs");
    for n in [20, 100] {
        let native = measure(n, false, runs);
        let code = measure(n, true, runs);
        for (label, f) in [("native", &native), ("code", &code)] {
            println!(
                "{n:>3} calls, {label:<6}: {} requests, {} request bytes, wall {}, cpu {}, peak RSS {} KiB",
                f.requests,
                f.request_bytes,
                ms(f.wall),
                ms(f.cpu),
                f.rss_kib.map_or("?".to_owned(), |k| k.to_string()),
            );
        }
        println!(
            "{n:>3} calls, code ÷ native: requests {:.3}, request bytes {:.3}, wall {:.3}, cpu {:.3}",
            code.requests as f64 / native.requests as f64,
            code.request_bytes as f64 / native.request_bytes as f64,
            code.wall.as_secs_f64() / native.wall.as_secs_f64(),
            code.cpu.as_secs_f64() / native.cpu.as_secs_f64(),
        );
    }
    let env = Env::new(1, "", None);
    let read = batch_line(
        &env,
        r#"{"name":"read_file","args":{"path":"src/m0.rs"}}"#,
        runs,
    );
    let program = batch_line(
        &env,
        r#"{"name":"run_code","args":{"code":"return 1","description":"nothing"}}"#,
        runs,
    );
    for (label, (wall, cpu, rss)) in [("read_file", read), ("run_code `return 1`", program)] {
        println!(
            "batch of one {label:<20}: wall {}, cpu {}, peak RSS {} KiB",
            ms(wall),
            ms(cpu),
            rss.map_or("?".to_owned(), |k| k.to_string())
        );
    }
    println!(
        "interpreter start-up (run_code − read_file): wall {}, cpu {}, peak RSS {} KiB",
        ms(program.0.saturating_sub(read.0)),
        ms(program.1.saturating_sub(read.1)),
        match (program.2, read.2) {
            (Some(a), Some(b)) => (a as i64 - b as i64).to_string(),
            _ => "?".to_owned(),
        }
    );
}
