//! `dsh doctor`: whether dsh can work here, one line per check — the configuration, trust, the
//! model endpoint, the sandbox and what `auto` enforces, MCP servers, hooks and plugins — each
//! `ok`, `warn` or `FAIL` with its verdict and, when not ok, the fix. Exit 1 when any check
//! failed, else 0 (warnings alone do not fail it). Every check is bounded in time: the
//! network's at 10 s, MCP servers' at their own start-up timeouts.
//!
//! The checks change nothing: the session is a dry one (journaled in memory); only the MCP
//! servers' logs and private directory are left under `DSH_HOME`, as `dsh check` leaves them.

mod extensions;
mod model;
mod sandbox;

use std::time::Duration;

use dsh_agent::{Session, SessionSettings};
use dsh_config::Loaded;
use serde_json::json;

use crate::repl::style::Style;
use crate::repl::visible::visible;
use crate::start::ModelArgs;
use crate::{Common, Failure, exit, settings, words};

/// How long a network check may take.
pub(super) const NETWORK_TIMEOUT: Duration = Duration::from_secs(10);

/// A check's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Status {
    Ok,
    Warn,
    Fail,
}

/// One line of the report.
#[derive(Debug)]
pub(super) struct Check {
    check: String,
    status: Status,
    verdict: String,
    fix: Option<String>,
}

impl Check {
    pub(super) fn ok(check: impl Into<String>, verdict: impl Into<String>) -> Check {
        Check::new(check, Status::Ok, verdict, None)
    }
    pub(super) fn warn(
        check: impl Into<String>,
        verdict: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check::new(check, Status::Warn, verdict, Some(fix.into()))
    }
    pub(super) fn fail(
        check: impl Into<String>,
        verdict: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check::new(check, Status::Fail, verdict, Some(fix.into()))
    }
    fn new(
        check: impl Into<String>,
        status: Status,
        verdict: impl Into<String>,
        fix: Option<String>,
    ) -> Check {
        Check {
            check: check.into(),
            status,
            verdict: verdict.into(),
            fix,
        }
    }
}

/// Prints each check as it comes (a slow MCP server does not hold back the lines before it)
/// and counts them.
struct Report {
    json: bool,
    style: Style,
    counts: [usize; 3],
}

impl Report {
    fn say(&mut self, checks: impl IntoIterator<Item = Check>) -> Result<(), Failure> {
        let mut lines = Vec::new();
        for c in checks {
            self.counts[c.status as usize] += 1;
            lines.push(self.line(&c));
        }
        crate::print_lines(lines)
    }

    fn line(&self, c: &Check) -> String {
        if self.json {
            let status = match c.status {
                Status::Ok => "ok",
                Status::Warn => "warn",
                Status::Fail => "fail",
            };
            return json!({"check": c.check, "status": status, "verdict": c.verdict, "fix": c.fix})
                .to_string();
        }
        let status = match c.status {
            Status::Ok => self.style.green("ok  "),
            Status::Warn => self.style.yellow("warn"),
            Status::Fail => self.style.red("FAIL"),
        };
        let fix = c
            .fix
            .as_deref()
            .map(|f| format!(" — fix: {}", visible(f, false)))
            .unwrap_or_default();
        format!(
            "{status}  {:<11} {}{fix}",
            self.style.bold(&visible(&c.check, false)),
            visible(&c.verdict, false)
        )
    }

    fn summary(&self) -> String {
        let [ok, warn, fail] = self.counts;
        let verdict = if fail > 0 {
            "dsh will not work as configured: fix the FAIL lines"
        } else if warn > 0 {
            "dsh works; the warnings say what it does not do here"
        } else {
            "dsh is ready"
        };
        format!(
            "{ok} ok, {}, {fail} failed: {verdict}",
            words::plural(warn, "warning")
        )
    }
}

