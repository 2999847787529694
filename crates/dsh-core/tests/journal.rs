//! The session journal through the public API (SPEC P1, DESIGN §6): what is on disk, when,
//! in which order and in which format, and what happens when the journal cannot record.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use dsh_core::journal::{
    GENESIS, Journal, JournalError, JsonlJournal, MemoryJournal, ReadError, Record, SyncPolicy,
    Totals, Transcript, read_journal,
};
use dsh_core::{
    Action, ApprovalOutcome, BatchError, BatchOutcome, CallSource, CancellationToken, Candidate,
    Disposition, FrozenResult, Pipeline, Registry, Tier, ToolCall, ToolOutput, Vote,
};
use dsh_testkit::{FaultyJournal, FnPolicy, FnTool, ScriptedApprover, kinds, ok_output};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The envelope keys every record carries (DESIGN §6).
const ENVELOPE: [&str; 6] = ["v", "seq", "ts", "session", "kind", "prev"];

/// DESIGN §4's result object, key for key (sorted).
const RESULT_KEYS: [&str; 10] = [
    "call_id",
    "content",
    "decided_by",
    "elapsed_ms",
    "exit_code",
    "failure_kind",
    "ok",
    "sandbox",
    "tool",
    "value",
];

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

async fn run(p: &Pipeline, calls: Vec<ToolCall>) -> Result<BatchOutcome, BatchError> {
    p.run_batch(calls, &CancellationToken::new()).await
}

fn registry(tools: Vec<FnTool>) -> Registry {
    let mut r = Registry::new();
    for t in tools {
        r.register(t).unwrap();
    }
    r
}

/// A tool that counts its invocations and returns `n` = the count so far.
fn counting_tool(name: &str, runs: Arc<AtomicUsize>) -> FnTool {
    FnTool::new(name, move |_args, _cx| {
        let runs = runs.clone();
        async move {
            let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(ok_output(i64::try_from(n).unwrap()))
        }
    })
}

/// A gate-1 policy that records the calls it is asked about and votes by call-id prefix:
/// `allow…` → rule allow, `deny…` → rule deny, `ask…` → rule ask, anything else → allow.
fn recording_policy(asked: Arc<Mutex<Vec<String>>>) -> FnPolicy {
    FnPolicy::new("by-id", move |c, _cx| {
        asked.lock().unwrap().push(c.id().to_owned());
        let id = c.id();
        if id.starts_with("deny") {
            Vote::deny(Tier::Rule, format!("{id} is denied by the test"))
        } else if id.starts_with("ask") {
            Vote::ask(Tier::Rule, format!("{id} needs approval"))
        } else {
            Vote::allow(Tier::Rule, format!("{id} is allowed by the test"))
        }
    })
}

/// One tool `t` (not read-only, so nothing runs without a vote), the id-prefix policy and an
/// approver that allows once.
fn mixed_pipeline(journal: Arc<dyn Journal>, runs: Arc<AtomicUsize>) -> Arc<Pipeline> {
    Pipeline::builder(registry(vec![counting_tool("t", runs)]), journal)
        .pre_policy(recording_policy(Arc::default()))
        .approver(ScriptedApprover::answering(ApprovalOutcome::AllowedOnce))
        .build()
}

/// Three one-call batches: allowed, denied, asked-and-approved.
async fn run_mixed(p: &Pipeline) -> Vec<Arc<FrozenResult>> {
    let mut results = Vec::new();
    for (id, step) in [("allow-1", 1), ("deny-2", 2), ("ask-3", 3)] {
        let c = call(id, "t", json!({"id": id, "nested": {"k": [1, 2]}})).with_step(step);
        let out = run(p, vec![c]).await.unwrap();
        assert_eq!(out.results.len(), 1);
        results.extend(out.results);
    }
    results
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `2026-11-30T03:15:02.123Z`: digits where digits go, the separators where they go.
fn is_rfc3339_millis(ts: &str) -> bool {
    let pattern = b"dddd-dd-ddTdd:dd:dd.dddZ";
    ts.len() == pattern.len()
        && ts.bytes().zip(pattern.iter()).all(|(c, &p)| match p {
            b'd' => c.is_ascii_digit(),
            other => c == other,
        })
}

fn str_field<'a>(record: &'a Map<String, Value>, key: &str) -> &'a str {
    record.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The record without its envelope: the fields the writer supplied.
