//! Assembling a session. The order of listeners on each gate is declared here, once:
//!
//! - gate 1: confinement, protected paths, permission rules, the memory file's ask (every
//!   write to `.dsh/memory.md` asks at tier `Rule`, which no allow rule lifts), the shell policy (which alone
//!   judges `run_shell`, by its rules and the safe/confirm lists; a `deny` from any of them wins;
//!   DESIGN §3 combines the votes, so the order only decides which policy a result names
//!   when several would deny);
//! - gate 2: no approver (headless: every `ask` is `unavailable`), `--yolo`'s, or a person
//!   through the session's event stream (`Approval::Interactive`);
//! - gate 3: confinement, protected paths — the same checks as gate 1, as guards, so a
//!   permissive listener can never carry a call past them (SPEC P4); then the Python audit
//!   again, on the scripts' content just before the call runs;
//! - gate 4: timeout (outermost), retry for idempotent tools;
//! - gate 5: redaction, then spill (so the spill store never holds a secret; the store also
//!   scrubs what `run_shell` spills before gate 5).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::events::{EventApprover, EventSink};
use dsh_core::journal::{self, Journal, JsonlJournal, MemoryJournal, SyncPolicy};
use dsh_core::{
    ApprovalAnswer, ApprovalError, ApprovalOutcome, ApprovalRequest, Approver, Pipeline,
    PipelineConfig, Registry, Retry, SpillStore, Timeout, Workspace, async_trait,
};
use dsh_policy::{
    Confinement, MemoryPolicy, NetworkVote, PermissionRules, ProtectedPaths, PythonAuditGuard,
    Redact, ShellLists, ShellPolicy, Spill,
};

/// What an `unavailable` result tells the user to do.
pub const UNAVAILABLE_HINT: &str = "to let it run, add an allow rule (e.g. `allow = [\"write_file(src/**)\"]` \
under [permissions] in .dsh/config.toml or your user config) or run with --yolo";

/// The `unavailable` hint for a call: the allow rule that would lift its ask, naming its own
/// tool (`run_shell(cargo build *)`, `edit_file(/src/main.rs)`), or the general sentence when
/// no one rule would.
fn unavailable_hint(shell: &ShellPolicy, workspace: &Arc<Workspace>) -> dsh_core::UnavailableHint {
    let (shell, workspace) = (shell.clone(), workspace.clone());
    dsh_core::UnavailableHint(Arc::new(
        move |call, accesses| match crate::allow_rule::rule_for(&shell, &workspace, call, accesses)
        {
            Some(rule) => format!(
                "to let it run, add an allow rule (`allow = [{rule:?}]` under [permissions] in .dsh/config.toml or your user config) or run with --yolo"
            ),
            None => format!(
                "to let it run, add an allow rule for `{0}` (`allow = [\"{0}(PATTERN)\"]` under [permissions] in .dsh/config.toml or your user config) or run with --yolo",
                call.name()
            ),
        },
    ))
}

/// Who answers `ask`.
#[derive(Clone)]
pub enum Approval {
    /// Nobody: every `ask` ends as `unavailable` (headless default, SPEC P3).
    None,
    /// `--yolo`: every `ask` is approved once. Guards still apply.
    Yolo,
    /// A person, through the session's event stream: each `ask` is an `ApprovalAsked`
    /// event answered by its consumer (the REPL's prompt; `events::EventApprover`).
    Interactive,
    /// Some other approver.
    Custom(Arc<dyn Approver>),
}

impl std::fmt::Debug for Approval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Approval::None => "None",
            Approval::Yolo => "Yolo",
            Approval::Interactive => "Interactive",
            Approval::Custom(_) => "Custom",
        })
    }
}

