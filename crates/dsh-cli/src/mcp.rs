//! `dsh mcp add|list|remove|serve`: the MCP servers of the user configuration (DESIGN §4),
//! edited as "always allow" edits it (comments kept), and dsh as an MCP server.

use std::collections::BTreeMap;

use anyhow::anyhow;

use crate::{Common, Failure, exit, settings};

/// `dsh mcp …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum McpCommand {
    /// Add a server to the user configuration: `dsh mcp add NAME -- CMD ARGS…` (stdio) or
    /// `dsh mcp add NAME --url URL` (streamable HTTP). Its tools ask before they run until a
    /// rule allows them (`allow = ["mcp__NAME__*"]`).
    Add {
        /// Its name: letters, digits, `_` and `-`, without `__` (its tools are mcp__NAME__TOOL).
        name: String,
        /// A streamable-HTTP server's URL (instead of a command).
        #[arg(long, value_name = "URL", conflicts_with = "command")]
        url: Option<String>,
        /// An environment variable for a stdio server: KEY=VALUE (repeatable).
        #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// A header for an HTTP server whose value is read from an environment variable
        /// when a session starts: NAME=VARIABLE (repeatable), e.g. Authorization=MY_TOKEN.
        #[arg(long = "header-env", value_name = "NAME=VARIABLE")]
        header_env: Vec<String>,
        /// The server's command and arguments, after `--`.
        #[arg(last = true, value_name = "CMD ARGS")]
        command: Vec<String>,
    },
    /// List the configured servers and where each is configured.
    List,
    /// Remove a server from the user configuration.
    Remove {
        /// The server's name.
        name: String,
    },
    /// Serve dsh's gated tools to an MCP client over stdio.
    Serve,
}

pub(crate) fn run(common: &Common, command: &McpCommand) -> Result<u8, Failure> {
    match command {
        McpCommand::Add {
            name,
            url,
            env,
            header_env,
            command,
        } => add(common, name, url.as_deref(), env, header_env, command),
        McpCommand::List => list(common),
        McpCommand::Remove { name } => remove(common, name),
        McpCommand::Serve => Err(Failure::usage(anyhow!(
            "dsh mcp serve is not implemented yet (the client side is: [mcp.servers.NAME])"
        ))),
    }
}

/// The user configuration file, as `dsh trust` finds it.
fn user_file(common: &Common) -> Result<std::path::PathBuf, Failure> {
    let loaded = settings::load_config(common)?;
    loaded.user_config.ok_or_else(|| {
        Failure::usage(anyhow!(
            "cannot find the user configuration file; pass --config FILE or set DSH_CONFIG_HOME"
        ))
    })
}

fn pairs(given: &[String], flag: &str) -> Result<BTreeMap<String, String>, Failure> {
    let mut out = BTreeMap::new();
    for g in given {
        let Some((k, v)) = g.split_once('=') else {
            return Err(Failure::usage(anyhow!("{flag} {g:?}: write KEY=VALUE")));
        };
        out.insert(k.to_owned(), v.to_owned());
    }
    Ok(out)
}

fn add(
    common: &Common,
    name: &str,
    url: Option<&str>,
    env: &[String],
    header_env: &[String],
    command: &[String],
) -> Result<u8, Failure> {
    let server = match (url, command.split_first()) {
        (Some(url), None) => {
            if !env.is_empty() {
                return Err(Failure::usage(anyhow!(
                    "--env is for a stdio server (a command); an HTTP server's headers come from --header-env"
                )));
            }
            dsh_config::NewMcpServer::Http {
                url: url.to_owned(),
                headers_env: pairs(header_env, "--header-env")?,
            }
        }
        (None, Some((program, args))) => {
            if !header_env.is_empty() {
                return Err(Failure::usage(anyhow!(
                    "--header-env is for an HTTP server (--url)"
                )));
            }
            dsh_config::NewMcpServer::Stdio {
                command: program.clone(),
                args: args.to_vec(),
                env: pairs(env, "--env")?,
            }
        }
        _ => {
            return Err(Failure::usage(anyhow!(
                "give the server's command after `--` (dsh mcp add NAME -- CMD ARGS…) or its --url"
            )));
        }
    };
    let file = user_file(common)?;
    let (file, line) = dsh_config::add_mcp_server(&file, name, &server).map_err(Failure::usage)?;
    println!(
        "added MCP server {name} to {}:{line}; its tools ask before they run unless a rule allows them (allow = [\"mcp__{name}__*\"])",
        file.display()
    );
    Ok(exit::OK)
}

fn remove(common: &Common, name: &str) -> Result<u8, Failure> {
    let file = user_file(common)?;
    let (file, removed) = dsh_config::remove_mcp_server(&file, name).map_err(Failure::usage)?;
    if removed {
        println!("removed MCP server {name} from {}", file.display());
        Ok(exit::OK)
    } else {
        Err(Failure::usage(anyhow!(
            "{} has no MCP server named {name} (`dsh mcp list` shows them and where each is configured)",
            file.display()
        )))
    }
}

fn list(common: &Common) -> Result<u8, Failure> {
    let loaded = settings::load_config(common)?;
    let servers = &loaded.config.mcp.servers;
    if servers.is_empty() {
        println!("no MCP servers configured (dsh mcp add NAME -- CMD ARGS…)");
        return Ok(exit::OK);
    }
    let mut lines = Vec::new();
    for (name, s) in servers {
        let target = match &s.value.launch {
            dsh_config::McpLaunch::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            dsh_config::McpLaunch::Http { url, .. } => url.clone(),
        };
        let line = if common.json {
            serde_json::json!({
                "name": name,
                "transport": match s.value.launch {
                    dsh_config::McpLaunch::Stdio { .. } => "stdio",
                    dsh_config::McpLaunch::Http { .. } => "http",
                },
                "target": target,
                "from": s.origin.location(),
            })
            .to_string()
        } else {
            format!(
                "{name}  {}  ({})",
                crate::repl::visible::visible(&target, false),
                s.origin.location()
            )
        };
        lines.push(line);
    }
    crate::print_lines(lines)?;
    Ok(exit::OK)
}