fn fields(record: &Map<String, Value>) -> Map<String, Value> {
    record
        .iter()
        .filter(|(k, _)| !ENVELOPE.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `(kind, call_id)` of every record.
fn kinds_and_ids(t: &Transcript) -> Vec<(String, String)> {
    t.json()
        .map(|r| {
            (
                str_field(r, "kind").to_owned(),
                str_field(r, "call_id").to_owned(),
            )
        })
        .collect()
}

fn parse_object(text: &str) -> Map<String, Value> {
    match serde_json::from_str(text).unwrap() {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

fn journal_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("session.jsonl")
}

// ---------------------------------------------------------------------------------------------
// P1: the call is on disk before anything else happens
// ---------------------------------------------------------------------------------------------

/// Bits the probing tool reports about what it found in the journal file while running.
const SAW_CALL: i64 = 1;
const SAW_STARTED: i64 = 2;
const NO_RESULT_YET: i64 = 4;
const NO_TORN_TAIL: i64 = 8;

#[tokio::test]
async fn tool_call_is_on_disk_while_the_tool_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let journal = Arc::new(JsonlJournal::create(&path, "s-p1", SyncPolicy::BatchEnd).unwrap());

    let probe_path = path.clone();
    let probe = FnTool::new("probe", move |args, cx| {
        let path = probe_path.clone();
        async move {
            // Read the file itself, as a crash investigator would: no handle to the journal.
            let t = read_journal(&path).unwrap();
            let id = cx.call.id().to_owned();
            let mine = |kind: &str| {
                t.of_kind(kind)
                    .filter(|r| str_field(r, "call_id") == id)
                    .cloned()
                    .collect::<Vec<_>>()
            };
            let mut found = 0;
            let calls = mine("tool_call");
            if calls.len() == 1
                && calls[0].get("args") == Some(&args)
                && str_field(&calls[0], "name") == "probe"
            {
                found |= SAW_CALL;
            }
            if mine("tool_started").len() == 1 {
                found |= SAW_STARTED;
            }
            if mine("tool_result").is_empty() {
                found |= NO_RESULT_YET;
            }
            if t.torn_tail.is_none() {
                found |= NO_TORN_TAIL;
            }
            Ok(ToolOutput::new(
                format!("kinds on disk while running: {:?}", t.kinds()),
                json!({"n": found}),
            ))
        }
    })
    .spec(|s| s.read_only(true));

    // Gate 1 looks too: by the time any policy is asked, the call is already in the file
    // (and has not started).
    let seen_at_gate1 = Arc::new(Mutex::new(Vec::new()));
    let (gate1_path, seen) = (path.clone(), seen_at_gate1.clone());
    let gate1 = FnPolicy::new("peek", move |c, _cx| {
        let t = read_journal(&gate1_path).unwrap();
        let on_record: Vec<String> = t
            .json()
            .filter(|r| str_field(r, "call_id") == c.id())
            .map(|r| str_field(r, "kind").to_owned())
            .collect();
        seen.lock().unwrap().push(on_record);
        Vote::abstain()
    });

    let p = Pipeline::builder(registry(vec![probe]), journal)
        .pre_policy(gate1)
        .build();
    let args = json!({"path": "src/main.rs", "limit": 7});
    let out = run(&p, vec![call("c-probe", "probe", args)]).await.unwrap();

    assert_eq!(
        *seen_at_gate1.lock().unwrap(),
        [["tool_call"]],
        "gate 1 was asked before the call was on disk"
    );

    let r = &out.results[0];
    assert!(r.ok(), "{}", r.content());
    assert_eq!(
        r.value(),
        Some(&json!({"n": SAW_CALL | SAW_STARTED | NO_RESULT_YET | NO_TORN_TAIL})),
        "while the tool ran, the journal file did not hold its tool_call and tool_started: {}",
        r.content()
    );
    let t = read_journal(&path).unwrap();
    assert_eq!(t.kinds(), ["tool_call", "tool_started", "tool_result"]);
}

// ---------------------------------------------------------------------------------------------
// P1: a process that dies mid-tool leaves the call on record
// ---------------------------------------------------------------------------------------------

const CRASH_CHILD_ENV: &str = "DSH_CRASH_CHILD_JOURNAL";

/// Re-runs this test binary for exactly one test, with `env_key=journal` set, from `cwd`
/// (so a core dump, if the system writes one, lands in a temporary directory).
fn rerun_self(
    test: &str,
    env_key: &str,
    journal: &Path,
    cwd: &Path,
    shell_prefix: Option<&str>,
) -> std::process::Output {
    let exe = std::env::current_exe().unwrap();
    let args = ["--exact", test, "--nocapture", "--test-threads=1"];
    let mut cmd = match shell_prefix {
        None => std::process::Command::new(&exe),
        Some(prefix) => {
            let mut c = std::process::Command::new("sh");
            c.arg("-c")
                .arg(format!("{prefix}; exec \"$0\" \"$@\""))
                .arg(&exe);
            c
        }
    };
    cmd.args(args)
        .env(env_key, journal)
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn describe(out: &std::process::Output) -> String {
    format!(
        "status {:?}\n--- child stdout ---\n{}\n--- child stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn abort_mid_tool_leaves_call_and_started_on_record() {
    if let Some(path) = std::env::var_os(CRASH_CHILD_ENV) {
        // The child: a normal call that completes, then a call whose tool kills the process.
        let journal =
            Arc::new(JsonlJournal::create(path, "s-crash", SyncPolicy::BatchEnd).unwrap());
        let fine =
            FnTool::new("fine", |_a, _cx| async { Ok(ok_output(1)) }).spec(|s| s.read_only(true));
        let boom = FnTool::new("boom", |_a, _cx| async { std::process::abort() })
            .spec(|s| s.read_only(true));
        let p = Pipeline::builder(registry(vec![fine, boom]), journal).build();
        let _ = run(
            &p,
            vec![
                call("c-fine", "fine", json!({"x": 1})),
                call("c-boom", "boom", json!({"why": "abort"})),
            ],
        )
        .await;
        panic!("the batch returned although its second tool aborts the process");
    }

    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let out = rerun_self(
        "abort_mid_tool_leaves_call_and_started_on_record",
        CRASH_CHILD_ENV,
        &path,
        dir.path(),
        None,
    );
    assert!(
        !out.status.success(),
        "the child should have died: {}",
        describe(&out)
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        const SIGABRT: i32 = 6;
        assert_eq!(
            out.status.signal(),
            Some(SIGABRT),
            "the child should have been killed by SIGABRT: {}",
            describe(&out)
        );
    }

    // The chain is intact and no line is torn: every record was handed to the OS whole.
    let t = read_journal(&path).unwrap_or_else(|e| panic!("{e}\n{}", describe(&out)));
    assert_eq!(t.torn_tail, None);
    let records = kinds_and_ids(&t);
    let pair = |k: &str, id: &str| (k.to_owned(), id.to_owned());

    // The aborting call: on record with its arguments and its start, and nothing more.
    let boom: Vec<_> = t
        .json()
        .filter(|r| str_field(r, "call_id") == "c-boom")
        .collect();
    assert_eq!(boom.len(), 2, "{records:?}");
    assert_eq!(str_field(boom[0], "kind"), "tool_call");
    assert_eq!(boom[0].get("args"), Some(&json!({"why": "abort"})));
    assert_eq!(str_field(boom[0], "name"), "boom");
    assert_eq!(str_field(boom[1], "kind"), "tool_started");

    // The completed call is whole, and the journal ends with the aborting call's tool_call
    // and tool_started: nothing was lost or reordered by the crash.
    assert_eq!(
        records,
        [
            pair("tool_call", "c-fine"),
            pair("tool_started", "c-fine"),
            pair("tool_result", "c-fine"),
            pair("tool_call", "c-boom"),
            pair("tool_started", "c-boom"),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// DESIGN §6: the line format and the hash chain
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn every_line_has_the_envelope_and_a_recomputable_hash_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let journal = Arc::new(JsonlJournal::create(&path, "s-format", SyncPolicy::BatchEnd).unwrap());
    let p = mixed_pipeline(journal, Arc::default());
    run_mixed(&p).await;

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'), "the last record lacks its newline");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3 + 2 + 4);

    let mut prev = GENESIS.to_owned();
    assert_eq!(prev, "0".repeat(64));
    for (i, line) in lines.iter().enumerate() {
        let seq = i + 1;
        let r = parse_object(line);
        assert_eq!(r.get("v"), Some(&json!(1)), "line {seq}: {line}");
        assert_eq!(r.get("seq"), Some(&json!(seq)), "line {seq}: {line}");
        assert!(is_rfc3339_millis(str_field(&r, "ts")), "line {seq}: {line}");
        assert_eq!(str_field(&r, "session"), "s-format", "line {seq}");
        assert!(!str_field(&r, "kind").is_empty(), "line {seq}: {line}");
        assert_eq!(
            str_field(&r, "prev"),
            prev,
            "line {seq}: prev is not the previous hash"
        );
        // The envelope's order as DESIGN §6 writes it: v, seq, ts, session, kind first; prev last.
        let head = format!(r#"{{"v":1,"seq":{seq},"ts":""#);
        assert!(line.starts_with(&head), "line {seq}: {line}");
        assert!(
            line.ends_with(&format!(r#","prev":"{prev}"}}"#)),
            "line {seq}: {line}"
        );
        let session_then_kind =
            format!(r#""session":"s-format","kind":"{}""#, str_field(&r, "kind"));
        assert!(line.contains(&session_then_kind), "line {seq}: {line}");
        prev = sha256_hex(line);
    }

    // The reader agrees.
    let t = read_journal(&path).unwrap();
    assert_eq!(t.records.len(), lines.len());
    assert_eq!(t.torn_tail, None);
}

#[tokio::test]
async fn tampering_with_a_middle_line_breaks_the_chain_at_the_next_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let journal = Arc::new(JsonlJournal::create(&path, "s-tamper", SyncPolicy::BatchEnd).unwrap());
    let p = mixed_pipeline(journal, Arc::default());
    run_mixed(&p).await;
    let original = std::fs::read_to_string(&path).unwrap();
    assert!(read_journal(&path).is_ok());

    // Change one byte of line 4 (still valid JSON, same seq): line 5's `prev` no longer matches.
    let mut lines: Vec<String> = original.lines().map(str::to_owned).collect();
    assert!(lines.len() > 5);
    let target = 4;
    let tampered =
        lines[target - 1].replacen("\"session\":\"s-tamper\"", "\"session\":\"s-tampex\"", 1);
    assert_ne!(tampered, lines[target - 1]);
    assert_eq!(tampered.len(), lines[target - 1].len());
    lines[target - 1] = tampered;
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    match read_journal(&path) {
        Err(ReadError::BrokenChain { line, .. }) => assert_eq!(line, target + 1),
        other => panic!(
            "expected a broken chain at line {}, got {other:?}",
            target + 1
        ),
    }

    // Tampering with the first record's `prev` is reported as a bad genesis.
    let mut lines: Vec<String> = original.lines().map(str::to_owned).collect();
    lines[0] = lines[0].replacen(GENESIS, &format!("1{}", &GENESIS[1..]), 1);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    assert!(matches!(
        read_journal(&path),
        Err(ReadError::BadGenesis { line: 1, .. })
    ));
}

#[tokio::test]
async fn records_come_in_gate_order_and_tool_result_is_the_frozen_result() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let journal = Arc::new(JsonlJournal::create(&path, "s-order", SyncPolicy::BatchEnd).unwrap());
    let runs = Arc::new(AtomicUsize::new(0));
    let p = mixed_pipeline(journal, runs.clone());
    let results = run_mixed(&p).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the denied call must not run"
    );

    let t = read_journal(&path).unwrap();
    let by_call = |id: &str| -> Vec<&Map<String, Value>> {
        t.json().filter(|r| str_field(r, "call_id") == id).collect()
    };
    let kinds_of = |rs: &[&Map<String, Value>]| -> Vec<String> {
        rs.iter().map(|r| str_field(r, "kind").to_owned()).collect()
    };

    // Allowed: tool_call, tool_started, tool_result.
    let allowed = by_call("allow-1");
    assert_eq!(
        kinds_of(&allowed),
        ["tool_call", "tool_started", "tool_result"]
    );
    // Denied: tool_call, tool_result — it never started.
    let denied = by_call("deny-2");
    assert_eq!(kinds_of(&denied), ["tool_call", "tool_result"]);
    // Asked and approved: tool_call, approval, tool_started, tool_result.
    let asked = by_call("ask-3");
    assert_eq!(
        kinds_of(&asked),
        ["tool_call", "approval", "tool_started", "tool_result"]
    );
    // Each batch's records are contiguous, so the whole file is the concatenation.
    assert_eq!(
        t.kinds(),
        [
            "tool_call",
            "tool_started",
            "tool_result", //
            "tool_call",
            "tool_result", //
            "tool_call",
            "approval",
            "tool_started",
            "tool_result",
        ]
    );

    // tool_call: call_id, name, args, source, parent, step — exactly.
    assert_eq!(
        fields(allowed[0]),
        parse_object(
            &json!({
                "call_id": "allow-1", "name": "t",
                "args": {"id": "allow-1", "nested": {"k": [1, 2]}},
                "source": "model", "parent": null, "step": 1
            })
            .to_string()
        )
    );
    // approval: call_id and outcome.
    assert_eq!(
        Value::Object(fields(asked[1])),
        json!({"call_id": "ask-3", "outcome": "allowed_once"})
    );
    // tool_started: call_id.
    assert_eq!(Value::Object(fields(asked[2])), json!({"call_id": "ask-3"}));

    // tool_result: the frozen result's JSON, field for field, with exactly §4's keys.
    let result_records = [allowed[2], denied[1], asked[3]];
    for (record, result) in result_records.iter().zip(&results) {
        let got = fields(record);
        assert_eq!(got, parse_object(&result.to_json()), "{}", result.call_id());
        let mut keys: Vec<&str> = got.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, RESULT_KEYS);
        let decided = got.get("decided_by").unwrap().as_object().unwrap();
        let mut dkeys: Vec<&str> = decided.keys().map(String::as_str).collect();
        dkeys.sort_unstable();
        assert_eq!(dkeys, ["gate", "policy", "reason"]);
    }
    assert_eq!(results[0].value(), Some(&json!({"n": 1})));
    assert_eq!(
        fields(denied[1]).get("failure_kind"),
        Some(&json!("denied"))
    );
    assert_eq!(fields(denied[1]).get("ok"), Some(&json!(false)));
    assert_eq!(
        fields(asked[3])
            .get("decided_by")
            .and_then(|d| d.get("gate")),
        Some(&json!("approval"))
    );
}

// ---------------------------------------------------------------------------------------------
// The file: private, never appended to
// ---------------------------------------------------------------------------------------------

#[cfg(unix)]
#[test]
fn journal_file_is_created_private_with_mode_0600() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let _journal = JsonlJournal::create(&path, "s-mode", SyncPolicy::BatchEnd).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "mode is {:o}", mode & 0o777);
}

#[tokio::test]
async fn create_refuses_an_existing_path_instead_of_appending() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    {
        let journal =
            Arc::new(JsonlJournal::create(&path, "s-first", SyncPolicy::BatchEnd).unwrap());
        let p = mixed_pipeline(journal, Arc::default());
        run_mixed(&p).await;
    }
    let before = std::fs::read(&path).unwrap();

    match JsonlJournal::create(&path, "s-second", SyncPolicy::BatchEnd) {
        Err(JournalError::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists);
        }
        other => panic!("create on an existing journal must fail, got {other:?}"),
    }
    // Also an existing file that is not a journal.
    let other = dir.path().join("notes.txt");
    std::fs::write(&other, "mine").unwrap();
    assert!(JsonlJournal::create(&other, "s", SyncPolicy::EveryRecord).is_err());
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "mine");

    // `/dev/full` exists, so it cannot be a journal either (no test can use it for ENOSPC).
    if Path::new("/dev/full").exists() {
        assert!(JsonlJournal::create("/dev/full", "s", SyncPolicy::EveryRecord).is_err());
    }

    // Nothing was appended, truncated or re-chained.
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let t = read_journal(&path).unwrap();
    assert!(t.json().all(|r| str_field(r, "session") == "s-first"));
}

// ---------------------------------------------------------------------------------------------
// Torn tail
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_line_without_its_newline_is_reported_as_a_torn_tail_and_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let journal = Arc::new(JsonlJournal::create(&path, "s-torn", SyncPolicy::BatchEnd).unwrap());
    let p = mixed_pipeline(journal, Arc::default());
    run_mixed(&p).await;
    let whole = read_journal(&path).unwrap();
    assert_eq!(whole.torn_tail, None);

    let garbage = r#"{"v":1,"seq":10,"ts":"2026-11-30T03:1"#;
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(garbage.as_bytes()).unwrap();
    }
    let torn = read_journal(&path).unwrap();
    assert_eq!(torn.torn_tail.as_deref(), Some(garbage));
    assert_eq!(torn.records, whole.records);
    assert_eq!(torn.records.len(), 9);
}

