//! `dsh replay` (DESIGN §4): every recorded `tool_call` of one journal, driven again through
//! today's gates 1 and 3 as a dry run, beside the decision the journal recorded for it.
//!
//! Two halves, kept apart so each can be tested alone:
//!
//! - [`recorded_calls`] reads what the journal says: each `tool_call`, paired with its
//!   `approval` and `tool_result` records, and the decision those imply ([`Recorded`]). It is
//!   pure: no session, no I/O.
//! - [`replay`] asks an assembled (dry) session what it decides today for each of those calls
//!   — [`dsh_core::Pipeline::check`], the code path `dsh check` uses, so the tool never runs,
//!   nobody is asked, and gate-1 listeners (hooks included) do run — and marks a row
//!   `changed` when the two decisions differ.
//!
//! Only the one file is read: `session_start.resumed_from` is not followed. The calls a
//! resumed session closes for the file it resumes have no `tool_call` in the new file and are
//! not replayed.

use std::collections::HashMap;

use dsh_core::journal::{Entry, Record, Stored};
use dsh_core::{CallSource, Decision, FailureKind, Gate, ToolCall, ToolSet};
use serde::Serialize;
use serde_json::Value;

use crate::Session;

/// The decision a journal recorded for one call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Recorded {
    pub decision: Decision,
    /// The gate its `tool_result` names (`decided_by.gate`); `None` when the call has no
    /// result (the process died).
    pub gate: Option<Gate>,
    /// The policy its `tool_result` names (`decided_by.policy`).
    pub policy: Option<String>,
}

/// What gates 1 and 3 decide for the call today.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Today {
    pub decision: Decision,
    pub gate: Gate,
    pub policy: Option<String>,
    pub reason: String,
}

/// One recorded `tool_call`, as the journal has it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedCall {
    pub seq: u64,
    pub call_id: String,
    pub tool: String,
    pub args: Value,
    /// Where the call came from: a call a person typed is judged as theirs again.
    pub source: CallSource,
    /// The agent that made the call; `None` is the main agent.
    pub agent: Option<String>,
    /// The profile that agent ran, from its `sub_agent_start` record (`None` for the main
    /// agent, or a sub-agent whose start the file does not hold).
    pub profile: Option<String>,
    /// `None`: the call never reached gate 1 (see [`recorded_calls`]).
    pub recorded: Option<Recorded>,
    /// The permission mode in force when the call was made (`session_start`, then each
    /// `mode_changed`); `None` in a journal older than the modes.
    pub mode: Option<dsh_config::PermissionMode>,
}

/// One line of `dsh replay`. Serializes to DESIGN §4's object, field for field; `args` and
/// `agent` are there for front ends that show them, not part of the object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub seq: u64,
    pub call_id: String,
    pub tool: String,
    #[serde(skip)]
    pub args: Value,
    #[serde(skip)]
    pub agent: Option<String>,
    pub recorded: Option<Recorded>,
    pub today: Today,
    /// The recorded and today's decisions (allow/ask/deny) differ; gates, policies and
    /// reasons are not compared. Always `false` when `recorded` is `None`.
    pub changed: bool,
}

/// The tool set the agent that made a call has today: the one place that chooses it.
///
/// The main agent (`agent` `None`) has every tool of the session but those withheld from
/// models (the person's `restore_file`), for the calls its model made; the calls no model
/// made had every tool. A sub-agent has its
/// profile's set as `profiles` define it today (a profile whose tools changed is judged by
/// its new list); a sub-agent whose profile is unknown — no `sub_agent_start` for it in the
/// file, or a profile no longer configured — has no tool at all, as the loop could not start
/// it.
pub fn tool_set_for(
    agent: Option<&str>,
    profile: Option<&str>,
    source: dsh_core::CallSource,
    session: &Session,
) -> ToolSet {
    if agent.is_none() {
        // The main agent's model (and its programs) had its tool set; the calls no model
        // made — a person's, a batch line, a configured command — had every tool.
        return match source {
            CallSource::Model | CallSource::Code | CallSource::SubAgent => session.main_tools(),
            CallSource::User | CallSource::Batch | CallSource::Config => ToolSet::all(),
            CallSource::Mcp => session.served_tools(),
        };
    }
    match profile.and_then(|p| session.profiles.get(p)) {
        Some(p) => session.profile_tools(p),
        None => ToolSet::only(std::iter::empty::<String>()),
    }
}

/// What the journal holds about one call while the records are read.
#[derive(Default)]
struct Seen {
    approval: bool,
    result: Option<(bool, Option<FailureKind>, Gate, Option<String>)>,
}

