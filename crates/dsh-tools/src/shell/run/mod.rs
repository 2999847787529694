//! `run_shell{command, timeout_s?, network?}` (see the module docs of `shell`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use dsh_core::{
    Access, Clearance, ExecContext, SandboxState, SpillStore, Tool, ToolError, ToolErrorKind,
    ToolOutput, ToolSpec, Workspace,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::output::{head_tail, spawn_reader};
use super::process::{INPUT_FD, Launch, Streams, kill_tree, spawn};
use super::{NetworkGrant, ShellSettings, env};
use crate::parse_args;
mod plan;

use plan::Plan;

use crate::sandbox::{self, ExecSpec, Probe, StatusPipe};

/// How long to wait for the output pipe to close once the command's tree has stopped. Only
/// a process that escaped the tree (possible without the sandbox) can hold it longer.
const DRAIN: Duration = Duration::from_secs(2);
/// How often a running command's latest output is reported for a live view, and how much
/// of it.
const LIVE_EVERY: Duration = Duration::from_millis(100);
const LIVE_BYTES: usize = 2048;

/// The `run_shell` tool of one session.
#[derive(Debug)]
pub struct RunShell {
    workspace: Arc<Workspace>,
    spill: Arc<SpillStore>,
    /// The session's private TMPDIR, created (0700) on first use, removed with the tool.
    tmp_dir: PathBuf,
    settings: ShellSettings,
    /// What the helper reported about this kernel, asked once per session (by the first
    /// command, or by the shell policy asking [`RunShell::read_only_profile`]).
    probe: Arc<OnceLock<Result<Probe, String>>>,
    /// What the read-only profile may read, computed once per session.
    readable: std::sync::OnceLock<Vec<PathBuf>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    command: String,
    timeout_s: Option<u64>,
    #[serde(default)]
    network: bool,
}

/// How the command's wait ended.
pub(crate) enum End {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
}

impl RunShell {
    /// `tmp_dir` is the session's own temporary directory (e.g. `DSH_HOME/tmp/<session>`),
    /// created on first use with mode 0700 and removed when the tool is dropped.
    pub fn new(
        workspace: Arc<Workspace>,
        spill: Arc<SpillStore>,
        tmp_dir: impl Into<PathBuf>,
        settings: ShellSettings,
    ) -> Self {
        RunShell {
            workspace,
            spill,
            tmp_dir: tmp_dir.into(),
            settings,
            probe: Arc::new(OnceLock::new()),
            readable: std::sync::OnceLock::new(),
        }
    }

    /// The deadline of a command that names none (`shell.timeout_s`).
    pub(crate) fn default_timeout(&self) -> Duration {
        self.settings.timeout
    }

    fn max_timeout_s(&self) -> u64 {
        self.settings.max_timeout.as_secs().max(1)
    }

    /// Whether `auto`'s hardened profile keeps `path` (as a call declares it) from commands:
    /// a protected path, a file git's configuration names, what a deny/ask rule matches.
    /// A path outside the workspace is not this question's (other policies refuse it).
    pub fn keeps(&self, path: &Path) -> bool {
        let Some(rel) = path
            .to_str()
            .and_then(|p| self.workspace.resolve(p).ok())
            .map(|r| r.rel)
        else {
            return false;
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        self.settings
            .keep
            .covers(self.workspace.root(), home.as_deref(), &rel)
    }

    /// What the read-only and hardened profiles read, computed once per session from the
    /// environment commands get.
    fn readable(&self, env: &[(OsString, OsString)]) -> Vec<PathBuf> {
        self.readable
            .get_or_init(|| sandbox::readable(self.workspace.root(), env))
            .clone()
    }

    /// Where what an `auto` command created on a protected path goes:
    /// `DSH_HOME/quarantine/<session>/` (the TMPDIR is `DSH_HOME/tmp/<session>`).
    fn quarantine_dir(&self) -> PathBuf {
        let session = self.tmp_dir.file_name().unwrap_or_default();
        match self.tmp_dir.parent().and_then(Path::parent) {
            Some(home) => home.join("quarantine").join(session),
            None => self.tmp_dir.with_extension("quarantine"),
        }
    }

    /// Creates the session's TMPDIR (0700) if it does not exist yet.
    fn ensure_tmp_dir(&self) -> Result<(), ToolError> {
        crate::private_dir::create(&self.tmp_dir).map_err(|e| {
            ToolError::failed(format!(
                "cannot create the session's temporary directory {}: {e}",
                self.tmp_dir.display()
            ))
        })
    }

    /// `text` as the session's redactor (the spill store's scrub) leaves it: for a tool that
    /// shows only part of a command's output (a plugin's stderr tail), before it cuts.
    pub(crate) fn scrub<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        self.spill.scrub(text)
    }