// ---------------------------------------------------------------------------------------------
// A journal that cannot record stops the batch before the next gate
// ---------------------------------------------------------------------------------------------

struct Counted {
    pipeline: Arc<Pipeline>,
    runs_a: Arc<AtomicUsize>,
    runs_b: Arc<AtomicUsize>,
    asked: Arc<Mutex<Vec<String>>>,
}

/// Tools `a` and `b` (exclusive), each counting its runs, and a recording gate-1 policy.
fn counted_pipeline(journal: Arc<dyn Journal>) -> Counted {
    let runs_a = Arc::new(AtomicUsize::new(0));
    let runs_b = Arc::new(AtomicUsize::new(0));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let tools = vec![
        counting_tool("a", runs_a.clone()),
        counting_tool("b", runs_b.clone()),
    ];
    let pipeline = Pipeline::builder(registry(tools), journal)
        .pre_policy(recording_policy(asked.clone()))
        .build();
    Counted {
        pipeline,
        runs_a,
        runs_b,
        asked,
    }
}

fn two_calls() -> Vec<ToolCall> {
    vec![
        call("first", "a", json!({"k": 1})),
        call("second", "b", json!({"k": 2})),
    ]
}

#[tokio::test]
async fn failing_tool_call_record_stops_the_batch_before_that_calls_gates() {
    // Find which append is the second call's tool_call by running the batch once for real.
    let dry = Arc::new(MemoryJournal::new("dry"));
    run(&counted_pipeline(dry.clone()).pipeline, two_calls())
        .await
        .unwrap();
    let lines = dry.lines();
    let n = lines
        .iter()
        .position(|l| {
            let r = parse_object(l);
            str_field(&r, "kind") == "tool_call" && str_field(&r, "call_id") == "second"
        })
        .unwrap()
        + 1;

    let journal = FaultyJournal::failing_from(n);
    let c = counted_pipeline(journal.clone());
    let err = run(&c.pipeline, two_calls())
        .await
        .expect_err("the batch must stop when a record cannot be written");

    assert!(matches!(err.source, JournalError::Io { .. }), "{err}");
    assert_eq!(
        c.runs_b.load(Ordering::SeqCst),
        0,
        "the second tool ran unrecorded"
    );
    assert_eq!(
        *c.asked.lock().unwrap(),
        ["first"],
        "gate 1 was asked about a call that is not on record"
    );
    assert_eq!(c.runs_a.load(Ordering::SeqCst), 1);
    // The first call's result was committed before the failure, and is kept.
    assert_eq!(err.committed.len(), 1, "{:?}", err.committed);
    assert_eq!(err.committed[0].call_id(), "first");
    assert!(err.committed[0].ok());
    assert_eq!(err.committed[0].value(), Some(&json!({"n": 1})));
    // Nothing about the second call reached the journal; what did is what the dry run wrote.
    let written = journal.lines();
    assert_eq!(kinds(&written), kinds(&lines[..n - 1]));
    assert!(written.iter().all(|l| !l.contains("\"second\"")));
    let committed_in_journal = written
        .iter()
        .filter(|l| l.contains("\"kind\":\"tool_result\""))
        .count();
    assert_eq!(committed_in_journal, 1);
}

