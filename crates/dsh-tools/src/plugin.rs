//! A plugin's tool (issue 27): a command line that reads the call's arguments as JSON on
//! stdin and answers one JSON value on stdout, declared in a `plugin.toml` (read by
//! dsh-config) and registered like any tool.
//!
//! **What it declares.** A plugin is a program its author wrote, so its tool declares that
//! it hands the call to something dsh does not vouch for ([`Access::Remote`], service
//! `plugin NAME`) and is never read-only to the pipeline: with no rule it asks, like an MCP
//! tool, and its own `read_only = true` is passed on only as a claim (which the read-only
//! mode honours only beside an allow rule). The arguments its `paths_from` names are declared
//! as the paths it reads (`read_only`) or writes, so confinement, protected paths and the
//! path rules judge them like a file tool's, before it runs.
//!
//! **How it runs.** Exactly as `run_shell` runs a command ([`RunShell::launch`]): `bash -c`
//! in the workspace, in the sandbox profile its clearance names (a call a rule or a person
//! allowed gets the workspace-write profile; never unsandboxed where the sandbox is
//! required), in a process tree killed at its deadline and when it ends, with the command
//! environment's allowlist plus `DSH_PLUGIN_DIR` (its folder) — never with the network.
//! Its stdout is kept apart from its stderr and bounded (4 MiB: more is a `tool_error`); a
//! non-zero exit is a `tool_error` quoting the end of its stderr; an answer that is not JSON
//! is a `tool_error`, and one that does not match its output schema becomes
//! `invalid_output` in the pipeline (SPEC P9).

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_core::{
    Access, ExecContext, Parallel, Tool, ToolError, ToolErrorKind, ToolOutput, ToolSpec, Workspace,
    async_trait,
};
use serde_json::Value;

use crate::RunShell;
use crate::shell::run::{End, Job, Ran};

/// How much of a failing plugin's stderr its error quotes (its end).
const STDERR_CHARS: usize = 2000;

/// One plugin tool as declared (plain data from `plugin.toml`).
#[derive(Clone, Debug, PartialEq)]
pub struct PluginToolSpec {
    /// The plugin's name (its folder's).
    pub plugin: String,
    /// The plugin's folder: readable to the command, `DSH_PLUGIN_DIR` in its environment.
    pub dir: PathBuf,
    pub name: String,
    pub description: String,
    /// Run with `bash -c` in the workspace.
    pub command: String,
    pub input_schema: Value,
    pub output_schema: Value,
    /// The plugin's claim that the tool only reads.
    pub read_only: bool,
    pub parallel_safe: bool,
    /// The arguments that are paths (a string or a list of strings each).
    pub paths_from: Vec<String>,
    /// `None`: the shell's default deadline.
    pub timeout: Option<Duration>,
}

/// A plugin's tool of one session.
#[derive(Debug)]
pub struct PluginTool {
    spec: PluginToolSpec,
    shell: Arc<RunShell>,
    workspace: Arc<Workspace>,
}

impl PluginTool {
    /// `shell` is the session's `run_shell`, whose sandbox, environment and temporary
    /// directory the plugin's command shares.
    pub fn new(spec: PluginToolSpec, shell: Arc<RunShell>, workspace: Arc<Workspace>) -> Self {
        PluginTool {
            spec,
            shell,
            workspace,
        }
    }

    fn service(&self) -> String {
        format!("plugin `{}`", self.spec.plugin)
    }

    fn deadline(&self) -> Duration {
        self.spec.timeout.unwrap_or(self.shell.default_timeout())
    }

    /// The paths the call names in its `paths_from` arguments; `Err` names an argument that
    /// is neither a string nor a list of strings.
    fn paths(&self, args: &Value) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        for arg in &self.spec.paths_from {
            match args.get(arg) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) => out.push(s.clone()),
                Some(Value::Array(items)) => {
                    for item in items {
                        match item {
                            Value::String(s) => out.push(s.clone()),
                            _ => return Err(arg.clone()),
                        }
                    }
                }
                Some(_) => return Err(arg.clone()),
            }
        }
        Ok(out)
    }

    fn fail(&self, message: impl std::fmt::Display, stderr: &str) -> ToolError {
        let mut text = format!("{}: {message}", self.spec.name);
        // Redacted whole before the cut: a cut could split a secret into halves that gate 5
        // no longer recognizes.
        let scrubbed = self.shell.scrub(stderr);
        let stderr = scrubbed.trim();
        if !stderr.is_empty() {
            let total = stderr.chars().count();
            let tail: String = stderr
                .chars()
                .skip(total.saturating_sub(STDERR_CHARS))
                .collect();
            text.push_str(&format!(". Its stderr:\n{tail}"));
        }
        ToolError::failed(text)
    }
}

