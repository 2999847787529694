//! The `dsh` binary: argument parsing, rendering and exit codes. Thin by design: sessions are
//! assembled by `dsh-agent`, decisions taken by the pipeline.

mod acp;
mod batch;
mod doctor;
mod exec;
mod hangup;
mod hooks;
mod init;
mod mcp;
mod mcp_serve;
mod mirror;
mod plugins;
mod repl;
mod replay;
mod sessions;
mod settings;
mod signals;
mod start;
mod words;
mod workspace;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// `dsh --version`: the package version and the commit it was built from (build.rs).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("DSH_COMMIT"), ")");

/// dsh — a terminal coding agent whose every tool call passes one fixed, journaled pipeline
/// of gates. `dsh` alone opens the interactive REPL in the current directory; `dsh exec
/// "TASK"` runs a task headless; `dsh init` writes a project configuration and `dsh doctor`
/// checks what works here.
#[derive(Debug, Parser)]
#[command(
    name = "dsh",
    version = VERSION,
    about,
    long_about = None,
    after_help = "`dsh` alone opens the REPL; `dsh \"PROMPT\"` opens it and sends PROMPT first; `dsh -p \"PROMPT\"` runs it headless, as `dsh exec \"PROMPT\"` does."
)]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    model: start::ModelArgs,
    /// Run PROMPT headless and print the answer, as `dsh exec PROMPT` does (`-` reads it
    /// from stdin).
    #[arg(
        short = 'p',
        long = "print",
        value_name = "PROMPT",
        conflicts_with = "prompt"
    )]
    print: Option<String>,
    /// A prompt to open the REPL with (sent as if typed first).
    #[arg(value_name = "PROMPT")]
    prompt: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

/// Options every subcommand takes.
#[derive(Clone, Debug, Args)]
pub(crate) struct Common {
    /// The workspace: the only directory tools may touch (default: the current directory;
    /// `--resume` and `replay` keep the one the session recorded unless this is given).
    #[arg(long, global = true, default_value = ".", value_name = "DIR")]
    workspace: PathBuf,
    /// Whether `--workspace` was given on the command line (not defaulted): `sessions list`
    /// filters by workspace, and `replay` and `--resume` use it over the recorded one, only
    /// then.
    #[arg(skip)]
    workspace_given: bool,
    /// The user configuration file (default: the platform config dir's dsh/config.toml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Approve every call that would ask (the same as `--mode yolo`). Confinement, protected
    /// paths, deny rules, guards, the sandbox and the network ban still apply.
    #[arg(long, global = true)]
    yolo: bool,
    /// The permission mode: read-only (every write and every program not on the read-only
    /// list denied), ask (the default), auto (builds and workspace writes run unasked in a
    /// hardened sandbox; asks where that sandbox is unavailable), yolo (every ask approved).
    /// Overrides [permissions] mode.
    #[arg(long, global = true, value_name = "read-only|ask|auto|yolo")]
    mode: Option<dsh_config::PermissionMode>,
    /// `exec` and `batch`: print the session's journal records, one JSON line each, as they
    /// are written (instead of the final text or the result objects). `check` always prints
    /// JSON. `sessions list`: one object per session; `sessions show`: the records;
    /// `replay`: one object per call, then the summary; `doctor`: one object per check.
    #[arg(long, global = true)]
    json: bool,
    /// The OS sandbox for run_shell: auto (as much as the OS offers, warning otherwise),
    /// required (refuse to run commands unsandboxed), off (no sandbox). Overrides sandbox.mode.
    #[arg(long, global = true, value_name = "auto|required|off")]
    sandbox: Option<dsh_config::SandboxMode>,
    /// How the model calls tools: native (its own tool calls; the default), code (Code Mode:
    /// one run_code tool whose JavaScript program calls the tools, each call still through
    /// every gate) or both. Overrides [tools] mode.
    #[arg(long, global = true, value_name = "native|code|both")]
    tools_mode: Option<dsh_config::ToolsMode>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Dry-run gates 1 and 3 for one call: nothing runs, nobody is asked. Prints one JSON line.
    Check {
        /// The tool's name, e.g. read_file.
        tool: String,
        /// The arguments as a JSON object, e.g. '{"path":"src/main.rs"}'.
        args_json: String,
    },
    /// Run tool calls without a model: JSONL calls in, one frozen result per line out.
    Batch {
        /// A file of lines `{"name":…,"args":{…}}` (optional "id"), or `-` for stdin.
        file: String,
    },
    /// Run a task headless to a stop line: the final answer on stdout (with --json, the
    /// session's journal records instead). Exit 0 done, 1 harness error, 2 usage or config,
    /// 3 stopped by a stop line (steps, token budget, repeated call), 130 interrupted.
    Exec(exec::ExecArgs),
    /// Trust this workspace, so its .dsh/config.toml may widen permissions.
    Trust,
    /// The recorded sessions under DSH_HOME: list, show, verify, prune.
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
    /// Re-drive a recorded session's tool calls through today's gates 1 and 3: nothing runs,
    /// nobody is asked. Prints per call the recorded decision and today's, then a summary.
    #[command(long_about = replay::HELP)]
    Replay {
        /// A session id, a name given with /save, a unique prefix of an id, or a journal file's path.
        session: String,
    },
    /// MCP servers: add, list and remove those of the user configuration; approve a
    /// project's; serve dsh's tools.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Hooks ([[hooks.EVENT]], .claude/settings.json): list them; approve a project's.
    #[command(subcommand)]
    Hooks(hooks::HooksCommand),
    /// Write a commented .dsh/config.toml for this project: its test command for [verify]
    /// and allow rules for its build and test commands to accept (Cargo, npm, pnpm, yarn,
    /// Python, Go, Make detected; no model needed). Never replaces a file unasked.
    Init {
        /// Print the configuration instead of writing it.
        #[arg(long)]
        print: bool,
    },
    /// Print a shell completion script: `dsh completions bash > /etc/bash_completion.d/dsh`,
    /// or zsh, fish, powershell, elvish.
    Completions { shell: clap_complete::Shell },
    /// Print dsh's manual page (roff): `dsh man > dsh.1 && man ./dsh.1`.
    Man,
    /// Serve an editor as an Agent Client Protocol agent on stdio (Zed, JetBrains IDEs,
    /// Neovim, Emacs): each session the editor opens is a dsh session in the directory it
    /// names (with --workspace DIR, only in DIR or below), its asks sent to the editor.
    /// Exits when stdin closes.
    Acp,
    /// Plugins (folders with a plugin.toml): list them; approve a project's.
    #[command(subcommand)]
    Plugins(plugins::PluginsCommand),
    /// Check the model endpoint, sandbox, MCP servers, hooks, trust and config; exit 1 if broken.
    Doctor,
}

