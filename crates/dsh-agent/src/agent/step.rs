//! One run of the loop: a prompt to its stop line, step by step — a model call (after
//! making room), the calls it asks for through the pipeline, the checks for a stop line.

use std::borrow::Cow;
use std::time::Instant;

use dsh_core::journal::{JournalError, Record, RequestedCall, Stored, sha256_hex};
use dsh_core::{CallSource, CancellationToken, ToolCall};
use dsh_model::{Message, ModelError, StreamEvent};
use serde_json::{Value, json};

use super::{Agent, AgentError, Outcome, StopReason};
use crate::events::{EventKind, journal_agent};

impl Agent {
    fn stop(&self, stop: StopReason, text: String) -> Result<Outcome, AgentError> {
        self.record_stop(stop.as_str(), None)?;
        self.emit(EventKind::Stop {
            reason: stop.as_str().to_owned(),
            text: text.clone(),
        });
        Ok(Outcome {
            stop,
            text,
            steps: self.step,
            usage: self.family.ledger.spent(&self.spec.id).usage,
        })
    }

    /// Runs `prompt` to a stop line; what happens meanwhile goes to the session's events.
    /// Every way out writes `stop` with the totals: a stop line, or on a fault `model_error`
    /// / `journal_error` (tried even though the journal failed; see `ending.rs`).
    pub async fn run(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<Outcome, AgentError> {
        let result = self.run_steps(prompt, cancel).await;
        if let Err(e) = &result {
            let reason = e.stop_reason();
            let _ = self.record_stop(reason, Some(&e.to_string()));
            self.emit(EventKind::Stop {
                reason: reason.to_owned(),
                text: e.to_string(),
            });
        }
        result
    }

    async fn run_steps(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<Outcome, AgentError> {
        let context = match self.prompt_hooks(prompt).await {
            Ok(c) => c,
            Err(why) => return self.stop(StopReason::PromptBlocked, why),
        };
        let seq = self.record(&Record::UserMessage {
            text: prompt.into(),
        })?;
        self.turn_seqs.resize(self.turn_starts.len(), None);
        self.turn_seqs.push(Some(seq));
        self.turn_starts.push(self.history.len());
        self.history.push(Message::user(prompt));
        self.attach_hook_context(&context)?;
        let mut continued = 0;
        let mut last_text = String::new();
        let mut previous: Option<Vec<(String, String)>> = None;
        let mut repeats = 0;
        let first_step = self.step + 1;
        loop {
            if cancel.is_cancelled() {
                return self.stop(StopReason::Interrupted, last_text);
            }
            // Tools that joined since the last step (an MCP server that became ready, a
            // changed tool list): between steps, never in the middle of a batch.
            self.session.sync_tools();
            if self.step + 1 - first_step >= self.config.max_steps {
                return self.stop(StopReason::MaxSteps, last_text);
            }
            // A sub-agent's budgets are shared with its parent's other children, who may be
            // spending them right now: its request reserves its estimate first and is not
            // sent when that would pass a budget (`spend.rs`). Estimated before room is
            // made, which only shrinks the request; built only when there is something to
            // reserve (not for the main agent).
            let reservation = match self.reserve(|| self.request()) {
                Ok(r) => r,
                Err(stop) => return self.stop(stop, last_text),
            };
            self.step += 1;
            let step = self.step;
            match self.make_room(cancel).await {
                Err(AgentError::Model(ModelError::Cancelled)) => {
                    return self.stop(StopReason::Interrupted, last_text);
                }
                other => other?,
            }
            let mut request = self.request();
            let begun = Instant::now();
            let (agent, sink) = (self.spec.id.clone(), self.events.clone());
            // The answer as streamed so far, kept if the person interrupts it.
            let partial = std::sync::Mutex::new(String::new());
            let mut on_event = |e: StreamEvent| {
                let kind = match e {
                    StreamEvent::Text(t) => {
                        if let Ok(mut p) = partial.lock() {
                            p.push_str(&t);
                        }
                        EventKind::TextDelta(t)
                    }
                    StreamEvent::Reasoning(t) => EventKind::ReasoningDelta(t),
                    StreamEvent::Retrying { attempt, reason } => {
                        // Asked again from the start: what came is not the answer.
                        if let Ok(mut p) = partial.lock() {
                            p.clear();
                        }
                        EventKind::ModelRetry { attempt, reason }
                    }
                    StreamEvent::ToolCall { .. } => return,
                };
                sink.send(&agent, kind);
            };
            let mut retried = false;
            let completion = loop {
                match self
                    .provider
                    .complete(&request, &mut on_event, cancel)
                    .await
                {
                    Ok(c) => break c,
                    Err(ModelError::Cancelled) => {
                        let partial = partial.lock().map(|p| p.clone()).unwrap_or_default();
                        self.keep_interrupted(step, &partial)?;
                        return self.stop(StopReason::Interrupted, last_text);
                    }
                    // Too long for the model: make what room pruning and compaction can, and
                    // try once more.
                    Err(e) if !retried && crate::context::is_too_long(&e) => {
                        retried = true;
                        let pruned = self.prune(0).results > 0;
                        let compacted = match self.compact(cancel).await {
                            Err(AgentError::Model(ModelError::Cancelled)) => {
                                return self.stop(StopReason::Interrupted, last_text);
                            }
                            other => other?,
                        };
                        if !pruned && !compacted {
                            return Err(e.into());
                        }
                        request = self.request();
                    }
                    Err(e) => return Err(e.into()),
                }
            };
            let elapsed = begun.elapsed();
            self.record_model_call(step, &request, &completion, elapsed, reservation)?;
            let mut message = completion.message;
            unique_call_ids(&mut message, step);
            // Arguments over 1 MiB go to a blob, durable before the record naming it.
            let journal = self.session.pipeline.journal().as_ref();
            let tool_calls = message
                .tool_calls
                .iter()
                .map(|c| {
                    Ok(RequestedCall {
                        id: Cow::Borrowed(&c.id),
                        name: Cow::Borrowed(&c.name),
                        arguments: Stored::text(journal, &c.arguments)?,
                    })
                })
                .collect::<Result<Vec<_>, JournalError>>()?;
            self.record(&Record::AssistantMessage {
                step,
                content: Cow::Borrowed(&message.content),
                tool_calls,
                reasoning: message.reasoning.as_deref().map(Cow::Borrowed),
            })?;
            if !message.content.is_empty() {
                last_text.clone_from(&message.content);
            }
            let calls = message.tool_calls.clone();
            self.history.push(message);
            if calls.is_empty() {
                if let Some(more) = self.stop_hooks(&mut continued, &last_text).await {
                    self.attach_hook_context(&[more])?;
                    continue;
                }
                return self.stop(StopReason::FinalAnswer, last_text);
            }

            let signature: Vec<(String, String)> = calls
                .iter()
                .map(|c| (c.name.clone(), canonical_args(&c.arguments)))
                .collect();
            repeats = if previous.as_ref() == Some(&signature) {
                repeats + 1
            } else {
                1
            };
            previous = Some(signature);
            if repeats >= self.config.repeat_limit {
                return self.stop(StopReason::RepeatedCall, last_text);
            }

            let agent = journal_agent(&self.spec.id);
            let tool_calls: Vec<ToolCall> = calls
                .iter()
                .map(|c| {
                    ToolCall::new(c.id.clone(), c.name.clone(), parse_args(&c.arguments))
                        .with_step(step)
                        .with_agent(agent.clone())
                })
                .collect();
            let scope = self.scope_for_step();
            let batch = match &self.dispatch {
                None => {
                    self.session
                        .pipeline
                        .run_batch_in(&scope, tool_calls, cancel)
                        .await?
                }
                Some(d) => {
                    d.submit_in(&scope, CallSource::SubAgent, tool_calls, cancel)
                        .await?
                }
            };
            self.count_children();
            for r in &batch.results {
                let counts = self.tool_counts.entry(r.tool().to_owned()).or_default();
                if r.ok() {
                    counts.ran += 1;
                    let pipeline = &self.session.pipeline;
                    if pipeline.spec(r.tool()).is_none_or(|s| !s.read_only) {
                        self.family.changed();
                    }
                } else {
                    counts.refused_or_failed += 1;
                }
                self.history.push(Message::tool(r.call_id(), r.content()));
            }
            for a in &batch.attached {
                self.emit(EventKind::ContextAttached {
                    policy: a.policy.clone(),
                    text: a.text.clone(),
                });
            }
            if !batch.attached.is_empty() {
                let text = batch
                    .attached
                    .iter()
                    .map(|a| format!("[from {}] {}", a.policy, a.text))
                    .collect::<Vec<_>>()
                    .join("\n");
                self.history.push(Message::user(text));
            }
            if cancel.is_cancelled() {
                return self.stop(StopReason::Interrupted, last_text);
            }
            if let Some(stop) = self.budget_spent_up() {
                return self.stop(stop, last_text);
            }
        }
    }
}

/// Ends the part of an answer the person interrupted, in the history and the journal: the
/// next request shows the model what it had said and that it was stopped there.
pub const INTERRUPTED: &str = "[interrupted by the user]";

impl Agent {
    /// Keeps `partial`, the answer streamed until an interrupt, with the [`INTERRUPTED`]
    /// marker (nothing when nothing came).
    fn keep_interrupted(&mut self, step: u32, partial: &str) -> Result<(), AgentError> {
        if partial.trim().is_empty() {
            return Ok(());
        }
        let content = format!("{}\n\n{INTERRUPTED}", partial.trim_end());
        self.record(&Record::AssistantMessage {
            step,
            content: Cow::Borrowed(&content),
            tool_calls: Vec::new(),
            reasoning: None,
        })?;
        self.history.push(Message::assistant(content, Vec::new()));
        Ok(())
    }
}

/// The model's argument text as JSON; text that is not JSON is passed on as a string, which
/// the registry refuses as `invalid_args` with a message the model can act on.
pub(crate) fn parse_args(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// Arguments compared for repetition: the digest of their text, parsed and re-serialized
/// when they are JSON. A digest, not the text: the signature is kept for the next step, and
/// a 10 MB argument would be held twice over.
pub(crate) fn canonical_args(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(v) => sha256_hex(v.to_string().as_bytes()),
        Err(_) => sha256_hex(raw.as_bytes()),
    }
}

/// Some servers omit or repeat call ids; the pipeline and the journal need them unique.
fn unique_call_ids(message: &mut Message, step: u32) {
    let mut seen = std::collections::HashSet::new();
    for (i, c) in message.tool_calls.iter_mut().enumerate() {
        if c.id.is_empty() || !seen.insert(c.id.clone()) {
            c.id = format!("call_{step}_{i}");
            seen.insert(c.id.clone());
        }
    }
}
