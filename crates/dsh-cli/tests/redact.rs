//! Redaction end to end (issue 27, gate 5): a secret a command prints — a token of a known
//! shape, the model's own API key, a private key — reaches neither the model nor the journal
//! nor any file under `DSH_HOME`; the model sees markers naming each kind instead, and the
//! call still succeeds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{Dirs, journals, records, scripted_exec, stderr};
use dsh_testkit::model_server::{Reply, ScriptedServer, ServerHandle, Turn};
use serde_json::{Value, json};

/// The model's API key: no token shape, so only knowing the value can redact it.
const MODEL_KEY: &str = "local-key-Zq8XvT41mNw";
/// A GitHub token the command prints in two pieces, so the command line (journaled as the
/// model wrote it) does not hold it; only the output does.
const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
const TOKEN_TAIL: &str = "0123456789abcdefghijABCDEFGHIJ012345";
const AWS_ID: &str = "AKIAIOSFODNN7EXAMPLE";
const PEM_BODY: &str = "MIIEowIBAAKCAQEAwJ2redactme0123456789";

/// What no record, request or file may hold.
const SECRETS: &[&str] = &[MODEL_KEY, TOKEN, TOKEN_TAIL, AWS_ID, PEM_BODY];

/// A workspace file of credentials (as a `.env` or a deploy config holds them).
fn write_credentials(d: &Dirs) {
    std::fs::create_dir_all(d.ws.join("deploy")).unwrap();
    std::fs::write(
        d.ws.join("deploy/credentials.txt"),
        format!(
            "model_key = {MODEL_KEY}\naws_access_key_id = {AWS_ID}\n\
             -----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\n"
        ),
    )
    .unwrap();
}

/// `dsh exec` against `server` with the model key set to [`MODEL_KEY`].
fn exec(d: &Dirs, server: &ServerHandle) -> std::process::Output {
    let out = scripted_exec(d, &server.url, &[], "show me the deploy credentials")
        .env("OPENAI_API_KEY", MODEL_KEY)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    out
}

fn assert_secret_free(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} holds {s:?}");
    }
}

/// Every file under `dir`, with its text (lossy).
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                out.push((p.display().to_string(), text));
            }
        }
    }
    out
}

/// The `tool_result` record of call `id`.
fn result_of<'a>(records: &'a [Value], id: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["call_id"] == id)
        .unwrap_or_else(|| panic!("no tool_result for {id}: {records:?}"))
}

/// The content of the tool message answering call `id` in a request the model received.
fn tool_message(request: &Value, id: &str) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no tool message for {id}"))["content"]
        .to_string()
}

