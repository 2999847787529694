//! A journal as readable lines (`dsh sessions show`, the REPL's `/log`): one line per record
//! worth showing, each sub-agent's lines nested under the call that started it.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use dsh_core::journal::{Entry, Record, Stored, Transcript, read_journal};
use serde_json::Value;

/// A journal's records as `dsh sessions show` prints them (the REPL's `/log`).
pub(crate) fn readable_lines(path: &Path) -> Result<Vec<String>, anyhow::Error> {
    let transcript = read_journal(path)?;
    Ok(lines_of(&transcript))
}

/// One readable line per record worth showing. A sub-agent's lines are nested under the
/// `sub_agent_start` that opened it (gathered from the whole file: parallel children
/// interleave there), each prefixed with [`NESTED`], and closed by its `sub_agent_end`; a
/// child record whose start is not in the file is shown where it stands, with its tag.
pub(crate) fn lines_of(transcript: &Transcript) -> Vec<String> {
    let records = &transcript.records;
    let texts = record_texts(records);
    let layout = Layout::new(records);
    let mut out = Out {
        records,
        texts: &texts,
        emitted: vec![false; records.len()],
        opened: HashSet::new(),
        lines: Vec::new(),
    };
    out.emit(&layout, &layout.main, 0);
    // Only records no start reaches (start records forming a cycle) are left: shown last,
    // where they would otherwise be lost.
    for i in 0..records.len() {
        if !out.emitted[i] {
            out.line(i, 0);
        }
    }
    out.lines
}

/// The deepest nesting shown (sub-agents cannot start sub-agents: one level is real).
const MAX_DEPTH: usize = 4;

/// What prefixes a sub-agent's lines, once per level of nesting.
const NESTED: &str = "  │ ";

/// `[sub-1] ` for a record written by a sub-agent; empty for the main agent.
fn tag(entry: &Entry) -> String {
    entry
        .agent
        .as_deref()
        .map(|a| format!("[{a}] "))
        .unwrap_or_default()
}

/// Where each record is shown: the main agent's sequence, each opened child's sequence, and
/// the start and end records that open and close a child's block.
struct Layout<'a> {
    /// The main agent's records and those of agents no `sub_agent_start` names, in order.
    main: Vec<usize>,
    /// Each opened child's own records, in order (its closing `sub_agent_end` excepted).
    children: HashMap<&'a str, Vec<usize>>,
    /// The first `sub_agent_start` naming each child: where its block is shown.
    starts: HashMap<&'a str, usize>,
    /// The first `sub_agent_end` naming each opened child: shown after its block.
    ends: HashMap<&'a str, usize>,
}

impl<'a> Layout<'a> {
    fn new(records: &'a [Entry]) -> Self {
        let mut starts = HashMap::new();
        for (i, entry) in records.iter().enumerate() {
            if let Record::SubAgentStart { child, .. } = &entry.record {
                starts.entry(child.as_ref()).or_insert(i);
            }
        }
        let mut ends = HashMap::new();
        for (i, entry) in records.iter().enumerate() {
            if let Record::SubAgentEnd { child, .. } = &entry.record
                && starts.contains_key(child.as_ref())
            {
                ends.entry(child.as_ref()).or_insert(i);
            }
        }
        let closing: HashSet<usize> = ends.values().copied().collect();
        let mut main = Vec::new();
        let mut children: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, entry) in records.iter().enumerate() {
            if closing.contains(&i) {
                continue;
            }
            match entry.agent.as_deref() {
                Some(agent) if starts.contains_key(agent) => {
                    children.entry(agent).or_default().push(i);
                }
                _ => main.push(i),
            }
        }
        Layout {
            main,
            children,
            starts,
            ends,
        }
    }
}

/// The lines being laid out, and which records have been shown.
struct Out<'a> {
    records: &'a [Entry],
    texts: &'a [Option<String>],
    emitted: Vec<bool>,
    /// The children whose block has been shown (each once, whatever the file says).
    opened: HashSet<&'a str>,
    lines: Vec<String>,
}

