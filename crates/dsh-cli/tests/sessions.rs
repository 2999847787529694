//! `dsh sessions list | show | verify` through the built binary, over journals written by real
//! `dsh batch` runs in an isolated world (and copies of them cut or edited by hand).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{Dirs, json_lines, stderr, stdout};
use dsh_core::journal::{
    Journal, JsonlJournal, Record, ResumedFrom, SyncPolicy, Totals, read_journal,
};
use serde_json::{Value, json};

/// `dsh ARGS…` in the world, without the `--workspace` that `Dirs::dsh` always passes.
fn dsh(d: &Dirs, args: &[&str]) -> Command {
    d.dsh_in(d.root(), args)
}

fn run(d: &Dirs, args: &[&str]) -> Output {
    dsh(d, args).output().unwrap()
}

fn sessions_dir(d: &Dirs) -> PathBuf {
    d.home.join("sessions")
}

fn journals(d: &Dirs) -> BTreeSet<PathBuf> {
    match std::fs::read_dir(sessions_dir(d)) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => BTreeSet::new(),
    }
}

/// Three calls: one allowed read, one shell command the shell policy denies, one write that
/// needs approval nobody can give. Returns the journal the run wrote.
fn batch_in(d: &Dirs, workspace: &Path) -> PathBuf {
    std::fs::write(workspace.join("a.txt"), "hello\n").unwrap();
    let before = journals(d);
    let calls = [
        json!({"name":"read_file","args":{"path":"a.txt"}}),
        json!({"name":"run_shell","args":{"command":"curl http://example.com"}}),
        json!({"name":"write_file","args":{"path":"b.txt","content":"x"}}),
    ];
    let ws = workspace.to_str().unwrap();
    let mut child = dsh(d, &["--workspace", ws, "batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for c in &calls {
            writeln!(stdin, "{c}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let after = journals(d);
    let new: Vec<_> = after.difference(&before).cloned().collect();
    assert_eq!(new.len(), 1, "{new:?}");
    // Start times are kept to the millisecond: this run started before `now`; wait until the
    // clock's millisecond has moved past it, so that "newest first" is defined for the next.
    let journal = new.into_iter().next().unwrap();
    let ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    };
    let now = ms();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while ms() <= now {
        assert!(
            std::time::Instant::now() < deadline,
            "the clock stood still"
        );
        std::thread::yield_now();
    }
    journal
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Writes `lines` (each with its newline) as `<id>.jsonl` next to the journals.
fn write_copy(d: &Dirs, id: &str, lines: &[String]) -> PathBuf {
    let path = sessions_dir(d).join(format!("{id}.jsonl"));
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    path
}

/// The journal cut right after its first `tool_result` line: the process "died".
fn cut_after_first_result(d: &Dirs, from: &Path, id: &str) -> PathBuf {
    let all = lines(from);
    let n = all
        .iter()
        .position(|l| l.contains(r#""kind":"tool_result""#))
        .unwrap();
    write_copy(d, id, &all[..=n])
}

fn id_of(path: &Path) -> String {
    path.file_stem().unwrap().to_str().unwrap().to_owned()
}

#[test]
fn list_is_newest_first_with_totals_and_says_which_did_not_end() {
    let d = Dirs::new();
    let first = batch_in(&d, &d.ws);
    let second = batch_in(&d, &d.ws);
    // A copy of the first run whose last records were cut off: no stop, no session_end.
    let cut = cut_after_first_result(&d, &first, "20000101T000000Z-0000dead");
    // A copy of the second whose closing records carry totals, as a model run's do: list
    // takes them from the last two lines without reading the rest.
    let mut spent = lines(&second);
    for l in spent.iter_mut().rev().take(2) {
        let mut v: Value = serde_json::from_str(l).unwrap();
        v["steps"] = json!(3);
        v["prompt_tokens"] = json!(1200);
        v["completion_tokens"] = json!(34);
        v["cost_usd"] = json!(0.0125);
        *l = v.to_string();
    }
    let spent = write_copy(&d, "20000101T000000Z-0000beef", &spent);

    let out = run(&d, &["sessions", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = json_lines(&out);
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    // Newest first by start time; the copies keep their originals' start, ties go by id.
    assert_eq!(
        ids,
        [
            id_of(&second).as_str(),
            id_of(&spent).as_str(),
            id_of(&first).as_str(),
            id_of(&cut).as_str()
        ]
    );
    let row = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap();
    let ended = row(&id_of(&first));
    assert_eq!(ended["stop"], "batch_complete");
    assert_eq!(ended["end"], "finished");
    assert_eq!(ended["workspace"], d.ws.to_str().unwrap());
    assert_eq!(ended["steps"], 0);
    assert_eq!(ended["cost_usd"], 0.0);
    assert_eq!(ended["resumed_from"], Value::Null);
    let keys: BTreeSet<&str> = ended
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let expected: BTreeSet<&str> = [
        "id",
        "started",
        "workspace",
        "provider",
        "model",
        "steps",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "stop",
        "resumed_from",
        "end",
        "name",
        "first_prompt",
        "turns",
        "chain",
    ]
    .into();
    assert_eq!(keys, expected);
    let spent_row = row(&id_of(&spent));
    assert_eq!(
        (
            &spent_row["steps"],
            &spent_row["prompt_tokens"],
            &spent_row["completion_tokens"],
            &spent_row["cost_usd"]
        ),
        (&json!(3), &json!(1200), &json!(34), &json!(0.0125))
    );
    let died = row(&id_of(&cut));
    assert_eq!(died["end"], "did_not_end");
    assert_eq!(died["stop"], Value::Null);
    assert_eq!(died["cost_usd"], Value::Null);

    let text = stdout(&run(&d, &["sessions", "list"]));
    let line = |id: &str| text.lines().find(|l| l.starts_with(id)).unwrap().to_owned();
    assert!(line(&id_of(&cut)).contains("did not end"), "{text}");
    assert!(
        line(&id_of(&first)).contains("finished (batch_complete)"),
        "{text}"
    );
    assert!(line(&id_of(&spent)).contains("1200+34"), "{text}");

    // A journal whose lock another process holds is being written: "running".
    let held = std::fs::File::open(&cut).unwrap();
    held.try_lock().unwrap();
    let text = stdout(&run(&d, &["sessions", "list"]));
    let running = text.lines().find(|l| l.starts_with(&id_of(&cut))).unwrap();
    assert!(running.contains("running"), "{text}");
}

#[test]
fn list_reads_back_past_last_lines_longer_than_its_first_read() {
    let d = Dirs::new();
    let journal = batch_in(&d, &d.ws);
    // The first result's line made long (its content padded): the cut copy ends with it, so
    // finding the last whole line needs more than the first 8 KiB read from the end.
    let mut all = lines(&journal);
    let n = all
        .iter()
        .position(|l| l.contains(r#""kind":"tool_result""#))
        .unwrap();
    let mut v: Value = serde_json::from_str(&all[n]).unwrap();
    v["content"] = json!("x".repeat(40_000));
    all[n] = v.to_string();
    let long = write_copy(&d, "20000101T000000Z-0000long", &all[..=n]);
    let whole = write_copy(&d, "20000101T000000Z-0000whol", &all);
    let rows = json_lines(&run(&d, &["sessions", "list", "--json"]));
    let row = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap().clone();
    assert_eq!(row(&id_of(&long))["end"], "did_not_end");
    assert_eq!(row(&id_of(&whole))["end"], "finished");
    assert_eq!(row(&id_of(&whole))["stop"], "batch_complete");
}

#[test]
fn list_filters_by_workspace_only_when_it_is_given() {
    let d = Dirs::new();
    let here = batch_in(&d, &d.ws);
    let there = batch_in(&d, &d.outside);
    let ids = |out: &Output| -> Vec<String> {
        assert!(out.status.success(), "{}", stderr(out));
        json_lines(out)
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    // No --workspace: every workspace, even though the default is ".".
    assert_eq!(
        ids(&run(&d, &["sessions", "list", "--json"])),
        [id_of(&there), id_of(&here)]
    );
    let ws = d.ws.to_str().unwrap();
    assert_eq!(
        ids(&run(&d, &["sessions", "list", "--json", "--workspace", ws])),
        [id_of(&here)]
    );
    // Before the verb too, and compared as canonical paths (a `..` detour matches).
    let detour = format!("{}/../ws", d.outside.display());
    assert_eq!(
        ids(&run(
            &d,
            &["--workspace", &detour, "sessions", "list", "--json"]
        )),
        [id_of(&here)]
    );
    // `.` given explicitly is a filter: the cwd here (the world's root) has no sessions.
    assert!(
        ids(&run(
            &d,
            &["--workspace", ".", "sessions", "list", "--json"]
        ))
        .is_empty()
    );
}

#[test]
fn show_prints_one_line_per_tool_call_with_outcome_and_deciding_policy() {
    let d = Dirs::new();
    let journal = batch_in(&d, &d.ws);
    let id = id_of(&journal);
    let out = run(&d, &["sessions", "show", &id[..20]]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let tools: Vec<&str> = text.lines().filter(|l| l.starts_with("tool ")).collect();
    assert_eq!(tools.len(), 3, "{text}");
    assert!(
        tools[0].starts_with("tool read_file path=a.txt → ok by pre_policy/"),
        "{text}"
    );
    assert!(
        tools[1].starts_with(
            r#"tool run_shell command="curl http://example.com" → denied by pre_policy/shell: "#
        ),
        "{text}"
    );
    assert!(tools[2].contains("→ unavailable by approval/"), "{text}");
    assert!(tools.iter().all(|l| l.ends_with(" ms]")), "{text}");
    assert!(text.contains("stop: batch_complete"), "{text}");

    // --json: the records, as written.
    let out = run(&d, &["sessions", "show", &id, "--json"]);
    let records = json_lines(&out);
    let written: Vec<Value> = lines(&journal)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records, written);
}

#[test]
fn ids_are_full_ids_unique_prefixes_or_paths_and_otherwise_exit_2() {
    let d = Dirs::new();
    let a = batch_in(&d, &d.ws);
    let _b = batch_in(&d, &d.ws);
    let a_id = id_of(&a);
    for given in [a_id.as_str(), &a_id[..22], a.to_str().unwrap()] {
        let out = run(&d, &["sessions", "verify", given]);
        assert_eq!(out.status.code(), Some(0), "{given}: {}", stderr(&out));
    }
    let out = run(&d, &["sessions", "show", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`2` is ambiguous"),
        "{}",
        stderr(&out)
    );
    let out = run(&d, &["sessions", "show", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no session matches `nope`"),
        "{}",
        stderr(&out)
    );
}

fn verify(d: &Dirs, path: &Path) -> (Option<i32>, String) {
    let out = run(d, &["sessions", "verify", path.to_str().unwrap()]);
    (out.status.code(), stdout(&out))
}

#[test]
fn verify_names_an_edited_record_a_deleted_one_and_a_torn_tail() {
    let d = Dirs::new();
    let journal = batch_in(&d, &d.ws);
    let (code, text) = verify(&d, &journal);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("intact, 11 records"), "{text}");
    let all = lines(&journal);

    // One byte changed inside line 2 (the first tool_call's path): still a valid record, so
    // the chain is what catches it, at line 3.
    let mut edited = all.clone();
    edited[1] = edited[1].replace(r#""path":"a.txt""#, r#""path":"a.txz""#);
    assert_ne!(edited[1], all[1]);
    let path = write_copy(&d, "edited", &edited);
    let (code, text) = verify(&d, &path);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("edited.jsonl: BROKEN at line 2 (seq 2)"),
        "{text}"
    );
    assert!(text.contains("was changed"), "{text}");

    // A middle record removed: the next one's seq gives it away.
    let mut deleted = all.clone();
    deleted.remove(4);
    let path = write_copy(&d, "deleted", &deleted);
    let (code, text) = verify(&d, &path);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("deleted.jsonl: BROKEN at line 5 (seq 5): seq is 6, expected 5"),
        "{text}"
    );

    // A torn last line (a crash mid-write): named, ignored; the rest verifies, so exit 0.
    let path = write_copy(&d, "torn", &all);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"v":1,"seq":12,"ts":"#);
    std::fs::write(&path, bytes).unwrap();
    let (code, text) = verify(&d, &path);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("intact, 11 records"), "{text}");
    assert!(text.contains("line 12 is torn (21 bytes"), "{text}");

    // Cut after a whole record: intact (a chain cannot tell), with a notice.
    let path = cut_after_first_result(&d, &journal, "cut");
    let (code, text) = verify(&d, &path);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("intact, 4 records; notice: the session did not end"),
        "{text}"
    );

    // The help says what a chain cannot prove.
    let help = stdout(&run(&d, &["sessions", "verify", "--help"]));
    assert!(help.contains("What a chain cannot prove"), "{help}");
}

/// A session resuming `old` at its record `seq` with `hash`, written with dsh's own journal.
fn resuming(d: &Dirs, id: &str, old: &str, seq: u64, hash: &str) -> PathBuf {
    let path = sessions_dir(d).join(format!("{id}.jsonl"));
    let journal = JsonlJournal::create(&path, id, SyncPolicy::EveryRecord).unwrap();
    journal
        .append(&Record::SessionStart {
            workspace: d.ws.as_path().into(),
            provider: None,
            model: None,
            dsh_version: "0.1.0".into(),
            config_digest: "test".into(),
            resumed_from: Some(ResumedFrom {
                session: old.into(),
                seq,
                hash: hash.into(),
            }),
            mode: None,
            tools_mode: None,
            client: None,
        })
        .unwrap();
    for record in [
        Record::Stop {
            reason: "batch_complete".into(),
            error: None,
            totals: Totals::none(),
        },
        Record::SessionEnd {
            reason: "finished".into(),
            signal: None,
            totals: Totals::none(),
        },
    ] {
        journal.append(&record).unwrap();
    }
    path
}

#[test]
fn verify_follows_resumed_from_links() {
    let d = Dirs::new();
    let journal = batch_in(&d, &d.ws);
    // The old session died after its first result; the new one resumes at that record.
    let old = cut_after_first_result(&d, &journal, "20000101T000000Z-00000001");
    let last = read_journal(&old).unwrap().records.pop().unwrap();
    let old_id = id_of(&old);
    let good = resuming(
        &d,
        "20000101T000001Z-00000002",
        &old_id,
        last.seq,
        &last.hash,
    );
    let (code, text) = verify(&d, &good);
    assert_eq!(code, Some(0), "{text}");
    let reported: Vec<&str> = text.lines().collect();
    assert_eq!(reported.len(), 2, "{text}");
    assert!(
        reported[0].contains("00000002.jsonl: intact, 3 records"),
        "{text}"
    );
    assert!(
        reported[1].contains("00000001.jsonl: intact, 4 records"),
        "{text}"
    );
    // list shows the link.
    let rows = json_lines(&run(&d, &["sessions", "list", "--json"]));
    let row = rows
        .iter()
        .find(|r| r["id"] == "20000101T000001Z-00000002")
        .unwrap();
    assert_eq!(
        row["resumed_from"],
        json!({"session": old_id, "seq": last.seq, "hash": last.hash})
    );

    // A link whose hash is not that record's.
    let wrong = "0".repeat(63) + "1";
    let bad = resuming(&d, "20000101T000002Z-00000003", &old_id, last.seq, &wrong);
    let (code, text) = verify(&d, &bad);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("00000003.jsonl: BROKEN at line 1 (seq 1): resumed_from names session"),
        "{text}"
    );
    assert!(text.contains("that record's hash is"), "{text}");

    // A link to a session that does not exist.
    let missing = resuming(
        &d,
        "20000101T000003Z-00000004",
        "20000101T000000Z-0000ffff",
        1,
        &wrong,
    );
    let (code, text) = verify(&d, &missing);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("does not exist"), "{text}");
}

/// A journal written with dsh's own writer: `(agent, record)` in order (`None`: main).
fn journal_of(d: &Dirs, id: &str, records: &[(Option<&str>, Record<'_>)]) -> PathBuf {
    let path = sessions_dir(d).join(format!("{id}.jsonl"));
    std::fs::create_dir_all(sessions_dir(d)).unwrap();
    let journal = JsonlJournal::create(&path, id, SyncPolicy::EveryRecord).unwrap();
    for (agent, record) in records {
        journal.append_as(*agent, record).unwrap();
    }
    path
}

fn session_start(d: &Dirs) -> Record<'static> {
    Record::SessionStart {
        workspace: d.ws.clone().into(),
        provider: Some("openai".into()),
        model: Some("m".into()),
        dsh_version: "0.1.0".into(),
        config_digest: "test".into(),
        resumed_from: None,
        mode: None,
        tools_mode: None,
        client: None,
    }
}

fn user(text: &str) -> Record<'_> {
    Record::UserMessage { text: text.into() }
}

fn assistant(content: &str) -> Record<'_> {
    Record::AssistantMessage {
        step: 1,
        content: content.into(),
        tool_calls: Vec::new(),
        reasoning: None,
    }
}

fn call<'a>(id: &'a str, name: &'a str, args: Value, parent: Option<&'a str>) -> Record<'a> {
    Record::ToolCall {
        call_id: id.into(),
        name: name.into(),
        args: args.into(),
        source: if parent.is_some() {
            dsh_core::CallSource::SubAgent
        } else {
            dsh_core::CallSource::Model
        },
        parent: parent.map(Into::into),
        step: 1,
    }
}

fn approved(id: &str) -> Record<'_> {
    Record::Approval {
        call_id: id.into(),
        outcome: dsh_core::ApprovalOutcome::AllowedOnce,
        message: None,
    }
}

/// An `ok` result of `tool`, decided at `execute`.
fn result(id: &str, tool: &str) -> Record<'static> {
    let r: dsh_core::FrozenResult = serde_json::from_value(json!({
        "call_id": id, "tool": tool, "ok": true, "failure_kind": null,
        "decided_by": {"gate": "execute", "policy": null, "reason": ""},
        "content": "done", "value": null, "elapsed_ms": 1, "exit_code": null, "sandbox": null,
    }))
    .unwrap();
    Record::ToolResult(dsh_core::journal::Held::Owned(r))
}

fn stop(reason: &str) -> Record<'_> {
    Record::Stop {
        reason: reason.into(),
        error: None,
        totals: Totals::none(),
    }
}