#[tokio::test]
async fn failing_tool_started_record_means_the_tool_never_runs() {
    let journal = FaultyJournal::failing_kind("tool_started");
    let c = counted_pipeline(journal.clone());
    let err = run(&c.pipeline, two_calls())
        .await
        .expect_err("the batch must stop when tool_started cannot be written");
    assert!(matches!(err.source, JournalError::Io { .. }), "{err}");
    assert_eq!(
        c.runs_a.load(Ordering::SeqCst),
        0,
        "the tool ran without tool_started"
    );
    assert_eq!(c.runs_b.load(Ordering::SeqCst), 0);
    assert_eq!(
        *c.asked.lock().unwrap(),
        ["first"],
        "the batch went on after the failure"
    );
    assert!(err.committed.is_empty());
    assert_eq!(kinds(&journal.lines()), ["tool_call"]);
}

const FULL_CHILD_ENV: &str = "DSH_FULL_CHILD_JOURNAL";

/// A real write failure of the file journal. `/dev/full` cannot serve: `JsonlJournal::create`
/// opens with `create_new`, and `/dev/full` exists. Instead the child runs with a file-size
/// limit (`ulimit -f`, SIGXFSZ ignored), so a write past it fails with `EFBIG` after a short
/// write — the same shape as a disk filling up mid-record.
#[cfg(unix)]
#[tokio::test]
async fn disk_full_mid_record_stops_the_batch_and_takes_the_short_write_back() {
    if let Some(path) = std::env::var_os(FULL_CHILD_ENV) {
        let path = PathBuf::from(path);
        let journal =
            Arc::new(JsonlJournal::create(&path, "s-full", SyncPolicy::EveryRecord).unwrap());
        let c = counted_pipeline(journal.clone());

        // Small records fit under the limit.
        let out = run(&c.pipeline, vec![call("first", "a", json!({"k": 1}))])
            .await
            .unwrap();
        assert!(out.results[0].ok());

        // This tool_call record does not fit: the batch stops before gate 1.
        let big = "x".repeat(64 * 1024);
        let err = run(&c.pipeline, vec![call("second", "b", json!({"big": big}))])
            .await
            .expect_err("a record that cannot be written must stop the batch");
        match &err.source {
            JournalError::Io { source, .. } => {
                assert_eq!(source.kind(), std::io::ErrorKind::FileTooLarge, "{source}");
            }
            other => panic!("expected an I/O error, got {other:?}"),
        }
        assert!(err.committed.is_empty());
        assert_eq!(c.runs_b.load(Ordering::SeqCst), 0);

        // The journal is now unusable: the next batch stops before anything runs.
        let err = run(&c.pipeline, vec![call("third", "a", json!({"k": 3}))])
            .await
            .expect_err("a broken journal must refuse further records");
        assert!(matches!(err.source, JournalError::Broken(_)), "{err}");
        assert_eq!(c.runs_a.load(Ordering::SeqCst), 1);
        assert_eq!(*c.asked.lock().unwrap(), ["first"]);

        // A closing record is still tried, and fits: the failed line was taken back.
        journal
            .append_closing(&Record::Stop {
                reason: "journal_error".into(),
                error: None,
                totals: Totals::default(),
            })
            .unwrap();
        return;
    }

    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let out = rerun_self(
        "disk_full_mid_record_stops_the_batch_and_takes_the_short_write_back",
        FULL_CHILD_ENV,
        &path,
        dir.path(),
        Some("trap '' XFSZ; ulimit -c 0; ulimit -f 16"),
    );
    assert!(
        out.status.success(),
        "the child's checks failed: {}",
        describe(&out)
    );

    // The short write of the big record was cut off again: the file ends with a whole
    // record, the chain verifies, and the closing record follows it.
    let t = read_journal(&path).unwrap_or_else(|e| panic!("{e}\n{}", describe(&out)));
    assert_eq!(
        t.kinds(),
        ["tool_call", "tool_started", "tool_result", "stop"]
    );
    assert!(t.torn_tail.is_none(), "{:?}", t.torn_tail);
}

