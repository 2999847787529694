//! `dsh check` and `dsh batch` (DESIGN §4). Both assemble the same session; `check` stops
//! after gates 1 and 3, `batch` runs everything.

use std::io::BufRead;

use anyhow::anyhow;
use dsh_agent::{Ending, Session, Totals};
use dsh_core::{CallSource, ToolCall};
use serde::Deserialize;
use serde_json::Value;

use crate::signals::{self, Signals};
use crate::{Common, Failure, exit, mirror, settings};

/// One input line of `dsh batch`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    name: String,
    #[serde(default = "empty_object")]
    args: Value,
    id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

pub(crate) async fn check(common: &Common, tool: &str, args_json: &str) -> Result<u8, Failure> {
    let args: Value = serde_json::from_str(args_json)
        .map_err(|e| Failure::usage(anyhow!("ARGS_JSON is not valid JSON: {e}")))?;
    if !args.is_object() {
        return Err(Failure::usage(anyhow!(
            "ARGS_JSON must be a JSON object, e.g. '{{\"path\":\"src/main.rs\"}}'"
        )));
    }
    let settings = settings::load(common)?;
    let session = Session::assemble_dry(&settings).map_err(Failure::usage)?;
    crate::start::say_mode(&session);
    // An MCP tool is judged once its server is up (each within its start-up timeout); no
    // server starts for a check of another tool.
    if tool.starts_with(dsh_mcp::PREFIX) {
        crate::start::wait_for_servers(&session).await;
    }
    let report = session
        .pipeline
        .check_in(&session.batch_tools(), &ToolCall::new("check", tool, args))
        .await;
    session.stop_extensions();
    let line = serde_json::to_string(&report).map_err(Failure::harness)?;
    crate::print_lines([line])?;
    Ok(exit::OK)
}

pub(crate) async fn batch(common: &Common, file: &str) -> Result<u8, Failure> {
    let calls = read_calls(file)?;
    let settings = settings::load(common)?;
    // With --json, the session's journal records stream to stdout as they are written (as
    // `dsh exec --json` does) instead of the result objects.
    let mirror = mirror::open(common.json)?;
    let signals = Signals::install().map_err(Failure::harness)?;
    let session =
        Session::assemble_with_mirror(&settings, mirror.clone()).map_err(Failure::assembly)?;
    crate::start::say_mode(&session);
    crate::start::wait_for_servers(&session).await;
    let scope = dsh_core::Scope {
        tools: session.batch_tools(),
        ..dsh_core::Scope::default()
    };
    let outcome = session
        .pipeline
        .run_batch_in(&scope, calls, signals.token())
        .await;
    let (results, error) = match outcome {
        Ok(out) => (out.results, Ok(())),
        Err(e) => (e.committed.clone(), Err(e)),
    };
    let ending = match &error {
        Err(_) => Ending::Error,
        Ok(()) => signals.ending(Ending::Finished),
    };
    let stop = match (&error, ending) {
        (Err(_), _) => "journal_error",
        (Ok(()), Ending::Finished) => "batch_complete",
        (Ok(()), _) => "interrupted",
    };
    let detail = error.as_ref().err().map(ToString::to_string);
    session.close_extensions().await;
    // The closing records are tried even after a journal fault (see dsh_agent's ending.rs).
    let closed = session
        .record_stop(stop, detail.as_deref(), Totals::none())
        .and_then(|_| session.finish(ending, Totals::none()));
    mirror::drain(mirror.as_ref(), &signals).await;
    if !common.json {
        crate::print_lines(results.iter().map(|r| r.to_json()))?;
    }
    crate::settle("the batch", error, closed)?;
    // A signal during the drain still says the output was cut short.
    Ok(signals::exit_code(signals.ending(ending)).unwrap_or(exit::OK))
}

/// Reads and validates every line before anything runs: a malformed input runs nothing.
fn read_calls(file: &str) -> Result<Vec<ToolCall>, Failure> {
    let reader: Box<dyn BufRead> = if file == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(file)
            .map_err(|e| Failure::usage(anyhow!("cannot read {file}: {e}")))?;
        Box::new(std::io::BufReader::new(f))
    };
    let mut calls = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (i, line) in reader.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| Failure::usage(anyhow!("{file}:{n}: cannot read: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line = serde_json::from_str(&line).map_err(|e| {
            Failure::usage(anyhow!(
                "{file}:{n}: not a tool call ({e}); each line is {{\"name\":\"read_file\",\"args\":{{…}}}} with an optional \"id\""
            ))
        })?;
        if !parsed.args.is_object() {
            return Err(Failure::usage(anyhow!(
                "{file}:{n}: \"args\" must be a JSON object"
            )));
        }
        let id = parsed.id.unwrap_or_else(|| format!("call-{n}"));
        if !ids.insert(id.clone()) {
            return Err(Failure::usage(anyhow!(
                "{file}:{n}: the id \"{id}\" is used twice"
            )));
        }
        // No model asked for these, and nobody typed them at the REPL: a batch's lines.
        calls.push(
            ToolCall::new(id, parsed.name, parsed.args)
                .with_step(1)
                .with_source(CallSource::Batch),
        );
    }
    Ok(calls)
}