/// Exit codes (DESIGN §4), defined once.
pub(crate) mod exit {
    pub const OK: u8 = 0;
    /// A harness fault (journal unwritable, state dir unusable).
    pub const HARNESS: u8 = 1;
    /// Bad usage or configuration; the message names the file, line and key.
    pub const USAGE: u8 = 2;
    /// `dsh replay`: a recorded decision is not today's.
    pub const CHANGED: u8 = 4;
    /// Interrupted by the user (SIGINT).
    pub const INTERRUPTED: u8 = 130;
    /// Terminated (SIGTERM).
    pub const TERMINATED: u8 = 143;
    /// Hung up (SIGHUP).
    pub const HUNG_UP: u8 = 129;
}

/// Prints lines to stdout, one `writeln` each (so a reader sees them as they come); a closed
/// pipe (`| head`) is not an error worth a message.
pub(crate) fn print_lines(lines: impl IntoIterator<Item = String>) -> Result<(), Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for line in lines {
        if let Err(e) = writeln!(out, "{line}") {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(Failure::harness(e));
        }
    }
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::harness(e)),
        _ => Ok(()),
    }
}

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: exit::USAGE,
            error: error.into(),
        }
    }
    pub fn harness(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: exit::HARNESS,
            error: error.into(),
        }
    }
    /// A session that could not be assembled: a usage error when the configuration is at
    /// fault, else the harness's.
    pub fn assembly(error: dsh_agent::AssemblyError) -> Self {
        if error.is_configuration() {
            Failure::usage(error)
        } else {
            Failure::harness(error)
        }
    }
}

/// Writes `bytes` to stdout; a reader that went away (`| head`) is no failure.
fn print_all(bytes: &[u8]) -> Result<u8, Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(exit::OK),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(exit::OK),
        Err(e) => Err(Failure::harness(anyhow::anyhow!(
            "cannot write to stdout: {e}"
        ))),
    }
}

