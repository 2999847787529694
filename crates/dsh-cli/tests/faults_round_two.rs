//! Faults found from outside, round two (issue 21): what a person sees when state and
//! environment misbehave — an empty `DSH_HOME`, a full disk, spills of a resumed session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Dirs, journals, scripted_exec, stderr};

/// `DSH_HOME=` (say, `DSH_HOME=$TYPO`) used to send every journal to the real data
/// directory; an empty path is an error for every verb that needs dsh's state, and so is
/// an empty `DSH_CONFIG_HOME` for every verb that reads configuration.
#[test]
fn an_empty_dsh_home_or_config_home_is_a_usage_error_naming_the_variable() {
    let d = Dirs::new();
    for (var, args) in [
        ("DSH_HOME", &["batch", "-"][..]),
        ("DSH_HOME", &["sessions", "list"][..]),
        ("DSH_HOME", &["check", "list_dir", r#"{"path":"."}"#][..]),
        (
            "DSH_CONFIG_HOME",
            &["check", "list_dir", r#"{"path":"."}"#][..],
        ),
    ] {
        let out = d.dsh(args).env(var, "").output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{var} {args:?}: {err}");
        assert!(
            err.contains(&format!("environment variable {var}")) && err.contains("empty"),
            "{var} {args:?}: {err}"
        );
    }
    // Nothing was written anywhere on the way.
    assert!(!d.home.exists());
}

fn results(path: &std::path::Path) -> Vec<serde_json::Value> {
    dsh_core::journal::read_journal(path)
        .unwrap()
        .records
        .into_iter()
        .map(|e| serde_json::Value::Object(e.json))
        .filter(|r| r["kind"] == "tool_result")
        .collect()
}

/// The history a resumed session sends still says "page it with read_output{id: out-c1}";
/// the output lives in the earlier session's spill directory, so `read_output` follows the
/// `resumed_from` chain — two resumes deep — instead of answering `not_found`.
#[test]
fn a_resumed_session_pages_back_what_the_sessions_it_resumes_spilled() {
    use dsh_testkit::model_server::{ScriptedServer, Turn};
    let d = Dirs::new();
    d.write_user_config("[permissions]\nallow = [\"run_shell(seq *)\"]\n");
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", r#"{"command":"seq 1 20000"}"#).into(),
        Turn::text("spilled").into(),
    ]);
    let out = scripted_exec(&d, &server.url, &[], "count")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = journals(&d.home).pop().unwrap();
    let spilled = results(&first);
    assert!(
        spilled[0]["content"].as_str().unwrap().contains("out-c1"),
        "{}",
        spilled[0]
    );

    // Resume once with a turn that pages nothing, then again, and page from there.
    let server = ScriptedServer::start(vec![Turn::text("nothing to do").into()]);
    let id = first.file_stem().unwrap().to_string_lossy().into_owned();
    let out = scripted_exec(&d, &server.url, &["--resume", &id], "wait")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let second = journals(&d.home).into_iter().find(|p| p != &first).unwrap();

    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "r1",
            "read_output",
            r#"{"id":"out-c1","offset":0,"limit":20}"#,
        )
        .into(),
        // The same call id as the first session's (a batch's ids repeat, so may a model's).
        Turn::tool_call("c1", "run_shell", r#"{"command":"seq 1 20000"}"#).into(),
        Turn::text("read it").into(),
    ]);
    let id = second.file_stem().unwrap().to_string_lossy().into_owned();
    let out = scripted_exec(&d, &server.url, &["--resume", &id], "page it")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let third = journals(&d.home)
        .into_iter()
        .find(|p| p != &first && p != &second)
        .unwrap();
    let got = results(&third);
    assert_eq!(got[0]["ok"], true, "{}", got[0]);
    assert!(
        got[0]["content"].as_str().unwrap().starts_with("1\n2\n3\n"),
        "{}",
        got[0]
    );
    // A new spill never takes an id the chain already holds.
    assert!(
        got[1]["content"].as_str().unwrap().contains("out-c1-2"),
        "{}",
        got[1]
    );
}

/// Runs `cmd` with `DSH_HOME` on a private tmpfs of `size` (a full disk that is dsh's
/// alone: a mount namespace of its own, gone with the process), then copies what
/// `DSH_HOME` holds to `keep` so the test can read it.
fn on_a_small_disk(
    d: &Dirs,
    cmd: &std::process::Command,
    size: &str,
    keep: &std::path::Path,
) -> std::process::Output {
    std::fs::create_dir_all(&d.home).unwrap();
    let script = format!(
        "mount -t tmpfs -o size={size},mode=0700 tmpfs \"$DSH_HOME\" || exit 99\n\
         \"$@\"; rc=$?\n\
         cp -a \"$DSH_HOME\" \"$KEEP\" || exit 98\n\
         exit $rc"
    );
    let mut c = std::process::Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", &script, "sh"])
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("KEEP", keep)
        .stdin(std::process::Stdio::null());
    if let Some(dir) = cmd.get_current_dir() {
        c.current_dir(dir);
    }
    let out = c.output().unwrap();
    assert!(
        !matches!(out.status.code(), Some(98 | 99)),
        "the small disk could not be set up: {}",
        stderr(&out)
    );
    out
}

/// `dsh batch` of `n` copies of the call `line`, on a small disk (see [`on_a_small_disk`]).
fn batch_on_a_small_disk(
    d: &Dirs,
    line: &str,
    n: usize,
    size: &str,
    keep: &std::path::Path,
) -> std::process::Output {
    let calls = d.root().join("calls.jsonl");
    std::fs::write(&calls, format!("{line}\n").repeat(n)).unwrap();
    on_a_small_disk(d, &d.dsh(&["batch", calls.to_str().unwrap()]), size, keep)
}

