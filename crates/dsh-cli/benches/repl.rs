//! The REPL's three measurements (issue 11): the release `dsh` in a pseudo-terminal (the
//! tests' harness, `tests/common/pty.rs`: portable-pty and a vt100 emulator) against the
//! scripted model server on 127.0.0.1.
//!
//! - `enter`: Enter → the model request's first byte at the server, over `ENTER_TURNS` turns
//!   (default 30) in one REPL process. The start is taken just before Enter is written to the
//!   PTY, the end is `Recorded::received` (the server's first read of the request).
//! - `idle`: the REPL's own CPU time (all its threads, `/proc/PID/task/*/schedstat`) over
//!   `IDLE_SECS` seconds (default 10) at the prompt, and again during a turn whose model reply
//!   is held (the key reader and spinner run).
//! - `render`: a ~1 MB Markdown answer streamed as fast as the server writes it, in deltas of
//!   `DELTA_CHARS` characters (default 16). Two texts (mixed prose, lists and code; mostly
//!   code) with colour and with `NO_COLOR=1`. "stream" is the same reply read by a plain TCP
//!   client that discards it (request written → EOF); "render" is the request's first byte at
//!   the server → the end marker in the PTY's raw output. Also: how long the vt100 emulator
//!   takes to replay the REPL's raw output, since it is the terminal in this setup.
//!   And the same reply through `dsh exec` with stdout to /dev/null (no renderer): request →
//!   exit. `RENDER_RUNS` (default 2) runs of each; `RENDER_TEXT=mixed` or `code-heavy` runs one.
//!
//! - `resize` (issue 24): an answer of `RESIZE_LINES` lines (default 100, 100 characters
//!   each, the last line of each batch still arriving) streamed in deltas of 10 characters
//!   every 2 ms — about two seconds — once steady and once through a resize storm (the PTY
//!   resized every 10 ms, 120 ↔ 80 columns: 100 resizes a second). For each: the REPL's CPU
//!   time and the bytes it wrote from Enter to the answer's end, and their storm/steady
//!   ratios. `RESIZE_RUNS` (default 3) runs of each, alternated.
//!
//! ```sh
//! cargo bench -p dsh-cli --bench repl            # all four
//! cargo bench -p dsh-cli --bench repl -- render  # one of enter, idle, render, resize
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/pty.rs"]
mod pty;

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use common::Dirs;
use dsh_testkit::model_server::{Gate, Reply, ScriptedServer, ServerHandle, Turn};
use pty::{Mark, Pty, PtySpec, key};

const BIN: &str = env!("CARGO_BIN_EXE_dsh");
const PROMPT: &str = "›";
const END: &str = "ENDOFANSWERMARKER";

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The REPL against `server` in a fresh PTY, at its first prompt.
fn spawn(w: &Dirs, server: &ServerHandle, no_color: bool) -> Pty {
    let url = server.url.as_str();
    let mut c = w.dsh(&[
        "--provider",
        "openai",
        "--base-url",
        url,
        "--model",
        "scripted",
    ]);
    c.env("OPENAI_API_KEY", "sk-test");
    if no_color {
        c.env("NO_COLOR", "1");
    }
    let pty = PtySpec::from_command(&c)
        .size(40, 120)
        .timeout(Duration::from_secs(300))
        .spawn();
    pty.wait_for_text(PROMPT);
    pty
}

/// Waits until `needle` is in the raw output after `mark` and a prompt follows it.
fn wait_answer_then_prompt(pty: &Pty, mark: Mark, needle: &str) {
    pty.wait_for_raw(&format!("{needle:?} then the prompt"), |raw| {
        let text = pty::strip_ansi(raw.get(mark.0..).unwrap_or_default());
        text.find(needle)
            .is_some_and(|i| text[i..].contains(PROMPT))
    });
}

fn stats(name: &str, unit: &str, mut v: Vec<f64>) {
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    println!(
        "{name}: n={} median {:.2} {unit}, p10 {:.2}, p90 {:.2}, min {:.2}, max {:.2}",
        v.len(),
        q(0.5),
        q(0.1),
        q(0.9),
        v[0],
        v[v.len() - 1]
    );
}

