//! `dsh exec PROMPT`: a headless run to a stop line (DESIGN §4). No TTY needed, no stdin read
//! unless the prompt is `-`; the final text goes to stdout, or with `--json` the session's
//! journal records, one per line, as they are written.

use std::io::Read;

use anyhow::anyhow;
use dsh_agent::{Agent, Ending, LoopConfig, Session, StopReason};

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
    settings.provider = Some(provider.name().to_owned());
    settings.model = Some(provider.model().to_owned());
    let mirror = mirror::open(common.json)?;
    let signals = Signals::install().map_err(Failure::harness)?;
    let session =
        Session::assemble_with_mirror(&settings, mirror.clone()).map_err(Failure::harness)?;
    let config = LoopConfig::from_loaded(&loaded);
    let mut agent = Agent::new(&session, provider, config);
    // The agent writes `stop` however its run ends; `session_end` is written here.
    let outcome = agent.run(&prompt, signals.token(), &mut |_| {}).await;
    let totals = agent.totals();
    let ending = match &outcome {
        Ok(_) => signals.ending(Ending::Finished),
        Err(_) => Ending::Error,
    };
    let closed = session.finish(ending, totals);
    mirror::drain(mirror.as_ref(), &signals).await;
    let outcome = outcome.map_err(|e| Failure::harness(anyhow::Error::new(e)))?;
    closed.map_err(|e| Failure::harness(anyhow::Error::new(e)))?;
    if !common.json && !outcome.text.is_empty() {
        println!("{}", outcome.text);
    }
    // A signal during the drain still says the output was cut short.
    if let Some(code) = signals::exit_code(signals.ending(ending)) {
        return Ok(code);
    }
    let code = match outcome.stop {
        StopReason::FinalAnswer => exit::OK,
        StopReason::Interrupted => exit::INTERRUPTED,
        StopReason::MaxSteps | StopReason::TokenBudget | StopReason::RepeatedCall => {
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
