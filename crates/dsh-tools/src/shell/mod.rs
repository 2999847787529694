//! `run_shell`: a command line, run well (SPEC A4, layer 4, and the sandbox **+**).
//!
//! Deciding *whether* a command may run is not this module's business: gate 1 votes on it
//! (in this stage nothing allows `run_shell`, so every call is asked about: the tool is not
//! read-only). Once a call is let through, this module runs it so that it can do as little
//! harm as possible and the model learns exactly what happened:
//!
//! * `bash -c <command>` with stdin from `/dev/null`, in the workspace, in a process group of
//!   its own (a session of its own under the sandbox), inside the OS sandbox
//!   ([`crate::sandbox`]) unless the mode is `off`;
//! * an environment built from an allowlist ([`mod@env`]): never dsh's API keys, `BASH_ENV`,
//!   `ENV` or exported functions; `TMPDIR` is the session's own directory (mode 0700);
//! * a deadline (`shell.timeout_s`, default 120 s; `timeout_s` per call up to
//!   [`ShellSettings::max_timeout`]) that kills the whole tree and waits until it has stopped
//!   before the call returns — the scheduler keeps the call's slot until then (DESIGN §3);
//! * when the command ends, whatever it left running in the background is killed too;
//! * stdout and stderr through one pipe (interleaved as written), bounded in memory, cut to
//!   `shell.max_output_chars` (default 3000) keeping head and tail with a marker; the full
//!   output is saved in the session's spill store and the marker says how to page it with
//!   `read_output`;
//! * the exit code always reported (`exit_code`; a non-zero exit is a successful call), a
//!   death by signal said as such, a timeout failing as `timeout`, and `"sandbox"` saying
//!   whether Landlock confined it — with a warning line first in the content when not.
//!
//! **The network** is banned inside the sandbox. A call may ask for it (`network: true`), and
//! gets it only if [`ShellSettings::network`] allows: `--yolo` and project rules never do,
//! because `--yolo` approves *calls* and a rule is text in a repository, while the network
//! is the one way out for anything a command could read. Refused calls fail as `denied` and
//! say how to allow them.

pub mod env;
mod keep;
mod output;
mod process;
pub(crate) mod run;

use std::path::PathBuf;
use std::time::Duration;

pub use keep::{Cover, Judge, Keep};
pub use output::head_tail;
pub use run::RunShell;

use crate::sandbox::SandboxMode;

/// Whether `run_shell{…, network: true}` may lift the network ban for its command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NetworkGrant {
    /// Never: the call fails as `denied` (the default; what headless runs and `--yolo` get).
    #[default]
    Refused,
    /// The user's own configuration says `sandbox.allow_network = true`.
    UserConfig,
    /// A person approves each call one at a time (the REPL). Whoever sets this must also make
    /// every `network: true` call ask a person at gate 2 — a rule-tier `ask` no allow rule can
    /// lift — so that the approval *is* the one-shot consent to the network.
    PersonApproves,
}

/// How `run_shell` runs commands; filled from `[shell]`, `[sandbox]` and flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellSettings {
    /// The deadline when a call gives no `timeout_s` (`shell.timeout_s`, default 120 s).
    pub timeout: Duration,
    /// The largest `timeout_s` a call may ask for (default 600 s).
    pub max_timeout: Duration,
    /// Output shown to the model is cut to this many characters (`shell.max_output_chars`).
    pub max_output_chars: usize,
    /// Extra environment variables passed to commands (`shell.pass_env`), less
    /// [`env::refusal`]s.
    pub pass_env: Vec<String>,
    pub sandbox: SandboxMode,
    /// The `dsh` executable whose `sandbox-exec` subcommand is the sandbox helper (the CLI
    /// passes its own path). Without one, `required` refuses to run and `auto` runs
    /// unsandboxed with a warning.
    pub helper: Option<PathBuf>,
    pub network: NetworkGrant,
    /// What the hardened profile (`auto`) keeps from commands inside the workspace.
    pub keep: Keep,
}

impl Default for ShellSettings {
    fn default() -> Self {
        ShellSettings {
            timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(600),
            max_output_chars: 3000,
            pass_env: Vec::new(),
            sandbox: SandboxMode::Auto,
            helper: None,
            network: NetworkGrant::Refused,
            keep: Keep::default(),
        }
    }
}