/// `dsh doctor`.
pub(crate) async fn doctor(common: &Common, args: &ModelArgs) -> Result<u8, Failure> {
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let color = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut report = Report {
        json: common.json,
        style: Style::new(color),
        counts: [0; 3],
    };
    // Contradicting flags are a usage error, as for every verb.
    let opts = settings::load_options(common, args.overrides()?)?;
    let env = dsh_config::process_env();
    match dsh_config::load(&opts) {
        Err(e) => {
            report.say([Check::fail(
                "config",
                e.to_string(),
                "correct the key at that file and line",
            )])?;
            // Nothing else can be judged without the configuration but the machine.
            report.say(
                sandbox::check(
                    common.sandbox.unwrap_or(dsh_config::SandboxMode::Auto),
                    None,
                )
                .await,
            )?;
        }
        Ok(loaded) => {
            let settings = SessionSettings::from_loaded(&loaded, &env, common.yolo);
            let (notices, settings) = match settings {
                Ok(c) => (c.notices, Some(c.settings)),
                Err(e) => {
                    report.say([Check::fail(
                        "config",
                        e.to_string(),
                        "set DSH_HOME to a directory, or unset it for the default",
                    )])?;
                    (Vec::new(), None)
                }
            };
            report.say(config_checks(&loaded, &notices))?;
            report.say(model::check(&loaded, &env).await)?;
            let session = match &settings {
                Some(s) => match Session::assemble_dry(s) {
                    Ok(session) => Some(session),
                    Err(e) => {
                        report.say([Check::fail(
                            "session",
                            crate::render_chain(&anyhow::Error::new(e)),
                            "correct the setting it names",
                        )])?;
                        None
                    }
                },
                None => None,
            };
            report.say(sandbox::check(loaded.config.sandbox.mode, session.as_ref()).await)?;
            if let Some(session) = &session {
                report.say(extensions::mcp(&loaded, session).await)?;
            }
            report.say(extensions::hooks(&loaded))?;
            if let Some(settings) = &settings {
                report.say(extensions::plugins(settings))?;
            }
        }
    }
    if !report.json {
        let summary = report.summary();
        crate::print_lines([summary])?;
    }
    Ok(if report.counts[Status::Fail as usize] > 0 {
        exit::HARNESS
    } else {
        exit::OK
    })
}

/// The configuration's files and notices, and the workspace's trust.
fn config_checks(loaded: &Loaded, notices: &[String]) -> Vec<Check> {
    let files: Vec<String> = loaded
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    let mut out = vec![Check::ok(
        "config",
        if files.is_empty() {
            "no configuration file: the defaults apply".to_owned()
        } else {
            format!("loaded {}", files.join(", "))
        },
    )];
    // The hooks' and plugins' approvals have lines of their own below.
    let elsewhere = |n: &str| n.contains("dsh hooks approve") || n.starts_with("plugin `");
    for n in loaded
        .notices
        .iter()
        .chain(notices.iter().filter(|n| !elsewhere(n)))
    {
        let fix = if n.contains("dsh trust") {
            "`dsh trust`, if you trust this repository"
        } else {
            "change the setting it names"
        };
        out.push(Check::warn("config", n.clone(), fix));
    }
    let user = match &loaded.user_config {
        Some(p) if p.exists() => format!("your config: {}", p.display()),
        Some(p) => format!("your config: {} (not created yet)", p.display()),
        None => "no user config file location".to_owned(),
    };
    let ws = loaded.workspace.display();
    out.push(if loaded.user_config.is_none() {
        Check::warn(
            "trust",
            format!("{ws}: {user}, so `dsh trust` and approvals cannot be recorded"),
            "set DSH_CONFIG_HOME, or pass --config FILE",
        )
    } else if loaded.trusted {
        Check::ok(
            "trust",
            format!(
                "{ws} is trusted: its .dsh/config.toml applies in full (a repository's hooks, MCP servers and plugins still wait for approval); {user}"
            ),
        )
    } else {
        Check::ok(
            "trust",
            format!(
                "{ws} is not trusted: its .dsh/config.toml can only tighten, its hooks, MCP servers and plugins are ignored (`dsh trust` to change that); {user}"
            ),
        )
    });
    out
}