fn enter() {
    let turns = env_num("ENTER_TURNS", 30) as usize;
    let w = Dirs::new();
    let server = ScriptedServer::start(
        (0..turns)
            .map(|i| Reply::text(format!("answer-{i}.")))
            .collect(),
    );
    let pty = spawn(&w, &server, false);
    let mut ms = Vec::with_capacity(turns);
    for i in 0..turns {
        let line = format!("question {i}");
        pty.send(&line);
        pty.wait_for_text(&line);
        let mark = pty.mark();
        let t0 = Instant::now();
        pty.send(key::ENTER);
        assert!(server.wait_for_requests(i + 1, Duration::from_secs(30)));
        let received = server.recorded()[i].received;
        ms.push(received.duration_since(t0).as_secs_f64() * 1e3);
        wait_answer_then_prompt(&pty, mark, &format!("answer-{i}."));
    }
    stats("enter -> first request byte", "ms", ms);
    pty.send(key::CTRL_D);
}

/// CPU time of process `pid` in ms: the sum over its live threads of
/// `/proc/PID/task/TID/schedstat`'s first field (ns on the CPU), which unlike `stat`'s
/// utime/stime is not rounded to clock ticks. (Threads that exit in the window are missed.)
fn cpu_ms(pid: u32) -> f64 {
    let mut ns = 0u64;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = t.unwrap().path().join("schedstat");
        if let Ok(s) = std::fs::read_to_string(path) {
            ns += s.split(' ').next().unwrap().parse::<u64>().unwrap();
        }
    }
    ns as f64 / 1e6
}

fn idle_for(pid: u32, secs: u64) -> f64 {
    let c0 = cpu_ms(pid);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let c1 = cpu_ms(pid);
    (c1 - c0) / t0.elapsed().as_secs_f64()
}

fn idle() {
    let secs = env_num("IDLE_SECS", 10);
    let w = Dirs::new();
    let gate = Gate::new();
    let server = ScriptedServer::start(vec![Reply::text("held answer.").held(&gate)]);
    let pty = spawn(&w, &server, false);
    let pid = pty.pid().expect("pid");
    // Let start-up work (lazy loads, the first prompt's queries) settle.
    std::thread::sleep(Duration::from_secs(1));
    let at_prompt = idle_for(pid, secs);
    println!("idle at the prompt: {at_prompt:.2} CPU ms per s over {secs} s");
    let mark = pty.mark();
    pty.send_line("wait for the model");
    assert!(server.wait_for_requests(1, Duration::from_secs(30)));
    std::thread::sleep(Duration::from_millis(500));
    let held = idle_for(pid, secs);
    println!("idle in a turn waiting on a held reply: {held:.2} CPU ms per s over {secs} s");
    gate.open();
    wait_answer_then_prompt(&pty, mark, "held answer.");
    pty.send(key::CTRL_D);
}

/// About `bytes` of Markdown; `code_heavy`: nearly all fenced Rust and Python.
fn markdown(bytes: usize, code_heavy: bool) -> String {
    let prose = "The pipeline runs every call through the same gates, in order, and journals \
                 each decision before the tool sees its arguments; a denial is a result.\n";
    let list = "- `read_file` keeps the version it saw, so a later edit can be refused\n\
                - the journal is fsynced once per batch, not per call\n\
                  1. nested: the order is declared once, with the reason beside it\n";
    let rust = "```rust\n\
                /// Runs one batch; results commit in submission order.\n\
                pub fn run_batch(&mut self, calls: Vec<Call>) -> Result<Vec<Outcome>, Error> {\n\
                \x20   let mut out = Vec::with_capacity(calls.len()); // reserve once\n\
                \x20   for (i, call) in calls.into_iter().enumerate() {\n\
                \x20       let r = self.gate(i, &call).map_err(|e| Error::new(\"gate\", e))?;\n\
                \x20       out.push(r.unwrap_or(Outcome::Denied { reason: \"no\".into() }));\n\
                \x20   }\n\
                \x20   Ok(out)\n\
                }\n\
                ```\n";
    let python = "```python\n\
                  def fold(lines, width=80):\n\
                  \x20   \"\"\"Fold each line at width, keeping words.\"\"\"\n\
                  \x20   for n, line in enumerate(lines):  # one pass\n\
                  \x20       yield n, [line[i:i + width] for i in range(0, len(line), width)]\n\
                  ```\n";
    let mut s = String::with_capacity(bytes + 4096);
    let mut k = 0usize;
    while s.len() < bytes {
        if code_heavy {
            s.push_str(if k.is_multiple_of(2) { rust } else { python });
            if k.is_multiple_of(10) {
                s.push_str(&format!("\n## Part {k}\n\n{prose}\n"));
            }
        } else {
            s.push_str(&format!("## Section {k}\n\n{prose}{prose}\n{list}\n"));
            s.push_str(if k.is_multiple_of(2) { rust } else { python });
            s.push_str(&format!("\n{prose}\n"));
        }
        k += 1;
    }
    s.push_str(&format!("\nDone: {END}\n"));
    s
}

