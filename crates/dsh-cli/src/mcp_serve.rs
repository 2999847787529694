//! `dsh mcp serve`: dsh's file, search and shell tools as an MCP server over stdio, each call
//! a batch of one through the session's pipeline (source `mcp`), judged by the workspace's
//! configuration with no person behind it — an `ask` is `unavailable` unless a rule allows the
//! call (or `--yolo`), and the result says how to allow it. The session starts once the
//! client has said who it is, so `session_start` names it; it ends when the client goes away
//! or a signal comes, with `stop` and `session_end`. stdout is the protocol's: nothing else is
//! written there.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::anyhow;
use dsh_agent::{Ending, Session, Totals};
use dsh_core::{CallSource, CancellationToken, Scope, ToolCall, ToolSet};
use dsh_mcp::{HostResult, HostTool, ToolHost};
use serde_json::Value;

use crate::signals::{self, Signals};
use crate::{Common, Failure, exit, settings};

struct Host {
    session: Arc<Session>,
    tools: ToolSet,
    calls: AtomicU32,
    /// Held (shared) by each running call; taken whole once the client is gone.
    inflight: Arc<tokio::sync::RwLock<()>>,
}

/// How long the end waits for the calls still running to record their results.
const CALLS_WIND_DOWN: std::time::Duration = std::time::Duration::from_secs(30);

#[async_trait::async_trait]
impl ToolHost for Host {
    fn tools(&self) -> Vec<HostTool> {
        self.session
            .pipeline
            .specs(&self.tools)
            .iter()
            .map(|s| HostTool {
                name: s.name.clone(),
                description: s.description.clone(),
                input_schema: s.input_schema.clone(),
                output_schema: s
                    .output_schema
                    .clone()
                    .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                read_only: s.read_only,
            })
            .collect()
    }

    async fn call(&self, name: &str, args: Value, cancel: CancellationToken) -> HostResult {
        let _running = self.inflight.clone().read_owned().await;
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let call = ToolCall::new(format!("mcp-{n}"), name, args)
            .with_step(n)
            .with_source(CallSource::Mcp);
        let scope = Scope {
            tools: self.tools.clone(),
            ..Scope::default()
        };
        match self
            .session
            .pipeline
            .run_batch_in(&scope, vec![call], &cancel)
            .await
        {
            Ok(mut out) if !out.results.is_empty() => {
                let r = out.results.remove(0);
                HostResult {
                    ok: r.ok(),
                    content: r.content().to_owned(),
                    value: r.value().cloned(),
                }
            }
            Ok(_) => HostResult {
                ok: false,
                content: "the call produced no result".to_owned(),
                value: None,
            },
            Err(e) => HostResult {
                ok: false,
                content: format!("dsh could not record the call, so it did not run: {e}"),
                value: None,
            },
        }
    }
}

pub(crate) async fn serve(common: &Common) -> Result<u8, Failure> {
    if common.json {
        return Err(Failure::usage(anyhow!(
            "dsh mcp serve speaks MCP on stdout; --json cannot share it"
        )));
    }
    let settings = settings::load(common)?;
    let signals = Signals::install().map_err(Failure::harness)?;
    let started: Arc<Mutex<Option<Arc<Session>>>> = Arc::default();
    let slot = started.clone();
    let inflight: Arc<tokio::sync::RwLock<()>> = Arc::default();
    let calls = inflight.clone();
    let make: dsh_mcp::HostFactory = Box::new(move |client: &str| {
        let mut settings = settings.clone();
        settings.set_client(client);
        let session = Session::assemble(&settings).map_err(|e| e.to_string())?;
        crate::start::say_mode(&session);
        let session = Arc::new(session);
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(session.clone());
        Ok(Arc::new(Host {
            tools: session.served_tools(),
            session,
            calls: AtomicU32::new(0),
            inflight: calls.clone(),
        }) as Arc<dyn ToolHost>)
    });
    let served = tokio::select! {
        r = dsh_mcp::serve_stdio(make) => r,
        () = signals.token().cancelled() => Ok(()),
    };
    // The client went away or a signal came: the calls still running were cancelled (by
    // rmcp, once its transport closed); each records its result before the journal's closing
    // records, so `session_end` stays the last one. Bounded: a call that does not wind down
    // is left to the process's end.
    let _ = tokio::time::timeout(CALLS_WIND_DOWN, inflight.write()).await;
    let session = started
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(session) = session {
        let ending = signals.ending(Ending::Finished);
        let stop = if ending == Ending::Finished {
            "client_closed"
        } else {
            "interrupted"
        };
        let closed = session
            .record_stop(stop, None, Totals::none())
            .and_then(|_| session.finish(ending, Totals::none()));
        if let Err(e) = closed {
            eprintln!("dsh: the journal ends without its closing records: {e}");
        }
    }
    if let Err(e) = served {
        return Err(Failure::harness(anyhow!(e)));
    }
    Ok(signals::exit_code(signals.ending(Ending::Finished)).unwrap_or(exit::OK))
}
