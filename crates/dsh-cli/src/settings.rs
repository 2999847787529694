//! From flags to configuration (dsh-config loads it) and to session settings (dsh-agent
//! translates it); this file only fills the options and prints the notices.

use anyhow::anyhow;
use dsh_agent::SessionSettings;
use dsh_config::{LoadOptions, Loaded};

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
    let opts = load_options(common, overrides)?;
    let loaded = dsh_config::load(&opts).map_err(Failure::usage)?;
    for notice in &loaded.notices {
        eprintln!("dsh: {notice}");
    }
    Ok(loaded)
}

/// What [`load_config_with`] loads: the common flags over `overrides` (a usage error when
/// they contradict each other).
pub(crate) fn load_options(
    common: &Common,
    overrides: dsh_config::Overrides,
) -> Result<LoadOptions, Failure> {
    let mut opts = LoadOptions::new(&common.workspace);
    opts.user_config.clone_from(&common.config);
    opts.overrides = overrides;
    opts.overrides.sandbox = common.sandbox;
    opts.overrides.tools_mode = common.tools_mode;
    opts.overrides.mode = match (common.yolo, common.mode) {
        (true, Some(m)) if m != dsh_config::PermissionMode::Yolo => {
            return Err(Failure::usage(anyhow::anyhow!(
                "--yolo is --mode yolo; it cannot be given with --mode {m}"
            )));
        }
        (true, _) => Some(dsh_config::PermissionMode::Yolo),
        (false, m) => m,
    };
    opts.env = dsh_config::process_env();
    Ok(opts)
}

/// The session settings for `common`.
pub(crate) fn load(common: &Common) -> Result<SessionSettings, Failure> {
    let loaded = load_config(common)?;
    session_settings(common, &loaded)
}

/// The session settings for a loaded configuration and the common flags (dsh-agent
/// translates; this prints its notices).
pub(crate) fn session_settings(
    common: &Common,
    loaded: &Loaded,
) -> Result<SessionSettings, Failure> {
    let env = dsh_config::process_env();
    let configured =
        SessionSettings::from_loaded(loaded, &env, common.yolo).map_err(Failure::usage)?;
    for notice in &configured.notices {
        eprintln!("dsh: {notice}");
    }
    Ok(configured.settings)
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
