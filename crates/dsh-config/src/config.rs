//! The effective configuration: plain data with built-in defaults.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::defaults;
pub use crate::origin::{Layer, Origin, Sourced};
pub use dsh_core::HookEvent;
pub use dsh_core::{PermissionMode, Rule, Unlisted};

dsh_core::spelled_enum! {
    /// A model provider.
    Provider {
        /// OpenAI chat completions.
        Openai = "openai",
        /// Anthropic messages.
        Anthropic = "anthropic",
        /// DeepSeek (OpenAI-compatible wire format).
        Deepseek = "deepseek",
        /// A local Ollama server (OpenAI-compatible wire format, no key).
        Ollama = "ollama",
    }
}

impl Provider {
    /// The endpoint used when no layer sets `model.base_url`.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Provider::Openai => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::Deepseek => "https://api.deepseek.com",
            Provider::Ollama => "http://localhost:11434/v1",
        }
    }

    /// The environment variable holding the API key when no layer sets
    /// `model.api_key_env` (`None`: the provider needs no key).
    pub fn default_api_key_env(self) -> Option<&'static str> {
        match self {
            Provider::Openai => Some("OPENAI_API_KEY"),
            Provider::Anthropic => Some("ANTHROPIC_API_KEY"),
            Provider::Deepseek => Some("DEEPSEEK_API_KEY"),
            Provider::Ollama => None,
        }
    }

    /// The provider-specific environment variable that overrides `model.base_url`.
    pub fn base_url_env(self) -> &'static str {
        match self {
            Provider::Openai => "OPENAI_BASE_URL",
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
            Provider::Deepseek => "DEEPSEEK_BASE_URL",
            Provider::Ollama => "OLLAMA_BASE_URL",
        }
    }
}

dsh_core::spelled_enum! {
    /// What a hook's crash or timeout means.
    OnError {
        /// The call is denied (the default: fail closed).
        Deny = "deny",
        /// The hook abstains.
        Abstain = "abstain",
    }
}

dsh_core::spelled_enum! {
    /// When the journal fsyncs.
    Fsync {
        /// Once per batch of records (the default).
        Batch = "batch",
        /// After every record.
        Record = "record",
    }
}

dsh_core::spelled_enum! {
    /// Whether commands run in the OS sandbox. Ordered by strictness: `Off < Auto < Required`.
    SandboxMode {
        /// Never sandbox.
        Off = "off",
        /// Sandbox when the OS supports it (the default).
        Auto = "auto",
        /// Refuse to run commands unsandboxed.
        Required = "required",
    }
}

impl SandboxMode {
    /// Strictness rank: off 0, auto 1, required 2.
    pub fn strictness(self) -> u8 {
        match self {
            SandboxMode::Off => 0,
            SandboxMode::Auto => 1,
            SandboxMode::Required => 2,
        }
    }
}

/// `[model] price`: USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Price {
    /// Prompt tokens.
    pub input: f64,
    /// Prompt tokens served from the provider's cache (`None`: priced as `input`).
    pub cached_input: Option<f64>,
    /// Completion tokens.
    pub output: f64,
}

/// `[model]`, resolved: provider defaults are filled in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelConfig {
    /// The provider (default `openai`).
    pub provider: Provider,
    /// The endpoint (default [`Provider::default_base_url`]).
    pub base_url: String,
    /// The model name; `None` leaves the choice to the provider crate.
    pub model: Option<String>,
    /// The environment variable holding the API key (default
    /// [`Provider::default_api_key_env`]); `None` sends no key.
    pub api_key_env: Option<String>,
    /// The model's context window in tokens (`None`: the agent's estimate).
    pub context_window: Option<u64>,
    /// Prices for cost accounting (`None`: cost unknown).
    pub price: Option<Price>,
    /// Seconds of silence from the server before an attempt fails.
    pub idle_timeout_s: u64,
    /// Retries of a call that failed before any content arrived.
    pub max_retries: u64,
}

/// `[permissions]`: rules from every layer, accumulated; each rule's
/// [`decision`](Rule::decision) is the list it is on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Permissions {
    /// The permission mode.
    pub mode: PermissionMode,
    /// Allow rules (never from an untrusted project).
    pub allow: Vec<Rule>,
    /// Ask rules.
    pub ask: Vec<Rule>,
    /// Deny rules.
    pub deny: Vec<Rule>,
}

/// `[shell]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShellConfig {
    /// Commands that run without asking. A command is in at most one of `safe` and
    /// `confirm`: the highest layer naming it decides (within one layer, `confirm` wins).
    pub safe: Vec<String>,
    /// Commands that need confirmation.
    pub confirm: Vec<String>,
    /// What happens to a program on neither list: asks (default) or is refused.
    pub unlisted: Unlisted,
    /// Default command timeout, seconds.
    pub timeout_s: u64,
    /// Output shown to the model is truncated to this many characters.
    pub max_output_chars: u64,
    /// Environment variables passed through to commands (all others are dropped).
    pub pass_env: Vec<String>,
}