#[async_trait]
impl Tool for PluginTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            self.spec.name.clone(),
            format!("({}) {}", self.service(), self.spec.description),
        )
        .input_schema(self.spec.input_schema.clone())
        .output_schema(self.spec.output_schema.clone())
        // Its claim is not the pipeline's fact: it asks unless a rule allows it.
        .read_only(false)
        .parallel(if self.spec.parallel_safe {
            Parallel::Always
        } else {
            Parallel::Never
        })
        // The command's own deadline fires first; the wrapper's is the backstop.
        .timeout(self.deadline() + Duration::from_secs(15))
    }

    fn accesses(&self, args: &Value) -> Vec<Access> {
        let mut out: Vec<Access> = self
            .paths(args)
            .unwrap_or_default()
            .into_iter()
            .map(|p| {
                let path = PathBuf::from(p);
                if self.spec.read_only {
                    Access::Read { path }
                } else {
                    Access::Write { path }
                }
            })
            .collect();
        out.push(Access::Remote {
            service: self.service(),
            claims_read_only: self.spec.read_only,
        });
        out
    }

    async fn run(&self, args: &Value, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let name = &self.spec.name;
        let paths = self.paths(args).map_err(|arg| {
            ToolError::new(
                ToolErrorKind::InvalidArgs,
                format!("{name}: `{arg}` names paths: give a string or a list of strings"),
            )
        })?;
        // The policies judged these paths; the tool keeps its own promise too.
        for p in &paths {
            if let Err(e) = self.workspace.resolve(p) {
                return Err(ToolError::new(
                    ToolErrorKind::Denied,
                    format!(
                        "{name}: {e}; only paths inside {} can be used",
                        self.workspace.root().display()
                    ),
                ));
            }
        }
        let input = serde_json::to_vec(args)
            .map_err(|e| ToolError::failed(format!("{name}: cannot encode the arguments: {e}")))?;
        let timeout = self.deadline();
        let ran = self
            .shell
            .launch(
                Job {
                    who: name,
                    command: &self.spec.command,
                    timeout,
                    network: false,
                    input: Some(input),
                    split_stdout: true,
                    readable: vec![self.spec.dir.clone()],
                    env: vec![(
                        OsString::from("DSH_PLUGIN_DIR"),
                        self.spec.dir.clone().into_os_string(),
                    )],
                },
                cx,
            )
            .await?;
        let Ran {
            end,
            exit_code,
            signal,
            text: stderr,
            stdout,
            notes,
            state,
            warning,
            ..
        } = ran;
        match end {
            End::Cancelled => return Err(crate::cancelled()),
            End::TimedOut => {
                return Err(ToolError::new(
                    ToolErrorKind::Timeout,
                    format!(
                        "{name}: timed out after {} s: the plugin's command and every process it started were killed",
                        timeout.as_secs()
                    ),
                ));
            }
            End::Exited(_) => {}
        }
        if exit_code != 0 {
            let how = match signal {
                Some(s) => format!("was killed by signal {s}"),
                None => format!("exited with code {exit_code}"),
            };
            return Err(self.fail(format!("the plugin's command {how}"), &stderr));
        }
        let Some((whole, written)) = stdout else {
            return Err(self.fail("the plugin's output was not captured", &stderr));
        };
        let Some(bytes) = whole else {
            return Err(self.fail(
                format!("the plugin answered {written} bytes; at most 4 MiB is read"),
                &stderr,
            ));
        };
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            self.fail(
                format!("the plugin did not answer one JSON value on stdout: {e}"),
                &stderr,
            )
        })?;
        let mut content = String::new();
        if let Some(w) = &warning {
            content.push_str(&format!("[warning: {w}]\n"));
        }
        content.push_str(&value.to_string());
        for n in &notes {
            content.push('\n');
            content.push_str(n);
        }
        Ok(ToolOutput::new(content, value).with_sandbox(state))
    }
}