impl<'a> Out<'a> {
    /// Shows record `i` (if it has a line) at nesting `depth`.
    fn line(&mut self, i: usize, depth: usize) {
        self.emitted[i] = true;
        if let Some(text) = &self.texts[i] {
            let who = tag(&self.records[i]);
            self.lines
                .push(format!("{}{who}{text}", NESTED.repeat(depth)));
        }
    }

    /// Shows `seq` at `depth`, each child's block right after the start that opens it.
    fn emit(&mut self, layout: &Layout<'a>, seq: &[usize], depth: usize) {
        let records = self.records;
        for &i in seq {
            self.line(i, depth);
            let Record::SubAgentStart { child, .. } = &records[i].record else {
                continue;
            };
            let child = child.as_ref();
            // Sub-agents cannot nest; a deeper chain is a forged file, and its records are
            // shown after the rest instead of recursing without bound.
            if depth >= MAX_DEPTH
                || layout.starts.get(child) != Some(&i)
                || !self.opened.insert(child)
            {
                continue;
            }
            if let Some(own) = layout.children.get(child) {
                self.emit(layout, own, depth + 1);
            }
            match layout.ends.get(child) {
                Some(&end) => self.line(end, depth),
                None => self.lines.push(format!(
                    "{}{}sub-agent {child} did not end (no sub_agent_end record)",
                    NESTED.repeat(depth),
                    tag(&records[i])
                )),
            }
        }
    }
}

/// Each record's line, without its agent's tag or nesting (`None`: not shown). Read in file
/// order: a result, an approval belongs to the call with the same agent and call id most
/// recently opened by a `tool_call` (sub-agents number their calls on their own).
fn record_texts(records: &[Entry]) -> Vec<Option<String>> {
    let mut calls: CallMap<'_, (&str, &Stored<'_, Value>)> = HashMap::new();
    let mut approvals: CallMap<'_, String> = HashMap::new();
    let mut texts = Vec::with_capacity(records.len());
    for entry in records {
        let agent = entry.agent.as_deref();
        let text = match &entry.record {
            Record::SessionStart {
                workspace,
                provider,
                model,
                resumed_from,
                client,
                ..
            } => Some(format!(
                "session {}  started {}  workspace {}  model {}{}{}",
                entry.session,
                entry.ts,
                workspace.display(),
                match (provider, model) {
                    (Some(p), Some(m)) => format!("{p}/{m}"),
                    (None, Some(m)) => m.to_string(),
                    _ => "-".to_owned(),
                },
                resumed_from
                    .as_ref()
                    .map(|r| format!("  resumes {} at seq {}", r.session, r.seq))
                    .unwrap_or_default(),
                client
                    .as_ref()
                    .map(|c| format!(
                        "  serving MCP client {}",
                        crate::repl::visible::visible(c, false)
                    ))
                    .unwrap_or_default()
            )),
            Record::UserMessage { text } => Some(format!("user: {text}")),
            Record::AssistantMessage { content, .. } if !content.is_empty() => {
                Some(format!("assistant: {content}"))
            }
            Record::ToolCall {
                call_id,
                name,
                args,
                ..
            } => {
                calls.insert((agent, call_id), (name, args));
                // A reused id opens a new call: an earlier call's approval is not its.
                approvals.remove(&(agent, call_id.as_ref()));
                None
            }
            Record::Approval { call_id, .. } => {
                let outcome = entry
                    .json
                    .get("outcome")
                    .map(short_value)
                    .unwrap_or_default();
                approvals.insert((agent, call_id), outcome);
                None
            }
            Record::ToolResult(_) => Some(tool_line(&entry.json, agent, &calls, &approvals)),
            Record::SubAgentStart {
                child,
                profile,
                task,
                ..
            } => Some(format!(
                "sub-agent {child} ({profile}) starts: {}",
                shorten(task, 80)
            )),
            Record::SubAgentEnd {
                child,
                stop,
                steps,
                tokens,
                ..
            } => Some(format!(
                "sub-agent {child} ends: {stop} ({steps} steps, {tokens} tokens)"
            )),
            Record::Stop { reason, totals, .. } => Some(format!(
                "stop: {reason} ({} steps, {}+{} tokens{})",
                totals.steps,
                totals.prompt_tokens,
                totals.completion_tokens,
                totals
                    .cost_usd
                    .map(|c| format!(", ${c:.4}"))
                    .unwrap_or_default()
            )),
            Record::SessionEnd { reason, .. } => Some(format!("end: {reason}")),
            Record::ContextCompacted {
                turns,
                tokens_before,
                tokens_after,
                ..
            } => Some(format!(
                "context compacted: {turns} turns summarized, {tokens_before} → {tokens_after} tokens"
            )),
            Record::HistoryCleared {} => Some("history cleared".to_owned()),
            Record::SessionNamed { name, .. } => Some(format!("named: {name}")),
            Record::ModeChanged { mode, by } => Some(format!("mode: {mode} (switched by {by})")),
            Record::ModelChanged {
                provider,
                model,
                base_url,
            } => Some(format!("model: {provider}/{model} at {base_url}")),
            Record::Checkpoint {
                path,
                before,
                after,
                ..
            } => Some(format!(
                "checkpoint: {path} ({})",
                match (before, after) {
                    (None, _) => "created; /undo removes it",
                    (Some(_), None) => "removed",
                    (Some(_), Some(_)) => "pre-image kept for /undo",
                }
            )),
            Record::AssistantMessage { .. }
            | Record::LlmCall { .. }
            | Record::ToolStarted { .. }
            | Record::ContextAttached(_) => None,
        };
        texts.push(text);
    }
    texts
}

