//! `dsh hooks list|approve`: the hooks configured for this workspace — the user's, the
//! project's `.dsh/config.toml` and `.claude/settings.json` ones — and the approval a
//! project's hook needs before it runs (DESIGN §5). The approval covers its event, matcher,
//! command line, variables and the content of the workspace files its command names.

use anyhow::anyhow;

use crate::{Common, Failure, exit, settings};

/// `dsh hooks …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum HooksCommand {
    /// List every hook for this workspace, numbered, with where it is configured and, for a
    /// project's hook, whether it is approved.
    List,
    /// Approve project hooks so they run (by their numbers in `dsh hooks list`, or --all):
    /// recorded in the user configuration; a changed command or script asks again.
    Approve {
        /// The hooks' numbers in `dsh hooks list`.
        numbers: Vec<usize>,
        /// Every project hook waiting for approval.
        #[arg(long, conflicts_with = "numbers")]
        all: bool,
    },
}

pub(crate) fn run(common: &Common, command: &HooksCommand) -> Result<u8, Failure> {
    match command {
        HooksCommand::List => list(common),
        HooksCommand::Approve { numbers, all } => approve(common, numbers, *all),
    }
}

/// A hook as `dsh hooks list` shows it.
pub(crate) struct Shown<'a> {
    pub number: usize,
    pub hook: &'a dsh_config::Sourced<dsh_config::Hook>,
    /// `None`: not a project's hook (needs no approval).
    pub approved: Option<bool>,
    digest: String,
}

/// Every hook of `loaded`, numbered as `dsh hooks list` and `approve` number them.
pub(crate) fn shown(loaded: &dsh_config::Loaded) -> Vec<Shown<'_>> {
    loaded
        .config
        .hooks
        .entries
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let digest = dsh_config::hook_approval_digest(&loaded.workspace, &h.value);
            Shown {
                number: i + 1,
                hook: h,
                approved: (h.origin.layer == dsh_config::Layer::Project)
                    .then(|| loaded.approved.contains(&digest)),
                digest,
            }
        })
        .collect()
}

fn list(common: &Common) -> Result<u8, Failure> {
    let loaded = settings::load_config(common)?;
    let hooks = shown(&loaded);
    if hooks.is_empty() && !common.json {
        println!(
            "no hooks configured ([[hooks.PreToolUse]] in a config file, or .claude/settings.json)"
        );
        return Ok(exit::OK);
    }
    let mut lines = Vec::new();
    for s in &hooks {
        let h = &s.hook.value;
        let approval = s.approved.map(|a| {
            if a {
                "approved".to_owned()
            } else {
                format!("needs approval: dsh hooks approve {}", s.number)
            }
        });
        lines.push(if common.json {
            serde_json::json!({
                "number": s.number,
                "event": h.event.as_str(),
                "matcher": h.matcher,
                "command": h.command,
                "env": h.env,
                "timeout_ms": h.timeout_ms,
                "on_error": h.on_error.as_str(),
                "from": s.hook.origin.location(),
                "approval": approval,
            })
            .to_string()
        } else {
            format!(
                "{}. {} {}{}{}  ({}){}",
                s.number,
                h.event,
                h.matcher
                    .as_deref()
                    .map(|m| format!("[{}] ", crate::repl::visible::visible(m, false)))
                    .unwrap_or_default(),
                crate::repl::visible::visible(&h.command, false),
                with_env(h),
                s.hook.origin.location(),
                approval.map(|a| format!("  [{a}]")).unwrap_or_default()
            )
        });
    }
    crate::print_lines(lines)?;
    Ok(exit::OK)
}

fn approve(common: &Common, numbers: &[usize], all: bool) -> Result<u8, Failure> {
    let loaded = settings::load_config(common)?;
    let hooks = shown(&loaded);
    let chosen: Vec<&Shown<'_>> = if all {
        hooks.iter().filter(|s| s.approved == Some(false)).collect()
    } else if numbers.is_empty() {
        return Err(Failure::usage(anyhow!(
            "name the hooks to approve by their numbers in `dsh hooks list`, or pass --all"
        )));
    } else {
        let mut chosen = Vec::new();
        for n in numbers {
            let Some(s) = hooks.iter().find(|s| s.number == *n) else {
                return Err(Failure::usage(anyhow!(
                    "there is no hook {n} ({} configured; `dsh hooks list` shows them)",
                    hooks.len()
                )));
            };
            if s.approved.is_none() {
                return Err(Failure::usage(anyhow!(
                    "hook {n} is not a project's ({}): only hooks a repository names need approval",
                    s.hook.origin.location()
                )));
            }
            chosen.push(s);
        }
        chosen
    };
    if chosen.is_empty() {
        println!("no project hook waits for approval");
        return Ok(exit::OK);
    }
    let Some(user) = &loaded.user_config else {
        return Err(Failure::usage(anyhow!(
            "cannot find the user configuration file; pass --config FILE or set DSH_CONFIG_HOME"
        )));
    };
    for s in chosen {
        let h = &s.hook.value;
        let note = format!(
            "hook {} of {}: {}",
            h.event,
            loaded.workspace.display(),
            h.command
        );
        let file = dsh_config::record_approval(user, &s.digest, &note).map_err(Failure::usage)?;
        println!(
            "approved hook {} ({} {}): {}{}\nrecorded in {}; if the project changes it, it waits for approval again",
            s.number,
            h.event,
            s.hook.origin.location(),
            crate::repl::visible::visible(&h.command, false),
            with_env(h),
            file.display()
        );
    }
    Ok(exit::OK)
}

/// The hook's own variables as a person approves them (they change what its command runs:
/// `PATH`, `LD_PRELOAD`, …): ` with NAME=value, …`, or nothing.
fn with_env(h: &dsh_config::Hook) -> String {
    if h.env.is_empty() {
        return String::new();
    }
    let vars: Vec<String> = h
        .env
        .iter()
        .map(|(k, v)| crate::repl::visible::visible(&format!("{k}={v}"), false).into_owned())
        .collect();
    format!(" with {}", vars.join(", "))
}
