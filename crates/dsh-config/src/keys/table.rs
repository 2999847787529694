//! The key table: every configuration key's entry (see the parent module).

use super::{Fixed, Group, Key, Kind, Managed, Scalar, TextRule, Trust};
use crate::config::{
    Config, Fsync, Layer, PermissionMode, Provider, SandboxMode, ToolsMode, Unlisted,
};

// ---- reading a stored value back into the configuration's types ----

fn count(v: Option<&Scalar>) -> u64 {
    match v {
        Some(Scalar::Count(n)) => *n,
        _ => 0,
    }
}

fn number(v: Option<&Scalar>) -> f64 {
    match v {
        Some(Scalar::Number(x)) => *x,
        _ => 0.0,
    }
}

fn flag(v: Option<&Scalar>) -> bool {
    matches!(v, Some(Scalar::Flag(true)))
}

fn text(v: Option<&Scalar>) -> Option<String> {
    match v {
        Some(Scalar::Text(s)) => Some(s.clone()),
        _ => None,
    }
}

/// The choice `v` names, or `current` (a choice key is never unset: it has a default).
fn choice<T: std::str::FromStr>(v: Option<&Scalar>, current: T) -> T {
    match v {
        Some(Scalar::Choice(c)) => c.parse().unwrap_or(current),
        _ => current,
    }
}

fn spellings<T: Copy>(all: &[T], as_str: fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|v| as_str(*v)).collect()
}

const NO_LAYERS: (&[Layer], &str) = (&[], "");

/// A scalar key with the common settings: a trusted-only key, no ceiling.
const fn scalar(
    name: &'static str,
    kind: Kind,
    default: Option<Fixed>,
    doc: &'static str,
    set: fn(&mut Config, Option<&Scalar>),
) -> Key {
    Key {
        name,
        kind,
        default,
        unset: "",
        trust: Trust::Ignored,
        managed: Managed::Plain,
        loosest_not_from: NO_LAYERS,
        group: Group::Alone,
        doc,
        above_max: ", the most accepted",
        set,
    }
}

/// A list or table, read by its own code.
const fn structured(
    name: &'static str,
    what: &'static str,
    trust: Trust,
    doc: &'static str,
) -> Key {
    Key {
        name,
        kind: Kind::Structured(what),
        default: None,
        unset: "",
        trust,
        managed: Managed::Plain,
        loosest_not_from: NO_LAYERS,
        group: Group::Alone,
        doc,
        above_max: ", the most accepted",
        set: |_, _| {},
    }
}

/// One hook event's `[[hooks.EVENT]]` list.
const fn hook_event(name: &'static str, doc: &'static str) -> Key {
    structured(
        name,
        "array of tables { matcher?, command, timeout_ms?, on_error?, env? }",
        Trust::Ignored,
        doc,
    )
}

/// A limit: positive (0 off where `off_at_zero`), only lowered by an untrusted project, a
/// ceiling when the managed file sets it.
const fn limit(
    name: &'static str,
    max: u64,
    off_at_zero: bool,
    default: u64,
    doc: &'static str,
    set: fn(&mut Config, Option<&Scalar>),
) -> Key {
    Key {
        name,
        kind: Kind::Count {
            min: 1,
            max,
            off_at_zero,
        },
        default: Some(Fixed::Count(default)),
        unset: "",
        trust: Trust::Tightens,
        managed: Managed::Ceiling,
        loosest_not_from: NO_LAYERS,
        group: Group::Raise,
        doc,
        above_max: ", the most accepted",
        set,
    }
}

const POSITIVE: Kind = Kind::Count {
    min: 1,
    max: u64::MAX,
    off_at_zero: false,
};

