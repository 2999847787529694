//! `dsh exec PROMPT`: a headless run to a stop line (DESIGN §4). No TTY needed, no stdin read
//! unless the prompt is `-`; the final text goes to stdout, or with `--json` the session's
//! journal records, one per line, as they are written.

use std::io::Read;

use anyhow::anyhow;
use std::sync::Arc;

use dsh_agent::{
    Agent, Ending, EventKind, EventSink, EventStream, LoopConfig, Session, StopReason,
};

use crate::signals::{self, Signals};
use crate::{Common, Failure, exit, mirror, settings};

/// Exit code for a run stopped by a stop line (steps, budget, loop).
const STOPPED: u8 = 3;

/// Flags of `dsh exec`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExecArgs {
    /// The task. `-` reads it from stdin.
    prompt: String,
    /// openai, anthropic, deepseek or ollama.
    #[arg(long)]
    provider: Option<String>,
    /// The provider's endpoint, e.g. http://127.0.0.1:8080/v1.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The model name.
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// Stop after this many model calls (exit code 3).
    #[arg(long, value_name = "N")]
    max_steps: Option<u64>,
    /// Continue session ID (an id, a unique prefix, or a journal's path) in a new journal
    /// linked to it. Nothing is re-run and no approval is reused; calls the old process never
    /// finished are closed as cut off, and the model is told.
    #[arg(long, value_name = "ID", conflicts_with = "continue_")]
    resume: Option<String>,
    /// Continue the newest session of this workspace that has a user message and is not
    /// open in another process (as --resume does).
    #[arg(long = "continue")]
    continue_: bool,
}

pub(crate) async fn exec(common: &Common, args: &ExecArgs) -> Result<u8, Failure> {
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
    let provider = match &args.provider {
        Some(p) => Some(
            p.parse()
                .map_err(|e: String| Failure::usage(anyhow!("--provider: {e}")))?,
        ),
        None => None,
    };
    let overrides = dsh_config::Overrides {
        provider,
        base_url: args.base_url.clone(),
        model: args.model.clone(),
        max_steps: args.max_steps,
        ..dsh_config::Overrides::default()
    };
    let loaded = settings::load_config_with(common, overrides)?;
    let env = dsh_config::process_env();
    let provider = dsh_agent::provider_from_loaded(&loaded, &env).map_err(Failure::usage)?;

    let mut settings = settings::session_settings(common, &loaded)?;
    let resumed = resume(args, &settings.dsh_home, &loaded.workspace)?;
    if let Some(r) = &resumed {
        settings.resumed_from = Some(r.link.clone());
    }
    settings.provider = Some(provider.name().to_owned());
    settings.model = Some(provider.model().to_owned());
    let mirror = mirror::open(common.json)?;
    let signals = Signals::install().map_err(Failure::harness)?;
    let (events, stream) = EventSink::channel();
    settings.events = events;
    let session =
        Session::assemble_with_mirror(&settings, mirror.clone()).map_err(Failure::harness)?;
    // Only the session holds the sink now: the stream ends when the session is gone.
    drop(settings);
    let session = Arc::new(session);
    // Rendered from the agent's events, like every front end.
    let render = tokio::spawn(render(stream));
    let config = LoopConfig::from_loaded(&loaded);
    let mut agent = match resumed {
        None => Agent::new(session.clone(), provider, config),
        Some(r) => {
            session
                .record_cut_off(&r.cut_off)
                .map_err(|e| Failure::harness(anyhow::Error::new(e)))?;
            Agent::resumed(session.clone(), provider, config, r)
        }
    };
    if agent.cost_budget_unenforced() {
        eprintln!(
            "dsh: [limits] max_cost_usd is set, but the prices of {} are unknown, so it cannot stop the run; set [model] price",
            agent.model()
        );
    }
    // The agent writes `stop` however its run ends; `session_end` is written here.
    let outcome = agent.run(&prompt, signals.token()).await;
    let totals = agent.totals();
    drop(agent);
    let ending = match &outcome {
        Ok(_) => signals.ending(Ending::Finished),
        Err(_) => Ending::Error,
    };
    let closed = session.finish(ending, totals);
    mirror::drain(mirror.as_ref(), &signals).await;
    // The session's sink closes with the session: the renderer then has every event.
    drop(session);
    let answer = render.await.unwrap_or_default();
    let outcome = outcome.map_err(|e| Failure::harness(anyhow::Error::new(e)))?;
    closed.map_err(|e| Failure::harness(anyhow::Error::new(e)))?;
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
        StopReason::MaxSteps
        | StopReason::TokenBudget
        | StopReason::CostBudget
        | StopReason::RepeatedCall => {
            eprintln!(
                "dsh: stopped after {} steps: {}",
                outcome.steps,
                outcome.stop.as_str().replace('_', " ")
            );
            STOPPED
        }
    };
    Ok(code)
}

/// The conversation `--resume ID` or `--continue` names, rebuilt from its journal; a notice
/// on stderr says what is resumed and which calls were cut off.
fn resume(
    args: &ExecArgs,
    dsh_home: &std::path::Path,
    workspace: &std::path::Path,
) -> Result<Option<dsh_agent::resume::Resumed>, Failure> {
    use dsh_agent::resume;
    let path = match (&args.resume, args.continue_) {
        (Some(id), _) => dsh_agent::sessions::resolve(dsh_home, id)
            .map_err(|e| Failure::usage(anyhow::Error::new(e)))?,
        (None, true) => resume::newest_for(dsh_home, workspace)
            .map_err(|e| Failure::usage(anyhow::Error::new(e)))?,
        (None, false) => return Ok(None),
    };
    let resumed =
        resume::load_session(dsh_home, &path).map_err(|e| Failure::usage(anyhow::Error::new(e)))?;
    eprintln!(
        "dsh: resuming session {} ({} turns)",
        resumed.session,
        resumed.turn_starts.len()
    );
    for r in &resumed.cut_off {
        eprintln!(
            "dsh: call {} ({}) was cut off when the old process ended: closed as {}",
            r.call_id(),
            r.tool(),
            r.failure_kind().map_or("", |k| k.as_str())
        );
    }
    Ok(Some(resumed))
}

/// What `dsh exec` shows of the events: each retry of a model call on stderr as it happens,
/// and the main agent's final answer, printed once the run is over (headless: no live text,
/// no approval prompts — none are asked, see DESIGN §4).
async fn render(mut stream: EventStream) -> String {
    let mut answer = String::new();
    while let Some(event) = stream.recv().await {
        match event.kind {
            EventKind::ModelRetry { attempt, reason } => {
                eprintln!("dsh: the model call failed, attempt {attempt} follows: {reason}");
            }
            EventKind::Stop { text, .. } if &*event.agent == dsh_agent::events::MAIN => {
                answer = text;
            }
            // Never sent headless (no interactive approver is mounted); dropping the reply
            // would answer `cancelled`.
            _ => {}
        }
    }
    answer
}
