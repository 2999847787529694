//! `dsh plugins list|approve`: the plugins found for this workspace — the user's (`plugins/`
//! beside the user config) and a trusted project's (`.dsh/plugins/`) — and the approval a
//! project's plugin needs before its tools are offered (DESIGN §5). The approval covers the
//! content of every file in the plugin's folder: a changed file asks again.

use anyhow::anyhow;
use dsh_config::{Loaded, PluginSource};

use crate::{Common, Failure, exit, settings};

/// `dsh plugins …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum PluginsCommand {
    /// List every plugin for this workspace with its tools, where it is and, for a project's
    /// plugin, whether it is approved.
    List,
    /// Approve project plugins so their tools are offered (by name, or --all): recorded in
    /// the user configuration; a changed file in the plugin's folder asks again.
    Approve {
        /// The plugins' names in `dsh plugins list`.
        names: Vec<String>,
        /// Every project plugin waiting for approval.
        #[arg(long, conflicts_with = "names")]
        all: bool,
    },
}

pub(crate) fn run(common: &Common, command: &PluginsCommand) -> Result<u8, Failure> {
    match command {
        PluginsCommand::List => list(common),
        PluginsCommand::Approve { names, all } => approve(common, names, *all),
    }
}

/// A plugin as `dsh plugins list` shows it.
struct Shown {
    plugin: Option<dsh_config::Plugin>,
    name: String,
    source: PluginSource,
    file: std::path::PathBuf,
    /// `None`: not a project's plugin (needs no approval) or refused.
    approved: Option<bool>,
    digest: String,
    refused: Option<String>,
}

fn shown(loaded: &Loaded) -> Vec<Shown> {
    let found = dsh_config::find_plugins(
        &loaded.workspace,
        loaded.trusted,
        loaded.user_config.as_deref(),
    );
    for n in &found.notices {
        eprintln!("dsh: {n}");
    }
    let mut out = Vec::new();
    for p in found.plugins {
        let digest = dsh_config::plugin_approval_digest(&loaded.workspace, &p);
        out.push(Shown {
            name: p.name.clone(),
            source: p.source,
            file: p.file(),
            approved: (p.source == PluginSource::Project)
                .then(|| loaded.approved.contains(&digest)),
            digest,
            refused: None,
            plugin: Some(p),
        });
    }
    for r in found.refused {
        out.push(Shown {
            plugin: None,
            name: r.name,
            source: r.source,
            file: r.dir.join(dsh_config::PLUGIN_TOML),
            approved: None,
            digest: String::new(),
            refused: Some(r.error.to_string()),
        });
    }
    out
}

fn list(common: &Common) -> Result<u8, Failure> {
    let loaded = settings::load_config(common)?;
    let plugins = shown(&loaded);
    if plugins.is_empty() && !common.json {
        println!(
            "no plugins: a plugin is a folder with a plugin.toml, under plugins/ beside your user config or .dsh/plugins/ of a trusted project"
        );
        return Ok(exit::OK);
    }
    let mut lines = Vec::new();
    for s in &plugins {
        let tools: Vec<&str> = s
            .plugin
            .iter()
            .flat_map(|p| p.tools.iter().map(|t| t.name.as_str()))
            .collect();
        let state = match (&s.refused, s.approved) {
            (Some(why), _) => format!("refused: {why}"),
            (None, Some(false)) => format!("needs approval: dsh plugins approve {}", s.name),
            (None, Some(true)) => "approved".to_owned(),
            (None, None) => "loaded".to_owned(),
        };
        lines.push(if common.json {
            serde_json::json!({
                "name": s.name,
                "source": s.source.as_str(),
                "file": s.file.display().to_string(),
                "tools": tools,
                "state": state,
            })
            .to_string()
        } else {
            format!(
                "{} ({}, {}): {}  [{}]",
                crate::repl::visible::visible(&s.name, false),
                s.source.as_str(),
                s.file.display(),
                if tools.is_empty() {
                    "no tools".to_owned()
                } else {
                    tools.join(", ")
                },
                crate::repl::visible::visible(&state, false)
            )
        });
    }
    crate::print_lines(lines)?;
    Ok(exit::OK)
}

fn approve(common: &Common, names: &[String], all: bool) -> Result<u8, Failure> {
    let loaded = settings::load_config(common)?;
    let plugins = shown(&loaded);
    let chosen: Vec<&Shown> = if all {
        plugins
            .iter()
            .filter(|s| s.approved == Some(false))
            .collect()
    } else if names.is_empty() {
        return Err(Failure::usage(anyhow!(
            "name the plugins to approve (as `dsh plugins list` shows them), or pass --all"
        )));
    } else {
        let mut chosen = Vec::new();
        for n in names {
            let Some(s) = plugins.iter().find(|s| &s.name == n) else {
                return Err(Failure::usage(anyhow!(
                    "there is no plugin `{n}` here (`dsh plugins list` shows them)"
                )));
            };
            if let Some(why) = &s.refused {
                return Err(Failure::usage(anyhow!(
                    "plugin `{n}` cannot be used: {why}"
                )));
            }
            if s.approved.is_none() {
                return Err(Failure::usage(anyhow!(
                    "plugin `{n}` is not a project's ({}): only plugins a repository names need approval",
                    s.file.display()
                )));
            }
            chosen.push(s);
        }
        chosen
    };
    if chosen.is_empty() {
        println!("no project plugin waits for approval");
        return Ok(exit::OK);
    }
    let Some(user) = &loaded.user_config else {
        return Err(Failure::usage(anyhow!(
            "cannot find the user configuration file; pass --config FILE or set DSH_CONFIG_HOME"
        )));
    };
    for s in chosen {
        let commands: Vec<String> = s
            .plugin
            .iter()
            .flat_map(|p| p.tools.iter().map(|t| format!("{}: {}", t.name, t.command)))
            .collect();
        let note = format!(
            "plugin {} of {}: {}",
            s.name,
            loaded.workspace.display(),
            commands.join("; ")
        );
        let file = dsh_config::record_approval(user, &s.digest, &note).map_err(Failure::usage)?;
        println!(
            "approved plugin {} ({}): {}\nrecorded in {}; if a file in its folder changes, it waits for approval again",
            s.name,
            s.file.display(),
            crate::repl::visible::visible(&commands.join("; "), false),
            file.display()
        );
    }
    Ok(exit::OK)
}