// ---------------------------------------------------------------------------------------------
// Sync policies
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn every_record_and_batch_end_sync_write_the_same_journal() {
    let dir = tempfile::tempdir().unwrap();
    let mut transcripts = Vec::new();
    for (file, policy) in [
        ("every.jsonl", SyncPolicy::EveryRecord),
        ("batch.jsonl", SyncPolicy::BatchEnd),
    ] {
        let path = dir.path().join(file);
        let journal = Arc::new(JsonlJournal::create(&path, "s-sync", policy).unwrap());
        let p = mixed_pipeline(journal.clone(), Arc::default());
        run_mixed(&p).await;
        // Another batch with several calls in it.
        run(
            &p,
            vec![
                call("allow-4", "t", json!({})),
                call("deny-5", "t", json!({})),
                call("allow-6", "t", json!({"z": null})),
            ],
        )
        .await
        .unwrap();
        drop(p);
        drop(journal);
        let t = read_journal(&path).unwrap();
        assert_eq!(t.torn_tail, None, "{policy:?}");
        transcripts.push(t);
    }
    // Same records, once the time-dependent parts (ts, the hashes that cover it, elapsed_ms)
    // are set aside.
    let normalized = |t: &Transcript| -> Vec<Map<String, Value>> {
        t.json()
            .map(|r| {
                let mut r = r.clone();
                r.remove("ts");
                r.remove("prev");
                r.remove("elapsed_ms");
                r
            })
            .collect()
    };
    assert_eq!(transcripts[0].records.len(), 9 + 8);
    assert_eq!(normalized(&transcripts[0]), normalized(&transcripts[1]));
}

