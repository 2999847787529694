//! `dsh exec PROMPT`: a headless run to a stop line (DESIGN §4). No TTY needed, no stdin read
//! unless the prompt is `-`; the final text goes to stdout, or with `--json` the session's
//! journal records, one per line, as they are written.

use std::io::Read;

use anyhow::anyhow;

use dsh_agent::{Command, Ending, EventKind, EventStream, Reply, StopReason};

use crate::signals::{self, Signals};
use crate::start::{self, ModelArgs, Started};
use crate::{Common, Failure, exit, mirror};

/// Exit code for a run stopped by a stop line (steps, budget, loop).
pub(crate) const STOPPED: u8 = 3;

/// Flags of `dsh exec` (the model flags and `--resume`/`--continue` are [`ModelArgs`], shared
/// with the REPL and accepted before or after the verb).
#[derive(Debug, clap::Args)]
pub(crate) struct ExecArgs {
    /// No tool lines on stderr (the final answer and errors still print).
    #[arg(long)]
    quiet: bool,
    /// After a turn that changed files, run `[verify] command` and hand a failure back to
    /// the model, at most `[verify] max_rounds` times (the command is judged like a model's
    /// call: allow it with a rule, or it is refused headless).
    #[arg(long)]
    verify: bool,
    /// The task. `-` reads it from stdin.
    prompt: String,
}

impl ExecArgs {
    /// `dsh -p PROMPT`: the task, with no other flag.
    pub(crate) fn prompt(prompt: String) -> ExecArgs {
        ExecArgs {
            quiet: false,
            verify: false,
            prompt,
        }
    }
}

pub(crate) async fn exec(
    common: &Common,
    model: &ModelArgs,
    args: &ExecArgs,
) -> Result<u8, Failure> {
    let prompt = if args.prompt == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::usage(anyhow!("cannot read the prompt from stdin: {e}")))?;
        text
    } else {
        args.prompt.clone()
    };
    if prompt.trim().is_empty() {
        return Err(Failure::usage(anyhow!("the prompt is empty")));
    }
    let signals = Signals::install().map_err(Failure::harness)?;
    let Started {
        runtime,
        mut stream,
        mirror,
        resumed,
        unconfigured,
        ..
    } = start::start(common, model, None, signals.token(), args.verify)?;
    for line in resumed.iter().flat_map(start::ResumedNote::lines) {
        eprintln!("dsh: {}", crate::repl::visible::visible(&line, false));
    }
    let status = runtime.status();
    if status.cost_budget_unenforced {
        eprintln!(
            "dsh: [limits] max_cost_usd is set, but the prices of {} are unknown, so it cannot stop the run; set [model] price",
            status.model
        );
    }
    // Tool lines only in text mode: with --json the records say it all on stdout.
    let lines = !(args.quiet || common.json);
    let mut rendered = Rendered::default();
    // The runtime writes `stop` however the turn ends; `session_end` comes with `Finish`.
    let sent = runtime.send(Command::Prompt(prompt));
    let outcome = match sent {
        Ok(id) => match until_done(&mut stream, id, lines, &mut rendered).await {
            Some(Reply::Turn(outcome)) => outcome,
            _ => {
                return Err(Failure::harness(anyhow!(
                    "the runtime stopped during the turn"
                )));
            }
        },
        Err(e) => return Err(Failure::harness(anyhow::Error::new(e))),
    };
    // The MCP servers that failed or were not started (headless, nobody reads `/mcp`).
    if !common.json {
        crate::start::say_extensions(runtime.session());
    }
    let ending = match &outcome {
        Ok(_) => signals.ending(Ending::Finished),
        Err(_) => Ending::Error,
    };
    let closed = match runtime.send(Command::Finish(ending)) {
        Ok(id) => match until_done(&mut stream, id, lines, &mut rendered).await {
            Some(Reply::Finished(closed)) => closed,
            _ => {
                return Err(Failure::harness(anyhow!(
                    "the runtime stopped before the session ended"
                )));
            }
        },
        Err(e) => return Err(Failure::harness(anyhow::Error::new(e))),
    };
    mirror::drain(mirror.as_ref(), &signals).await;
    // The stream ends once the runtime and its session are gone.
    drop(runtime);
    while let Some(event) = stream.recv().await {
        show(event, lines, &mut rendered);
    }
    let Rendered {
        answer, unasked, ..
    } = rendered;
    // Nothing configured and no local model answering is a set-up problem, not a failed
    // run: the error (with its advice, once) and exit 2.
    if unconfigured.is_some()
        && let Err(dsh_agent::AgentError::Model(e)) = &outcome
        && e.is_unreachable()
        && closed.is_ok()
    {
        return Err(Failure::usage(anyhow!("{e}")));
    }
    let outcome = crate::settle("the run", outcome, closed)?;
    if lines && unasked > 0 {
        eprintln!(
            "dsh: {unasked} call{s} needed a person's approval and nobody was asked (headless); add an allow rule for {them} under [permissions] allow, or run with --yolo",
            s = if unasked == 1 { "" } else { "s" },
            them = if unasked == 1 { "it" } else { "them" },
        );
    }
    if !common.json && !answer.is_empty() {
        println!("{answer}");
    }
    // A signal during the drain still says the output was cut short.
    if let Some(code) = signals::exit_code(signals.ending(ending)) {
        return Ok(code);
    }
    let code = match outcome.stop {
        StopReason::FinalAnswer => exit::OK,
        StopReason::Interrupted => exit::INTERRUPTED,
        StopReason::PromptBlocked => {
            eprintln!(
                "dsh: the prompt was not sent: {}",
                crate::repl::visible::visible(&outcome.text, false)
            );
            STOPPED
        }
        StopReason::MaxSteps
        | StopReason::TokenBudget
        | StopReason::CostBudget
        | StopReason::RepeatedCall => {
            eprintln!(
                "dsh: stopped after {}: {}",
                crate::words::plural(outcome.steps, "step"),
                outcome.stop.as_str().replace('_', " ")
            );
            STOPPED
        }
    };
    Ok(code)
}

