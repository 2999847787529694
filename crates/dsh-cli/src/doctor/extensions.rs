//! The extension checks: each MCP server started as `dsh check` starts them (each within its
//! start-up timeout, its tools counted, then shut down), each hook with its approval (the
//! numbers `dsh hooks list` gives), each plugin with its state.

use dsh_agent::{PluginState, Session, SessionSettings};
use dsh_config::Loaded;
use dsh_mcp::State;

use super::Check;

/// One line per configured MCP server: ready with its tools, failed, or waiting.
pub(super) async fn mcp(loaded: &Loaded, session: &Session) -> Vec<Check> {
    session.wait_for_extensions().await;
    let statuses = session.mcp_status();
    session.close_extensions().await;
    if statuses.is_empty() {
        return vec![Check::ok(
            "mcp",
            "no MCP servers configured (`dsh mcp add NAME -- CMD ARGS…` adds one)",
        )];
    }
    statuses
        .into_iter()
        .map(|s| {
            let subject = format!("mcp {}", s.name);
            let from = loaded
                .config
                .mcp
                .servers
                .get(&s.name)
                .map(|c| format!(", from {}", c.origin.location()))
                .unwrap_or_default();
            let why = s.last_error.unwrap_or_default();
            match s.state {
                State::Ready => Check::ok(
                    subject,
                    format!(
                        "ready, {} ({}{from})",
                        crate::words::plural(s.tools.len(), "tool"),
                        s.launch
                    ),
                ),
                State::Skipped if why.contains("dsh mcp approve") => Check::warn(
                    subject,
                    format!("not started: {why}"),
                    format!("`dsh mcp approve {}` (see `dsh mcp list` first)", s.name),
                ),
                State::Skipped => {
                    let var = why
                        .split_once("the environment variable ")
                        .and_then(|(_, rest)| rest.split_whitespace().next())
                        .unwrap_or("the variable it names");
                    Check::fail(
                        subject,
                        format!("not started: {why}"),
                        format!("set {var} before starting dsh, or change the server's env"),
                    )
                }
                State::Failed => {
                    let log = s
                        .log
                        .map(|l| format!("; its log: {}", l.display()))
                        .unwrap_or_default();
                    Check::fail(
                        subject,
                        format!("failed ({}{from}): {why}", s.launch),
                        format!("correct its command or url (`dsh mcp list` shows it){log}"),
                    )
                }
                State::Starting => Check::warn(
                    subject,
                    format!("still starting after its start-up timeout ({})", s.launch),
                    "raise its startup_timeout_s",
                ),
            }
        })
        .collect()
}

/// One line per hook: the user's run; a project's run once approved.
pub(super) fn hooks(loaded: &Loaded) -> Vec<Check> {
    let shown = crate::hooks::shown(loaded);
    if shown.is_empty() {
        return vec![Check::ok(
            "hooks",
            "none configured ([[hooks.EVENT]] in a config file, or .claude/settings.json)",
        )];
    }
    shown
        .iter()
        .map(|s| {
            let h = &s.hook.value;
            let subject = format!("hook {}", s.number);
            let what = format!("{} {} ({})", h.event, h.command, s.hook.origin.location());
            match s.approved {
                None => Check::ok(subject, format!("{what}: yours, runs")),
                Some(true) => Check::ok(subject, format!("{what}: approved, runs")),
                Some(false) => Check::warn(
                    subject,
                    format!(
                        "{what}: the project's, not approved: it does not run{}",
                        if h.event == dsh_config::HookEvent::PreToolUse {
                            " (the calls it would judge ask)"
                        } else {
                            ""
                        }
                    ),
                    format!(
                        "`dsh hooks approve {}` (see `dsh hooks list` first)",
                        s.number
                    ),
                ),
            }
        })
        .collect()
}

/// One line per plugin: loaded, waiting for approval, or refused.
pub(super) fn plugins(settings: &SessionSettings) -> Vec<Check> {
    if settings.plugin_status.is_empty() {
        return vec![Check::ok(
            "plugins",
            "none (a folder with a plugin.toml under plugins/ beside your config, or a trusted project's .dsh/plugins/)",
        )];
    }
    settings
        .plugin_status
        .iter()
        .map(|p| {
            let subject = format!("plugin {}", p.name);
            match &p.state {
                PluginState::Loaded => Check::ok(
                    subject,
                    format!(
                        "loaded ({}, {})",
                        p.source.as_str(),
                        crate::words::plural(p.tools.len(), "tool")
                    ),
                ),
                PluginState::NeedsApproval(how) => Check::warn(
                    subject,
                    format!("not loaded: {how}"),
                    format!(
                        "`dsh plugins approve {}` (see `dsh plugins list` first)",
                        p.name
                    ),
                ),
                PluginState::Refused(why) => Check::fail(
                    subject,
                    format!("refused: {why}"),
                    format!("correct {}", p.dir.join(dsh_config::PLUGIN_TOML).display()),
                ),
            }
        })
        .collect()
}
