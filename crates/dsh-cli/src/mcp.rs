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
    /// Approve a server this workspace's project names (.mcp.json or .dsh/config.toml), so it
    /// starts: the approval covers exactly its command line (or URL and headers) and the
    /// variables it reads, recorded in the user configuration; a change asks again.
    Approve {
        /// The server's name.
        name: String,
    },
    /// Remove a server from the user configuration.
    Remove {
        /// The server's name.
        name: String,
    },
    /// Serve dsh's file, search and shell tools to an MCP client over stdio, each call judged
    /// by this workspace's configuration with nobody to ask (an ask is refused with how to
    /// allow it; --yolo approves), and journaled as a session naming the client.
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
        McpCommand::Approve { name } => approve(common, name),
        McpCommand::Remove { name } => remove(common, name),
        McpCommand::Serve => unreachable_serve(),
    }
}

/// `dsh mcp serve` runs on the async runtime (main.rs sends it to [`crate::mcp_serve`]).
fn unreachable_serve() -> Result<u8, Failure> {
    Err(Failure::harness(anyhow!(
        "dsh mcp serve needs the async runtime"
    )))
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

/// What an approval covers, in words: the command line or URL, its directory, the values of
/// its environment (or the variables they read) and the variables its headers read.
fn described(launch: &dsh_config::McpLaunch) -> String {
    match launch {
        dsh_config::McpLaunch::Stdio { env, cwd, .. } => {
            let mut line = launch.command_line();
            if let Some(cwd) = cwd {
                line.push_str(&format!(" (in {cwd})"));
            }
            if !env.is_empty() {
                let vars: Vec<String> = env
                    .iter()
                    .map(|(k, v)| {
                        let read = dsh_config::variables(v);
                        if read.is_empty() {
                            // The value itself: a repository's `LD_PRELOAD=./x.so` or
                            // `NODE_OPTIONS=--require ./x.js` is code the approval covers.
                            format!("{k}={v}")
                        } else {
                            format!("{k} (from ${})", read.join(", $"))
                        }
                    })
                    .collect();
                line.push_str(&format!("; environment {}", vars.join(", ")));
            }
            line
        }
        dsh_config::McpLaunch::Http {
            url,
            headers_env,
            headers,
        } => {
            let mut line = url.clone();
            let mut sent: Vec<String> = headers_env
                .iter()
                .map(|(h, v)| format!("{h} (from ${v})"))
                .collect();
            sent.extend(headers.iter().map(|(h, v)| {
                let read = dsh_config::variables(v);
                if read.is_empty() {
                    h.clone()
                } else {
                    format!("{h} (from ${})", read.join(", $"))
                }
            }));
            if !sent.is_empty() {
                line.push_str(&format!("; headers {}", sent.join(", ")));
            }
            line
        }
    }
}

fn approve(common: &Common, name: &str) -> Result<u8, Failure> {
    let loaded = settings::load_config(common)?;
    let Some(server) = loaded.config.mcp.servers.get(name) else {
        return Err(Failure::usage(anyhow!(
            "no MCP server named {name} is configured for {} (`dsh mcp list` shows them)",
            loaded.workspace.display()
        )));
    };
    if server.origin.layer != dsh_config::Layer::Project {
        return Err(Failure::usage(anyhow!(
            "{name} is not a project's server ({}): only servers a repository names need approval",
            server.origin.location()
        )));
    }
    let Some(user) = &loaded.user_config else {
        return Err(Failure::usage(anyhow!(
            "cannot find the user configuration file; pass --config FILE or set DSH_CONFIG_HOME"
        )));
    };
    let what = described(&server.value.launch);
    let digest = dsh_config::approval_digest(&loaded.workspace, name, &server.value);
    let note = format!(
        "MCP server {name} of {}: {what}",
        loaded.workspace.display()
    );
    let file = dsh_config::record_approval(user, &digest, &note).map_err(Failure::usage)?;
    println!(
        "approved MCP server {name} ({}): {}
recorded in {}; if the project changes it, it waits for approval again",
        server.origin.location(),
        crate::repl::visible::visible(&what, false),
        file.display()
    );
    Ok(exit::OK)
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
        let approval = (s.origin.layer == dsh_config::Layer::Project).then(|| {
            let digest = dsh_config::approval_digest(&loaded.workspace, name, &s.value);
            if loaded.approved.contains(&digest) {
                "approved".to_owned()
            } else {
                format!("needs approval: dsh mcp approve {name}")
            }
        });
        let target = s.value.launch.command_line();
        // A project's server is listed with all its approval would cover, so a person sees
        // it before `dsh mcp approve` (the environment's values, the directory, what its
        // headers read), not only the command line.
        let covers = approval.is_some().then(|| described(&s.value.launch));
        let line = if common.json {
            serde_json::json!({
                "name": name,
                "transport": match s.value.launch {
                    dsh_config::McpLaunch::Stdio { .. } => "stdio",
                    dsh_config::McpLaunch::Http { .. } => "http",
                },
                "target": target,
                "from": s.origin.location(),
                "approval": approval,
                "covers": covers,
            })
            .to_string()
        } else {
            format!(
                "{name}  {}  ({}){}",
                crate::repl::visible::visible(covers.as_ref().unwrap_or(&target), false),
                s.origin.location(),
                approval.map(|a| format!("  [{a}]")).unwrap_or_default()
            )
        };
        lines.push(line);
    }
    crate::print_lines(lines)?;
    Ok(exit::OK)
}
