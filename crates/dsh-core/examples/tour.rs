//! A tour of the pipeline: the seed's example batch (read A, read B, write A, read C) plus a
//! call a policy denies and one a guard refuses, through every gate, with a real JSONL journal.
//!
//! `cargo run -p dsh-core --example tour`

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dsh_core::journal::{JsonlJournal, SyncPolicy, read_journal};
use dsh_core::{
    Access, CancellationToken, Denial, ExecContext, Guard, Pipeline, PolicyContext, PrePolicy,
    Registry, Tier, Timeout, Tool, ToolCall, ToolError, ToolOutput, ToolSpec, Vote, async_trait,
};
use serde_json::{Value, json};

/// An in-memory "file system" shared by the two tools.
type Files = Arc<Mutex<BTreeMap<String, String>>>;

fn path_of(args: &Value) -> String {
    args["path"].as_str().unwrap_or_default().to_owned()
}

struct ReadFile(Files);

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("read_file", "Read a file.")
            .input_schema(json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}))
            .output_schema(json!({"type":"object","properties":{"bytes":{"type":"integer"}},"required":["bytes"]}))
            .read_only(true)
            .idempotent(true)
    }
    fn parallel_safe(&self, _: &Value) -> Result<bool, String> {
        Ok(true)
    }
    fn accesses(&self, args: &Value) -> Vec<Access> {
        vec![Access::Read {
            path: PathBuf::from(path_of(args)),
        }]
    }
    async fn run(&self, args: &Value, _: &ExecContext) -> Result<ToolOutput, ToolError> {
        let path = path_of(args);
        // Reads of A are slow, so B finishes first: results still commit in submission order.
        let ms = if path == "A" { 120 } else { 40 };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let files = self
            .0
            .lock()
            .map_err(|_| ToolError::failed("state poisoned"))?;
        match files.get(&path) {
            Some(text) => Ok(ToolOutput::new(text.clone(), json!({"bytes": text.len()}))),
            None => Err(ToolError::new(
                dsh_core::ToolErrorKind::NotFound,
                format!("{path} does not exist"),
            )),
        }
    }
}

struct WriteFile(Files);

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("write_file", "Write a file.")
            .input_schema(json!({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}))
            .output_schema(json!({"type":"object","properties":{"bytes":{"type":"integer"}},"required":["bytes"]}))
    }
    fn accesses(&self, args: &Value) -> Vec<Access> {
        vec![Access::Write {
            path: PathBuf::from(path_of(args)),
        }]
    }
    async fn run(&self, args: &Value, _: &ExecContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_millis(40)).await;
        let content = args["content"].as_str().unwrap_or_default().to_owned();
        let n = content.len();
        self.0
            .lock()
            .map_err(|_| ToolError::failed("state poisoned"))?
            .insert(path_of(args), content);
        Ok(ToolOutput::new(
            format!("wrote {n} bytes"),
            json!({"bytes": n}),
        ))
    }
}

/// A permission rule: writes to A are allowed (lifting the tool's default ask); `.env` is denied.
struct Rules;

#[async_trait]
impl PrePolicy for Rules {
    fn name(&self) -> &str {
        "permissions"
    }
    async fn vote(&self, _: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        for a in cx.accesses {
            match a {
                Access::Read { path } | Access::Write { path } if path.ends_with(".env") => {
                    return Vote::deny(Tier::Rule, "deny read_file(.env)");
                }
                Access::Write { path } if path == &PathBuf::from("A") => {
                    return Vote::allow(Tier::Rule, "allow write_file(A)");
                }
                _ => {}
            }
        }
        Vote::abstain()
    }
}

/// A red line: nothing under `.git/`.
struct ProtectGit;

impl Guard for ProtectGit {
    fn name(&self) -> &str {
        "protected_paths"
    }
    fn refuses(&self, _: &ToolCall, cx: &PolicyContext<'_>) -> Option<Denial> {
        cx.accesses.iter().find_map(|a| match a {
            Access::Read { path } | Access::Write { path } if path.starts_with(".git") => {
                Some(Denial::new(format!("{} is protected", path.display())))
            }
            _ => None,
        })
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: Files = Arc::new(Mutex::new(BTreeMap::from([
        ("A".to_owned(), "alpha".to_owned()),
        ("B".to_owned(), "bravo".to_owned()),
        ("C".to_owned(), "charlie".to_owned()),
    ])));
    let mut registry = Registry::new();
    registry.register(ReadFile(files.clone()))?;
    registry.register(WriteFile(files))?;

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("tour.jsonl");
    let journal = Arc::new(JsonlJournal::create(&path, "tour", SyncPolicy::BatchEnd)?);
    let pipeline = Pipeline::builder(registry, journal)
        .pre_policy(Rules)
        .guard(ProtectGit)
        .wrapper(Timeout::new(Duration::from_secs(5)))
        .build();

    let call = |id: &str, name: &str, args: Value| ToolCall::new(id, name, args);
    let batch = vec![
        call("1", "read_file", json!({"path": "A"})),
        call("2", "read_file", json!({"path": "B"})),
        call("3", "write_file", json!({"path": "A", "content": "ALPHA"})),
        call("4", "read_file", json!({"path": "C"})),
        call("5", "read_file", json!({"path": ".env"})),
        call(
            "6",
            "write_file",
            json!({"path": ".git/hooks/pre-commit", "content": "x"}),
        ),
        call("7", "write_file", json!({"path": "B", "content": "x"})),
    ];
    let begun = Instant::now();
    let out = pipeline.run_batch(batch, &CancellationToken::new()).await?;
    println!(
        "# results, in submission order ({} ms wall)",
        begun.elapsed().as_millis()
    );
    for r in &out.results {
        println!("{}", r.to_json());
    }
    let transcript = read_journal(&path)?;
    println!(
        "\n# journal {} ({} records, hash chain verified)",
        path.display(),
        transcript.records.len()
    );
    print!("{}", std::fs::read_to_string(&path)?);
    Ok(())
}
