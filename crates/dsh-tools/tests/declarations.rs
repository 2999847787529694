//! What the tools declare (SPEC P9, P10, DESIGN §3): schemas, classes, accesses, and the
//! size of what the model reads on its first request.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::env;
use dsh_core::{Access, FailureKind, Gate, Workspace};
use dsh_tools::{ReadCaps, read_only_tools};
use serde_json::{Value, json};

fn tools() -> (tempfile::TempDir, Vec<Arc<dyn dsh_core::Tool>>) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Arc::new(Workspace::new(dir.path()).unwrap());
    (dir, read_only_tools(ws, &ReadCaps::default()))
}

#[test]
fn every_tool_is_read_only_idempotent_parallel_safe_and_strict() {
    let (_d, tools) = tools();
    let names: Vec<String> = tools.iter().map(|t| t.spec().name).collect();
    assert_eq!(names, ["read_file", "list_dir", "grep", "find_files"]);
    for tool in &tools {
        let spec = tool.spec();
        assert!(
            spec.read_only && spec.idempotent && !spec.reserved,
            "{}",
            spec.name
        );
        assert_eq!(spec.parallel, dsh_core::Parallel::Always, "{}", spec.name);
        assert_eq!(spec.input_schema["additionalProperties"], false);
        let out = spec.output_schema.as_ref().unwrap();
        assert_eq!(out["additionalProperties"], false, "{}", spec.name);
    }
}

#[test]
fn accesses_name_every_path_read() {
    let (_d, tools) = tools();
    let read = |p: &str| {
        vec![Access::Read {
            path: PathBuf::from(p),
        }]
    };
    let by = |name: &str| {
        tools
            .iter()
            .find(|t| t.spec().name == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        by("read_file").accesses(&json!({"path": "src/a.rs"})),
        read("src/a.rs")
    );
    assert_eq!(
        by("list_dir").accesses(&json!({"path": "../x"})),
        read("../x")
    );
    assert_eq!(by("grep").accesses(&json!({"pattern": "x"})), read("."));
    assert_eq!(
        by("grep").accesses(&json!({"pattern": "x", "path": "src"})),
        read("src")
    );
    assert_eq!(
        by("find_files").accesses(&json!({"pattern": "*"})),
        read(".")
    );
    assert_eq!(
        by("find_files").accesses(&json!({"pattern": "*", "path": "/etc"})),
        read("/etc")
    );
    // Malformed arguments (refused at the registry anyway) declare nothing rather than panic.
    assert_eq!(by("read_file").accesses(&json!({"path": 5})), vec![]);
}

#[test]
fn the_first_request_stays_small() {
    let (_d, tools) = tools();
    let size: usize = tools
        .iter()
        .map(|t| {
            let s = t.spec();
            s.name.len() + s.description.len() + s.input_schema.to_string().len()
        })
        .sum();
    assert!(size < 2600, "the four tools cost {size} bytes of prompt");
    for t in &tools {
        assert!(t.spec().description.len() < 400, "{}", t.spec().name);
    }
}

#[tokio::test]
async fn unknown_or_mistyped_arguments_fail_at_the_registry() {
    let e = env();
    for (tool, args) in [
        ("read_file", json!({"path": "a", "lines": 3})),
        ("read_file", json!({"path": "a", "offset": 0})),
        ("list_dir", json!({})),
        ("grep", json!({"pattern": ""})),
        ("find_files", json!({"pattern": "*", "recursive": true})),
    ] {
        let r = e.call(tool, args).await;
        assert_eq!(
            r.failure_kind(),
            Some(FailureKind::InvalidArgs),
            "{}",
            r.to_json()
        );
        assert_eq!(r.decided_by().gate, Gate::Registry);
    }
}

#[tokio::test]
async fn one_batch_of_every_tool_runs_in_parallel_and_every_output_validates() {
    let e = env();
    e.write("src/lib.rs", "pub fn hello() {}\n");
    let results = e
        .batch(vec![
            ("read_file", json!({"path": "src/lib.rs"})),
            ("list_dir", json!({"path": "src"})),
            ("grep", json!({"pattern": "hello"})),
            ("find_files", json!({"pattern": "*.rs"})),
            ("read_file", json!({"path": "missing"})),
        ])
        .await;
    let kinds: Vec<Option<&str>> = results
        .iter()
        .map(|r| r.failure_kind().map(|k| k.as_str()))
        .collect();
    assert_eq!(kinds, [None, None, None, None, Some("not_found")]);
    // The §4 result object, as the journal holds it.
    let line: Value = serde_json::from_str(&results[2].to_json()).unwrap();
    assert_eq!(line["tool"], "grep");
    assert_eq!(line["content"], "src/lib.rs:1:pub fn hello() {}");
    assert_eq!(
        line["value"],
        json!({"matches": [{"path": "src/lib.rs", "line": 1, "text": "pub fn hello() {}"}], "truncated": false, "files_searched": 1})
    );
}

#[tokio::test]
async fn a_cancelled_call_stops_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..20 {
        common::write_under(dir.path(), &format!("d{i}/f.txt"), "needle\n");
    }
    let ws = Arc::new(Workspace::new(dir.path()).unwrap());
    let cancel = dsh_core::CancellationToken::new();
    cancel.cancel();
    for tool in read_only_tools(ws, &ReadCaps::default()) {
        let args = match tool.spec().name.as_str() {
            "read_file" => json!({"path": "d0/f.txt"}),
            "list_dir" => json!({"path": "."}),
            _ => json!({"pattern": "needle"}),
        };
        let cx = dsh_core::ExecContext {
            call: dsh_core::ToolCall::new("1", tool.spec().name, args.clone()),
            spec: Arc::new(tool.spec()),
            cancel: cancel.clone(),
            attempt: 1,
            dispatch: None,
            clearance: dsh_core::Clearance::Write,
        };
        let err = tool.run(&args, &cx).await.unwrap_err();
        assert!(
            err.message.contains("cancelled"),
            "{}: {err}",
            tool.spec().name
        );
    }
}