fn sub_start<'a>(child: &'a str, call_id: &'a str, task: &'a str) -> Record<'a> {
    Record::SubAgentStart {
        child: child.into(),
        profile: "search".into(),
        call_id: call_id.into(),
        task: task.into(),
    }
}

fn sub_end(child: &str) -> Record<'_> {
    Record::SubAgentEnd {
        child: child.into(),
        stop: "finished".into(),
        steps: 2,
        tokens: 300,
        cost_usd: None,
    }
}

fn session_end() -> Record<'static> {
    Record::SessionEnd {
        reason: "finished".into(),
        signal: None,
        totals: Totals::none(),
    }
}

/// `dsh sessions show ID`'s lines after the first (`session …  started <time> …`).
fn shown(d: &Dirs, id: &str) -> Vec<String> {
    let out = run(d, &["sessions", "show", id]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!("session {id}  started ")),
        "{text}"
    );
    text.lines().skip(1).map(str::to_owned).collect()
}

#[test]
fn show_nests_each_sub_agent_under_its_call_even_when_children_interleave() {
    let d = Dirs::new();
    let (main, s1, s2) = (None, Some("sub-1"), Some("sub-2"));
    // The main agent's `call_1` (approved) and two parallel children that number their own
    // calls from `call_1` too, their records interleaved as they ran.
    let path = journal_of(
        &d,
        "20000101T000000Z-0000sub2",
        &[
            (main, session_start(&d)),
            (main, user("look around")),
            (
                main,
                call("call_1", "read_file", json!({"path": "main.txt"}), None),
            ),
            (main, approved("call_1")),
            (main, result("call_1", "read_file")),
            (
                main,
                call(
                    "call_2",
                    "call_sub_agent",
                    json!({"profile": "search", "task": "find A"}),
                    None,
                ),
            ),
            (
                main,
                call(
                    "call_3",
                    "call_sub_agent",
                    json!({"profile": "search", "task": "find B"}),
                    None,
                ),
            ),
            (main, sub_start("sub-1", "call_2", "find A")),
            (s1, user("find A")),
            (main, sub_start("sub-2", "call_3", "find B")),
            (s2, user("find B")),
            (
                s1,
                call("call_1", "grep", json!({"pattern": "A"}), Some("call_2")),
            ),
            (
                s2,
                call(
                    "call_1",
                    "find_files",
                    json!({"pattern": "*.b"}),
                    Some("call_3"),
                ),
            ),
            (s2, result("call_1", "find_files")),
            (s1, result("call_1", "grep")),
            (s1, assistant("A is in a.rs")),
            (s2, assistant("B is b.b")),
            (s1, stop("finished")),
            (main, sub_end("sub-1")),
            (s2, stop("finished")),
            (main, sub_end("sub-2")),
            (main, result("call_2", "call_sub_agent")),
            (main, result("call_3", "call_sub_agent")),
            (main, assistant("both found")),
            (main, stop("finished")),
            (main, session_end()),
        ],
    );
    let lines = shown(&d, &id_of(&path));
    let stopped = "stop: finished (0 steps, 0+0 tokens, $0.0000)";
    let expected = [
        "user: look around".to_owned(),
        "tool read_file path=main.txt → ok by execute/- (approval: allowed_once) [1 ms]".to_owned(),
        "sub-agent sub-1 (search) starts: find A".to_owned(),
        "  │ [sub-1] user: find A".to_owned(),
        "  │ [sub-1] tool grep pattern=A → ok by execute/- [1 ms]".to_owned(),
        "  │ [sub-1] assistant: A is in a.rs".to_owned(),
        format!("  │ [sub-1] {stopped}"),
        "sub-agent sub-1 ends: finished (2 steps, 300 tokens)".to_owned(),
        "sub-agent sub-2 (search) starts: find B".to_owned(),
        "  │ [sub-2] user: find B".to_owned(),
        "  │ [sub-2] tool find_files pattern=*.b → ok by execute/- [1 ms]".to_owned(),
        "  │ [sub-2] assistant: B is b.b".to_owned(),
        format!("  │ [sub-2] {stopped}"),
        "sub-agent sub-2 ends: finished (2 steps, 300 tokens)".to_owned(),
        "tool call_sub_agent profile=search task=\"find A\" → ok by execute/- [1 ms]".to_owned(),
        "tool call_sub_agent profile=search task=\"find B\" → ok by execute/- [1 ms]".to_owned(),
        "assistant: both found".to_owned(),
        stopped.to_owned(),
        "end: finished".to_owned(),
    ];
    assert_eq!(lines, expected, "{lines:#?}");

    // The same shape without sub-agents prints flat and untagged, as it always has.
    let path = journal_of(
        &d,
        "20000101T000000Z-0000flat",
        &[
            (main, session_start(&d)),
            (main, user("look")),
            (
                main,
                call("call_1", "read_file", json!({"path": "main.txt"}), None),
            ),
            (main, approved("call_1")),
            (main, result("call_1", "read_file")),
            (main, assistant("done")),
            (main, stop("finished")),
            (main, session_end()),
        ],
    );
    assert_eq!(
        shown(&d, &id_of(&path)),
        [
            "user: look",
            "tool read_file path=main.txt → ok by execute/- (approval: allowed_once) [1 ms]",
            "assistant: done",
            stopped,
            "end: finished",
        ]
    );
}