// ---------------------------------------------------------------------------------------------
// Attached context comes after the batch's results
// ---------------------------------------------------------------------------------------------

struct AttachNote;

#[dsh_core::async_trait]
impl Disposition for AttachNote {
    fn name(&self) -> &str {
        "note"
    }
    async fn dispose(&self, call: &ToolCall, candidate: &Candidate) -> Action {
        Action::AttachContext(format!("note about {} (ok={})", call.id(), candidate.ok()))
    }
}

#[tokio::test]
async fn context_attached_is_journaled_after_every_tool_result_of_the_batch() {
    let journal = Arc::new(MemoryJournal::new("s-attach"));
    let p = Pipeline::builder(
        registry(vec![counting_tool("t", Arc::default())]),
        journal.clone(),
    )
    .pre_policy(recording_policy(Arc::default()))
    .disposition(AttachNote)
    .build();
    let code = call("allow-code", "t", json!({}))
        .with_source(CallSource::Code)
        .with_parent("allow-1");
    let out = run(
        &p,
        vec![
            call("allow-1", "t", json!({})),
            call("deny-2", "t", json!({})),
            code,
            call("allow-3", "t", json!({})),
        ],
    )
    .await
    .unwrap();

    let lines = journal.lines();
    let ks = kinds(&lines);
    let last_result = ks.iter().rposition(|k| k == "tool_result").unwrap();
    let first_attached = ks.iter().position(|k| k == "context_attached").unwrap();
    assert!(
        last_result < first_attached,
        "context was attached before the batch's results were all journaled: {ks:?}"
    );
    assert_eq!(ks.iter().filter(|k| *k == "tool_result").count(), 4);

    // The records carry what the batch outcome carries, in the same order; Code Mode
    // sub-calls get none (SPEC P11).
    let attached: Vec<Value> = lines
        .iter()
        .map(|l| parse_object(l))
        .filter(|r| str_field(r, "kind") == "context_attached")
        .map(|r| Value::Object(fields(&r)))
        .collect();
    let expected: Vec<Value> = out
        .attached
        .iter()
        .map(|a| json!({"call_id": a.call_id, "policy": a.policy, "text": a.text}))
        .collect();
    assert_eq!(attached, expected);
    let ids: Vec<&str> = out.attached.iter().map(|a| a.call_id.as_str()).collect();
    assert_eq!(ids, ["allow-1", "deny-2", "allow-3"]);
    assert_eq!(out.attached[1].text, "note about deny-2 (ok=false)");
    assert!(out.attached.iter().all(|a| a.policy == "note"));
}

// ---------------------------------------------------------------------------------------------
// Commit before the next start
// ---------------------------------------------------------------------------------------------

/// A call that has finished is committed (journaled `tool_result`, handed to observers, kept
/// in `BatchError::committed`) before the next call is journaled and gated, so a crash or a
/// journal failure at the next call never loses a result that had already been produced.
#[tokio::test]
async fn a_finished_call_is_committed_before_the_next_call_starts() {
    let journal = Arc::new(MemoryJournal::new("s-commit"));
    run(&counted_pipeline(journal.clone()).pipeline, two_calls())
        .await
        .unwrap();
    assert_eq!(
        kind_and_id_lines(&journal.lines()),
        [
            "tool_call first",
            "tool_started first",
            "tool_result first",
            "tool_call second",
            "tool_started second",
            "tool_result second",
        ]
    );

    // A failure at the second call's tool_call (the fourth append) keeps the first result.
    let c = counted_pipeline(FaultyJournal::failing_from(4));
    let err = run(&c.pipeline, two_calls()).await.unwrap_err();
    assert_eq!(c.runs_a.load(Ordering::SeqCst), 1);
    assert_eq!(c.runs_b.load(Ordering::SeqCst), 0);
    let committed: Vec<&str> = err.committed.iter().map(|r| r.call_id()).collect();
    assert_eq!(committed, ["first"]);
}

