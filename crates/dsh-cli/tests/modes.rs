//! Permission modes through the binary (issue "ordinary work runs", item 4; DESIGN §5): one
//! switch over the same gates, a gate-1 vote by `policy: "mode"`; `--mode`, `--yolo` and
//! `[permissions] mode` with the trust rules; the mode in `session_start`; replay under the
//! mode in force. The REPL's `/mode` and Shift-Tab are in tests/repl.rs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Dirs, check, check_shell as shell, json_lines, kind, records, stderr};
use serde_json::json;

#[test]
fn read_only_mode_denies_writes_and_programs_that_do_not_only_read() {
    let d = Dirs::new();
    let ro = ["--mode", "read-only"];
    for line in [
        "make",
        "cargo build",
        "ls > out.txt",
        "touch x",
        "sed -i s/a/b/ f",
    ] {
        let c = shell(&d, &ro, line);
        assert_eq!(c["decision"], "deny", "{line}: {c}");
        assert_eq!(c["policy"], "mode", "{line}: {c}");
        assert!(
            c["reason"].as_str().unwrap().contains("read-only mode"),
            "{line}: {c}"
        );
    }
    for line in ["ls -la", "git status", "grep -rn x . | sort"] {
        assert_eq!(shell(&d, &ro, line)["decision"], "allow", "{line}");
    }
    let c = check(
        &d,
        &ro,
        "write_file",
        json!({"path": "a.txt", "content": "x"}),
    );
    assert_eq!(c["decision"], "deny", "{c}");
    assert!(
        c["reason"].as_str().unwrap().contains("read-only mode"),
        "{c}"
    );
    // Even --yolo's approvals cannot lift it: the same from the configuration.
    d.write_user_config("[permissions]\nmode = \"read-only\"\n");
    let calls = [json!({"name": "run_shell", "args": {"command": "make"}})];
    let out = d.batch_output(&calls, &[], &[]);
    assert_eq!(kind(&json_lines(&out)[0]), "denied");
}

#[test]
fn modes_from_flags_and_configuration_follow_the_trust_rules() {
    let d = Dirs::new();
    // An untrusted project may only tighten to read-only.
    d.project_config("[permissions]\nmode = \"yolo\"\n");
    let out = d
        .dsh(&["check", "run_shell", r#"{"command":"cargo build"}"#])
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("permissions.mode = \"yolo\""),
        "{}",
        stderr(&out)
    );
    assert_eq!(json_lines(&out)[0]["decision"], "ask");
    d.project_config("[permissions]\nmode = \"read-only\"\n");
    assert_eq!(shell(&d, &[], "cargo build")["decision"], "deny");
    // A trusted project still cannot choose yolo.
    d.write_user_config(&format!(
        "[trust]\nworkspaces = [{:?}]\n",
        d.ws.display().to_string()
    ));
    d.project_config("[permissions]\nmode = \"yolo\"\n");
    let calls = [json!({"name": "run_shell", "args": {"command": "cargo build"}})];
    let out = d.batch_output(&calls, &[], &[]);
    assert!(stderr(&out).contains("only a flag"), "{}", stderr(&out));
    assert_eq!(kind(&json_lines(&out)[0]), "unavailable");
    // The user's own file may.
    d.project_config("");
    d.write_user_config("[permissions]\nmode = \"yolo\"\n");
    let calls = [json!({"name": "run_shell", "args": {"command": "true; mkdir made"}})];
    let out = d.batch_output(&calls, &[], &[]);
    assert_eq!(kind(&json_lines(&out)[0]), "ok", "{}", stderr(&out));
    assert!(d.ws.join("made").is_dir());
    // `--yolo` is `--mode yolo`; with another mode it is a usage error.
    d.write_user_config("");
    let out = d
        .dsh(&["--yolo", "--mode", "ask", "check", "run_shell", "{}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // auto lets it run by the mode's vote, in the hardened sandbox; without its sandbox it
    // asks and says why.
    let out = d
        .dsh(&[
            "--mode",
            "auto",
            "check",
            "run_shell",
            r#"{"command":"cargo build"}"#,
        ])
        .output()
        .unwrap();
    let c = &json_lines(&out)[0];
    assert_eq!(c["decision"], "allow", "{}", stderr(&out));
    assert_eq!(c["policy"], "mode", "{c}");
    let out = d
        .dsh(&[
            "--mode",
            "auto",
            "--sandbox",
            "off",
            "check",
            "run_shell",
            r#"{"command":"cargo build"}"#,
        ])
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("auto behaves as ask"),
        "{}",
        stderr(&out)
    );
    assert_eq!(json_lines(&out)[0]["decision"], "ask");
}

#[test]
fn the_mode_is_journaled_and_replay_judges_under_it() {
    let d = Dirs::new();
    let calls = [
        json!({"name": "run_shell", "args": {"command": "make"}}),
        json!({"name": "run_shell", "args": {"command": "ls"}}),
    ];
    let out = d.batch_output(&calls, &["--mode", "read-only"], &[]);
    let results = json_lines(&out);
    assert_eq!(kind(&results[0]), "denied", "{}", results[0]);
    assert_eq!(kind(&results[1]), "ok", "{}", results[1]);
    let journal = common::journals(&d.home).remove(0);
    let recs = records(&journal);
    assert_eq!(recs[0]["kind"], "session_start");
    assert_eq!(recs[0]["mode"], "read-only");
    // A batch's lines are the batch's: nobody typed them at the REPL.
    for call in recs.iter().filter(|r| r["kind"] == "tool_call") {
        assert_eq!(call["source"], "batch", "{call}");
    }
    // Replayed without the flag, each call is judged under the mode it was made in: nothing
    // changed.
    let out = d
        .dsh(&["replay", journal.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows = json_lines(&out);
    assert_eq!(rows[0]["today"]["decision"], "deny", "{}", rows[0]);
    assert_eq!(rows[0]["today"]["policy"], "mode", "{}", rows[0]);
    assert_eq!(rows[0]["changed"], false);
}
