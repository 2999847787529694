//! The MCP client against a real server process (tests/servers/mini.py, plain Python 3
//! speaking the MCP stdio transport), its tools called through a real pipeline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_core::journal::MemoryJournal;
use dsh_core::{
    ApprovalAnswer, ApprovalError, ApprovalOutcome, ApprovalRequest, Approver, CancellationToken,
    FailureKind, FrozenResult, Pipeline, Registry, Timeout, ToolCall, async_trait,
};
use dsh_mcp::{Launch, McpServers, ServerSpec, State, ToolChange};
use serde_json::{Value, json};

const PYTHON: &str = "/usr/bin/python3";

struct Yes;

#[async_trait]
impl Approver for Yes {
    fn name(&self) -> &str {
        "yes"
    }
    async fn approve(&self, _: &ApprovalRequest<'_>) -> Result<ApprovalAnswer, ApprovalError> {
        Ok(ApprovalOutcome::AllowedOnce.into())
    }
}

fn mini() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/mini.py")
}

struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> Self {
        World {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn events(&self) -> PathBuf {
        self.dir.path().join("events.log")
    }

    fn logs(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    fn spec(&self, name: &str, extra_env: &[(&str, &str)]) -> ServerSpec {
        let mut env = vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("MINI_LOG".into(), self.events().into_os_string()),
        ];
        env.extend(extra_env.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        ServerSpec {
            name: name.to_owned(),
            launch: Launch::Stdio {
                program: PYTHON.to_owned(),
                args: vec![mini().display().to_string()],
                env,
                cwd: self.dir.path().to_owned(),
            },
            startup_timeout: Duration::from_secs(20),
            call_timeout: Duration::from_secs(20),
            max_restarts: 1,
        }
    }

    fn events_text(&self) -> String {
        std::fs::read_to_string(self.events()).unwrap_or_default()
    }

    /// Waits (at most 20 s) until the server's event log holds `line`.
    async fn wait_event(&self, line: &str) {
        let start = Instant::now();
        while !self.events_text().lines().any(|l| l == line) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no {line:?} in {:?}",
                self.events_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The servers started and their tools registered in a pipeline that approves every ask.
async fn connected(servers: &McpServers) -> Arc<Pipeline> {
    servers.wait_started().await;
    let pipeline = Pipeline::builder(Registry::new(), Arc::new(MemoryJournal::new("t")))
        .approver(Arc::new(Yes))
        .wrapper(Timeout::new(Duration::from_secs(60)).with_grace(Duration::from_secs(5)))
        .build();
    apply(servers, &pipeline);
    pipeline
}

fn apply(servers: &McpServers, pipeline: &Pipeline) {
    for change in servers.tool_changes() {
        match change {
            ToolChange::Add(t) | ToolChange::Replace(t) => {
                let name = dsh_core::Tool::spec(t.as_ref()).name;
                if let Err(e) = pipeline.register(t) {
                    servers.refused(&name, e.to_string());
                }
            }
        }
    }
}

async fn call(pipeline: &Pipeline, name: &str, args: Value) -> Arc<FrozenResult> {
    pipeline
        .run_batch(
            vec![ToolCall::new("c1", name, args)],
            &CancellationToken::new(),
        )
        .await
        .unwrap()
        .results
        .remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_offered_by_their_mcp_names_with_structured_output() {
    let w = World::new();
    let servers = McpServers::new(vec![w.spec("mini", &[])], w.logs(), Vec::new());
    let pipeline = connected(&servers).await;
    let status = servers.status();
    assert_eq!(status[0].state, State::Ready, "{status:?}");
    let names: Vec<_> = status[0]
        .tools
        .iter()
        .filter_map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"mcp__mini__echo".to_owned()), "{names:?}");
    assert!(
        names.contains(&"mcp__mini__read_dotted_name".to_owned()),
        "{names:?}"
    );
    let hints = servers.hints("mcp__mini__echo").unwrap();
    assert_eq!(hints.read_only, Some(true));

    let r = call(&pipeline, "mcp__mini__echo", json!({"text": "hi"})).await;
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.content(), "hi");
    assert_eq!(r.value(), Some(&json!({"echo": "hi"})));

    let r = call(&pipeline, "mcp__mini__read_dotted_name", json!({})).await;
    assert_eq!(
        r.content(),
        "dotted",
        "the call reaches the server's own name"
    );

    // No output schema: the standard content list, binary data named, not carried.
    let r = call(&pipeline, "mcp__mini__plain", json!({})).await;
    assert!(r.ok(), "{r:?}");
    assert!(
        r.content()
            .contains("some text\n[image image/png, 8 bytes: not shown]"),
        "{}",
        r.content()
    );
    assert_eq!(r.value().unwrap()["content"][1]["bytes"], json!(8));
    assert!(r.value().unwrap()["content"][1].get("data").is_none());

    // Arguments are checked against the server's input schema before anything runs.
    let r = call(&pipeline, "mcp__mini__echo", json!({})).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::InvalidArgs), "{r:?}");
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_breaks_its_schema_or_reports_an_error_fails_the_call() {
    let w = World::new();
    let servers = McpServers::new(vec![w.spec("mini", &[])], w.logs(), Vec::new());
    let pipeline = connected(&servers).await;
    let r = call(&pipeline, "mcp__mini__liar", json!({})).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::InvalidOutput), "{r:?}");
    let r = call(&pipeline, "mcp__mini__fails", json!({})).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::ToolError), "{r:?}");
    assert!(
        r.content()
            .contains("MCP server `mini` says `fails` failed: the thing is broken"),
        "{}",
        r.content()
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_its_timeout_is_cancelled_on_the_server() {
    let w = World::new();
    let mut spec = w.spec("mini", &[]);
    spec.call_timeout = Duration::from_millis(500);
    let servers = McpServers::new(vec![spec], w.logs(), Vec::new());
    let pipeline = connected(&servers).await;
    let r = call(&pipeline, "mcp__mini__slow", json!({"seconds": 30})).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Timeout), "{r:?}");
    w.wait_event("slow cancelled").await;
    assert!(!w.events_text().contains("slow finished"));
    // The server is still there for the next call.
    let r = call(&pipeline, "mcp__mini__count", json!({})).await;
    assert_eq!(r.content(), "1", "{r:?}");
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_mid_call_fails_it_and_is_started_again_at_most_n_times() {
    let w = World::new();
    let servers = McpServers::new(vec![w.spec("mini", &[])], w.logs(), Vec::new());
    let pipeline = connected(&servers).await;
    let r = call(&pipeline, "mcp__mini__die", json!({})).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::ToolError), "{r:?}");
    let text = r.content();
    assert!(
        text.contains("MCP server `mini` ended while running `die` (exit status 3)"),
        "{text}"
    );
    assert!(text.contains("it said: dying on purpose"), "{text}");
    assert_eq!(servers.status()[0].state, State::Failed);

    // Started again on the next call (once: max_restarts = 1).
    let r = call(&pipeline, "mcp__mini__count", json!({})).await;
    assert!(r.ok(), "{r:?}");
    assert_eq!(w.events_text().lines().filter(|l| *l == "start").count(), 2);
    assert_eq!(servers.status()[0].restarts, 1);
    assert_eq!(servers.status()[0].state, State::Ready);

    let r = call(&pipeline, "mcp__mini__die", json!({})).await;
    assert!(
        r.content().contains("it is not started again this session"),
        "{}",
        r.content()
    );
    let r = call(&pipeline, "mcp__mini__count", json!({})).await;
    assert_eq!(r.failure_kind(), Some(FailureKind::ToolError));
    assert!(
        r.content().contains("already started again 1 times"),
        "{}",
        r.content()
    );
    assert_eq!(w.events_text().lines().filter(|l| *l == "start").count(), 2);
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_says_why_in_its_status() {
    let w = World::new();
    let failing = w.spec("bad", &[("MINI_FAIL_START", "no token configured")]);
    let mut missing = w.spec("missing", &[]);
    if let Launch::Stdio { program, .. } = &mut missing.launch {
        *program = "/nonexistent/mcp-server".into();
    }
    let mut silent = w.spec("silent", &[]);
    if let Launch::Stdio { args, .. } = &mut silent.launch {
        *args = vec!["-c".into(), "import time; time.sleep(60)".into()];
    }
    silent.startup_timeout = Duration::from_millis(500);
    let servers = McpServers::new(vec![failing, missing, silent], w.logs(), Vec::new());
    let started = Instant::now();
    servers.wait_started().await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the servers start at once"
    );
    let status = servers.status();
    assert!(
        status.iter().all(|s| s.state == State::Failed),
        "{status:?}"
    );
    let why = |i: usize| status[i].last_error.clone().unwrap();
    assert!(why(0).contains("(exit status 7)"), "{}", why(0));
    assert!(
        why(0).contains("it said: no token configured"),
        "{}",
        why(0)
    );
    assert!(
        why(1).contains("could not start `/nonexistent/mcp-server`"),
        "{}",
        why(1)
    );
    assert!(
        why(2).contains("did not finish starting within 0 s"),
        "{}",
        why(2)
    );
    assert!(servers.tool_changes().is_empty());
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_handed_over_when_asked_and_stderr_goes_to_the_log() {
    let w = World::new();
    let servers = McpServers::new(vec![w.spec("mini", &[])], w.logs(), Vec::new());
    let pipeline = connected(&servers).await;
    let r = call(&pipeline, "mcp__mini__grow", json!({})).await;
    assert!(r.ok(), "{r:?}");
    let start = Instant::now();
    let grown = loop {
        let changes = servers.tool_changes();
        if !changes.is_empty() {
            break changes;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no new tool");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let names: Vec<String> = grown
        .iter()
        .map(|c| match c {
            ToolChange::Add(t) | ToolChange::Replace(t) => dsh_core::Tool::spec(t.as_ref()).name,
        })
        .collect();
    assert_eq!(names, ["mcp__mini__grown"]);

    let log = std::fs::read_to_string(w.logs().join("mini.log")).unwrap();
    assert!(log.contains("mini started pid="), "{log}");
    assert_eq!(servers.status()[0].log, Some(w.logs().join("mini.log")));
    drop(pipeline);
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_sees_only_the_environment_it_is_given() {
    let w = World::new();
    let servers = McpServers::new(
        vec![w.spec("mini", &[("GIVEN", "1")])],
        w.logs(),
        Vec::new(),
    );
    let pipeline = connected(&servers).await;
    let r = call(&pipeline, "mcp__mini__env", json!({})).await;
    let names: Vec<&str> = r.content().split(' ').collect();
    assert!(names.contains(&"GIVEN"), "{names:?}");
    assert!(names.contains(&"MINI_LOG"));
    assert!(
        !names.contains(&"CARGO_MANIFEST_DIR"),
        "dsh's environment leaked: {names:?}"
    );
    assert!(!names.contains(&"HOME"), "{names:?}");
    servers.shutdown().await;
}