/// The same for a call refused before execution: its `tool_result` is written before the next
/// call's `tool_call`. Otherwise a crash while the next call runs would leave the denied call
/// looking `cancelled_before`, and a journal failure at the next call would drop the denial
/// from `BatchError::committed`.
#[tokio::test]
async fn a_refused_call_is_committed_before_the_next_call_starts() {
    let journal = Arc::new(MemoryJournal::new("s-commit-refused"));
    let calls = || {
        vec![
            call("deny-1", "a", json!({})),
            call("second", "b", json!({})),
        ]
    };
    run(&counted_pipeline(journal.clone()).pipeline, calls())
        .await
        .unwrap();
    assert_eq!(
        kind_and_id_lines(&journal.lines()),
        [
            "tool_call deny-1",
            "tool_result deny-1",
            "tool_call second",
            "tool_started second",
            "tool_result second",
        ]
    );

    let c = counted_pipeline(FaultyJournal::failing_from(3));
    let err = run(&c.pipeline, calls()).await.unwrap_err();
    assert_eq!(c.runs_b.load(Ordering::SeqCst), 0);
    let committed: Vec<&str> = err.committed.iter().map(|r| r.call_id()).collect();
    assert_eq!(committed, ["deny-1"]);
}

fn kind_and_id_lines(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let r = parse_object(l);
            format!("{} {}", str_field(&r, "kind"), str_field(&r, "call_id"))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The typed records: every kind round-trips; what is not a record is an error naming the line
// ---------------------------------------------------------------------------------------------

/// One record of every kind of DESIGN §6's closed list.
fn one_of_every_kind(
    result: &FrozenResult,
    attached: &dsh_core::AttachedContext,
) -> Vec<Record<'static>> {
    use dsh_core::journal::{Held, RequestedCall, ResumedFrom};
    use std::borrow::Cow;
    let totals = Totals {
        steps: 3,
        prompt_tokens: 120,
        completion_tokens: 45,
        cost_usd: Some(0.25),
    };
    let result: FrozenResult = serde_json::from_str(&result.to_json()).unwrap();
    vec![
        Record::SessionStart {
            workspace: Cow::Owned(PathBuf::from("/tmp/ws")),
            provider: Some("openai".into()),
            model: None,
            dsh_version: "0.1.0".into(),
            config_digest: "abc".into(),
            resumed_from: Some(ResumedFrom {
                session: "s-old".into(),
                seq: 7,
                hash: GENESIS.into(),
            }),
            mode: Some("read-only".into()),
            tools_mode: Some("both".into()),
            client: Some("an editor".into()),
        },
        Record::UserMessage { text: "hi".into() },
        Record::LlmCall {
            step: 1,
            provider: "openai".into(),
            model: "m".into(),
            prompt_tokens: 10,
            completion_tokens: 2,
            tokens_estimated: false,
            cached_tokens: 4,
            cache_write_tokens: 1,
            cost_usd: Some(0.25),
            elapsed_ms: 5,
            has_tool_calls: true,
            finish_reason: Cow::Owned(json!({"other": "weird"})),
        },
        Record::AssistantMessage {
            step: 1,
            content: "".into(),
            tool_calls: vec![RequestedCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: "{not json".into(),
            }],
            reasoning: Some("because".into()),
        },
        Record::ToolCall {
            call_id: "c1".into(),
            name: "read_file".into(),
            args: json!({"path": "a.txt"}).into(),
            source: CallSource::Code,
            parent: Some("c0".into()),
            step: 1,
        },
        Record::Approval {
            call_id: "c1".into(),
            outcome: ApprovalOutcome::Rejected,
            message: Some("use notes.md instead".into()),
        },
        Record::ToolStarted {
            call_id: "c1".into(),
        },
        Record::ToolResult(Held::Owned(result)),
        Record::ContextAttached(Held::Owned(attached.clone())),
        Record::Stop {
            reason: "model_error".into(),
            error: Some("connection refused".into()),
            totals,
        },
        Record::SessionEnd {
            reason: "interrupted".into(),
            signal: Some("SIGINT".into()),
            totals,
        },
        Record::SubAgentStart {
            child: "sub-1".into(),
            profile: "explore".into(),
            call_id: "c2".into(),
            task: "look around".into(),
        },
        Record::SubAgentEnd {
            child: "sub-1".into(),
            stop: "finished".into(),
            steps: 2,
            tokens: 300,
            cost_usd: None,
        },
        Record::ContextCompacted {
            replaced: vec![2, 3, 4],
            turns: 1,
            summary: "earlier".into(),
            tokens_before: 1000,
            tokens_after: 100,
        },
        Record::HistoryCleared {},
        Record::SessionNamed {
            name: "refactor".into(),
            point: Some(12),
        },
        Record::ModeChanged {
            mode: "auto".into(),
            by: "person".into(),
        },
        Record::ModelChanged {
            provider: "ollama".into(),
            model: "llama3".into(),
            base_url: "http://localhost:11434/v1".into(),
        },
        Record::Checkpoint {
            call_id: "c1".into(),
            path: "src/lib.rs".into(),
            before: Some("ab".repeat(32).into()),
            after: None,
        },
    ]
}