/// `[guards]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Guards {
    /// Workspace-relative globs no tool may write; accumulated from every layer
    /// (defaults `.git/**` and `.dsh/**` cannot be removed).
    pub protected: Vec<Sourced<String>>,
}

impl Default for Guards {
    fn default() -> Self {
        Guards {
            protected: defaults::GUARDS_PROTECTED
                .iter()
                .map(|p| Sourced::builtin((*p).to_string()))
                .collect(),
        }
    }
}

/// One hook: a `[[hooks.EVENT]]` table, or one command of a `.claude/settings.json` `hooks`
/// section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hook {
    /// When it runs.
    pub event: HookEvent,
    /// Which tools it sees (interpreted by the hooks policy); `None` = every tool. Only
    /// [`HookEvent::matches_tools`] events match tools; others carry it for Claude Code's own
    /// matchers (`startup|resume`, `manual|auto`).
    pub matcher: Option<String>,
    /// The command line to run with `sh -c` in the workspace.
    pub command: String,
    /// Timeout, milliseconds.
    pub timeout_ms: u64,
    /// What a crash, a timeout or an answer of the wrong shape means (default deny).
    pub on_error: OnError,
    /// Variables set for it, beside the command environment's allowlist.
    pub env: BTreeMap<String, String>,
}

/// `[hooks]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hooks {
    /// How many times `Stop`/`SubagentStop` hooks may send an agent back to work in a turn.
    pub max_continuations: u64,
    /// Every hook, accumulated from every trusted layer in layer order.
    pub entries: Vec<Sourced<Hook>>,
}

/// `[compat]`: what dsh reads of other harnesses' user-level files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Compat {
    /// Read `~/.claude/settings.json` hooks (and, with skills, `~/.claude/skills`).
    pub claude: bool,
}

/// One `[mcp.servers.NAME]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpServer {
    /// How the server is reached.
    pub launch: McpLaunch,
    /// How long it may take to start and list its tools, seconds.
    pub startup_timeout_s: u64,
    /// How long one of its tool calls may run, seconds.
    pub timeout_s: u64,
}

/// How an MCP server is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum McpLaunch {
    /// A child process speaking MCP over stdio.
    Stdio {
        /// Program.
        command: String,
        /// Arguments.
        args: Vec<String>,
        /// Extra environment, beside the command environment's allowlist.
        env: BTreeMap<String, String>,
        /// Its working directory (relative: to the workspace); `None`: the workspace.
        cwd: Option<String>,
    },
    /// A streamable-HTTP server.
    Http {
        /// `http://` or `https://` URL.
        url: String,
        /// Headers sent with every request: header name → the environment variable that
        /// holds its value (never the value itself: the file is not a place for tokens).
        headers_env: BTreeMap<String, String>,
        /// Headers as `.mcp.json` writes them: header name → its value, `${VAR}` read from
        /// the environment.
        headers: BTreeMap<String, String>,
    },
}

impl McpLaunch {
    /// The command line (program and arguments, space-separated) or the URL.
    pub fn command_line(&self) -> String {
        match self {
            McpLaunch::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            McpLaunch::Http { url, .. } => url.clone(),
        }
    }
}

/// `[mcp]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Mcp {
    /// Servers by name; a higher trusted layer replaces a lower one's server of the same name.
    pub servers: BTreeMap<String, Sourced<McpServer>>,
}

/// `[limits]`; every integer value is positive.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limits {
    /// Model steps per task.
    pub max_steps: u64,
    /// Token budget per session.
    pub max_tokens: u64,
    /// Calls executing at once (at most 64: the key table's bound).
    pub max_parallel: u64,
    /// Bytes `read_file` returns at most.
    pub max_read_bytes: u64,
    /// Results `grep`/`find_files` return at most.
    pub max_results: u64,
    /// Results longer than this are spilled to a file and replaced by a locator.
    pub spill_chars: u64,
    /// Cost budget per session in USD; 0 = off.
    pub max_cost_usd: f64,
}

/// `[journal]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalConfig {
    /// When to fsync (default batch).
    pub fsync: Fsync,
}

/// `[sandbox]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxConfig {
    /// Default auto.
    pub mode: SandboxMode,
    /// Whether sandboxed commands may use the network (default false).
    pub allow_network: bool,
}

/// `[context]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextConfig {
    /// Turns of history kept; 0 = unlimited.
    pub keep_turns: u64,
    /// Fraction of the context window the history may fill (0 < f ≤ 1).
    pub max_fraction: f64,
}

dsh_core::spelled_enum! {
    /// How the model calls tools.
    ToolsMode {
        /// The provider's native tool calls (the default).
        Native = "native",
        /// Code Mode: one `run_code` tool.
        Code = "code",
        /// Both.
        Both = "both",
    }
}

/// `[tools]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolsConfig {
    /// Default native.
    pub mode: ToolsMode,
    /// A `run_code` program's wall time, seconds.
    pub code_timeout_s: u64,
}