    /// The model-facing text of an output: whole, or head and tail around a marker naming
    /// the spilled full output. Returns the text, whether it was cut, and the spill id.
    ///
    /// The whole output passes the session's redactor (the spill store's scrub) first: this
    /// saves it before gate 5 runs, and a cut could split a secret into halves that gate 5's
    /// redaction no longer recognizes.
    fn shape_output(&self, call_id: &str, text: &str) -> (String, bool, Option<String>) {
        let scrubbed = self.spill.scrub(text);
        let text = &*scrubbed;
        if text.is_empty() {
            return ("(no output)".to_owned(), false, None);
        }
        let Some((head, tail, omitted)) = head_tail(text, self.settings.max_output_chars) else {
            return (text.to_owned(), false, None);
        };
        let total = text.chars().count();
        let head_n = head.chars().count();
        match self.spill.save(call_id, text) {
            Ok(id) => (
                format!(
                    "{head}\n[… {omitted} of {total} characters omitted; the full output is \
                     saved as `{id}`: page it with read_output{{\"id\":\"{id}\",\"offset\":{head_n}}} …]\n{tail}"
                ),
                true,
                Some(id),
            ),
            Err(e) => (
                format!(
                    "{head}\n[… {omitted} of {total} characters omitted; the full output could \
                     not be saved: {e} …]\n{tail}"
                ),
                true,
                None,
            ),
        }
    }
}

/// One command line to launch through the session's sandbox: `run_shell`'s, or a plugin's
/// (which reads its arguments on stdin and answers on stdout alone).
pub(crate) struct Job<'a> {
    /// What messages name as the one that runs it (`run_shell`, a plugin's tool).
    pub who: &'a str,
    /// Run with `bash -c`.
    pub command: &'a str,
    pub timeout: Duration,
    /// Lifts the network ban (the caller has checked it may).
    pub network: bool,
    /// Bytes on standard input; `None`: `/dev/null`.
    pub input: Option<Vec<u8>>,
    /// Standard output apart (bounded; [`Ran::stdout`]); standard error alone is then
    /// [`Ran::text`].
    pub split_stdout: bool,
    /// More trees the profiles that confine reads let it read (a plugin's own folder).
    pub readable: Vec<PathBuf>,
    /// Variables set over the command environment's allowlist.
    pub env: Vec<(OsString, OsString)>,
}

/// What a launched command did.
pub(crate) struct Ran {
    pub end: End,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// The exit code as a shell reports it (128 + a signal), or -1.
    pub exit_code: i32,
    /// Its output (stdout and stderr interleaved), or its stderr alone with
    /// [`Job::split_stdout`]; bounded.
    pub text: String,
    /// Bytes of `text` written in all.
    pub bytes: u64,
    /// With [`Job::split_stdout`]: all of stdout when it was at most 4 MiB (else `None`),
    /// and how many bytes it wrote.
    pub stdout: Option<(Option<Vec<u8>>, u64)>,
    /// Lines for the model about the tree's end (not confirmed stopped, undone writes, …).
    pub notes: Vec<String>,
    pub state: SandboxState,
    /// Why it ran less confined than asked, if it did.
    pub warning: Option<String>,
}