#[tokio::test]
async fn every_record_kind_round_trips_through_the_file() {
    // A real frozen result, from a real batch.
    let memory = Arc::new(MemoryJournal::new("s-rt"));
    let p = mixed_pipeline(memory, Arc::new(AtomicUsize::new(0)));
    let results = run_mixed(&p).await;
    let attached = dsh_core::AttachedContext {
        call_id: "c1".to_owned(),
        policy: "notes".to_owned(),
        text: "remember this".to_owned(),
    };
    let records = one_of_every_kind(&results[0], &attached);
    // One of each: a kind added to `Record` fails to compile here until it is added above.
    let index = |r: &Record<'_>| match r {
        Record::SessionStart { .. } => 0,
        Record::UserMessage { .. } => 1,
        Record::LlmCall { .. } => 2,
        Record::AssistantMessage { .. } => 3,
        Record::ToolCall { .. } => 4,
        Record::Approval { .. } => 5,
        Record::ToolStarted { .. } => 6,
        Record::ToolResult(_) => 7,
        Record::ContextAttached(_) => 8,
        Record::Stop { .. } => 9,
        Record::SessionEnd { .. } => 10,
        Record::SubAgentStart { .. } => 11,
        Record::SubAgentEnd { .. } => 12,
        Record::ContextCompacted { .. } => 13,
        Record::HistoryCleared {} => 14,
        Record::SessionNamed { .. } => 15,
        Record::ModeChanged { .. } => 16,
        Record::ModelChanged { .. } => 17,
        Record::Checkpoint { .. } => 18,
    };
    let indices: Vec<usize> = records.iter().map(index).collect();
    assert_eq!(indices, (0..19).collect::<Vec<_>>());

    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let journal = JsonlJournal::create(&path, "s-rt", SyncPolicy::BatchEnd).unwrap();
    for (i, r) in records.iter().enumerate() {
        let seq = match r {
            Record::Stop { .. } | Record::SessionEnd { .. } => journal.append_closing(r),
            _ if i % 2 == 1 => journal.append_as(Some("sub-1"), r),
            _ => journal.append(r),
        }
        .unwrap();
        assert_eq!(seq, i as u64 + 1);
    }
    journal.sync().unwrap();

    let t = read_journal(&path).unwrap();
    assert_eq!(t.torn_tail, None);
    assert_eq!(t.records.len(), records.len());
    let text = std::fs::read_to_string(&path).unwrap();
    for (i, ((entry, written), line)) in
        t.records.iter().zip(&records).zip(text.lines()).enumerate()
    {
        assert_eq!(&entry.record, written, "line {}", i + 1);
        assert_eq!(entry.seq, i as u64 + 1);
        assert_eq!(entry.session, "s-rt");
        let closing = matches!(written, Record::Stop { .. } | Record::SessionEnd { .. });
        let agent = (i % 2 == 1 && !closing).then_some("sub-1");
        assert_eq!(entry.agent.as_deref(), agent, "line {}", i + 1);
        assert_eq!(entry.hash, sha256_hex(line));
        // The envelope keeps its order around the record's own fields.
        assert!(
            line.starts_with(&format!(r#"{{"v":1,"seq":{},"ts":""#, i + 1)),
            "{line}"
        );
        assert!(line.contains(r#","session":"s-rt","kind":""#), "{line}");
    }
    // The result record is the §4 result object, byte for byte, after the envelope.
    let result_line = text.lines().nth(7).unwrap();
    let body = results[0].to_json();
    assert!(
        result_line.contains(&format!(
            r#""kind":"tool_result",{}"#,
            &body[1..body.len() - 1]
        )),
        "{result_line}"
    );
}

#[test]
fn an_unknown_kind_is_an_error_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let journal = JsonlJournal::create(&path, "s-unknown", SyncPolicy::BatchEnd).unwrap();
    journal
        .append(&Record::UserMessage { text: "hi".into() })
        .unwrap();
    drop(journal);
    // A well-chained second line of a kind the list does not have.
    let first = std::fs::read_to_string(&path).unwrap();
    let prev = sha256_hex(first.trim_end_matches('\n'));
    let second = format!(
        r#"{{"v":1,"seq":2,"ts":"2026-12-01T00:00:00.000Z","session":"s-unknown","kind":"telepathy","prev":"{prev}"}}"#
    );
    std::fs::write(&path, format!("{first}{second}\n")).unwrap();
    let err = read_journal(&path).unwrap_err();
    assert!(
        matches!(&err, ReadError::BadRecord { line: 2, path: p, .. } if *p == path.display().to_string()),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("line 2"), "{message}");
    assert!(message.contains("telepathy"), "{message}");
}

#[test]
fn a_malformed_line_is_an_error_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let journal = JsonlJournal::create(&path, "s-bad", SyncPolicy::BatchEnd).unwrap();
    journal
        .append(&Record::UserMessage { text: "hi".into() })
        .unwrap();
    drop(journal);
    let first = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{first}{{\"v\":1,\"seq\":2,\n")).unwrap();
    let err = read_journal(&path).unwrap_err();
    assert!(
        matches!(&err, ReadError::NotJson { line: 2, path: p, .. } if *p == path.display().to_string()),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("line 2"), "{message}");

    // A known kind missing one of its fields is not a record either.
    let prev = sha256_hex(first.trim_end_matches('\n'));
    let second = format!(
        r#"{{"v":1,"seq":2,"ts":"2026-12-01T00:00:00.000Z","session":"s-bad","kind":"tool_started","prev":"{prev}"}}"#
    );
    std::fs::write(&path, format!("{first}{second}\n")).unwrap();
    let err = read_journal(&path).unwrap_err();
    assert!(
        matches!(&err, ReadError::BadRecord { line: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("call_id"), "{err}");
}

/// Digests of JSON values hash what they say, not the order their maps keep: keys sorted at
/// every depth, compact, exactly as a sorted map serializes (so approvals recorded before
/// maps kept their order still hold).
#[test]
fn json_digests_do_not_depend_on_key_order() {
    use dsh_core::journal::{canonical_json, json_digest};
    let a: serde_json::Value =
        serde_json::from_str(r#"{"b":1,"a":{"d":[1,{"z":"\"q\"","y":2}],"c":"é"}}"#).unwrap();
    let b: serde_json::Value =
        serde_json::from_str(r#"{"a":{"c":"é","d":[1,{"y":2,"z":"\"q\""}]},"b":1}"#).unwrap();
    assert_eq!(
        canonical_json(&a),
        r#"{"a":{"c":"é","d":[1,{"y":2,"z":"\"q\""}]},"b":1}"#
    );
    assert_eq!(json_digest(&a), json_digest(&b));
    assert_ne!(
        json_digest(&a),
        json_digest(&serde_json::json!({"a": 1, "b": 1}))
    );
}
