//! From configuration and flags to session settings (configuration in two stages: dsh-config
//! parses plain data, this fills the assembly's settings).

use std::time::Duration;

use anyhow::anyhow;
use dsh_agent::{Approval, RuleSpec, SessionSettings};
use dsh_config::{Fsync, LoadOptions, Loaded, SandboxMode};
use dsh_policy::RuleKind;
use dsh_tools::{NetworkGrant, ShellSettings};

use crate::{Common, Failure, exit};

/// Loads the layered configuration for the workspace in `common`, printing its notices.
pub(crate) fn load_config(common: &Common) -> Result<Loaded, Failure> {
    load_config_with(common, dsh_config::Overrides::default())
}

/// [`load_config`] with more flags (`dsh exec`'s model flags).
pub(crate) fn load_config_with(
    common: &Common,
    overrides: dsh_config::Overrides,
) -> Result<Loaded, Failure> {
    let mut opts = LoadOptions::new(&common.workspace);
    opts.user_config.clone_from(&common.config);
    opts.overrides = overrides;
    opts.overrides.sandbox = common.sandbox;
    opts.env = dsh_config::process_env();
    let loaded = dsh_config::load(&opts).map_err(Failure::usage)?;
    for notice in &loaded.notices {
        eprintln!("dsh: {notice}");
    }
    Ok(loaded)
}

/// The session settings for `common`.
pub(crate) fn load(common: &Common) -> Result<SessionSettings, Failure> {
    let loaded = load_config(common)?;
    session_settings(common, &loaded)
}

/// The session settings for a loaded configuration and the common flags.
pub(crate) fn session_settings(
    common: &Common,
    loaded: &Loaded,
) -> Result<SessionSettings, Failure> {
    let env = dsh_config::process_env();
    let home = dsh_config::dsh_home(&env).ok_or_else(|| {
        Failure::usage(anyhow!(
            "cannot find a home directory for dsh's state; set DSH_HOME"
        ))
    })?;
    let c = &loaded.config;
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
    s.shell = shell_settings(c);
    // dsh-config has already applied the lists' layers (an untrusted project can only move
    // a command from safe to confirm).
    s.shell_lists = dsh_policy::ShellLists {
        safe: c.shell.safe.clone(),
        confirm: c.shell.confirm.clone(),
        origin: "[shell] safe/confirm lists".to_owned(),
    };
    if common.yolo {
        s.approval = Approval::Yolo;
    }
    Ok(s)
}

/// `[shell]` and `[sandbox]` (the `--sandbox` flag is already merged into `sandbox.mode`).
fn shell_settings(c: &dsh_config::Config) -> ShellSettings {
    for name in &c.shell.pass_env {
        if let Some(why) = dsh_tools::shell::env::refusal(name) {
            eprintln!("dsh: shell.pass_env: {name} is never passed to commands ({why})");
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

/// `dsh trust`: records the workspace as trusted in the user configuration.
pub(crate) fn trust(common: &Common) -> Result<u8, Failure> {
    let loaded = load_config(common)?;
    let Some(user) = &loaded.user_config else {
        return Err(Failure::usage(anyhow!(
            "cannot find the user configuration file; pass --config FILE or set DSH_CONFIG_HOME"
        )));
    };
    dsh_config::record_trust(user, &loaded.workspace).map_err(Failure::usage)?;
    println!(
        "trusted {} (recorded in {}); its .dsh/config.toml now applies in full",
        loaded.workspace.display(),
        user.display()
    );
    Ok(exit::OK)
}