fn names(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The one journal's records in a kept `DSH_HOME`, and the reserve files left there.
fn kinds_and_reserves(home: &std::path::Path) -> (Vec<serde_json::Value>, Vec<String>) {
    let files = names(&home.join("sessions"));
    assert_eq!(files.len(), 1, "{files:?}");
    let records = dsh_core::journal::read_journal(home.join("sessions").join(&files[0]))
        .unwrap()
        .records
        .into_iter()
        .map(|e| serde_json::Value::Object(e.json))
        .collect();
    (records, names(&home.join("reserve")))
}

/// A full disk under `DSH_HOME` stops `dsh batch` at the call whose record failed, and the
/// journal still ends with `stop` and `session_end` (the space set aside for them is given
/// back), verifies, and leaves no reserve behind; the message names the batch.
#[test]
fn a_full_disk_stops_a_batch_with_its_journal_closed() {
    let d = Dirs::new();
    std::fs::write(d.ws.join("page.txt"), "0123456789abcd\n".repeat(1000)).unwrap();
    let keep = d.root().join("kept");
    let line = r#"{"name":"read_file","args":{"path":"page.txt"}}"#;
    let out = batch_on_a_small_disk(&d, line, 40, "128k", &keep);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("dsh: the batch stopped: cannot write the journal")
            && err.contains("No space left on device"),
        "{err}"
    );
    assert!(!err.contains("ends without"), "{err}");
    let (records, reserves) = kinds_and_reserves(&keep);
    let n = records.len();
    assert_eq!(records[n - 2]["kind"], "stop", "{}", records[n - 2]);
    assert_eq!(records[n - 2]["reason"], "journal_error");
    assert_eq!(records[n - 1]["kind"], "session_end");
    assert_eq!(reserves, Vec::<String>::new());
    // The calls that ran are on record; the one whose record failed never ran.
    assert!(records.iter().any(|r| r["kind"] == "tool_result"));
}

/// The same for `dsh exec`: the message names the run, and the journal ends closed.
#[test]
fn a_full_disk_stops_an_exec_run_with_its_journal_closed() {
    use dsh_testkit::model_server::{ScriptedServer, Turn};
    let d = Dirs::new();
    std::fs::write(d.ws.join("page.txt"), "0123456789abcd\n".repeat(1000)).unwrap();
    let mut turn = Turn::tool_call("c0", "read_file", r#"{"path":"page.txt"}"#);
    for i in 1..30 {
        turn = turn.call(&format!("c{i}"), "read_file", r#"{"path":"page.txt"}"#);
    }
    let server = ScriptedServer::start(vec![turn.into(), Turn::text("never reached").into()]);
    let keep = d.root().join("kept");
    let out = on_a_small_disk(
        &d,
        &scripted_exec(&d, &server.url, &[], "read it"),
        "160k",
        &keep,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("dsh: the run stopped: cannot write the journal") && !err.contains("batch"),
        "{err}"
    );
    let (records, reserves) = kinds_and_reserves(&keep);
    let n = records.len();
    assert_eq!(records[n - 2]["kind"], "stop", "{}", records[n - 2]);
    assert_eq!(records[n - 2]["reason"], "journal_error");
    assert_eq!(records[n - 1]["kind"], "session_end");
    assert_eq!(reserves, Vec::<String>::new());
}

/// A disk too small even for the reserve: the closing records cannot be written, and the
/// message says so — and that the journal still verifies and resumes — after the error
/// that caused it.
#[test]
fn a_journal_that_cannot_close_says_so_and_still_verifies() {
    let d = Dirs::new();
    let keep = d.root().join("kept");
    let line = r#"{"name":"list_dir","args":{"path":"."}}"#;
    let out = batch_on_a_small_disk(&d, line, 60, "12k", &keep);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let stopped = err.find("dsh: the batch stopped: cannot write the journal");
    let unclosed = err.find("the journal ends without its closing records");
    assert!(stopped.is_some() && unclosed > stopped, "{err}");
    assert!(
        err.contains("`dsh sessions verify` and `--resume` still work"),
        "{err}"
    );
    let (records, _) = kinds_and_reserves(&keep);
    assert_ne!(records.last().unwrap()["kind"], "session_end");
    // What it holds verifies.
    let journal = std::fs::read_dir(keep.join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .unwrap();
    let verify = d
        .dsh(&["sessions", "verify", journal.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
}

/// A killed process leaves its reserve behind; the next session's start removes reserves
/// whose session is over (its journal unlocked) or gone, and keeps nothing of its own once
/// it ends.
#[test]
fn reserves_of_dead_sessions_are_swept_and_a_finished_session_leaves_none() {
    let d = Dirs::new();
    let reserve = d.home.join("reserve");
    std::fs::create_dir_all(&reserve).unwrap();
    std::fs::create_dir_all(d.home.join("sessions")).unwrap();
    let dead = "20261202T000000Z-deadbeef";
    std::fs::write(reserve.join(dead), [0u8; 16]).unwrap();
    std::fs::write(d.home.join("sessions").join(format!("{dead}.jsonl")), "").unwrap();
    let gone = "20261202T000001Z-0123abcd";
    std::fs::write(reserve.join(gone), [0u8; 16]).unwrap();
    std::fs::write(reserve.join("not-a-session"), "kept").unwrap();
    let out = d.batch_output(
        &[serde_json::json!({"name":"list_dir","args":{"path":"."}})],
        &[],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(names(&reserve), ["not-a-session"]);
}