#[test]
fn show_keeps_sub_agent_records_without_a_start_and_says_when_a_child_did_not_end() {
    let d = Dirs::new();
    let (main, s3, s4) = (None, Some("sub-3"), Some("sub-4"));
    // sub-3's start was lost (the file was cut and stitched, or a writer is broken): its
    // records stay where they are, tagged. sub-4 started but the process died in it.
    let path = journal_of(
        &d,
        "20000101T000000Z-0000orph",
        &[
            (main, session_start(&d)),
            (s3, user("orphan task")),
            (main, user("meanwhile")),
            (
                s3,
                call("call_1", "grep", json!({"pattern": "x"}), Some("call_9")),
            ),
            (s3, result("call_1", "grep")),
            (main, sub_end("sub-3")),
            (
                main,
                call(
                    "call_1",
                    "call_sub_agent",
                    json!({"profile": "search", "task": "t"}),
                    None,
                ),
            ),
            (main, sub_start("sub-4", "call_1", "t")),
            (s4, user("t")),
            (
                s4,
                call("call_1", "read_file", json!({"path": "x"}), Some("call_1")),
            ),
        ],
    );
    let out = run(&d, &["sessions", "show", &id_of(&path)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(
        lines,
        [
            "[sub-3] user: orphan task",
            "user: meanwhile",
            "[sub-3] tool grep pattern=x → ok by execute/- [1 ms]",
            "sub-agent sub-3 ends: finished (2 steps, 300 tokens)",
            "sub-agent sub-4 (search) starts: t",
            "  │ [sub-4] user: t",
            "sub-agent sub-4 did not end (no sub_agent_end record)",
            "(the session did not end: no session_end record)",
        ],
        "{text}"
    );
}

fn llm_call(prompt_tokens: u64, completion_tokens: u64) -> Record<'static> {
    Record::LlmCall {
        step: 1,
        provider: "openai".into(),
        model: "m".into(),
        prompt_tokens,
        completion_tokens,
        tokens_estimated: false,
        cached_tokens: 0,
        cache_write_tokens: 0,
        cost_usd: None,
        elapsed_ms: 1,
        has_tool_calls: false,
        finish_reason: std::borrow::Cow::Owned(json!("stop")),
    }
}

#[test]
fn list_counts_a_childs_tokens_in_a_session_that_did_not_end() {
    let d = Dirs::new();
    let id = "20000101T000000Z-0000c0de";
    journal_of(
        &d,
        id,
        &[
            (None, session_start(&d)),
            (None, user("go")),
            (None, llm_call(100, 10)),
            (None, sub_start("sub-1", "call_1", "look")),
            (Some("sub-1"), llm_call(40, 4)),
        ],
    );
    let out = run(&d, &["sessions", "list", "--json"]);
    let rows = json_lines(&out);
    let row = rows.iter().find(|r| r["id"] == id).unwrap();
    // Steps are the main agent's; the tokens are the session's, its child's included.
    assert_eq!(
        (
            &row["steps"],
            &row["prompt_tokens"],
            &row["completion_tokens"]
        ),
        (&json!(1), &json!(140), &json!(14))
    );
    assert_eq!(row["end"], "did_not_end");
}

#[test]
fn show_loses_no_record_of_children_whose_starts_name_each_other() {
    let d = Dirs::new();
    let id = "20000101T000000Z-0000cyc1";
    // A corrupt file: each child's start written by the other, so no start is reachable
    // from the main agent's records.
    journal_of(
        &d,
        id,
        &[
            (None, session_start(&d)),
            (Some("sub-2"), sub_start("sub-1", "call_1", "one")),
            (Some("sub-1"), sub_start("sub-2", "call_2", "two")),
            (Some("sub-1"), user("from one")),
        ],
    );
    let text = stdout(&run(&d, &["sessions", "show", id]));
    for needle in [
        "sub-agent sub-1 (search) starts: one",
        "sub-agent sub-2 (search) starts: two",
        "user: from one",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}

/// A name given with `/save` resolves where an id does, with precedence exact id, then
/// name, then unique prefix (DESIGN §4).
#[test]
fn names_resolve_between_exact_ids_and_prefixes() {
    let d = Dirs::new();
    fn named(name: &str) -> Record<'_> {
        Record::SessionNamed {
            name: name.into(),
            point: Some(2),
        }
    }
    let a = journal_of(
        &d,
        "20260101T000000Z-aaaa0001",
        &[
            (None, session_start(&d)),
            (None, user("in a")),
            (None, named("work")),
        ],
    );
    // Named with b's exact id, and with a prefix shared by both ids.
    let b = journal_of(
        &d,
        "20260101T000000Z-bbbb0002",
        &[
            (None, session_start(&d)),
            (None, user("in b")),
            (None, named("20260101T000000Z-aaaa0001")),
            (None, named("2026")),
        ],
    );
    let shown = |given: &str| {
        let out = run(&d, &["sessions", "show", given]);
        assert_eq!(out.status.code(), Some(0), "{given}: {}", stderr(&out));
        stdout(&out)
    };
    assert!(shown("work").contains("in a"), "a name");
    // An exact id wins over a name equal to it.
    assert!(shown(&id_of(&a)).contains("in a"));
    // A name wins over the ids it is a prefix of (ambiguous as a prefix).
    assert!(shown("2026").contains("in b"));
    assert!(shown(&id_of(&b)[..20]).contains("in b"), "a unique prefix");
}

/// A chain of resumed journals lists as one session: the newest file's id, the chain's files
/// oldest first, its name, first prompt and turns; a human header names the columns.
#[test]
fn a_chain_of_resumed_journals_lists_as_one_session() {
    use dsh_testkit::model_server::{Reply, ScriptedServer};
    let d = Dirs::new();
    let server = ScriptedServer::start(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("alone"),
    ]);
    let out = common::scripted_exec(&d, &server.url, &[], "fix the flaky test")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let first = id_of(&common::journals(&d.home)[0]);
    let out = common::scripted_exec(&d, &server.url, &["--resume", &first], "and the docs")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = common::scripted_exec(&d, &server.url, &[], "something else")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let all = common::journals(&d.home);
    assert_eq!(all.len(), 3);

    let rows = json_lines(&run(&d, &["sessions", "list", "--json"]));
    assert_eq!(rows.len(), 2, "{rows:#?}");
    let chained = rows.iter().find(|r| r["turns"] == 2).unwrap();
    assert_eq!(chained["first_prompt"], "fix the flaky test");
    let chain: Vec<&str> = chained["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(chain.len(), 2);
    assert_eq!(chain[0], first);
    assert_eq!(chained["id"], chain[1]);
    assert_eq!(chained["name"], Value::Null);
    let alone = rows.iter().find(|r| r["turns"] == 1).unwrap();
    assert_eq!(alone["first_prompt"], "something else");
    assert_eq!(alone["chain"].as_array().unwrap().len(), 1);

    let text = stdout(&run(&d, &["sessions", "list"]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("FIRST PROMPT"),
        "{text}"
    );
    assert_eq!(lines.len(), 3, "{text}");
    assert!(text.contains("fix the flaky test"), "{text}");
    assert!(text.contains("just now"), "{text}");
}

/// What a journal quotes (a first prompt, a name) reaches the terminal with its control
/// characters made visible: a listing cannot retitle the window or write the clipboard.
#[test]
fn the_list_shows_control_characters_as_visible_text() {
    let d = Dirs::new();
    journal_of(
        &d,
        "20260101T000000Z-cccc0003",
        &[
            (None, session_start(&d)),
            (None, user("evil \u{1b}]52;c;Zm9v\u{7} prompt")),
            (
                None,
                Record::SessionNamed {
                    name: "n\u{1b}]0;t\u{7}".into(),
                    point: Some(2),
                },
            ),
        ],
    );
    let text = stdout(&run(&d, &["sessions", "list"]));
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(text.contains("evil ^[]52;c;Zm9v^G prompt"), "{text}");
}

/// `sessions show` makes what the journal quotes visible: an answer cannot retitle the window.
#[test]
fn show_makes_control_characters_visible() {
    let d = Dirs::new();
    let path = journal_of(
        &d,
        "20260101T000000Z-dddd0004",
        &[
            (None, session_start(&d)),
            (None, user("look \u{1b}]0;owned\u{7} here\nsecond line")),
            (None, assistant("done \u{1b}[2J")),
        ],
    );
    let text = stdout(&run(&d, &["sessions", "show", path.to_str().unwrap()]));
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(text.contains("look ^[]0;owned^G here"), "{text}");
    assert!(text.contains("second line"), "{text}");
}
