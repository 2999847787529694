//! The session's hooks (DESIGN §5): from configuration to [`dsh_policy::Hooks`]. A hook a
//! project names (its `.dsh/config.toml` or `.claude/settings.json`) runs only once a person
//! approved that very command line (`dsh hooks approve`, recorded with a digest in the user
//! config; a changed script asks again); until then it does not run, and a `PreToolUse`
//! one makes the calls it matches ask. Hooks get the command environment's allowlist (never
//! dsh's keys), their own variables and `CLAUDE_PROJECT_DIR`, and run in the workspace.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dsh_config::{Layer, Loaded, OnError};
use dsh_policy::hooks::{HookHost, HookSpec, Matcher};

/// One configured hook, as the session is given it.
#[derive(Clone, Debug)]
pub struct HookSetting {
    pub hook: dsh_config::Hook,
    /// Where it was written (`file:line: key`).
    pub origin: String,
    /// `false`: a project's hook no person approved yet.
    pub approved: bool,
    /// For a project's hook: the workspace and the digest a person's approval covers,
    /// checked again before each run.
    pub approval: Option<(std::path::PathBuf, String)>,
}

/// The hooks of `loaded`, each with whether it may run, and a notice for each hook of the
/// project that waits for approval and each matcher naming a tool dsh does not have.
pub(crate) fn hook_settings(loaded: &Loaded, notices: &mut Vec<String>) -> Vec<HookSetting> {
    let mut out = Vec::new();
    let mut waiting = 0;
    for h in &loaded.config.hooks.entries {
        let origin = h.origin.location();
        let approval = (h.origin.layer == Layer::Project).then(|| {
            (
                loaded.workspace.clone(),
                dsh_config::hook_approval_digest(&loaded.workspace, &h.value),
            )
        });
        let approved = approval
            .as_ref()
            .is_none_or(|(_, digest)| loaded.approved.contains(digest));
        if !approved {
            waiting += 1;
        }
        if h.value.event.matches_tools()
            && let Ok(m) = Matcher::parse(h.value.matcher.as_deref())
        {
            for name in m.names() {
                if !known_tool(name) {
                    notices.push(format!(
                        "{origin}: the matcher names {name:?}, a tool dsh does not have; the hook never sees it"
                    ));
                }
            }
        }
        out.push(HookSetting {
            hook: h.value.clone(),
            origin,
            approved,
            approval,
        });
    }
    if waiting > 0 {
        notices.push(format!(
            "{waiting} of the project's hooks wait for your approval and do not run (the calls its PreToolUse hooks would judge ask instead): see `dsh hooks list`, then `dsh hooks approve`"
        ));
    }
    out
}

/// dsh's tools other than the file, search and command tools Claude Code names too.
const OTHER_TOOLS: &[&str] = &[
    "read_output",
    "call_sub_agent",
    "run_code",
    "skill",
    "restore_file",
];

/// Whether a matcher's exact name can name a call: a Claude Code or dsh name of a built-in
/// tool, or an MCP tool (checked once the servers are up, not here).
fn known_tool(name: &str) -> bool {
    dsh_policy::hooks::known_name(name) || OTHER_TOOLS.contains(&name) || name.starts_with("mcp__")
}

/// Why a hook cannot be used: its matcher is not a regular expression.
#[derive(Debug, thiserror::Error)]
#[error("{at}: matcher {why}")]
pub struct HookError {
    pub at: String,
    pub why: String,
}

/// The session's hooks.
pub(crate) fn build(
    settings: &crate::SessionSettings,
    root: &Path,
    session_id: &str,
    transcript: &Path,
    temp_dir: &Path,
    mode: dsh_policy::ModeSwitch,
) -> Result<Arc<dsh_policy::Hooks>, HookError> {
    let mut specs = Vec::new();
    for s in &settings.hooks {
        let matcher = if s.hook.event.matches_tools() {
            Matcher::parse(s.hook.matcher.as_deref()).map_err(|why| HookError {
                at: s.origin.clone(),
                why,
            })?
        } else {
            Matcher::Every
        };
        specs.push(HookSpec {
            event: s.hook.event,
            matcher,
            command: s.hook.command.clone(),
            timeout: Duration::from_millis(s.hook.timeout_ms),
            abstain_on_error: s.hook.on_error == OnError::Abstain,
            env: s
                .hook
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            origin: s.origin.clone(),
            approved: s.approved,
            still_approved: s
                .approval
                .clone()
                .filter(|_| s.approved)
                .map(|(workspace, digest)| {
                    let hook = s.hook.clone();
                    dsh_policy::hooks::StillApproved(Arc::new(move || {
                        dsh_config::hook_approval_digest(&workspace, &hook) == digest
                    }))
                }),
        });
    }
    let env =
        dsh_tools::shell::env::command_env(std::env::vars_os(), &settings.shell.pass_env, temp_dir);
    Ok(dsh_policy::Hooks::new(
        HookHost {
            workspace: root.to_path_buf(),
            env,
            session_id: session_id.to_owned(),
            transcript_path: transcript.to_path_buf(),
            mode: Some(mode),
        },
        specs,
    ))
}

/// An approver that first tells the `Notification` hooks a call waits for a person (in the
/// background: the question is never delayed by a hook), then asks as `inner` does.
pub(crate) struct Notifying {
    pub(crate) inner: Arc<dyn dsh_core::Approver>,
    pub(crate) hooks: Arc<dsh_policy::Hooks>,
}

#[dsh_core::async_trait]
impl dsh_core::Approver for Notifying {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn shows_preview(&self) -> bool {
        self.inner.shows_preview()
    }

    async fn approve(
        &self,
        request: &dsh_core::ApprovalRequest<'_>,
    ) -> Result<dsh_core::ApprovalAnswer, dsh_core::ApprovalError> {
        if self.hooks.listens(dsh_config::HookEvent::Notification) {
            let hooks = self.hooks.clone();
            let mut fields = serde_json::Map::new();
            fields.insert(
                "message".into(),
                serde_json::json!(format!(
                    "dsh needs your permission to use {}",
                    request.call.name()
                )),
            );
            fields.insert("notification_type".into(), "permission_prompt".into());
            tokio::spawn(async move {
                hooks.on(dsh_config::HookEvent::Notification, fields).await;
            });
        }
        self.inner.approve(request).await
    }
}