/// Keyed by (agent, call id): `None` is the main agent.
type CallMap<'a, T> = HashMap<(Option<&'a str>, &'a str), T>;

/// `tool read_file path=src/a.rs → ok [execute] 3 ms`, or with the failure and who decided:
/// `tool run_shell command="rm -rf /" → denied by pre_policy/shell: reason [12 ms]`.
fn tool_line(
    result: &serde_json::Map<String, Value>,
    agent: Option<&str>,
    calls: &CallMap<'_, (&str, &Stored<'_, Value>)>,
    approvals: &CallMap<'_, String>,
) -> String {
    let call_id = result.get("call_id").and_then(Value::as_str).unwrap_or("");
    let key = (agent, call_id);
    let tool = result.get("tool").and_then(Value::as_str).unwrap_or("?");
    let args = calls
        .get(&key)
        .map(|(_, args)| match args {
            Stored::Inline(args) => short_args(args),
            // Not read for a one-line summary: what it is and where.
            Stored::Blob(r) => format!("[arguments in {r}]"),
        })
        .unwrap_or_default();
    let outcome = result
        .get("failure_kind")
        .and_then(Value::as_str)
        .unwrap_or("ok");
    let decided = &result.get("decided_by").cloned().unwrap_or(Value::Null);
    let gate = decided["gate"].as_str().unwrap_or("?");
    let policy = decided["policy"].as_str().unwrap_or("-");
    let reason = decided["reason"].as_str().unwrap_or("");
    let elapsed = result
        .get("elapsed_ms")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let approval = approvals
        .get(&key)
        .map(|o| format!(" (approval: {o})"))
        .unwrap_or_default();
    let reason = if reason.is_empty() {
        String::new()
    } else {
        format!(": {}", shorten(reason, 100))
    };
    format!("tool {tool} {args} → {outcome} by {gate}/{policy}{reason}{approval} [{elapsed} ms]")
}

/// `key=value` pairs, each value cut short, the whole cut at 100 characters.
pub(crate) fn short_args(args: &Value) -> String {
    let text = match args {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", shorten(&short_value(v), 40)))
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    };
    shorten(&text, 100)
}

fn short_value(v: &Value) -> String {
    match v {
        Value::String(s) if !s.contains(char::is_whitespace) && !s.is_empty() => s.clone(),
        other => other.to_string(),
    }
}

/// `text` on one line, at most `max` characters, with `…` when cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c == '\n' { '⏎' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}