impl RunShell {
    /// Launches `job` as every command runs (the `shell` module docs): planned under the
    /// sandbox mode, in the profile `cx.clearance` asks for, in a process group (session) of
    /// its own with the environment allowlist, killed with its whole tree at the deadline,
    /// on cancellation and when it ends. `Err` when it could not run or could not be
    /// settled; a command that ran, however it ended, is `Ok`.
    pub(crate) async fn launch(&self, job: Job<'_>, cx: &ExecContext) -> Result<Ran, ToolError> {
        let who = job.who;
        let timeout = job.timeout;
        let plan = self.plan().await?;
        self.ensure_tmp_dir()?;
        // The kept paths before an `auto` command (the hardened profile), to settle after.
        let mut survey = None;
        // Where the helper reports a setup failure.
        let mut setup_pipe = None;
        let mut env = env::command_env(std::env::vars_os(), &self.settings.pass_env, &self.tmp_dir);
        env.retain(|(k, _)| !job.env.iter().any(|(o, _)| o == k));
        env.extend(job.env);
        env.sort();
        let bash: Vec<OsString> = vec!["bash".into(), "-c".into(), job.command.into()];
        let (launch, state, warning) = match plan {
            Plan::Helper {
                helper,
                landlock,
                confine,
                state,
                warning,
            } => {
                // A call cleared to read only runs in the read-only profile where it is
                // enforced in full; elsewhere the policy has made what needs it ask.
                let read_only = cx.clearance == Clearance::ReadOnly
                    && state == SandboxState::Landlock
                    && warning.is_none()
                    && !job.network;
                let hardened = cx.clearance == Clearance::Hardened;
                if hardened && (job.network || self.hardened_profile().is_err()) {
                    // `auto` allowed it only in the hardened sandbox: nowhere else.
                    return Err(ToolError::new(
                        ToolErrorKind::Denied,
                        format!(
                            "{who}: auto mode allowed this command only in the hardened sandbox, which cannot be used for it here (no network, Landlock in full and a private mount namespace); run it in ask mode"
                        ),
                    ));
                }
                let (state, readable, writable) = if hardened {
                    let mut readable = self.readable(&env);
                    if let Some(tree) = sandbox::enclosing_work_tree(self.workspace.root(), &env) {
                        readable.retain(|p| *p != tree);
                    }
                    readable.extend(sandbox::toolchains(&env));
                    readable.extend(job.readable.iter().cloned());
                    let writable = vec![self.workspace.root().to_path_buf(), self.tmp_dir.clone()];
                    (SandboxState::Landlock, readable, writable)
                } else if read_only {
                    let mut readable = self.readable(&env);
                    readable.extend(job.readable.iter().cloned());
                    (
                        SandboxState::LandlockReadOnly,
                        readable,
                        vec![self.tmp_dir.clone()],
                    )
                } else {
                    let writable = vec![self.workspace.root().to_path_buf(), self.tmp_dir.clone()];
                    (state, Vec::new(), writable)
                };
                let home = env
                    .iter()
                    .find(|(k, _)| k == "HOME")
                    .map(|(_, v)| PathBuf::from(v));
                let (protect, hide) = if hardened {
                    let s = self
                        .settings
                        .keep
                        .survey(self.workspace.root(), home.as_deref())
                        .map_err(|e| {
                            ToolError::new(
                                ToolErrorKind::Denied,
                                format!("{who}: auto mode cannot run this command: {e}; run it in ask mode"),
                            )
                        })?;
                    let kept = (s.read_only.clone(), s.hidden.clone());
                    survey = Some(s);
                    kept
                } else if read_only && self.settings.keep.judge.is_some() {
                    // What the file tools' deny/ask rules keep from reading is hidden from a
                    // command that runs free too (`grep -r`, `git grep --no-index`).
                    let hidden = self
                        .settings
                        .keep
                        .survey(self.workspace.root(), home.as_deref())
                        .map(|s| s.hidden)
                        .map_err(|e| {
                            ToolError::new(
                                ToolErrorKind::Denied,
                                format!("{who}: this command cannot run free: {e}; a person can let it run"),
                            )
                        })?;
                    if !hidden.is_empty() && self.hardened_profile().is_err() {
                        return Err(ToolError::new(
                            ToolErrorKind::Denied,
                            format!(
                                "{who}: this command cannot run free here: the files your read rules deny can be hidden from it only in a private mount namespace, which is not available; a person can let it run"
                            ),
                        ));
                    }
                    (Vec::new(), hidden)
                } else {
                    (Vec::new(), Vec::new())
                };
                let pipe = StatusPipe::new().map_err(|e| {
                    ToolError::failed(format!("cannot create the sandbox's status pipe: {e}"))
                })?;
                setup_pipe = Some(pipe);
                let spec = ExecSpec {
                    landlock,
                    read_only,
                    hardened,
                    protect,
                    hide,
                    readable,
                    writable,
                    allow_network: job.network,
                    confine,
                    lifeline: true,
                    status_fd: Some(StatusPipe::FD),
                    stdin_fd: job.input.is_some().then_some(INPUT_FD),
                    program: bash,
                };
                let mut helper_args = vec![OsString::from(sandbox::SUBCOMMAND)];
                helper_args.extend(spec.to_args());
                let launch = Launch {
                    program: helper.into_os_string(),
                    args: helper_args,
                    own_session: true,
                };
                (launch, state, warning)
            }
            Plan::Direct { warning } => {
                let (program, rest) = bash.split_at(1);
                let launch = Launch {
                    program: program[0].clone(),
                    args: rest.to_vec(),
                    own_session: false,
                };
                (launch, SandboxState::None, Some(warning))
            }
        };

        let (reader, writer) = std::io::pipe()
            .map_err(|e| ToolError::failed(format!("cannot create the output pipe: {e}")))?;
        let (capture, finished) = spawn_reader(reader)
            .map_err(|e| ToolError::failed(format!("cannot start the output reader: {e}")))?;
        let (stdout, stdout_writer) = if job.split_stdout {
            let (reader, writer) = std::io::pipe()
                .map_err(|e| ToolError::failed(format!("cannot create the output pipe: {e}")))?;
            let (capture, finished) = spawn_reader(reader)
                .map_err(|e| ToolError::failed(format!("cannot start the output reader: {e}")))?;
            (Some((capture, finished)), Some(writer))
        } else {
            (None, None)
        };
        let (input_reader, input_writer) = match &job.input {
            Some(_) => {
                let (r, w) = std::io::pipe()
                    .map_err(|e| ToolError::failed(format!("cannot create the input pipe: {e}")))?;
                (Some(r), Some(w))
            }
            None => (None, None),
        };
        let streams = Streams {
            output: writer,
            stdout: stdout_writer,
            input: input_reader,
            status: setup_pipe.as_mut().and_then(StatusPipe::take_writer),
        };
        let mut spawned = spawn(&launch, env, self.workspace.root(), streams).map_err(|e| {
            ToolError::failed(format!(
                "cannot start {}: {e}",
                Path::new(&launch.program).display()
            ))
        })?;
        let mut guard = TreeGuard(spawned.pgid);
        if let (Some(mut w), Some(bytes)) = (input_writer, job.input) {
            // A thread: a command that does not read its input must not block the call; it
            // ends when the command's tree is gone (the pipe breaks).
            std::thread::Builder::new()
                .name("dsh-command-input".into())
                .spawn(move || {
                    use std::io::Write as _;
                    let _ = w.write_all(&bytes);
                })
                .map_err(|e| ToolError::failed(format!("cannot start the input writer: {e}")))?;
        }

        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut live = tokio::time::interval(LIVE_EVERY);
        live.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut reported = 0;
        let end = loop {
            tokio::select! {
                status = spawned.child.wait() => break match status {
                    Ok(s) => End::Exited(s),
                    Err(e) => {
                        return Err(ToolError::failed(format!("waiting for the command: {e}")));
                    }
                },
                () = &mut deadline => break End::TimedOut,
                () = cx.cancel.cancelled() => break End::Cancelled,
                _ = live.tick() => {
                    let latest = {
                        let c = capture.lock().unwrap_or_else(PoisonError::into_inner);
                        (c.total_bytes() != reported).then(|| (c.total_bytes(), c.last(LIVE_BYTES)))
                    };
                    if let Some((total, text)) = latest {
                        reported = total;
                        cx.report_output(&text);
                    }
                }
            }
        };
        if !matches!(end, End::Exited(_)) {
            let _ = spawned.child.start_kill();
        }
        let stopped = match spawned.pgid {
            Some(pgid) => kill_tree(pgid, launch.own_session).await,
            None => true,
        };
        let status = match end {
            End::Exited(s) => Some(s),
            End::TimedOut | End::Cancelled => spawned.child.wait().await.ok(),
        };
        // The tree is gone and the child reaped: nothing for the guard to do.
        guard.0 = None;
        let mut drained = tokio::time::timeout(DRAIN, finished).await.is_ok();
        let stdout = match stdout {
            Some((capture, finished)) => {
                drained &= tokio::time::timeout(DRAIN, finished).await.is_ok();
                let c = capture.lock().unwrap_or_else(PoisonError::into_inner);
                Some((c.whole().map(<[u8]>::to_vec), c.total_bytes()))
            }
            None => None,
        };
        let (text, bytes) = {
            let c = capture.lock().unwrap_or_else(PoisonError::into_inner);
            (c.text(), c.total_bytes())
        };

        let mut notes = Vec::new();
        if !stopped {
            notes.push("[some processes of the command could not be confirmed stopped]".to_owned());
        }
        if !drained {
            notes.push(
                "[a process outside the command's tree still holds its output; output after \
                 this point is not shown]"
                    .to_owned(),
            );
        }
        let code = status.as_ref().and_then(std::process::ExitStatus::code);
        let signal = status.as_ref().and_then(signal_of);
        let exit_code = code.or(signal.map(|s| 128 + s)).unwrap_or(-1);

        // Only the helper writes there, and only when nothing ran.
        if let Some(report) = setup_pipe.and_then(StatusPipe::report) {
            return Err(ToolError::failed(format!(
                "the sandbox could not be set up, so the command did not run: {report}"
            )));
        }

        // What an `auto` command did to kept paths that no mount could prevent is undone (see
        // `keep.rs`); the result says so, and fails when it could not be.
        if let Some(survey) = &survey {
            match survey.settle(
                &self.settings.keep,
                self.workspace.root(),
                &self.quarantine_dir(),
            ) {
                Ok(undone) => notes.extend(undone),
                Err(e) => {
                    return Err(ToolError::failed(format!(
                        "{e}. The command's output:\n{}",
                        text.trim_end()
                    )));
                }
            }
        }
        Ok(Ran {
            end,
            code,
            signal,
            exit_code,
            text,
            bytes,
            stdout,
            notes,
            state,
            warning,
        })
    }
}