/// Everything a session is assembled from: plain data, filled from configuration and flags.
#[derive(Clone, Debug)]
pub struct SessionSettings {
    pub workspace: PathBuf,
    /// All state: `sessions/`, `spill/`.
    pub dsh_home: PathBuf,
    /// The permission rules as configured (`dsh_core::Rule`: parsed, with where each came
    /// from), compiled by the policies at assembly.
    pub rules: Vec<dsh_core::Rule>,
    /// Paths no call may write (gitignore-style).
    pub protected: Vec<String>,
    pub limits: dsh_tools::ReadCaps,
    pub max_parallel: usize,
    /// Outputs longer than this many characters are spilled.
    pub spill_chars: usize,
    pub fsync_every_record: bool,
    pub tool_timeout: Duration,
    /// How `run_shell` runs commands: timeout, output limit, environment, sandbox, network.
    pub shell: dsh_tools::ShellSettings,
    /// The shell policy's safe and confirm lists (`[shell] safe/confirm`).
    pub shell_lists: ShellLists,
    /// The permission mode the session starts in (`[permissions] mode`, `--mode`); `yolo`
    /// approves every ask whoever else would answer.
    pub mode: dsh_config::PermissionMode,
    pub approval: Approval,
    /// The digest of the effective configuration, for `session_start`.
    pub config_digest: String,
    /// The model provider and model, for `session_start` (none for `batch`).
    pub provider: Option<String>,
    pub model: Option<String>,
    /// Where the session's agents send their events (and `Approval::Interactive` its
    /// questions); none by default.
    pub events: EventSink,
    /// The session this one resumes: the old file's last intact record (`session_start`'s
    /// `resumed_from`, DESIGN §6).
    pub resumed_from: Option<journal::ResumedFrom<'static>>,
    /// The sessions of the chain this one resumes, newest first (`Resumed::chain`): their
    /// spilled outputs stay pageable with `read_output`, since the history names them.
    pub earlier_sessions: Vec<String>,
    /// Where an "always allow" rule is written (`dsh_config::Loaded::rule_target`): the
    /// project file of a trusted workspace, else the user file's section for it.
    pub rule_target: Option<(PathBuf, dsh_config::RuleScope)>,
    /// The configured sub-agent profiles (`[agents.NAME]`); the built-in four are always
    /// there.
    pub agents: Vec<crate::subagent::ProfileSpec>,
    /// How the models call tools (`[tools] mode`, `--tools-mode`).
    pub tools_mode: dsh_config::ToolsMode,
    /// What a `run_code` program may use.
    pub code: dsh_code::CodeLimits,
    /// The MCP servers to start (`[mcp.servers]`); a stdio server's environment holds only
    /// its configured variables here, the session adds the command environment's allowlist,
    /// and an empty working directory is the session's private directory.
    pub mcp: Vec<dsh_mcp::ServerSpec>,
    /// Configured servers not to start, with why (shown in `/mcp`).
    pub mcp_skipped: Vec<dsh_mcp::Skipped>,
    /// The client the session serves (`dsh mcp serve`, `dsh acp`), for `session_start`:
    /// set with [`SessionSettings::set_client`].
    pub client: Option<String>,
    /// The configured hooks (`[[hooks.EVENT]]`, `.claude/settings.json`).
    pub hooks: Vec<crate::hooks::HookSetting>,
    /// How many times `Stop`/`SubagentStop` hooks may send an agent back to work in a turn.
    pub max_continuations: u32,
    /// The skills found (`skills.rs`); the `skill` tool is offered when there is one.
    pub skills: Arc<dsh_tools::skill::Catalog>,
    /// The environment variables holding credentials dsh was given: their values, read at
    /// assembly, are redacted from every tool output (`dsh_policy::Redact`).
    pub credential_vars: Vec<String>,
    /// The plugins whose tools the session registers (`plugins.rs`: approved where needed).
    pub plugins: Vec<dsh_config::Plugin>,
    /// Every plugin found and its state, for `/plugins`.
    pub plugin_status: Vec<crate::plugins::PluginStatus>,
}

/// The longest client name `session_start` keeps.
const CLIENT_NAME_MAX: usize = 200;

impl SessionSettings {
    /// The client the session serves, as `session_start` keeps its name: without control
    /// characters, at most [`CLIENT_NAME_MAX`] characters (a client chooses it: it may be
    /// anything, of any length).
    pub fn set_client(&mut self, name: &str) {
        let clean: String = name.chars().filter(|c| !c.is_control()).collect();
        self.client = Some(if clean.chars().count() <= CLIENT_NAME_MAX {
            clean
        } else {
            let mut cut: String = clean.chars().take(CLIENT_NAME_MAX).collect();
            cut.push('…');
            cut
        });
    }