fn main() -> ExitCode {
    // The hidden `dsh sandbox-exec …` subcommand: run_shell's sandbox helper. It confines
    // itself and execs the command, before any thread or runtime exists; it never returns.
    let mut argv = std::env::args_os();
    if argv.nth(1).as_deref() == Some(std::ffi::OsStr::new(dsh_tools::sandbox::SUBCOMMAND)) {
        dsh_tools::sandbox::sandbox_exec_main(argv.collect());
    }
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    cli.common.workspace_given =
        matches.value_source("workspace") == Some(ValueSource::CommandLine);
    let command = match (cli.command, cli.print) {
        (None, Some(prompt)) => Some(Command::Exec(exec::ExecArgs::prompt(prompt))),
        (command, _) => command,
    };
    let outcome = match command {
        None => runtime().and_then(|rt| {
            let (common, model, first) = (cli.common, cli.model, cli.prompt);
            let outcome = rt.block_on(async move {
                tokio::spawn(async move { repl::repl(&common, &model, first).await })
                    .await
                    .map_err(|e| Failure::harness(anyhow::anyhow!("the REPL failed: {e}")))?
            });
            // The line editor may still be blocked on a terminal that went away (a hang-up
            // ended the session): the journal is closed, so nothing waits for it.
            rt.shutdown_background();
            outcome
        }),
        Some(Command::Check { tool, args_json }) => {
            runtime().and_then(|rt| rt.block_on(batch::check(&cli.common, &tool, &args_json)))
        }
        Some(Command::Batch { file }) => {
            runtime().and_then(|rt| rt.block_on(batch::batch(&cli.common, &file)))
        }
        Some(Command::Exec(args)) => runtime().and_then(|rt| {
            // The loop runs on a worker, not in `block_on`: each tool execution it spawns
            // then costs no cross-thread wake-up of the driving thread (BENCHMARKS.md).
            let (common, model) = (cli.common, cli.model);
            rt.block_on(async move {
                tokio::spawn(async move { exec::exec(&common, &model, &args).await })
                    .await
                    .map_err(|e| Failure::harness(anyhow::anyhow!("the agent loop failed: {e}")))?
            })
        }),
        Some(Command::Trust) => settings::trust(&cli.common),
        Some(Command::Sessions(command)) => sessions::run(&cli.common, &command),
        Some(Command::Mcp(mcp::McpCommand::Serve)) => {
            runtime().and_then(|rt| rt.block_on(mcp_serve::serve(&cli.common)))
        }
        Some(Command::Mcp(command)) => mcp::run(&cli.common, &command),
        Some(Command::Hooks(command)) => hooks::run(&cli.common, &command),
        Some(Command::Init { print }) => init::init(&cli.common, print),
        Some(Command::Completions { shell }) => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "dsh", &mut out);
            print_all(&out)
        }
        Some(Command::Man) => {
            let mut out = Vec::new();
            match clap_mangen::Man::new(Cli::command()).render(&mut out) {
                Ok(()) => print_all(&out),
                Err(e) => Err(Failure::harness(anyhow::anyhow!(
                    "cannot render the page: {e}"
                ))),
            }
        }
        Some(Command::Acp) => {
            runtime().and_then(|rt| rt.block_on(acp::serve(&cli.common, &cli.model)))
        }
        Some(Command::Plugins(command)) => plugins::run(&cli.common, &command),
        Some(Command::Doctor) => {
            runtime().and_then(|rt| rt.block_on(doctor::doctor(&cli.common, &cli.model)))
        }
        Some(Command::Replay { session }) => {
            runtime().and_then(|rt| rt.block_on(replay::replay(&cli.common, &session)))
        }
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "dsh: {}", render_chain(&f.error));
            ExitCode::from(f.code)
        }
    }
}

/// How a verb's run ends once its journal was closed, or tried to be: `outcome`'s error
/// said as what stopped (`what`: "the batch", "the run"), and a journal that could not take
/// its closing records said as such — after the error that caused it, since that is what a
/// person acts on.
pub(crate) fn settle<T, E>(
    what: &str,
    outcome: Result<T, E>,
    closed: Result<(), dsh_core::journal::JournalError>,
) -> Result<T, Failure>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let outcome = outcome
        .map_err(|e| Failure::harness(anyhow::Error::new(e).context(format!("{what} stopped"))));
    let Err(unclosed) = closed else {
        return outcome;
    };
    if let Err(f) = &outcome {
        eprintln!("dsh: {}", render_chain(&f.error));
    }
    Err(Failure::harness(anyhow::anyhow!(
        "the journal ends without its closing records (stop, session_end): {unclosed}; \
         `dsh sessions verify` and `--resume` still work with it"
    )))
}

/// An error and its causes, `: `-separated, each said once: a cause whose text its wrapper
/// already quotes is not repeated.
pub(crate) fn render_chain(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Failure::harness)
}