/// Every `tool_call` record in `records`, in order, with the decision the journal recorded
/// for it (DESIGN §4):
///
/// - `deny` when its `tool_result` is `ok: false` with `failure_kind` `denied` (refused at
///   gate 1 or by a guard);
/// - otherwise `ask` when an `approval` record exists for the call (whatever its outcome);
/// - otherwise `allow`.
///
/// `recorded` is `None` for a call that never reached gate 1: its result was decided at the
/// `registry` gate (`unknown_tool`, `invalid_args`, a tool outside its agent's set, or a
/// crash while declaring its accesses), or it is `cancelled_before` at `normalize` (the batch
/// was cancelled before the call reached gate 1) — and for a call gate 1 or a guard could not
/// decide (`tool_error` at `pre_policy` or `guard`: an OS error while resolving its path).
///
/// A call with no `tool_result` at all (the process died while it was in flight) is judged
/// by what exists: `ask` if an `approval` record was written, else `allow`, with no gate and
/// no policy. It may have been refused at a gate the journal did not get to record; reading
/// it as allowed is the closest the file can say.
///
/// A record belongs to the call with the same `call_id` and `agent` most recently opened by
/// a `tool_call`: models may reuse ids across steps, and sub-agents number their own.
///
/// Arguments stored in a blob are judged as read into the records by
/// [`resolve_blobs`](dsh_core::journal::resolve_blobs); unresolved, their reference
/// (`{"$blob":…,"bytes":N}`) stands in their place.
pub fn recorded_calls(records: &[Entry]) -> Vec<RecordedCall> {
    let mut calls: Vec<(RecordedCall, Seen)> = Vec::new();
    let mut open: HashMap<(Option<&str>, &str), usize> = HashMap::new();
    let mut profiles: HashMap<&str, &str> = HashMap::new();
    let mut mode = None;
    for entry in records {
        let agent = entry.agent.as_deref();
        match &entry.record {
            Record::SessionStart { mode: Some(m), .. } | Record::ModeChanged { mode: m, .. } => {
                mode = m.parse().ok();
            }
            Record::SubAgentStart { child, profile, .. } => {
                profiles.insert(child.as_ref(), profile.as_ref());
            }
            Record::ToolCall {
                call_id,
                name,
                args,
                source,
                ..
            } => {
                open.insert((agent, call_id.as_ref()), calls.len());
                calls.push((
                    RecordedCall {
                        seq: entry.seq,
                        call_id: call_id.to_string(),
                        tool: name.to_string(),
                        args: match args {
                            Stored::Inline(v) => v.as_ref().clone(),
                            Stored::Blob(r) => serde_json::to_value(r).unwrap_or_default(),
                        },
                        source: *source,
                        agent: entry.agent.clone(),
                        profile: agent.and_then(|a| profiles.get(a)).map(|p| (*p).to_owned()),
                        recorded: None,
                        mode,
                    },
                    Seen::default(),
                ));
            }
            Record::Approval { call_id, .. } => {
                if let Some(&i) = open.get(&(agent, call_id.as_ref())) {
                    calls[i].1.approval = true;
                }
            }
            Record::ToolResult(result) => {
                if let Some(i) = open.remove(&(agent, result.call_id())) {
                    let decided = result.decided_by();
                    calls[i].1.result = Some((
                        result.ok(),
                        result.failure_kind(),
                        decided.gate,
                        decided.policy.clone(),
                    ));
                }
            }
            _ => {}
        }
    }
    calls
        .into_iter()
        .map(|(mut call, seen)| {
            call.recorded = judge(&seen);
            call
        })
        .collect()
}

/// The recorded decision of one call (see [`recorded_calls`]).
fn judge(seen: &Seen) -> Option<Recorded> {
    let Some((ok, kind, gate, policy)) = &seen.result else {
        let decision = if seen.approval {
            Decision::Ask
        } else {
            Decision::Allow
        };
        return Some(Recorded {
            decision,
            gate: None,
            policy: None,
        });
    };
    let before_gate1 = *gate == Gate::Registry
        || (*kind == Some(FailureKind::CancelledBefore) && *gate == Gate::Normalize);
    // Gate 1 or a guard met an OS error (`EMFILE` resolving a path, a path that changed
    // while being resolved) and decided nothing: there is no decision to compare with.
    let undecided =
        *kind == Some(FailureKind::ToolError) && matches!(gate, Gate::PrePolicy | Gate::Guard);
    if before_gate1 || undecided {
        return None;
    }
    let decision = if !ok && *kind == Some(FailureKind::Denied) {
        Decision::Deny
    } else if seen.approval {
        Decision::Ask
    } else {
        Decision::Allow
    };
    Some(Recorded {
        decision,
        gate: Some(*gate),
        policy: policy.clone(),
    })
}