    /// Defaults for a workspace and a state directory, all from `dsh_config::defaults`
    /// (every default in one place).
    pub fn new(workspace: impl Into<PathBuf>, dsh_home: impl Into<PathBuf>) -> Self {
        use dsh_config::defaults as d;
        // The key table's defaults, through `Config::default`.
        let c = dsh_config::Config::default();
        let usize_of = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let shell_timeout = Duration::from_secs(c.shell.timeout_s);
        SessionSettings {
            workspace: workspace.into(),
            dsh_home: dsh_home.into(),
            rules: Vec::new(),
            protected: d::GUARDS_PROTECTED
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            limits: dsh_tools::ReadCaps {
                max_read_bytes: usize_of(c.limits.max_read_bytes),
                max_results: usize_of(c.limits.max_results),
                ..dsh_tools::ReadCaps::default()
            },
            max_parallel: usize_of(c.limits.max_parallel),
            spill_chars: usize_of(c.limits.spill_chars),
            fsync_every_record: false,
            tool_timeout: Duration::from_secs(d::TOOL_TIMEOUT_S),
            shell: dsh_tools::ShellSettings {
                timeout: shell_timeout,
                max_timeout: shell_timeout.max(Duration::from_secs(d::SHELL_MAX_TIMEOUT_S)),
                max_output_chars: usize_of(c.shell.max_output_chars),
                ..dsh_tools::ShellSettings::default()
            },
            shell_lists: ShellLists::default(),
            mode: c.permissions.mode,
            approval: Approval::None,
            config_digest: String::new(),
            provider: None,
            model: None,
            events: EventSink::none(),
            resumed_from: None,
            earlier_sessions: Vec::new(),
            rule_target: None,
            agents: Vec::new(),
            tools_mode: c.tools.mode,
            code: dsh_code::CodeLimits {
                wall: Duration::from_secs(c.tools.code_timeout_s),
                ..dsh_code::CodeLimits::default()
            },
            mcp: Vec::new(),
            mcp_skipped: Vec::new(),
            hooks: Vec::new(),
            max_continuations: 3,
            skills: Arc::default(),
            plugins: Vec::new(),
            plugin_status: Vec::new(),
            client: None,
            credential_vars: Vec::new(),
        }
    }
}

