//! From configuration and flags to session settings (configuration in two stages: dsh-config
//! parses plain data, this fills the assembly's settings).

use anyhow::anyhow;
use dsh_agent::{Approval, RuleSpec, SessionSettings};
use dsh_config::{Fsync, LoadOptions, Loaded};
use dsh_policy::RuleKind;

use crate::{Common, Failure, exit};

/// Loads the layered configuration for the workspace in `common`, printing its notices.
pub(crate) fn load_config(common: &Common) -> Result<Loaded, Failure> {
    let mut opts = LoadOptions::new(&common.workspace);
    opts.user_config.clone_from(&common.config);
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
            let text = match &r.specifier {
                Some(spec) => format!("{}({spec})", r.tool),
                None => r.tool.clone(),
            };
            s.rules.push(RuleSpec {
                kind,
                text,
                origin: r.origin.to_string(),
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
    if common.yolo {
        s.approval = Approval::Yolo;
    }
    Ok(s)
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
