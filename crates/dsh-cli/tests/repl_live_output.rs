//! A running command's latest lines in the REPL's live region (issue 24, stage d), in a real
//! pseudo-terminal: shown while the command runs, gone from the live region when it ends
//! (the finished call's head and tail show as before).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/pty.rs"]
mod pty;
#[path = "common/repl.rs"]
mod repl_kit;

use dsh_testkit::model_server::{Reply, ScriptedServer, Turn};
use repl_kit::{spawn, world};

/// The command prints two lines and then waits for the test's go-ahead (a file), so the test
/// sees its output while it is still running; then it prints a last line and ends. (Only
/// reading words: it runs unasked, in the read-only sandbox.)
#[test]
fn a_slow_commands_latest_lines_show_while_it_runs() {
    let d = world();
    let command = "echo live-one; printf 'live-two\\033[31mred\\n'; \
                   while [ ! -e go ]; do sleep 0.05; done; echo after-go | tr a-z A-Z";
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "c1",
            "run_shell",
            &serde_json::json!({ "command": command }).to_string(),
        )
        .into(),
        Reply::text("it finished"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("run the slow thing");
    // While it runs: its lines under its running line, control characters made visible.
    let s = pty.wait_for("the latest lines of the running command", |s| {
        s.contains("│ live-one") && s.contains("│ live-two")
    });
    assert!(!s.contains("AFTER-GO"), "{}", s.dump());
    assert!(
        s.contains("│ live-two^[[31mred"),
        "an escape in the output is shown, not obeyed: {}",
        s.dump()
    );
    std::fs::write(d.ws.join("go"), "").unwrap();
    let s = pty.wait_for_text("it finished");
    repl_kit::wait_at_prompt(&pty);
    let all = s.all_text();
    assert!(
        all.contains("AFTER-GO"),
        "the result shows as before: {all}"
    );
    // The finished call's lines (indented four) hold each output line once; the live
    // region's (indented two) left nothing behind.
    assert_eq!(
        all.lines().filter(|l| l.contains("│ live-one")).count(),
        1,
        "{all}"
    );
    assert!(
        !all.lines().any(|l| l.starts_with("  │ ")),
        "the live lines are gone with the call: {all}"
    );
    repl_kit::leave_at_prompt(pty);
}
