//! Which plugins a session loads (DESIGN §5): the user's own (`plugins/` beside the user
//! config) and a trusted project's (`.dsh/plugins/`), the latter only once a person approved
//! it (`dsh plugins approve NAME`, a digest of its folder recorded in the user config; a
//! changed file asks again). An untrusted project's plugins are ignored with the notice; a
//! project plugin not approved is skipped with a notice saying how to approve it (headless
//! runs too: nothing a repository names runs unapproved); a `plugin.toml` that cannot be
//! used is refused with a notice naming file:line:key. `/plugins` shows each one's state.

use std::path::PathBuf;

use dsh_config::{Loaded, PluginSource};

/// A plugin as `/plugins` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginStatus {
    pub name: String,
    pub source: PluginSource,
    pub dir: PathBuf,
    /// Its tools' names (none when refused).
    pub tools: Vec<String>,
    pub state: PluginState,
}

/// Whether a plugin's tools are offered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginState {
    Loaded,
    /// A project's plugin nobody approved (or whose files changed since): how to approve it.
    NeedsApproval(String),
    /// Its `plugin.toml` cannot be used: the error (file:line: key: why).
    Refused(String),
}

impl PluginState {
    pub fn describe(&self) -> String {
        match self {
            PluginState::Loaded => "loaded".to_owned(),
            PluginState::NeedsApproval(how) => format!("not loaded: {how}"),
            PluginState::Refused(why) => format!("refused: {why}"),
        }
    }
}

/// The plugins of `loaded`'s session to load, and every plugin's state.
pub(crate) fn plugins(
    loaded: &Loaded,
    notices: &mut Vec<String>,
) -> (Vec<dsh_config::Plugin>, Vec<PluginStatus>) {
    let found = dsh_config::find_plugins(
        &loaded.workspace,
        loaded.trusted,
        loaded.user_config.as_deref(),
    );
    notices.extend(found.notices);
    let mut load = Vec::new();
    let mut status = Vec::new();
    for r in found.refused {
        notices.push(format!("plugin `{}` refused: {}", r.name, r.error));
        status.push(PluginStatus {
            name: r.name,
            source: r.source,
            dir: r.dir,
            tools: Vec::new(),
            state: PluginState::Refused(r.error.to_string()),
        });
    }
    for p in found.plugins {
        let tools = p.tools.iter().map(|t| t.name.clone()).collect();
        let state = if p.source == PluginSource::Project
            && !loaded
                .approved
                .contains(&dsh_config::plugin_approval_digest(&loaded.workspace, &p))
        {
            let how = format!(
                "named by the project ({}): a plugin a repository names runs only once you approve it; run `dsh plugins approve {}` in this workspace",
                p.file().display(),
                p.name
            );
            notices.push(format!("plugin `{}` skipped: {how}", p.name));
            PluginState::NeedsApproval(how)
        } else {
            PluginState::Loaded
        };
        status.push(PluginStatus {
            name: p.name.clone(),
            source: p.source,
            dir: p.dir.clone(),
            tools,
            state: state.clone(),
        });
        if state == PluginState::Loaded {
            load.push(p);
        }
    }
    (load, status)
}

/// The tool declarations of `plugin`, as dsh-tools takes them.
pub(crate) fn tool_specs(plugin: &dsh_config::Plugin) -> Vec<dsh_tools::PluginToolSpec> {
    plugin
        .tools
        .iter()
        .map(|t| dsh_tools::PluginToolSpec {
            plugin: plugin.name.clone(),
            dir: plugin.dir.clone(),
            name: t.name.clone(),
            description: t.description.clone(),
            command: t.command.clone(),
            input_schema: t.input_schema.clone(),
            output_schema: t.output_schema.clone(),
            read_only: t.read_only,
            parallel_safe: t.parallel_safe,
            paths_from: t.paths_from.clone(),
            timeout: t.timeout_s.map(std::time::Duration::from_secs),
        })
        .collect()
}