impl Drop for RunShell {
    fn drop(&mut self) {
        // Best effort: the directory is private to this session and nothing runs in it now.
        let _ = std::fs::remove_dir_all(&self.tmp_dir);
    }
}

/// Kills the command's group if the call's future is dropped before the tree was reaped
/// (e.g. a wrapper gave up waiting); tokio kills and reaps the direct child itself.
struct TreeGuard(Option<u32>);

impl Drop for TreeGuard {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self
            .0
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[cfg(not(unix))]
fn signal_of(_: &std::process::ExitStatus) -> Option<i32> {
    None
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        31 => "SIGSYS",
        _ => return format!("signal {sig}"),
    };
    format!("signal {sig} ({name})")
}

#[async_trait]
impl Tool for RunShell {
    fn spec(&self) -> ToolSpec {
        let max = self.max_timeout_s();
        ToolSpec::new(
            "run_shell",
            format!(
                "Run a command line with bash -c in the workspace: no stdin, no terminal; \
                 stdout and stderr interleaved. Inside the sandbox, writes are allowed only \
                 in the workspace and $TMPDIR, and there is no network. Output longer than \
                 {} characters is cut to its head and tail (the full output can be paged \
                 with read_output); the exit code is always reported. timeout_s defaults to \
                 {} (at most {max}); the whole process tree is killed at the deadline and \
                 when the command ends (nothing keeps running in the background). \
                 network: true asks for network access for this one command; it is refused \
                 unless the user allowed it.",
                self.settings.max_output_chars,
                self.settings.timeout.as_secs()
            ),
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1},
                "timeout_s": {"type": "integer", "minimum": 1, "maximum": max},
                "network": {"type": "boolean"}
            },
            "required": ["command"],
            "additionalProperties": false
        }))
        .output_schema(json!({
            "type": "object",
            "properties": {
                "exit_code": {"type": "integer"},
                "signal": {"type": ["integer", "null"]},
                "sandbox": {"enum": ["landlock-read-only", "landlock", "none"]},
                "network": {"type": "boolean"},
                "output_chars": {"type": "integer", "minimum": 0},
                "output_bytes": {"type": "integer", "minimum": 0},
                "truncated": {"type": "boolean"},
                "spill_id": {"type": ["string", "null"]}
            },
            "required": ["exit_code", "signal", "sandbox", "network", "output_chars",
                         "output_bytes", "truncated", "spill_id"],
            "additionalProperties": false
        }))
        // The tool's own deadline fires first; the wrapper's is the backstop.
        .timeout(self.settings.max_timeout + Duration::from_secs(15))
    }

    fn accesses(&self, args: &Value) -> Vec<Access> {
        let mut out = Vec::new();
        if let Some(Value::String(command)) = args.get("command") {
            out.push(Access::Execute {
                command: command.clone(),
            });
        }
        if args.get("network") == Some(&Value::Bool(true)) {
            out.push(Access::Network {
                target: "*".to_owned(),
            });
        }
        out
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args("run_shell", args)?;
        if args.command.trim().is_empty() {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArgs,
                "run_shell: `command` is empty; give a command line to run",
            ));
        }
        let max = self.max_timeout_s();
        let timeout = match args.timeout_s {
            Some(s) if (1..=max).contains(&s) => Duration::from_secs(s),
            Some(s) => {
                return Err(ToolError::new(
                    ToolErrorKind::InvalidArgs,
                    format!("run_shell: timeout_s must be between 1 and {max} (got {s})"),
                ));
            }
            None => self.settings.timeout,
        };
        if args.network && self.settings.network == NetworkGrant::Refused {
            return Err(ToolError::new(
                ToolErrorKind::Denied,
                "run_shell: network access for commands is not allowed in this session, and \
                 --yolo or project rules cannot allow it. Run the command without \
                 `network: true` (inside the sandbox it has no network), or ask the user to set \
                 `sandbox.allow_network = true` in their own user configuration or to approve \
                 the call interactively",
            ));
        }

        if args.network && cx.clearance == Clearance::ReadOnly {
            // The read-only profile has no network; a call cleared only to read never gets it.
            return Err(ToolError::new(
                ToolErrorKind::Denied,
                "run_shell: this call was allowed only to read, and the read-only sandbox has no network; ask for `network: true` only where a person or a rule allows the command",
            ));
        }
        let ran = self
            .launch(
                Job {
                    who: "run_shell",
                    command: &args.command,
                    timeout,
                    network: args.network,
                    input: None,
                    split_stdout: false,
                    readable: Vec::new(),
                    env: Vec::new(),
                },
                cx,
            )
            .await?;
        let Ran {
            end,
            code,
            signal,
            exit_code,
            text,
            bytes,
            notes,
            state,
            warning,
            ..
        } = ran;
        let call_id = cx.call.id();
        let (shown, truncated, spill_id) = self.shape_output(call_id, &text);
        let mut content = String::new();
        if let Some(w) = &warning {
            content.push_str(&format!("[warning: {w}]\n"));
        }
        content.push_str(&shown);
        if !content.ends_with('\n') {
            content.push('\n');
        }
        for n in &notes {
            content.push_str(n);
            content.push('\n');
        }

        match end {
            // What the settling did is part of the record even when the call was cancelled.
            End::Cancelled if !notes.is_empty() => Err(ToolError::failed(format!(
                "the call was cancelled before it finished; its output is not reported. {}",
                notes.join(" ")
            ))),
            End::Cancelled => Err(crate::cancelled()),
            End::TimedOut => {
                let message = format!(
                    "timed out after {} s: the command and every process it started were \
                     killed. Give a larger timeout_s (at most {max}) or a narrower command. \
                     Output before the deadline:\n{content}",
                    timeout.as_secs()
                );
                Err(ToolError::new(ToolErrorKind::Timeout, message.trim_end())
                    .with_exit_code(exit_code))
            }
            End::Exited(_) => {
                match (code, signal) {
                    (Some(c), _) => content.push_str(&format!("[exit code {c}]")),
                    (None, Some(s)) => content.push_str(&format!(
                        "[killed by {}; exit code {exit_code} as a shell reports it]",
                        signal_name(s)
                    )),
                    (None, None) => content.push_str("[exit status unknown]"),
                }
                let value = json!({
                    "exit_code": exit_code,
                    "signal": signal,
                    "sandbox": state.as_str(),
                    "network": args.network,
                    "output_chars": text.chars().count(),
                    "output_bytes": bytes,
                    "truncated": truncated,
                    "spill_id": spill_id,
                });
                Ok(ToolOutput::new(content, value)
                    .with_exit_code(exit_code)
                    .with_sandbox(state))
            }
        }
    }
}