/// Every key, in the order of the tables in a file (model, permissions, shell, guards,
/// hooks, mcp, limits, journal, sandbox, trust, workspaces, context, tools, verify, agents,
/// plugins, skills) and, within a table, the order errors list them in.
pub static KEYS: &[Key] = &[
    // [model]: never from an untrusted project (a repository must not redirect the
    // endpoint, choose the model, or choose which key variable is sent).
    Key {
        group: Group::Model,
        ..scalar(
            "model.provider",
            Kind::Choice(|| spellings(Provider::ALL, Provider::as_str)),
            Some(Fixed::Choice("openai")),
            "The provider's wire format and defaults; naming another resets base_url, model and api_key_env to its own.",
            |c, v| c.model.provider = choice(v, c.model.provider),
        )
    },
    Key {
        group: Group::Model,
        unset: "the provider's endpoint",
        ..scalar(
            "model.base_url",
            Kind::Text(TextRule::Url),
            None,
            "The endpoint the model is called at.",
            |c, v| {
                c.model.base_url =
                    text(v).unwrap_or_else(|| c.model.provider.default_base_url().to_owned());
            },
        )
    },
    Key {
        group: Group::Model,
        unset: "the provider's default model",
        ..scalar(
            "model.model",
            Kind::Text(TextRule::NonEmpty),
            None,
            "The model's name.",
            |c, v| c.model.model = text(v),
        )
    },
    Key {
        group: Group::Model,
        unset: "the provider's variable (OPENAI_API_KEY, …)",
        ..scalar(
            "model.api_key_env",
            Kind::Text(TextRule::EnvName),
            None,
            "The environment variable holding the API key.",
            |c, v| {
                c.model.api_key_env =
                    text(v).or_else(|| c.model.provider.default_api_key_env().map(str::to_owned));
            },
        )
    },
    Key {
        group: Group::Model,
        unset: "not known",
        ..scalar(
            "model.context_window",
            POSITIVE,
            None,
            "The model's context window in tokens, for trimming and compaction.",
            |c, v| c.model.context_window = v.map(|v| count(Some(v))),
        )
    },
    structured(
        "model.price",
        "table { input, cached_input?, output } (USD per million tokens)",
        Trust::Ignored,
        "What the model costs, for the spend shown and limits.max_cost_usd.",
    ),
    Key {
        group: Group::Model,
        ..scalar(
            "model.idle_timeout_s",
            POSITIVE,
            Some(Fixed::Count(120)),
            "The longest silence from the model server (before its answer or inside its stream) before the attempt fails, seconds.",
            |c, v| c.model.idle_timeout_s = count(v),
        )
    },
    Key {
        group: Group::Model,
        ..scalar(
            "model.max_retries",
            Kind::Count {
                min: 0,
                max: 100,
                off_at_zero: false,
            },
            Some(Fixed::Count(3)),
            "Retries of a model call that failed before any of its content arrived (connection errors, 429, 5xx).",
            |c, v| c.model.max_retries = count(v),
        )
    },
    // [permissions]
    Key {
        trust: Trust::Only("read-only"),
        loosest_not_from: (
            &[Layer::Project, Layer::Managed],
            "only a flag (--mode yolo, --yolo) or your user configuration can approve every ask",
        ),
        ..scalar(
            "permissions.mode",
            Kind::Choice(|| spellings(PermissionMode::ALL, PermissionMode::as_str)),
            Some(Fixed::Choice("ask")),
            "The permission mode: read-only, ask, auto (workspace work unasked in the hardened sandbox) or yolo (every ask approved).",
            |c, v| c.permissions.mode = choice(v, c.permissions.mode),
        )
    },
    structured(
        "permissions.allow",
        "array of rules",
        Trust::Ignored,
        "Rules that let calls run without asking, e.g. \"run_shell(cargo test *)\".",
    ),
    structured(
        "permissions.ask",
        "array of rules",
        Trust::Applied,
        "Rules that make calls ask, whatever else would allow them.",
    ),
    structured(
        "permissions.deny",
        "array of rules",
        Trust::Applied,
        "Rules that refuse calls.",
    ),
    // [shell]
    structured(
        "shell.safe",
        "array of program names",
        Trust::Tightens,
        "Programs that run without asking, in the read-only sandbox (the built-in read-only list and these).",
    ),
    structured(
        "shell.confirm",
        "array of program names",
        Trust::Tightens,
        "Programs that always ask (a rule may lift the ask).",
    ),
    Key {
        trust: Trust::Tightens,
        ..scalar(
            "shell.unlisted",
            Kind::Choice(|| {
                let mut all = spellings(Unlisted::ALL, Unlisted::as_str);
                all.reverse();
                all
            }),
            Some(Fixed::Choice("ask")),
            "What a program on neither list does: asks, or is refused (seed 003's strict allowlist).",
            |c, v| c.shell.unlisted = choice(v, c.shell.unlisted),
        )
    },
    Key {
        trust: Trust::Tightens,
        group: Group::Raise,
        ..scalar(
            "shell.timeout_s",
            POSITIVE,
            Some(Fixed::Count(120)),
            "A command's default timeout, seconds (a call may ask for up to 600).",
            |c, v| c.shell.timeout_s = count(v),
        )
    },
    Key {
        trust: Trust::Tightens,
        group: Group::Raise,
        ..scalar(
            "shell.max_output_chars",
            POSITIVE,
            Some(Fixed::Count(3000)),
            "A command's output shown to the model is cut to its head and tail at this many characters.",
            |c, v| c.shell.max_output_chars = count(v),
        )
    },
    structured(
        "shell.pass_env",
        "array of variable names",
        Trust::Ignored,
        "Environment variables passed to commands (all others are dropped).",
    ),
    // [guards]
    structured(
        "guards.protected",
        "array of path patterns",
        Trust::Applied,
        "Workspace paths no tool may write (.git/**, .dsh/**, .claude/** and .mcp.json always).",
    ),
    // [hooks]
    scalar(
        "hooks.max_continuations",
        POSITIVE,
        Some(Fixed::Count(3)),
        "How many times Stop and SubagentStop hooks may send an agent back to work in one turn.",
        |c, v| c.hooks.max_continuations = count(v),
    ),
    hook_event(
        "hooks.PreToolUse",
        "Programs that vote allow, deny or ask on each call before it runs (gate 1).",
    ),
    hook_event(
        "hooks.PostToolUse",
        "Programs that see each result; they may withhold it or attach context, never flip success (gate 5).",
    ),
    hook_event(
        "hooks.SessionStart",
        "Programs run when a session starts or resumes; their output may add context.",
    ),
    hook_event(
        "hooks.UserPromptSubmit",
        "Programs run before a prompt is sent; they may add context or block it.",
    ),
    hook_event(
        "hooks.Stop",
        "Programs run when the main agent would end its turn; they may send it back to work.",
    ),
    hook_event(
        "hooks.SubagentStop",
        "Programs run when a sub-agent would end; they may send it back to work.",
    ),
    hook_event(
        "hooks.PreCompact",
        "Programs run before the conversation is compacted.",
    ),
    hook_event(
        "hooks.Notification",
        "Programs run when a call waits for a person's approval.",
    ),
    // [compat]
    Key {
        trust: Trust::Tightens,
        loosest_not_from: (
            &[Layer::Project],
            "only your user configuration can read ~/.claude",
        ),
        ..scalar(
            "compat.claude",
            Kind::Flag,
            Some(Fixed::Flag(false)),
            "Read ~/.claude/settings.json hooks (and ~/.claude/skills) as your own.",
            |c, v| c.compat.claude = flag(v),
        )
    },
    // [mcp]
    structured(
        "mcp.servers",
        "tables by name { command, args?, env?, cwd?, startup_timeout_s?, timeout_s? } or { url, headers_env?, startup_timeout_s?, timeout_s? }",
        Trust::Ignored,
        "MCP servers whose tools the session offers.",
    ),
    // [limits]
    limit(
        "limits.max_steps",
        u64::MAX,
        false,
        1_000,
        "Model steps per task.",
        |c, v| c.limits.max_steps = count(v),
    ),
    limit(
        "limits.max_tokens",
        u64::MAX,
        true,
        0,
        "The session's token budget (0: none).",
        |c, v| c.limits.max_tokens = count(v),
    ),
    Key {
        above_max: ", the most calls dsh runs at once (each running call holds open files); set 64 or less",
        ..limit(
            "limits.max_parallel",
            64,
            false,
            8,
            "Calls executing at once (each holds open files; at most 64).",
            |c, v| c.limits.max_parallel = count(v),
        )
    },
    limit(
        "limits.max_read_bytes",
        u64::MAX,
        false,
        262_144,
        "Bytes read_file returns at most.",
        |c, v| c.limits.max_read_bytes = count(v),
    ),
    limit(
        "limits.max_results",
        u64::MAX,
        false,
        50,
        "Results grep and find_files return at most.",
        |c, v| c.limits.max_results = count(v),
    ),
    limit(
        "limits.spill_chars",
        u64::MAX,
        false,
        20_000,
        "Results longer than this are saved to a file and paged with read_output.",
        |c, v| c.limits.spill_chars = count(v),
    ),
    Key {
        kind: Kind::Dollars,
        default: Some(Fixed::Number(0.0)),
        ..limit(
            "limits.max_cost_usd",
            u64::MAX,
            true,
            0,
            "The session's spending budget in USD (0: none).",
            |c, v| c.limits.max_cost_usd = number(v),
        )
    },
    // [journal]
    scalar(
        "journal.fsync",
        Kind::Choice(|| spellings(Fsync::ALL, Fsync::as_str)),
        Some(Fixed::Choice("batch")),
        "When the journal is flushed to disk: after each batch of records, or each record.",
        |c, v| c.journal.fsync = choice(v, c.journal.fsync),
    ),
    // [sandbox]
    Key {
        trust: Trust::Tightens,
        managed: Managed::LockAtTightest("the managed config requires the sandbox"),
        ..scalar(
            "sandbox.mode",
            Kind::Choice(|| {
                // Declared loosest first (off, auto, required).
                let mut all = spellings(SandboxMode::ALL, SandboxMode::as_str);
                all.reverse();
                all
            }),
            Some(Fixed::Choice("auto")),
            "The OS sandbox for commands: required (refuse to run unsandboxed), auto (as much as the OS offers), off.",
            |c, v| c.sandbox.mode = choice(v, c.sandbox.mode),
        )
    },
    Key {
        trust: Trust::Tightens,
        managed: Managed::LockAtTightest("the managed config forbids the network"),
        loosest_not_from: (
            &[Layer::Project],
            "only your user configuration can allow the network",
        ),
        ..scalar(
            "sandbox.allow_network",
            Kind::Flag,
            Some(Fixed::Flag(false)),
            "Whether a command may ask for the network (`network: true`).",
            |c, v| c.sandbox.allow_network = flag(v),
        )
    },
    // [trust], [workspaces]: the user file only.
    structured(
        "trust.approved",
        "array of digests (user file only)",
        Trust::Ignored,
        "Project commands a person approved (an MCP server a repository names); `dsh mcp approve` writes them.",
    ),
    structured(
        "trust.workspaces",
        "array of absolute paths (user file only)",
        Trust::Ignored,
        "Workspaces whose project file applies in full (`dsh trust` writes it).",
    ),
    structured(
        "workspaces",
        "tables by canonical path { permissions { mode?, allow, ask, deny } } (user and managed files)",
        Trust::Ignored,
        "Permission rules and mode for one workspace.",
    ),
    // [context]
    Key {
        trust: Trust::Applied,
        ..scalar(
            "context.keep_turns",
            Kind::Count {
                min: 0,
                max: u64::MAX,
                off_at_zero: false,
            },
            Some(Fixed::Count(0)),
            "Turns of history kept (0: all that fit).",
            |c, v| c.context.keep_turns = count(v),
        )
    },
    Key {
        trust: Trust::Tightens,
        group: Group::Raise,
        ..scalar(
            "context.max_fraction",
            Kind::Fraction,
            Some(Fixed::Number(0.8)),
            "The share of the model's context window the history may fill.",
            |c, v| c.context.max_fraction = number(v),
        )
    },
    // [tools]
    scalar(
        "tools.mode",
        Kind::Choice(|| spellings(ToolsMode::ALL, ToolsMode::as_str)),
        Some(Fixed::Choice("native")),
        "How the model calls tools: native tool calls, Code Mode (one run_code tool) or both.",
        |c, v| c.tools.mode = choice(v, c.tools.mode),
    ),
    Key {
        trust: Trust::Tightens,
        group: Group::Raise,
        ..scalar(
            "tools.code_timeout_s",
            POSITIVE,
            Some(Fixed::Count(60)),
            "A run_code program's wall time, seconds, counting the time its tool calls take.",
            |c, v| c.tools.code_timeout_s = count(v),
        )
    },
    // [verify]
    Key {
        group: Group::Table,
        unset: "no verification",
        ..scalar(
            "verify.command",
            Kind::Text(TextRule::NonEmpty),
            None,
            "The command that checks the agent's work after a turn that changed files.",
            |c, v| c.verify.command = text(v),
        )
    },
    Key {
        group: Group::Table,
        ..scalar(
            "verify.max_rounds",
            POSITIVE,
            Some(Fixed::Count(3)),
            "Rounds of fixing after a failed check.",
            |c, v| c.verify.max_rounds = count(v),
        )
    },
    structured(
        "agents",
        "tables by name { description?, tools, system?, model?, max_steps? }",
        Trust::Ignored,
        "Sub-agent profiles (search, code, shell and general are built in).",
    ),
    structured(
        "plugins",
        "none: an error saying where plugins go",
        Trust::Ignored,
        "Not a table: plugins are folders with a plugin.toml (plugins/ beside the user config, .dsh/plugins/ of a trusted project).",
    ),
    structured(
        "skills",
        "none: an error saying where skills go",
        Trust::Ignored,
        "Not a table: skills are folders with a SKILL.md (.dsh/skills/, .claude/skills/, skills/ beside the user config).",
    ),
];