/// Shows the events up to command `id`'s end; its reply (`None`: the stream ended first).
async fn until_done(
    stream: &mut EventStream,
    id: dsh_agent::runtime::CommandId,
    lines: bool,
    rendered: &mut Rendered,
) -> Option<Reply> {
    while let Some(event) = stream.recv().await {
        if let EventKind::Done { command, reply } = event.kind {
            if command == id {
                return Some(reply);
            }
            continue;
        }
        show(event, lines, rendered);
    }
    None
}

/// What the events said so far: the main agent's final answer, how many calls were refused
/// for want of a person (`unavailable`), and the calls proposed and not finished yet.
#[derive(Default)]
struct Rendered {
    answer: String,
    unasked: usize,
    calls: std::collections::HashMap<String, dsh_core::ToolCall>,
}

/// What `dsh exec` shows of an event: each retry of a model call, each compaction refused
/// for its summary's size and each verify step on stderr as they happen; with `lines`, one
/// line per finished tool call on stderr (the REPL's tool line, uncoloured: outcome, exit
/// code and time, or the deciding gate, policy and reason); and the main agent's final
/// answer, kept to print once the run is over (headless: no live text, no approval prompts
/// — none are asked, see DESIGN §4).
fn show(event: dsh_agent::Event, lines: bool, out: &mut Rendered) {
    use crate::repl::{style::Style, toolline};
    match event.kind {
        EventKind::ToolProposed { call } if lines => {
            out.calls.insert(call.id().to_owned(), call);
        }
        EventKind::ToolFinished { result } => {
            if result.failure_kind() == Some(dsh_core::FailureKind::Unavailable) {
                out.unasked += 1;
            }
            if lines {
                let call = out.calls.remove(result.call_id());
                let line = toolline::finished(call.as_ref(), &result, Style::new(false), true);
                if let Some(head) = line.first() {
                    eprintln!("{head}");
                }
            }
        }
        EventKind::ModelRetry { attempt, reason } => {
            eprintln!("dsh: the model call failed, attempt {attempt} follows: {reason}");
        }
        EventKind::CompactionRefused { turns, refused } => {
            eprintln!("dsh: context: {turns} old turns not summarized: {refused}");
        }
        EventKind::Verify(step) => eprintln!("dsh: {}", crate::repl::verify_line(&step)),
        EventKind::HookSaid { event: hook, text } => {
            eprintln!(
                "dsh: {hook} {}",
                crate::repl::visible::visible(&text, false)
            );
        }
        EventKind::Stop { text, .. } if &*event.agent == dsh_agent::events::MAIN => {
            out.answer = text;
        }
        // Never sent headless (no interactive approver is mounted); dropping the reply
        // would answer `cancelled`.
        _ => {}
    }
}
