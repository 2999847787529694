//! `dsh acp`: dsh as an Agent Client Protocol agent on stdio (dsh-acp). This file is its
//! opener — each session the client opens starts as `dsh` would start one in the client's
//! `cwd` (configuration, trust, provider, journal, runtime), its asks going to the client —
//! and the process's life: it serves until stdin closes or a signal comes, then ends every
//! open session (`session_end`). stdout is the protocol's alone.

use std::sync::Arc;

use anyhow::anyhow;
use dsh_acp::{AcpServer, Open, Opened, Opener};
use dsh_agent::{Approval, Ending};

use crate::signals::{self, Signals};
use crate::start::{self, Extra, ModelArgs};
use crate::{Common, Failure, exit};

struct CliOpener {
    common: Common,
    model: ModelArgs,
    cancel: dsh_core::CancellationToken,
}

impl Opener for CliOpener {
    fn open(&self, open: Open) -> Result<Opened, String> {
        let mut common = self.common.clone();
        // `--workspace DIR` pins the workspace: a session's cwd must be DIR or inside it.
        if self.common.workspace_given {
            let pinned = self
                .common
                .workspace
                .canonicalize()
                .map_err(|e| format!("--workspace {}: {e}", self.common.workspace.display()))?;
            let cwd = open
                .cwd
                .canonicalize()
                .map_err(|e| format!("cwd {}: {e}", open.cwd.display()))?;
            if !cwd.starts_with(&pinned) {
                return Err(format!(
                    "cwd {} is outside the workspace dsh acp was started with ({})",
                    cwd.display(),
                    pinned.display()
                ));
            }
        } else {
            common.workspace = open.cwd;
        }
        common.workspace_given = true;
        let mut model = self.model.clone();
        if let Some(id) = &open.resume {
            model.resume = Some(newest_of(id)?);
            model.continue_ = false;
        }
        let started = start::start_with(
            &common,
            &model,
            Some(Approval::Interactive),
            &self.cancel,
            false,
            Extra {
                mcp: open.mcp_servers,
                mcp_skipped: open.mcp_skipped,
                client: Some(open.client),
                history: open.resume.is_some(),
            },
        )
        .map_err(|f| format!("{:#}", f.error))?;
        let mut notices: Vec<String> = started
            .resumed
            .iter()
            .flat_map(start::ResumedNote::lines)
            .collect();
        notices.extend(started.unconfigured_notice());
        start::say_mode(started.runtime.session());
        Ok(Opened {
            runtime: started.runtime,
            stream: started.stream,
            history: started.history,
            notices,
        })
    }
}

/// The journal a client's session id continues: the newest file of the chain that file
/// belongs to (each `session/load` goes on in a new file; the client keeps the first id).
fn newest_of(id: &str) -> Result<String, String> {
    let home = dsh_config::dsh_home(&dsh_config::process_env()).map_err(|e| e.to_string())?;
    // Only an id: a client's session id is never a path or a name.
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!("no recorded session {id:?}"));
    }
    let (summaries, _) = dsh_agent::sessions::list(&home);
    let newest = dsh_agent::sessions::newest_of(&summaries, id)
        .ok_or_else(|| format!("no recorded session {id} under {}", home.display()))?;
    Ok(newest.path.display().to_string())
}

pub(crate) async fn serve(common: &Common, model: &ModelArgs) -> Result<u8, Failure> {
    if common.json {
        return Err(Failure::usage(anyhow!(
            "dsh acp speaks the Agent Client Protocol on stdout; --json cannot share it"
        )));
    }
    if model.resume.is_some() || model.continue_ {
        return Err(Failure::usage(anyhow!(
            "dsh acp: the client chooses the session (session/load); --resume and --continue do not apply"
        )));
    }
    let signals = Signals::install().map_err(Failure::harness)?;
    let server = AcpServer::new(Arc::new(CliOpener {
        common: common.clone(),
        model: model.clone(),
        cancel: signals.token().clone(),
    }));
    let served = server.serve_stdio(signals.token()).await;
    server.finish(signals.ending(Ending::Finished)).await;
    if let Err(e) = served {
        return Err(Failure::harness(anyhow!(e)));
    }
    Ok(signals::exit_code(signals.ending(Ending::Finished)).unwrap_or(exit::OK))
}