/// The time a plain client takes to read `reply` from a fresh scripted server: request
/// written → EOF, the body discarded.
fn stream_time(reply: Reply) -> (Duration, usize) {
    let server = ScriptedServer::start(vec![reply]);
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_owned();
    let body = r#"{"model":"scripted","stream":true,"messages":[{"role":"user","content":"x"}]}"#;
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_nodelay(true).unwrap();
    let t0 = Instant::now();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
    (t0.elapsed(), total)
}

fn render_once(text: &str, delta_chars: usize, no_color: bool) -> (Duration, usize) {
    let w = Dirs::new();
    let server = ScriptedServer::start(vec![Turn::text(text).deltas(delta_chars).into()]);
    let pty = spawn(&w, &server, no_color);
    let start = pty.mark();
    pty.send_line("write a long answer");
    assert!(server.wait_for_requests(1, Duration::from_secs(30)));
    let received = server.recorded()[0].received;
    // Poll the raw tail (cheap) rather than re-scanning the whole output at every read.
    loop {
        let len = pty.mark().0;
        let tail = pty.raw_since(Mark(len.saturating_sub(256).max(start.0)));
        if String::from_utf8_lossy(&tail).contains(END) {
            break;
        }
        assert!(pty.try_exit_status().is_none(), "{}", pty.report());
        assert!(
            received.elapsed() < Duration::from_secs(300),
            "{}",
            pty.report()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let rendered = received.elapsed();
    let raw = pty.raw_output();
    // The emulator's own share: replay the same bytes into a fresh vt100 terminal.
    let mut parser = vt100::Parser::new(
        std::num::NonZeroU16::new(40).unwrap(),
        std::num::NonZeroU16::new(120).unwrap(),
        pty::SCROLLBACK,
    );
    let t = Instant::now();
    parser.process(&raw);
    let emu = t.elapsed();
    println!(
        "    raw output {:.2} MB, vt100 replay of it {:.0} ms",
        raw.len() as f64 / 1e6,
        emu.as_secs_f64() * 1e3
    );
    drop(pty);
    (rendered, raw.len())
}

/// The same reply through `dsh exec` (stdout to /dev/null): the agent, provider and SSE
/// parsing without the REPL's renderer. Request's first byte → the process has exited.
fn exec_once(text: &str, delta_chars: usize) -> Duration {
    let w = Dirs::new();
    let server = ScriptedServer::start(vec![Turn::text(text).deltas(delta_chars).into()]);
    let mut child = Command::new(BIN)
        .arg("--workspace")
        .arg(&w.ws)
        .args([
            "exec",
            "--provider",
            "openai",
            "--base-url",
            &server.url,
            "--model",
            "scripted",
            "write a long answer",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DSH_HOME", &w.home)
        .env("DSH_CONFIG_HOME", &w.cfg)
        .env("HOME", &w.user_home)
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "exec: {status:?}");
    server.recorded()[0].received.elapsed()
}

fn render() {
    let delta = env_num("DELTA_CHARS", 16) as usize;
    let runs = env_num("RENDER_RUNS", 2);
    let only = std::env::var("RENDER_TEXT").unwrap_or_default();
    for (name, code_heavy) in [("mixed", false), ("code-heavy", true)] {
        if !only.is_empty() && only != name {
            continue;
        }
        let text = markdown(1 << 20, code_heavy);
        for run in 0..runs {
            let (stream, sse_bytes) = stream_time(Turn::text(text.clone()).deltas(delta).into());
            println!(
                "render {name} ({:.2} MB text, {delta}-char deltas, {:.1} MB SSE), run {run}:",
                text.len() as f64 / 1e6,
                sse_bytes as f64 / 1e6
            );
            println!(
                "  stream to a discarding client: {:.0} ms",
                stream.as_secs_f64() * 1e3
            );
            let e = exec_once(&text, delta);
            println!(
                "  dsh exec, stdout to /dev/null: request → exit {:.0} ms, {:.1}× the stream",
                e.as_secs_f64() * 1e3,
                e.as_secs_f64() / stream.as_secs_f64()
            );
            for no_color in [false, true] {
                let (r, _) = render_once(&text, delta, no_color);
                println!(
                    "  REPL{}: request → end marker on the PTY {:.0} ms, {:.1}× the stream",
                    if no_color { " NO_COLOR=1" } else { "" },
                    r.as_secs_f64() * 1e3,
                    r.as_secs_f64() / stream.as_secs_f64()
                );
            }
        }
    }
}

/// One streamed answer, steady or through a resize storm: (CPU ms, bytes written, wall ms,
/// resizes sent).
fn resize_once(lines: usize, storm: bool) -> (f64, usize, f64, usize) {
    let w = Dirs::new();
    let text: String = (0..lines)
        .map(|i| format!("{i:04} {}\n", "resize storm text ".repeat(5).trim_end()))
        .chain([format!("{END}\n")])
        .collect();
    let server = ScriptedServer::start(vec![
        Turn::text(text)
            .deltas(10)
            .slow(Duration::from_millis(2))
            .into(),
    ]);
    let pty = spawn(&w, &server, false);
    let pid = pty.pid().expect("pid");
    let start = pty.mark();
    let cpu0 = cpu_ms(pid);
    let t0 = Instant::now();
    pty.send_line("stream it");
    let mut resizes = 0;
    let mut last = Instant::now();
    loop {
        if storm && last.elapsed() >= Duration::from_millis(10) {
            resizes += 1;
            pty.resize(40, if resizes % 2 == 0 { 120 } else { 80 });
            last = Instant::now();
        }
        let len = pty.mark().0;
        let tail = pty.raw_since(Mark(len.saturating_sub(256).max(start.0)));
        if String::from_utf8_lossy(&tail).contains(END) {
            break;
        }
        assert!(pty.try_exit_status().is_none(), "{}", pty.report());
        std::thread::sleep(Duration::from_millis(1));
    }
    let wall = t0.elapsed().as_secs_f64() * 1e3;
    let cpu = cpu_ms(pid) - cpu0;
    let bytes = pty.mark().0 - start.0;
    drop(pty);
    (cpu, bytes, wall, resizes)
}

fn resize() {
    let lines = env_num("RESIZE_LINES", 100) as usize;
    let runs = env_num("RESIZE_RUNS", 3) as usize;
    let (mut steady, mut storm) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        steady.push(resize_once(lines, false));
        storm.push(resize_once(lines, true));
    }
    let median = |v: &[(f64, usize, f64, usize)], f: fn(&(f64, usize, f64, usize)) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(f64::total_cmp);
        x[x.len() / 2]
    };
    for (name, v) in [("steady", &steady), ("resize storm", &storm)] {
        println!(
            "resize/{name}: medians of {runs}: {:.0} CPU ms, {:.0} KB written, {:.0} ms wall, {:.0} resizes",
            median(v, |r| r.0),
            median(v, |r| r.1 as f64) / 1e3,
            median(v, |r| r.2),
            median(v, |r| r.3 as f64),
        );
    }
    println!(
        "resize/storm ÷ steady: CPU ×{:.2}, bytes ×{:.2}",
        median(&storm, |r| r.0) / median(&steady, |r| r.0),
        median(&storm, |r| r.1 as f64) / median(&steady, |r| r.1 as f64),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a plain word selects one measurement.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let want = |n: &str| only.is_empty() || only.iter().any(|o| o == n);
    if want("enter") {
        enter();
    }
    if want("idle") {
        idle();
    }
    if want("render") {
        render();
    }
    if want("resize") {
        resize();
    }
}
