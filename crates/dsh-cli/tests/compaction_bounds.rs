//! A compaction's summary is held to its own bound (issue 21, item 2; DESIGN §6): a model
//! that ignores the summary request's `max_tokens` gets its summary cut to that bound
//! (1,024 tokens), and a summary that is then still more than half of what it would replace
//! is refused — the turn goes on uncompacted, `dsh exec` says why on stderr, and no
//! `context_compacted` is journaled. Nothing oversized reaches a later request or the
//! journal (so a resume cannot inherit it). Both wire formats, through the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::{Dirs, stderr};
use dsh_testkit::model_server::{Reply, ScriptedServer, ServerHandle, Turn};
use serde_json::Value;

/// The summary a model ignoring `max_tokens` sends back: 2,000,000 characters (about
/// 500,000 tokens), as in the issue.
fn oversized_summary() -> Reply {
    Turn::text("S".repeat(2_000_000)).deltas(65_536).into()
}

/// No request after the fix comes near the oversized summary's size.
const REQUEST_MAX_BYTES: usize = 60_000;

#[derive(Clone, Copy, Debug)]
enum Wire {
    OpenAi,
    Anthropic,
}

struct World {
    dirs: Dirs,
    wire: Wire,
}

impl World {
    /// A workspace whose model window is tiny (3,000 tokens), so the third turn must make
    /// room by compacting the first.
    fn new(wire: Wire) -> World {
        let dirs = Dirs::new();
        dirs.write_user_config("[model]\ncontext_window = 3000\n");
        World { dirs, wire }
    }

    fn server(&self, script: Vec<Reply>) -> ServerHandle {
        match self.wire {
            Wire::OpenAi => ScriptedServer::start(script),
            Wire::Anthropic => ScriptedServer::start_anthropic(script),
        }
    }

    /// `dsh exec [--continue] PROMPT` against `server`; exit 0 expected.
    fn exec(&self, server: &ServerHandle, resume: bool, prompt: &str) -> Output {
        let (provider, key) = match self.wire {
            Wire::OpenAi => ("openai", "OPENAI_API_KEY"),
            Wire::Anthropic => ("anthropic", "ANTHROPIC_API_KEY"),
        };
        let mut cmd = self.dirs.dsh(&["exec"]);
        cmd.args([
            "--provider",
            provider,
            "--base-url",
            &server.url,
            "--model",
            "scripted",
        ])
        .env(key, "k");
        if resume {
            cmd.arg("--continue");
        }
        let out = cmd.arg(prompt).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{:?}: {}",
            self.wire,
            stderr(&out)
        );
        out
    }

    /// Three turns: the first answered with `first_answer`, the third made to compact the
    /// first with an oversized summary. The third run's output and requests.
    fn three_turns(&self, first_answer: &str) -> (Output, Vec<Value>) {
        let s1 = self.server(vec![Reply::text(first_answer)]);
        self.exec(&s1, false, "first task");
        let s2 = self.server(vec![Reply::text("two")]);
        self.exec(&s2, true, "second task");
        let s3 = self.server(vec![oversized_summary(), Reply::text("three")]);
        let out = self.exec(&s3, true, "third task");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "three\n");
        let requests = s3.requests();
        assert_eq!(
            requests.len(),
            2,
            "{:?}: a summary request, then the turn's",
            self.wire
        );
        assert!(
            requests[0]
                .to_string()
                .contains("You compress the earlier part"),
            "{:?}",
            self.wire
        );
        (out, requests)
    }

    /// The records of the third turn's journal (the newest of the chain).
    fn third_journal(&self) -> Vec<Value> {
        let newest: PathBuf = std::fs::read_dir(self.dirs.home.join("sessions"))
            .unwrap()
            .map(|d| d.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .find(|p| std::fs::read_to_string(p).unwrap().contains("third task"))
            .unwrap();
        dsh_core::journal::read_journal(&newest)
            .unwrap()
            .records
            .into_iter()
            .map(|r| Value::Object(r.json))
            .collect()
    }
}

fn of_kind<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["kind"] == kind).collect()
}

/// The first turn's work is about 3,000 tokens: the summary, cut to its 1,024-token bound,
/// is under half of it and takes its place. The next request carries the cut summary, not
/// two megabytes; the journal's `context_compacted` holds the cut summary.
#[test]
fn an_oversized_summary_is_cut_to_its_bound_in_both_wire_formats() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let w = World::new(wire);
        let first_answer = format!("ANSWER-ONE {}", "a".repeat(12_000));
        let (_, requests) = w.three_turns(&first_answer);

        let turn = requests[1].to_string();
        assert!(
            turn.len() < REQUEST_MAX_BYTES,
            "{wire:?}: the request after compaction is {} bytes",
            turn.len()
        );
        assert!(
            turn.contains("the summary was cut to its bound of 1024 tokens"),
            "{wire:?}"
        );
        assert!(turn.contains("SSSS"), "{wire:?}: the cut summary is sent");
        assert!(
            !turn.contains("ANSWER-ONE"),
            "{wire:?}: the first turn's work is replaced"
        );
        for task in ["first task", "second task", "third task"] {
            assert!(turn.contains(task), "{wire:?}: {task}");
        }

        let records = w.third_journal();
        let compacted = of_kind(&records, "context_compacted");
        assert_eq!(compacted.len(), 1, "{wire:?}");
        let summary = compacted[0]["summary"].as_str().unwrap();
        assert!(
            summary.chars().count() <= 1_024 * 4,
            "{wire:?}: {} characters journaled",
            summary.len()
        );
        assert!(
            summary.ends_with("the model wrote about 500000 tokens]"),
            "{wire:?}"
        );
        assert_eq!(compacted[0]["turns"], 1);
        assert!(
            compacted[0]["tokens_after"].as_u64() < compacted[0]["tokens_before"].as_u64(),
            "{wire:?}: {}",
            compacted[0]
        );
    }
}

/// The first turn's work is about 1,000 tokens: even cut to its bound the summary is more
/// than half of it, so it is refused — stderr says why, the turn goes on with the first
/// turn's work as it was, and nothing is journaled as compacted (the summary's own model
/// call is, as every call is).
#[test]
fn a_summary_not_under_half_of_what_it_replaces_is_refused_in_both_wire_formats() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let w = World::new(wire);
        let first_answer = format!("ANSWER-ONE {}", "a".repeat(4_000));
        let (out, requests) = w.three_turns(&first_answer);

        let err = stderr(&out);
        assert!(
            err.contains("dsh: context: 1 old turns not summarized: their summary (")
                && err.contains(
                    "cut to its bound of 1024) is more than half of what it would replace ("
                )
                && err.contains("the turn goes on without it"),
            "{wire:?}: {err}"
        );
        let turn = requests[1].to_string();
        assert!(
            turn.len() < REQUEST_MAX_BYTES,
            "{wire:?}: the request is {} bytes",
            turn.len()
        );
        assert!(turn.contains("ANSWER-ONE"), "{wire:?}: uncompacted");
        assert!(!turn.contains("SSSS"), "{wire:?}: no summary is sent");
        assert!(!turn.contains("Summary of the earlier work"), "{wire:?}");

        let records = w.third_journal();
        assert!(
            of_kind(&records, "context_compacted").is_empty(),
            "{wire:?}"
        );
        assert_eq!(of_kind(&records, "llm_call").len(), 2, "{wire:?}");
        assert!(
            records
                .iter()
                .all(|r| r.to_string().len() < REQUEST_MAX_BYTES),
            "{wire:?}: an oversized record was journaled"
        );
    }
}
