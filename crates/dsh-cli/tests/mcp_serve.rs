//! `dsh mcp serve` driven by an MCP client: dsh's own (rmcp-based) client, as another `dsh`
//! whose configured server is this one. The served calls pass the serving workspace's gates
//! with nobody to ask — a read runs, a write asks and is refused with how to allow it, an
//! allow rule lets it run — and are journaled as a session whose `session_start` names the
//! client and whose calls have source `mcp`. (The MCP Inspector's CLI drives it too, in
//! mcp_servers.rs.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::{Dirs, json_lines, kind, records, stderr};
use serde_json::{Value, json};

/// The served workspace and its own state, beside the client's.
struct Served {
    ws: PathBuf,
    home: PathBuf,
    cfg: PathBuf,
}

fn served(d: &Dirs, config: &str) -> Served {
    let s = Served {
        ws: d.root().join("served"),
        home: d.root().join("served-home"),
        cfg: d.root().join("served-cfg"),
    };
    std::fs::create_dir_all(&s.ws).unwrap();
    std::fs::create_dir_all(&s.cfg).unwrap();
    std::fs::write(s.ws.join("notes.txt"), "served notes\n").unwrap();
    std::fs::write(s.cfg.join("config.toml"), config).unwrap();
    d.write_user_config(&format!(
        "[mcp.servers.inner]\ncommand = {:?}\nargs = [\"--workspace\", {:?}, \"mcp\", \"serve\"]\nenv = {{ DSH_HOME = {:?}, DSH_CONFIG_HOME = {:?} }}\n",
        env!("CARGO_BIN_EXE_dsh"),
        s.ws.display().to_string(),
        s.home.display().to_string(),
        s.cfg.display().to_string()
    ));
    s
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "args": args})
}

fn served_journal(s: &Served) -> Vec<Value> {
    let journals = common::journals(&s.home);
    assert_eq!(journals.len(), 1, "{journals:?}");
    records(&journals[0])
}

#[test]
fn a_served_read_runs_and_a_write_is_refused_with_how_to_allow_it() {
    let d = Dirs::new();
    let s = served(&d, "");
    let out = d.batch_output(
        &[
            call("mcp__inner__read_file", json!({"path": "notes.txt"})),
            call(
                "mcp__inner__write_file",
                json!({"path": "new.txt", "content": "x"}),
            ),
            call(
                "mcp__inner__call_sub_agent",
                json!({"profile": "search", "task": "x"}),
            ),
        ],
        &["--yolo"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = json_lines(&out);
    assert_eq!(kind(&r[0]), "ok", "{r:?}");
    assert!(
        r[0]["content"].as_str().unwrap().contains("served notes"),
        "{r:?}"
    );
    // Structured content: read_file's own output schema and value.
    assert!(r[0]["value"].is_object(), "{r:?}");
    assert_eq!(kind(&r[1]), "tool_error", "{r:?}");
    let why = r[1]["content"].as_str().unwrap();
    assert!(
        why.contains("MCP server `inner` says `write_file` failed"),
        "{why}"
    );
    assert!(why.contains("to let it run, add an allow rule"), "{why}");
    assert!(!s.ws.join("new.txt").exists());
    // Tools that need a model are not served.
    assert_eq!(kind(&r[2]), "unknown_tool", "{r:?}");

    let journal = served_journal(&s);
    let start = &journal[0];
    assert_eq!(start["kind"], "session_start");
    assert_eq!(start["client"], "dsh", "{start}");
    let calls: Vec<&Value> = journal
        .iter()
        .filter(|r| r["kind"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 2, "{journal:?}");
    assert!(calls.iter().all(|c| c["source"] == "mcp"), "{calls:?}");
    let last = journal.last().unwrap();
    assert_eq!(last["kind"], "session_end", "{last}");
}

#[test]
fn an_allow_rule_of_the_served_workspace_lets_a_write_run() {
    let d = Dirs::new();
    let s = served(&d, "[permissions]\nallow = [\"write_file(new.txt)\"]\n");
    let out = d.batch_output(
        &[call(
            "mcp__inner__write_file",
            json!({"path": "new.txt", "content": "written over MCP"}),
        )],
        &["--yolo"],
        &[],
    );
    let r = json_lines(&out);
    assert_eq!(kind(&r[0]), "ok", "{r:?} {}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(s.ws.join("new.txt")).unwrap(),
        "written over MCP"
    );
}