/// `[verify]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyConfig {
    /// The command that checks the agent's work (`None`: no verification).
    pub command: Option<String>,
    /// Rounds of fixing after a failed check.
    pub max_rounds: u64,
}

/// One `[agents.NAME]` profile. Tool names are checked when the session is assembled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AgentProfile {
    pub description: Option<String>,
    /// Each tool name with where it is written (`agents.NAME.tools[i]`), for the error when
    /// the session has no such tool. Required when the session is assembled (a profile is
    /// its permission: leaving the list out gives no tools, and is an error).
    pub tools: Option<Vec<Sourced<String>>>,
    pub system: Option<String>,
    pub model: Option<String>,
    pub max_steps: Option<u64>,
}

impl AgentProfile {
    /// The built-in profiles, which no layer may redefine.
    pub const BUILT_IN: [&'static str; 4] = ["search", "code", "shell", "general"];
}

/// The effective configuration. `Config::default()` is the built-in defaults (`builtin.rs`:
/// the scalar keys' from the key table, the lists' from [`defaults`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    /// `[model]`.
    pub model: ModelConfig,
    /// `[permissions]`.
    pub permissions: Permissions,
    /// `[shell]`.
    pub shell: ShellConfig,
    /// `[guards]`.
    pub guards: Guards,
    /// `[hooks]`.
    pub hooks: Hooks,
    /// `[compat]`.
    pub compat: Compat,
    /// `[mcp]`.
    pub mcp: Mcp,
    /// `[limits]`.
    pub limits: Limits,
    /// `[journal]`.
    pub journal: JournalConfig,
    /// `[sandbox]`.
    pub sandbox: SandboxConfig,
    /// `[context]`.
    pub context: ContextConfig,
    /// `[tools]`.
    pub tools: ToolsConfig,
    /// `[verify]`.
    pub verify: VerifyConfig,
    /// `[agents.NAME]`, by name (never a built-in name); a higher trusted layer replaces a
    /// lower one's profile of the same name.
    pub agents: BTreeMap<String, Sourced<AgentProfile>>,
}

/// Each table's defaults are the configuration's (the key table's, through
/// [`Config::default`]).
macro_rules! default_from_config {
    ($($ty:ident . $field:ident),+ $(,)?) => {
        $(impl Default for $ty {
            fn default() -> Self {
                Config::default().$field
            }
        })+
    };
}

default_from_config!(
    ModelConfig.model,
    Permissions.permissions,
    ShellConfig.shell,
    Limits.limits,
    JournalConfig.journal,
    SandboxConfig.sandbox,
    ContextConfig.context,
    ToolsConfig.tools,
    VerifyConfig.verify,
    Hooks.hooks,
    Compat.compat,
);

impl Config {
    /// Lowercase hex SHA-256 of the configuration's JSON form with every `origin`
    /// removed: two sessions with the same effective settings have the same digest even
    /// if the settings moved between files or lines. Recorded in `session_start`.
    pub fn digest(&self) -> String {
        let mut value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        strip_origins(&mut value);
        dsh_core::journal::json_digest(&value)
    }
}

fn strip_origins(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("origin");
            map.values_mut().for_each(strip_origins);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_origins),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_design() {
        let c = Config::default();
        // The read-only list, at least.
        for p in "sort uniq cut tr nl seq rev tac column comm paste fold basename dirname \
                  realpath readlink which command type uname id du printf true false test [ \
                  sleep md5sum sha256sum cksum cmp od xxd jq rg fd sed xargs git file"
            .split_whitespace()
        {
            assert!(c.shell.safe.iter().any(|s| s == p), "{p} is read-only");
        }
        assert!(
            !c.shell.safe.iter().any(|s| s == "awk"),
            "awk runs programs"
        );
        assert_eq!(c.shell.confirm[0], "python");
        assert_eq!(c.shell.timeout_s, 120);
        assert_eq!(c.shell.unlisted, Unlisted::Ask);
        assert_eq!(c.limits.max_parallel, 8);
        assert_eq!(c.sandbox.mode, SandboxMode::Auto);
        assert_eq!(c.model.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    }

    #[test]
    fn digest_ignores_origins_but_not_values() {
        let a = Config::default();
        let mut b = Config::default();
        b.guards.protected[0].origin.line = Some(9);
        assert_eq!(a.digest(), b.digest());
        b.limits.max_steps = 7;
        assert_ne!(a.digest(), b.digest());
        assert_eq!(a.digest().len(), 64);
    }

    #[test]
    fn sandbox_modes_order_by_strictness() {
        assert!(SandboxMode::Off.strictness() < SandboxMode::Auto.strictness());
        assert!(SandboxMode::Auto.strictness() < SandboxMode::Required.strictness());
        assert_eq!("required".parse::<SandboxMode>(), Ok(SandboxMode::Required));
        assert!(
            "nope"
                .parse::<Provider>()
                .unwrap_err()
                .contains("openai, anthropic")
        );
    }
}
