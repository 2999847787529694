//! A temp workspace (and a temp directory outside it) with the read-only tools registered in
//! a real pipeline recording into a memory journal. Tests run batches and assert the frozen
//! results: a result that did not match its tool's output schema would be `invalid_output`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dsh_core::journal::MemoryJournal;
use dsh_core::{
    CancellationToken, FailureKind, FrozenResult, Pipeline, Registry, ToolCall, Workspace,
};
use dsh_tools::{ReadCaps, read_only_tools};
use serde_json::Value;
use tempfile::TempDir;

pub struct Env {
    pub ws: TempDir,
    pub outside: TempDir,
    pub pipeline: Arc<Pipeline>,
    pub journal: Arc<MemoryJournal>,
}

pub fn env() -> Env {
    env_with(&ReadCaps::default())
}

pub fn env_with(limits: &ReadCaps) -> Env {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let workspace = Arc::new(Workspace::new(ws.path()).unwrap());
    let mut registry = Registry::new();
    for tool in read_only_tools(workspace, limits) {
        registry.register_arc(tool).unwrap();
    }
    let journal = Arc::new(MemoryJournal::new("dsh-tools-test"));
    let pipeline = Pipeline::builder(registry, journal.clone()).build();
    Env {
        ws,
        outside,
        pipeline,
        journal,
    }
}

impl Env {
    pub fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.ws.path()).unwrap()
    }

    /// Writes a file under the workspace, creating parent directories.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        write_under(self.ws.path(), rel, content)
    }

    /// Writes a file under the outside directory.
    pub fn write_outside(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        write_under(self.outside.path(), rel, content)
    }

    /// Runs a batch and returns its results in submission order.
    pub async fn batch(&self, calls: Vec<(&str, Value)>) -> Vec<Arc<FrozenResult>> {
        let calls = calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, args))| ToolCall::new(format!("c{i}"), name, args))
            .collect();
        let cancel = CancellationToken::new();
        let run = self.pipeline.run_batch(calls, &cancel);
        tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .expect("the batch hung")
            .unwrap()
            .results
    }

    pub async fn call(&self, name: &str, args: Value) -> Arc<FrozenResult> {
        self.batch(vec![(name, args)]).await.remove(0)
    }

    /// A call that must succeed; returns (content, value).
    pub async fn ok(&self, name: &str, args: Value) -> (String, Value) {
        let r = self.call(name, args).await;
        assert!(r.ok(), "{}", r.to_json());
        (r.content().to_owned(), r.value().cloned().unwrap())
    }

    /// A call that must fail with `kind`; returns the content the model sees.
    pub async fn fails(&self, name: &str, args: Value, kind: FailureKind) -> String {
        let r = self.call(name, args).await;
        assert_eq!(r.failure_kind(), Some(kind), "{}", r.to_json());
        assert!(r.value().is_none());
        r.content().to_owned()
    }
}

pub fn write_under(base: &Path, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
    let path = base.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, content).unwrap();
    path
}

pub fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo failed");
}

/// Creates a character device like /dev/null; false when this process may not (no
/// CAP_MKNOD).
pub fn mknod_null(path: &Path) -> bool {
    std::process::Command::new("mknod")
        .arg(path)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success())
}

/// The value's `path` fields of grep matches, as `path:line`.
pub fn grep_hits(value: &Value) -> Vec<String> {
    value["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}:{}", m["path"].as_str().unwrap(), m["line"]))
        .collect()
}

pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}