#[test]
fn a_secret_printed_by_a_command_is_redacted_in_the_result_and_absent_from_the_journal() {
    let d = Dirs::new();
    write_credentials(&d);
    let command = format!("printf 'github ghp_%s\\n' {TOKEN_TAIL}; cat deploy/credentials.txt");
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "c1",
            "run_shell",
            &json!({ "command": command }).to_string(),
        )
        .into(),
        // Not only commands: every tool's output passes the redaction.
        Turn::tool_call("c2", "read_file", r#"{"path":"deploy/credentials.txt"}"#).into(),
        Reply::text("done"),
    ]);
    // The tail alone is in the command line: it must not count as the secret there.
    let secrets_in_output = [MODEL_KEY, TOKEN, AWS_ID, PEM_BODY];
    let out = exec(&d, &server);

    let paths = journals(&d.home);
    assert_eq!(paths.len(), 1);
    let records = records(&paths[0]);
    let r = result_of(&records, "c1");
    assert_eq!(r["ok"], true, "redaction never changes ok: {r}");
    assert_eq!(r["exit_code"], 0, "{r}");
    let content = r["content"].as_str().unwrap();
    for marker in [
        "github [redacted: GitHub token]",
        "model_key = [redacted: OPENAI_API_KEY]",
        "aws_access_key_id = [redacted: AWS access key id]",
        "[redacted: private key block]",
    ] {
        assert!(content.contains(marker), "{marker:?} missing: {content}");
    }
    // The command ran as the model wrote it; redaction did not decide the call.
    assert_ne!(r["decided_by"]["policy"], "redact", "{r}");

    let read = result_of(&records, "c2");
    assert_eq!(read["ok"], true, "{read}");
    let content = read["content"].as_str().unwrap();
    assert!(
        content.contains("model_key = [redacted: OPENAI_API_KEY]")
            && content.contains("[redacted: private key block]"),
        "{content}"
    );

    // The model's next requests carry the markers, not the secrets.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let seen = tool_message(&requests[1], "c1");
    assert!(seen.contains("[redacted: GitHub token]"), "{seen}");
    assert!(seen.contains("[redacted: OPENAI_API_KEY]"), "{seen}");
    let seen = tool_message(&requests[2], "c2");
    assert!(seen.contains("[redacted: AWS access key id]"), "{seen}");
    for s in secrets_in_output {
        for r in &requests {
            let body = serde_json::to_string(r).unwrap();
            assert!(!body.contains(s), "a request holds {s:?}");
        }
        let journal = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(!journal.contains(s), "the journal holds {s:?}");
        for (path, text) in files_under(&d.home) {
            assert!(!text.contains(s), "{path} holds {s:?}");
        }
        assert!(!common::stdout(&out).contains(s));
        assert!(!stderr(&out).contains(s), "{}", stderr(&out));
    }
}

/// Large outputs are saved for paging: by `run_shell` itself when it cuts a command's output
/// (before gate 5), and by the spill disposition after redaction. Neither saved file holds a
/// secret, and a page read back with `read_output` shows the markers.
#[test]
fn a_spilled_output_keeps_no_secret_on_disk() {
    let d = Dirs::new();
    write_credentials(&d);
    // The command output is cut above 100,000 characters; results spill above 20,000.
    d.write_user_config("[shell]\nmax_output_chars = 100000\n[limits]\nspill_chars = 20000\n");
    let creds = "cat deploy/credentials.txt";
    // ~28,000 characters: whole from run_shell, spilled by the disposition.
    let medium = format!("seq 1 3000; {creds}; seq 1 3000");
    // ~217,000 characters: cut and spilled by run_shell, the secrets in the omitted middle.
    let large = format!("seq 1 20000; {creds}; seq 1 20000");
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", &json!({ "command": medium }).to_string()).into(),
        Turn::tool_call("c2", "run_shell", &json!({ "command": large }).to_string()).into(),
        // seq 1 20000 is 108,894 characters: the page from 108,000 holds the credentials.
        Turn::tool_call(
            "c3",
            "read_output",
            r#"{"id":"out-c2","offset":108000,"limit":5000}"#,
        )
        .into(),
        Reply::text("done"),
    ]);
    exec(&d, &server);

    let paths = journals(&d.home);
    let records = records(&paths[0]);
    for id in ["c1", "c2", "c3"] {
        assert_eq!(result_of(&records, id)["ok"], true, "{id}");
    }
    let page = result_of(&records, "c3")["content"].as_str().unwrap();
    assert!(
        page.contains("model_key = [redacted: OPENAI_API_KEY]")
            && page.contains("[redacted: private key block]"),
        "{page}"
    );
    let spill: Vec<(String, String)> = files_under(&d.home.join("spill"));
    assert!(spill.len() >= 2, "{spill:?}");
    assert!(
        spill
            .iter()
            .filter(|(_, text)| text.contains("[redacted: AWS access key id]"))
            .count()
            >= 2,
        "both saved outputs hold the markers"
    );
    for (path, text) in files_under(&d.home) {
        assert_secret_free(&path, &text);
    }
    for r in server.requests() {
        assert_secret_free("a request", &serde_json::to_string(&r).unwrap());
    }
}