/// Why a session could not be assembled: a harness or configuration fault, never a tool
/// outcome.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AssemblyError {
    #[error("the workspace {path}: {source}")]
    Workspace {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{at}: {source}")]
    Rule {
        at: String,
        #[source]
        source: dsh_policy::RuleError,
    },
    #[error(transparent)]
    SubAgents(#[from] crate::subagent::SubAgentConfigError),
    #[error(
        "{at}: `{tool}` is reserved (Code Mode's program runner): no rule names it; its programs' calls are judged by the rules of the tools they call"
    )]
    ReservedRule { at: String, tool: String },
    #[error("protected path: {0}")]
    Protected(#[from] dsh_policy::PatternError),
    #[error(transparent)]
    Hook(#[from] crate::hooks::HookError),
    #[error("{at}: plugin `{plugin}` is refused: {source}")]
    Plugin {
        /// `plugin.toml:LINE` of the tool.
        at: String,
        plugin: String,
        #[source]
        source: Box<dsh_core::RegisterError>,
    },
    #[error("a built-in tool failed to register: {0}")]
    Register(#[from] dsh_core::RegisterError),
    #[error("cannot create the session journal under {path}: {source}")]
    Journal {
        path: String,
        #[source]
        source: journal::JournalError,
    },
    #[error("cannot create {path}: {source}")]
    Dir {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl AssemblyError {
    /// The configuration is at fault (a rule, a protected path, a profile), not the machine:
    /// the user fixes the file the message names.
    pub fn is_configuration(&self) -> bool {
        matches!(
            self,
            AssemblyError::Rule { .. }
                | AssemblyError::Protected(_)
                | AssemblyError::SubAgents(_)
                | AssemblyError::Hook(_)
                | AssemblyError::Plugin { .. }
        )
    }
}

/// `approver`, telling the `Notification` hooks first when there are any.
fn notifying(
    approver: Arc<dyn dsh_core::Approver>,
    hooks: &Arc<dsh_policy::Hooks>,
) -> Arc<dyn dsh_core::Approver> {
    if hooks.listens(dsh_config::HookEvent::Notification) {
        Arc::new(crate::hooks::Notifying {
            inner: approver,
            hooks: hooks.clone(),
        })
    } else {
        approver
    }
}

/// Approves every `ask` once (`--yolo`). Guards, confinement, protected paths and the sandbox
/// still apply: it can only say yes to what a person could have said yes to.
#[derive(Debug, Default)]
pub struct YoloApprover;

#[async_trait]
impl Approver for YoloApprover {
    fn name(&self) -> &str {
        "yolo"
    }
    async fn approve(&self, _: &ApprovalRequest<'_>) -> Result<ApprovalAnswer, ApprovalError> {
        Ok(ApprovalOutcome::AllowedOnce.into())
    }
}

/// An assembled session: the resources its agents share — workspace, journal, spill store,
/// file seam, tools, policies, approver — built once. Agents ([`crate::Agent`]) are made
/// over it, each with its own tool set; tools added while it runs go through
/// [`Session::register_tool`].
pub struct Session {
    pub id: String,
    pub pipeline: Arc<Pipeline>,
    pub workspace: Arc<Workspace>,
    pub spill: Arc<SpillStore>,
    /// The journal file, when the session records to disk.
    pub journal_path: Option<PathBuf>,
    /// Where the session's agents send their events.
    pub events: EventSink,
    /// The sweep of dead sessions' leftovers, running beside the session's start.
    pub(crate) sweeper: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// What the session was assembled from: "always allow" checks a rule against a dry
    /// session assembled from it with the rule added.
    pub(crate) settings: SessionSettings,
    /// The shell policy as assembled, for the rule an "always allow" would add.
    pub(crate) shell: ShellPolicy,
    /// Allow rules added while the session runs, judged by the live policies (and by the
    /// dry checks of later "always" offers).
    pub(crate) added: dsh_policy::AddedRules,
    /// The sub-agent profiles `call_sub_agent` offers.
    pub profiles: Arc<crate::subagent::Profiles>,
    /// The permission mode in force (see `mode.rs`).
    pub(crate) mode: dsh_policy::ModeSwitch,
    /// Whether `auto`'s hardened sandbox is enforced here.
    pub(crate) hardened: dsh_policy::SandboxCheck,
    /// Which files each turn changed, for `/undo`.
    pub(crate) checkpoints: Arc<crate::checkpoint::Checkpoints>,
    /// How the models call tools.
    pub tools_mode: dsh_config::ToolsMode,
    /// The MCP servers, whose tools join the registry as they become ready
    /// (`extensions.rs`).
    pub(crate) mcp: Arc<dsh_mcp::McpServers>,
    /// The session's private temporary directory (commands' and servers' `TMPDIR`).
    pub(crate) temp_dir: PathBuf,
    /// The configured hooks: `PreToolUse` and `PostToolUse` are listeners in the pipeline,
    /// the others the runtime fires (`agent/hooked.rs`).
    pub hooks: Arc<dsh_policy::Hooks>,
    /// The redactor (gate 5's), for what reaches the model outside a call's result: the
    /// context session hooks attach.
    pub(crate) scrub: dsh_core::Scrub,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("journal_path", &self.journal_path)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session that records to `DSH_HOME/sessions/<id>.jsonl`, opened with `session_start`.
    pub fn assemble(settings: &SessionSettings) -> Result<Session, AssemblyError> {
        Session::assemble_with_mirror(settings, None)
    }

    /// [`Session::assemble`], copying every journal line to `mirror` as it is written
    /// (`--json`; the mirror queues, the journal never waits for its reader).
    pub fn assemble_with_mirror(
        settings: &SessionSettings,
        mirror: Option<Arc<journal::Mirror>>,
    ) -> Result<Session, AssemblyError> {
        let id = crate::new_session_id();
        let dir = settings.dsh_home.join("sessions");
        create_private_dir(&dir)?;
        let path = dir.join(format!("{id}.jsonl"));
        let policy = if settings.fsync_every_record {
            SyncPolicy::EveryRecord
        } else {
            SyncPolicy::BatchEnd
        };
        let journal = JsonlJournal::create(&path, id.clone(), policy).map_err(|source| {
            AssemblyError::Journal {
                path: path.display().to_string(),
                source,
            }
        })?;
        // Room for the closing records on a full disk (best effort; see dsh_core's jsonl.rs);
        // the sweep of dead sessions removes what a killed process left here.
        let reserve_dir = settings.dsh_home.join(crate::leftovers::RESERVE_DIR);
        let journal = match create_private_dir(&reserve_dir) {
            Ok(()) => journal.with_reserve(&reserve_dir.join(&id)),
            Err(_) => journal,
        };
        let journal = match mirror {
            Some(m) => journal.with_mirror(m),
            None => journal,
        };
        let journal: Arc<dyn Journal> = Arc::new(journal);
        let mut session = Session::build(settings, id, journal.clone(), &path)?;
        session.journal_path = Some(path.clone());
        // What dead sessions left (not in `build`: `dsh check` changes nothing), swept off
        // the start-up path; `finish` waits for it.
        session.sweeper = std::sync::Mutex::new(crate::leftovers::spawn_sweep(
            settings.dsh_home.clone(),
            session.workspace.clone(),
        ));
        let start = journal::Record::SessionStart {
            workspace: session.workspace.root().into(),
            provider: settings.provider.as_deref().map(Into::into),
            model: settings.model.as_deref().map(Into::into),
            dsh_version: env!("CARGO_PKG_VERSION").into(),
            config_digest: settings.config_digest.as_str().into(),
            resumed_from: settings.resumed_from.clone(),
            mode: Some(session.mode().as_str().into()),
            tools_mode: Some(session.tools_mode.as_str().into()),
            client: settings.client.as_deref().map(Into::into),
        };
        journal
            .append(&start)
            .map_err(|source| AssemblyError::Journal {
                path: path.display().to_string(),
                source,
            })?;
        Ok(session)
    }

    /// A session that records in memory only: for `dsh check`, which runs nothing.
    pub fn assemble_dry(settings: &SessionSettings) -> Result<Session, AssemblyError> {
        let id = crate::new_session_id();
        Session::build(
            settings,
            id.clone(),
            Arc::new(MemoryJournal::new(id)),
            Path::new(""),
        )
    }

    fn build(
        settings: &SessionSettings,
        id: String,
        journal: Arc<dyn Journal>,
        journal_path: &Path,
    ) -> Result<Session, AssemblyError> {
        let workspace =
            Workspace::new(&settings.workspace).map_err(|source| AssemblyError::Workspace {
                path: settings.workspace.display().to_string(),
                source,
            })?;
        let workspace = Arc::new(workspace);
        let spill_dir = |id: &str| settings.dsh_home.join("spill").join(id);
        let redact = Redact::new(
            settings
                .credential_vars
                .iter()
                .filter_map(|name| Some((name.clone(), std::env::var(name).ok()?))),
        );
        let spill = Arc::new(
            SpillStore::new(spill_dir(&id))
                .with_earlier(settings.earlier_sessions.iter().map(|s| spill_dir(s)))
                .with_scrub(redact.scrubber()),
        );

        let mut registry = Registry::new();
        // Each change's pre-image, for `/undo`, under DSH_HOME like the spill store.
        let seam = Arc::new(dsh_tools::FileSeam::with_pre_images(
            dsh_tools::PreImages::new(settings.dsh_home.join("checkpoints").join(&id)),
        ));
        let tools = dsh_tools::session_tools(
            workspace.clone(),
            &settings.limits,
            seam,
            spill.clone(),
            settings.spill_chars,
        );
        for tool in tools {
            registry.register_arc(tool)?;
        }
        // Commands get a private TMPDIR per session, under DSH_HOME like the spill store.
        let temp_dir = settings.dsh_home.join("tmp").join(&id);
        // What `auto`'s hardened profile keeps from commands: the protected paths, the prompt
        // files, and what the file tools' deny/ask rules name.
        let mut shell_settings = settings.shell.clone();
        let file_readers: Vec<String> = registry
            .specs()
            .filter(|s| s.read_only)
            .map(|s| s.name.clone())
            .collect();
        shell_settings.keep =
            crate::keep::keep(&settings.protected, &settings.rules, &file_readers)?;
        let run_shell = Arc::new(dsh_tools::RunShell::new(
            workspace.clone(),
            spill.clone(),
            temp_dir.clone(),
            shell_settings,
        ));
        let mcp = Arc::new(crate::extensions::mcp_servers(settings, &id, &temp_dir));
        // The shell policy lets git's reading subcommands run free only where the command
        // tool can run them in the read-only profile.
        let read_only_sandbox = {
            let tool = run_shell.clone();
            dsh_policy::SandboxCheck(Arc::new(move || tool.read_only_profile()))
        };
        let hardened_sandbox = {
            let tool = run_shell.clone();
            dsh_policy::SandboxCheck(Arc::new(move || tool.hardened_profile()))
        };
        let kept = {
            let tool = run_shell.clone();
            dsh_policy::KeptCheck(Arc::new(move |path: &Path| tool.keeps(path)))
        };
        registry.register_arc(run_shell.clone())?;
        if !settings.skills.is_empty() {
            registry.register(dsh_tools::SkillTool::new(
                settings.skills.clone(),
                workspace.clone(),
            ))?;
        }
        // Code Mode's reserved tool: every session has it; the tools mode says who may call it.
        registry.register(dsh_code::RunCode::new(settings.code.clone()))?;
        // Plugins after the built-in tools, so that a plugin cannot take a built-in's name.
        for plugin in &settings.plugins {
            for (spec, declared) in crate::plugins::tool_specs(plugin)
                .into_iter()
                .zip(&plugin.tools)
            {
                let tool = dsh_tools::PluginTool::new(spec, run_shell.clone(), workspace.clone());
                registry
                    .register(tool)
                    .map_err(|source| AssemblyError::Plugin {
                        at: match declared.line {
                            Some(line) => format!("{}:{line}", plugin.file().display()),
                            None => plugin.file().display().to_string(),
                        },
                        plugin: plugin.name.clone(),
                        source: Box::new(source),
                    })?;
            }
        }
        if let Some(r) = settings.rules.iter().find(|r| r.tool == dsh_code::RUN_CODE) {
            return Err(AssemblyError::ReservedRule {
                at: r.origin.location(),
                tool: r.tool.clone(),
            });
        }
        // Sub-agents last: a profile may name any tool registered before it.
        let names: std::collections::BTreeSet<String> =
            registry.specs().map(|s| s.name.clone()).collect();
        let profiles = Arc::new(crate::subagent::Profiles::resolve(
            &settings.agents,
            &names,
        )?);
        let sub_agents = crate::subagent::SubAgentTool::new(profiles.clone(), |name| {
            registry.get(name).cloned().map(Arc::new)
        });
        registry.register_arc(Arc::new(sub_agents))?;

        crate::subagent::check_rules(&settings.rules)?;
        // The tools whose path rules carry over to shell words: those declaring read-only.
        let readers: Vec<String> = registry
            .specs()
            .filter(|s| s.read_only)
            .map(|s| s.name.clone())
            .collect();
        let rules = PermissionRules::new(workspace.clone(), settings.rules.clone(), &readers)
            .map_err(|source| AssemblyError::Rule {
                at: source.rule.origin.location(),
                source,
            })?;
        let network = match settings.shell.network {
            dsh_tools::NetworkGrant::Refused => NetworkVote::Refused,
            dsh_tools::NetworkGrant::UserConfig => NetworkVote::Granted,
            dsh_tools::NetworkGrant::PersonApproves => NetworkVote::Ask,
        };
        // For shell writes, the files that reach every later system prompt are protected too:
        // the file tools, whose writes to them ask, are the way in.
        let protected_patterns = settings
            .protected
            .iter()
            .map(String::as_str)
            .chain(dsh_policy::PROMPT_FILES)
            .map(dsh_policy::PathPattern::new)
            .collect::<Result<Vec<_>, _>>()?;
        // `--yolo` is the yolo mode, and the yolo mode is its approver.
        let mode = dsh_policy::ModeSwitch::new(match settings.approval {
            Approval::Yolo => dsh_config::PermissionMode::Yolo,
            _ => settings.mode,
        });
        let added = dsh_policy::AddedRules::new();
        let shell = ShellPolicy::new(
            workspace.clone(),
            settings.rules.clone(),
            settings.shell_lists.clone(),
            network,
        )
        .with_file_rules(&rules, protected_patterns)
        .with_temp_dir(temp_dir.clone())
        .with_pass_env(settings.shell.pass_env.clone())
        .with_added(added.clone())
        .with_read_only_sandbox(read_only_sandbox)
        .with_mode(mode.clone(), hardened_sandbox.clone());
        let confinement = Confinement::new(workspace.clone());
        // The memory file may be written only where a person answers asks.
        let person_answers = matches!(
            settings.approval,
            Approval::Interactive | Approval::Custom(_)
        );
        let protected = ProtectedPaths::new(workspace.clone(), &settings.protected)?
            .with_memory_exemption(person_answers);

        let hooks = crate::hooks::build(
            settings,
            workspace.root(),
            &id,
            journal_path,
            &temp_dir,
            mode.clone(),
        )?;
        let checkpoints = Arc::new(crate::checkpoint::Checkpoints::default());
        let mut builder = Pipeline::builder(registry, journal)
            .pre_policy(
                dsh_policy::ModePolicy::new(mode.clone(), shell.clone())
                    .with_kept(kept)
                    .with_rules(rules.clone().with_added(added.clone())),
            )
            .pre_policy(confinement.clone())
            .pre_policy(protected.clone())
            .pre_policy(rules.with_added(added.clone()))
            .pre_policy(MemoryPolicy::new(workspace.clone()))
            .pre_policy(shell.clone())
            .pre_policy(dsh_policy::HookPolicy::new(hooks.clone()))
            .guard(confinement)
            .guard(protected)
            .guard(PythonAuditGuard::new(workspace.clone()))
            .wrapper(Timeout::new(settings.tool_timeout))
            .wrapper(Retry::new(3, Duration::from_millis(100)))
            .disposition(redact.clone())
            .disposition(
                dsh_policy::PostToolUseHooks::new(hooks.clone()).with_scrub(redact.scrubber()),
            )
            .disposition(Spill::new(spill.clone(), settings.spill_chars))
            .observer(checkpoints.clone())
            .config(PipelineConfig {
                max_parallel: settings.max_parallel,
                unavailable_hint: unavailable_hint(&shell, &workspace),
                ..PipelineConfig::default()
            });
        match &settings.approval {
            Approval::None => {}
            Approval::Yolo => builder = builder.approver(Arc::new(YoloApprover)),
            Approval::Interactive => {
                builder = builder.approver(notifying(
                    Arc::new(EventApprover::new(settings.events.clone())),
                    &hooks,
                ));
            }
            Approval::Custom(a) => builder = builder.approver(notifying(a.clone(), &hooks)),
        }
        Ok(Session {
            id,
            pipeline: builder.build(),
            workspace,
            spill,
            journal_path: None,
            events: settings.events.clone(),
            sweeper: std::sync::Mutex::new(None),
            settings: settings.clone(),
            shell,
            added,
            profiles,
            mode,
            hardened: hardened_sandbox,
            checkpoints,
            tools_mode: settings.tools_mode,
            mcp,
            temp_dir,
            hooks,
            scrub: redact.scrubber(),
        })
    }
}

impl Session {
    /// The skills the session offers (through the `skill` tool).
    pub fn skills(&self) -> &[dsh_tools::skill::Skill] {
        self.settings.skills.skills()
    }

    /// Every plugin found for the session and its state (`/plugins`).
    pub fn plugins(&self) -> &[crate::plugins::PluginStatus] {
        &self.settings.plugin_status
    }

    /// The main agent's tools: every tool of the session but the person's `restore_file`,
    /// its model calling directly what the tools mode lets it.
    pub fn main_tools(&self) -> dsh_core::ToolSet {
        crate::AgentSpec::main()
            .tools
            .with_direct(self.direct(false))
    }

    /// A sub-agent's tools as its profile gives them under the tools mode: with `run_code`
    /// too in the `code` and `both` modes (every agent has it there), its model calling
    /// directly what the mode lets it.
    pub fn profile_tools(&self, profile: &crate::subagent::Profile) -> dsh_core::ToolSet {
        use dsh_config::ToolsMode;
        let extra: &[&str] = match self.tools_mode {
            ToolsMode::Native => &[],
            _ => &[dsh_code::RUN_CODE],
        };
        profile
            .tool_set_adding(extra)
            .with_direct(self.direct(profile.names(dsh_code::RUN_CODE)))
    }

    /// The tools a `dsh batch` line or `dsh check` may name: every tool of the session, but
    /// `run_code` only in the `code` and `both` tools modes.
    pub fn batch_tools(&self) -> dsh_core::ToolSet {
        let all = dsh_core::ToolSet::all();
        match self.direct(false) {
            dsh_core::Direct::Except(names, why) => names
                .iter()
                .fold(all, |set, n| set.withholding(n.as_str(), &*why)),
            _ => all,
        }
    }

    /// The tools `dsh mcp serve` offers its client: every tool but those that need a model
    /// (`call_sub_agent`, `run_code`) and the person's own `restore_file`.
    pub fn served_tools(&self) -> dsh_core::ToolSet {
        let needs_a_model =
            "it needs a model: dsh mcp serve offers the file, search and shell tools";
        dsh_core::ToolSet::all()
            .withholding(crate::subagent::CALL_SUB_AGENT, needs_a_model)
            .withholding(dsh_code::RUN_CODE, needs_a_model)
            .withholding(
                dsh_tools::RESTORE_FILE,
                "it is the person's own (/undo in the REPL)",
            )
    }

    /// What an agent's model may call itself under the tools mode: in `native`, every tool but
    /// `run_code` (unless the agent's profile names it); in `code`, only `run_code`; in
    /// `both`, every tool.
    pub(crate) fn direct(&self, names_run_code: bool) -> dsh_core::Direct {
        use dsh_config::ToolsMode;
        let run_code = || {
            Arc::new(std::collections::BTreeSet::from([
                dsh_code::RUN_CODE.to_owned()
            ]))
        };
        match self.tools_mode {
            ToolsMode::Native if !names_run_code => dsh_core::Direct::Except(
                run_code(),
                "run_code is Code Mode's tool, and this session's tools mode is native ([tools] mode, --tools-mode)".into(),
            ),
            ToolsMode::Code => dsh_core::Direct::Only(
                run_code(),
                "in the code tools mode tools are called from a program: call run_code with code that does `await tools.NAME(args)`".into(),
            ),
            _ => dsh_core::Direct::Any,
        }
    }

    /// Closes the calls a resumed session's old process never finished: their results are
    /// the new journal's first records after `session_start` (DESIGN §6), the main agent's
    /// first, then its sub-agents', each in its agent's name.
    pub fn record_cut_off(
        &self,
        results: &[Arc<dsh_core::FrozenResult>],
        children: &[(String, Arc<dsh_core::FrozenResult>)],
    ) -> Result<(), journal::JournalError> {
        let journal = self.pipeline.journal();
        for r in results {
            journal.append(&journal::Record::ToolResult(r.as_ref().into()))?;
        }
        for (agent, r) in children {
            journal.append_as(Some(agent), &journal::Record::ToolResult(r.as_ref().into()))?;
        }
        journal.sync()
    }

    /// The one registration point for tools added while the session runs (MCP servers,
    /// plugins): checked as at assembly (SPEC P9), then offered to every agent whose tool
    /// set includes it from its next step on.
    ///
    /// Policies built at assembly from the tools' declarations (the read-only tools whose
    /// path rules carry over to shell words) are not rebuilt.
    pub fn register_tool(
        &self,
        tool: Arc<dyn dsh_core::Tool>,
    ) -> Result<(), dsh_core::RegisterError> {
        self.pipeline.register(tool)
    }
}

pub(crate) fn create_private_dir(dir: &Path) -> Result<(), AssemblyError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|source| AssemblyError::Dir {
        path: dir.display().to_string(),
        source,
    })
}

impl Session {
    /// Calls no model asked for, marked with who did (`source`: `user` for the REPL's
    /// `/memory add`, `config` for `/verify`'s configured command): through every gate like
    /// any other call, their events reported as the main agent's.
    pub async fn run_own_calls(
        &self,
        calls: Vec<dsh_core::ToolCall>,
        source: dsh_core::CallSource,
        cancel: &dsh_core::CancellationToken,
    ) -> Result<dsh_core::BatchOutcome, dsh_core::BatchError> {
        let scope = dsh_core::Scope::new(
            dsh_core::ToolSet::all(),
            Arc::new(crate::events::CallBridge {
                agent: crate::events::MAIN.into(),
                sink: self.events.clone(),
            }),
        );
        let calls = calls.into_iter().map(|c| c.with_source(source)).collect();
        self.pipeline.run_batch_in(&scope, calls, cancel).await
    }
}
