//! MCP in the REPL, in a real pseudo-terminal: `/mcp` shows each server's state and tools
//! (with what the server says of them), `/tools` where each tool comes from, and an MCP
//! tool's approval says it runs on the server outside dsh's sandbox and that the server's
//! hints are its word only. The server is a real process (dsh-mcp's tests/servers/mini.py).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/pty.rs"]
mod pty;
#[path = "common/repl.rs"]
mod repl_kit;

use std::cell::Cell;
use std::path::PathBuf;

use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use pty::{Pty, strip_ansi};
use repl_kit::{journal, kind, leave_at_prompt, spawn, world};

fn mini() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dsh-mcp/tests/servers/mini.py")
}

/// Shows `/mcp` until the server is ready (it starts beside the prompt).
fn until_ready(pty: &Pty) -> String {
    for _ in 0..200 {
        let mark = pty.mark();
        pty.send_line("/mcp");
        let shown = Cell::new(String::new());
        pty.wait_for_raw("/mcp's last line", |raw| {
            let text = strip_ansi(raw.get(mark.0..).unwrap_or_default());
            let done = text.contains("servers' resources and prompts are not offered yet");
            if done {
                shown.set(text);
            }
            done
        });
        let text = shown.take();
        if text.contains("mini ready") {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the server never became ready");
}

#[test]
fn mcp_shows_the_servers_and_an_mcp_tools_approval_says_where_it_runs() {
    let d = world();
    d.write_user_config(&format!(
        "[mcp.servers.mini]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}]\n\n[mcp.servers.broken]\ncommand = \"/nonexistent/server\"\n",
        mini().display().to_string()
    ));
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "mcp__mini__echo", r#"{"text":"hello from mcp"}"#).into(),
        Reply::text("echoed"),
    ]);
    let pty = spawn(&d, &server, &[]);
    let text = until_ready(&pty);
    assert!(
        text.contains("mcp__mini__echo  says: read-only, closed world"),
        "{text}"
    );
    assert!(text.contains("mcp__mini__read_dotted_name"), "{text}");
    assert!(text.contains("its stderr:"), "{text}");
    assert!(text.contains("broken failed"), "{text}");
    assert!(
        text.contains("could not start `/nonexistent/server`"),
        "{text}"
    );

    pty.send_line("/tools");
    let screen = pty.wait_for_text("MCP server mini (says: read-only, closed world)");
    assert!(screen.contains("mcp__mini__echo"), "{}", screen.contents());

    // The tools joined before this turn's first request.
    pty.send_line("echo something");
    let screen = pty.wait_for_text("[y] approve once");
    let text = screen.contents();
    assert!(
        text.contains("agent main wants to run mcp__mini__echo"),
        "{text}"
    );
    assert!(
        text.contains("runs on MCP server mini, outside dsh's sandbox; it says the tool is read-only, closed world (its word, not checked)"),
        "{text}"
    );
    pty.send("y");
    pty.wait_for_text("echoed");
    leave_at_prompt(pty);
    let tools = server.requests()[0]["tools"].to_string();
    assert!(tools.contains("mcp__mini__echo"), "{tools}");
    let records = journal(&d);
    let result = records.iter().find(|r| kind(r) == "tool_result").unwrap();
    assert_eq!(
        result["value"],
        serde_json::json!({"echo": "hello from mcp"})
    );
}