/// Today's decision for each of `calls` in `session` (a dry session: see
/// [`Session::assemble_dry`]), one row per call in order. A tool the session has but outside
/// the tool set of the agent that made the call is refused at the registry, as the loop would
/// refuse it.
pub async fn replay(calls: Vec<RecordedCall>, session: &Session) -> Vec<Row> {
    let mut rows = Vec::with_capacity(calls.len());
    for call in calls {
        let tools = tool_set_for(
            call.agent.as_deref(),
            call.profile.as_deref(),
            call.source,
            session,
        );
        let probe = ToolCall::new(call.call_id.as_str(), call.tool.as_str(), call.args.clone())
            .with_agent(call.agent.as_deref().map(Into::into))
            .with_source(call.source);
        // Judged under the mode in force when it was made.
        if let Some(mode) = call.mode {
            session.mode.set(mode);
        }
        // A tool outside the agent's set is refused at the registry, as the loop refuses it.
        let report = session.pipeline.check_in(&tools, &probe).await;
        let today = Today {
            decision: report.decision,
            gate: report.gate,
            policy: report.policy,
            reason: report.reason,
        };
        let changed = call
            .recorded
            .as_ref()
            .is_some_and(|r| r.decision != today.decision);
        rows.push(Row {
            seq: call.seq,
            call_id: call.call_id,
            tool: call.tool,
            args: call.args,
            agent: call.agent,
            recorded: call.recorded,
            today,
            changed,
        });
    }
    rows
}

