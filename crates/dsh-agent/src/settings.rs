//! From configuration to session settings: the only reader of `dsh_config::Loaded`
//! (configuration in two stages, STYLE 9: dsh-config parses plain data, this fills the
//! assembly's settings; `assemble.rs` then compiles matchers and builds the pipeline).

use std::collections::BTreeMap;
use std::time::Duration;

use dsh_config::{Fsync, Loaded, SandboxMode};
use dsh_policy::RuleKind;
use dsh_tools::{NetworkGrant, ShellSettings};

use crate::{Approval, LoopConfig, RuleSpec, SessionSettings};

/// Why configuration could not be turned into settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    #[error("cannot find a home directory for dsh's state; set DSH_HOME")]
    NoHome,
}

/// Session settings from configuration, with one-line notices for the user.
#[derive(Debug)]
pub struct Configured {
    pub settings: SessionSettings,
    /// E.g. a `shell.pass_env` name that is never passed.
    pub notices: Vec<String>,
}

impl SessionSettings {
    /// The settings for a loaded configuration. `env` is the process environment (for
    /// `DSH_HOME`); `yolo` mounts the approver that approves every `ask` (`--yolo`).
    pub fn from_loaded(
        loaded: &Loaded,
        env: &BTreeMap<String, String>,
        yolo: bool,
    ) -> Result<Configured, SettingsError> {
        let home = dsh_config::dsh_home(env).ok_or(SettingsError::NoHome)?;
        let c = &loaded.config;
        let mut notices = Vec::new();
        let mut s = SessionSettings::new(&loaded.workspace, home);
        let rules = [
            (RuleKind::Allow, &c.permissions.allow),
            (RuleKind::Ask, &c.permissions.ask),
            (RuleKind::Deny, &c.permissions.deny),
        ];
        for (kind, list) in rules {
            for r in list {
                s.rules.push(RuleSpec {
                    kind,
                    tool: r.tool.clone(),
                    specifier: r.specifier.clone(),
                    origin: r.origin.to_string(),
                    at: r.origin.location(),
                    tighten_only: r.origin.tighten_only(),
                });
            }
        }
        s.protected = c.guards.protected.iter().map(|p| p.value.clone()).collect();
        s.limits.max_read_bytes = to_usize(c.limits.max_read_bytes);
        s.limits.max_results = to_usize(c.limits.max_results);
        s.max_parallel = to_usize(c.limits.max_parallel);
        s.spill_chars = to_usize(c.limits.spill_chars);
        s.fsync_every_record = c.journal.fsync == Fsync::Record;
        s.config_digest.clone_from(&loaded.digest);
        s.shell = shell_settings(c, &mut notices);
        // dsh-config has already applied the lists' layers (an untrusted project can only move
        // a command from safe to confirm).
        s.shell_lists = dsh_policy::ShellLists {
            safe: c.shell.safe.clone(),
            confirm: c.shell.confirm.clone(),
            origin: "[shell] safe/confirm lists".to_owned(),
        };
        if yolo {
            s.approval = Approval::Yolo;
        }
        Ok(Configured {
            settings: s,
            notices,
        })
    }
}

impl LoopConfig {
    /// The loop's stop lines from `[limits]`.
    pub fn from_loaded(loaded: &Loaded) -> LoopConfig {
        let limits = &loaded.config.limits;
        LoopConfig {
            max_steps: u32::try_from(limits.max_steps).unwrap_or(u32::MAX),
            max_tokens: limits.max_tokens,
            ..LoopConfig::default()
        }
    }
}

/// `[shell]` and `[sandbox]` (the `--sandbox` flag is already merged into `sandbox.mode`).
fn shell_settings(c: &dsh_config::Config, notices: &mut Vec<String>) -> ShellSettings {
    for name in &c.shell.pass_env {
        if let Some(why) = dsh_tools::shell::env::refusal(name) {
            notices.push(format!(
                "shell.pass_env: {name} is never passed to commands ({why})"
            ));
        }
    }
    let timeout = Duration::from_secs(c.shell.timeout_s.max(1));
    ShellSettings {
        timeout,
        max_timeout: timeout.max(Duration::from_secs(600)),
        max_output_chars: to_usize(c.shell.max_output_chars),
        pass_env: c.shell.pass_env.clone(),
        sandbox: match c.sandbox.mode {
            SandboxMode::Off => dsh_tools::sandbox::SandboxMode::Off,
            SandboxMode::Auto => dsh_tools::sandbox::SandboxMode::Auto,
            SandboxMode::Required => dsh_tools::sandbox::SandboxMode::Required,
        },
        // The helper is this very binary (`dsh sandbox-exec`).
        helper: std::env::current_exe().ok(),
        // Only configuration can lift the network ban headless: `--yolo` never does, and
        // an untrusted project's `allow_network = true` was already dropped by dsh-config.
        network: if c.sandbox.allow_network {
            NetworkGrant::UserConfig
        } else {
            NetworkGrant::Refused
        },
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