/// How many rows changed.
pub fn changed_count(rows: &[Row]) -> usize {
    rows.iter().filter(|r| r.changed).count()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// Entries from record bodies (`kind` and fields), numbered from 1, main agent unless
    /// the body carries `agent`.
    fn entries(bodies: &[Value]) -> Vec<Entry> {
        bodies
            .iter()
            .enumerate()
            .map(|(i, body)| Entry {
                seq: i as u64 + 1,
                ts: String::new(),
                session: "s".to_owned(),
                agent: body["agent"].as_str().map(str::to_owned),
                hash: String::new(),
                record: Record::deserialize(body).unwrap(),
                json: body.as_object().unwrap().clone(),
            })
            .collect()
    }

    fn call(id: &str, name: &str) -> Value {
        json!({"kind":"tool_call","call_id":id,"name":name,"args":{"path":"a"},
               "source":"model","parent":null,"step":1})
    }

    fn result(id: &str, ok: bool, kind: Option<&str>, gate: &str, policy: Option<&str>) -> Value {
        json!({"kind":"tool_result","call_id":id,"tool":"read_file","ok":ok,
               "failure_kind":kind,
               "decided_by":{"gate":gate,"policy":policy,"reason":"r"},
               "content":"","value":null,"elapsed_ms":0,"exit_code":null,"sandbox":null})
    }

    fn approval(id: &str, outcome: &str) -> Value {
        json!({"kind":"approval","call_id":id,"outcome":outcome})
    }

    fn decisions(bodies: &[Value]) -> Vec<Option<(Decision, Option<Gate>)>> {
        recorded_calls(&entries(bodies))
            .into_iter()
            .map(|c| c.recorded.map(|r| (r.decision, r.gate)))
            .collect()
    }

    /// The main agent's model was never offered the person's `restore_file`; a person's own
    /// calls (and a batch's) had every tool.
    #[test]
    fn the_main_agents_model_never_had_the_restore_a_person_has() {
        let dir = tempfile::tempdir().unwrap();
        let settings = crate::SessionSettings::new(dir.path(), dir.path().join("home"));
        let session = Session::assemble_dry(&settings).unwrap();
        let set = |source| tool_set_for(None, None, source, &session);
        assert!(!set(CallSource::Model).contains(dsh_tools::RESTORE_FILE));
        assert!(!set(CallSource::Code).contains(dsh_tools::RESTORE_FILE));
        assert!(set(CallSource::Model).contains("write_file"));
        assert!(set(CallSource::User).contains(dsh_tools::RESTORE_FILE));
        assert!(set(CallSource::Batch).contains(dsh_tools::RESTORE_FILE));
    }

    /// A call a person typed is replayed as theirs: the probe carries the recorded source.
    #[test]
    fn each_call_keeps_the_source_it_was_recorded_with() {
        let mut typed = call("m", "write_file");
        typed["source"] = json!("user");
        let calls = recorded_calls(&entries(&[call("a", "read_file"), typed]));
        let sources: Vec<CallSource> = calls.iter().map(|c| c.source).collect();
        assert_eq!(sources, [CallSource::Model, CallSource::User]);
    }

    #[test]
    fn denied_at_gate_1_or_a_guard_is_deny_even_after_an_approval() {
        let d = decisions(&[
            call("a", "read_file"),
            result("a", false, Some("denied"), "pre_policy", Some("rules")),
            call("b", "write_file"),
            approval("b", "allowed_once"),
            result("b", false, Some("denied"), "guard", Some("protect")),
        ]);
        assert_eq!(
            d,
            [
                Some((Decision::Deny, Some(Gate::PrePolicy))),
                Some((Decision::Deny, Some(Gate::Guard))),
            ]
        );
    }

    #[test]
    fn an_approval_of_any_outcome_is_ask() {
        let d = decisions(&[
            call("a", "write_file"),
            approval("a", "allowed_once"),
            result("a", true, None, "approval", Some("yolo")),
            call("b", "write_file"),
            approval("b", "unavailable"),
            result("b", false, Some("unavailable"), "approval", None),
            call("c", "write_file"),
            approval("c", "cancelled"),
            result("c", false, Some("cancelled_before"), "approval", None),
        ]);
        assert!(
            d.iter().all(|x| matches!(x, Some((Decision::Ask, _)))),
            "{d:?}"
        );
    }

    #[test]
    fn ran_or_failed_while_running_without_approval_is_allow() {
        let d = decisions(&[
            call("a", "read_file"),
            result("a", true, None, "pre_policy", Some("rules")),
            call("b", "read_file"),
            result("b", false, Some("not_found"), "execute", None),
        ]);
        assert_eq!(
            d,
            [
                Some((Decision::Allow, Some(Gate::PrePolicy))),
                Some((Decision::Allow, Some(Gate::Execute))),
            ]
        );
    }

    #[test]
    fn calls_that_never_reached_gate_1_have_no_recorded_decision() {
        let d = decisions(&[
            call("a", "nope"),
            result("a", false, Some("unknown_tool"), "registry", None),
            call("b", "read_file"),
            result("b", false, Some("invalid_args"), "registry", None),
            call("c", "read_file"),
            result("c", false, Some("cancelled_before"), "normalize", None),
        ]);
        assert_eq!(d, [None, None, None]);
    }

    #[test]
    fn calls_gate_1_or_a_guard_could_not_decide_have_no_recorded_decision() {
        let d = decisions(&[
            call("a", "write_file"),
            result(
                "a",
                false,
                Some("tool_error"),
                "pre_policy",
                Some("confinement"),
            ),
            call("b", "read_file"),
            result("b", false, Some("tool_error"), "guard", Some("confinement")),
            call("c", "read_file"),
            result("c", false, Some("tool_error"), "execute", None),
        ]);
        assert_eq!(
            d,
            [None, None, Some((Decision::Allow, Some(Gate::Execute)))]
        );
    }

    #[test]
    fn a_call_without_result_is_judged_by_what_was_written() {
        let d = decisions(&[
            call("a", "read_file"),
            call("b", "write_file"),
            approval("b", "allowed_once"),
        ]);
        assert_eq!(
            d,
            [Some((Decision::Allow, None)), Some((Decision::Ask, None))]
        );
    }

    #[test]
    fn a_reused_call_id_pairs_with_the_latest_call_and_agents_keep_their_own_ids() {
        let mut sub_call = call("a", "read_file");
        sub_call["agent"] = json!("sub-1");
        let mut sub_result = result("a", false, Some("denied"), "pre_policy", Some("rules"));
        sub_result["agent"] = json!("sub-1");
        let d = decisions(&[
            call("a", "write_file"),
            approval("a", "allowed_once"),
            result("a", true, None, "approval", Some("yolo")),
            call("a", "read_file"),
            sub_call,
            sub_result,
            result("a", true, None, "pre_policy", Some("rules")),
        ]);
        assert_eq!(
            d,
            [
                Some((Decision::Ask, Some(Gate::Approval))),
                Some((Decision::Allow, Some(Gate::PrePolicy))),
                Some((Decision::Deny, Some(Gate::PrePolicy))),
            ]
        );
    }

    #[test]
    fn the_json_row_is_designs_object() {
        let row = Row {
            seq: 7,
            call_id: "c1".to_owned(),
            tool: "read_file".to_owned(),
            args: json!({"path":"a"}),
            agent: None,
            recorded: Some(Recorded {
                decision: Decision::Allow,
                gate: Some(Gate::PrePolicy),
                policy: Some("rules".to_owned()),
            }),
            today: Today {
                decision: Decision::Ask,
                gate: Gate::PrePolicy,
                policy: Some("rules".to_owned()),
                reason: "why".to_owned(),
            },
            changed: true,
        };
        assert_eq!(
            serde_json::to_string(&row).unwrap(),
            r#"{"seq":7,"call_id":"c1","tool":"read_file","recorded":{"decision":"allow","gate":"pre_policy","policy":"rules"},"today":{"decision":"ask","gate":"pre_policy","policy":"rules","reason":"why"},"changed":true}"#
        );
    }
}
