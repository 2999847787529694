//! The agent loop (SPEC A1): model ↔ tools, step by step, until a stop line. Every model call
//! and every stop is journaled (DESIGN §6); tool calls go through the session's pipeline.
//!
//! Stop lines, each journaled as a `stop` record with its reason:
//! - `final_answer`: the model answered without calling a tool;
//! - `max_steps`: the step limit was reached;
//! - `token_budget`: the tokens used (as the provider reported them, estimated where it did
//!   not) reached the budget;
//! - `repeated_call`: the model asked for the same call(s) `repeat_limit` times in a row —
//!   the repetition is not executed;
//! - `interrupted`: the user interrupted (running tools are cancelled and recorded).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use dsh_core::journal::{JournalError, Record, RequestedCall};

use crate::ending::Totals;
use dsh_core::{BatchError, CancellationToken, ToolCall};
use dsh_model::{ChatRequest, Message, ModelError, Provider, StreamEvent, ToolSchema, Usage};
use serde_json::{Value, json};

use crate::Session;

/// The loop's limits.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    pub max_steps: u32,
    /// Total prompt + completion tokens after which the loop stops; 0: no budget.
    pub max_tokens: u64,
    /// Stop when the same call(s) are asked for this many times in a row.
    pub repeat_limit: u32,
    /// Whole turns of history sent (see `trim`; `None`: all of them); adjustable between runs.
    pub keep_turns: Option<usize>,
}

impl Default for LoopConfig {
    fn default() -> Self {
        use dsh_config::defaults as d;
        LoopConfig {
            max_steps: u32::try_from(d::LIMITS_MAX_STEPS).unwrap_or(u32::MAX),
            max_tokens: d::LIMITS_MAX_TOKENS,
            repeat_limit: d::REPEAT_LIMIT,
            keep_turns: keep_turns(d::CONTEXT_KEEP_TURNS),
        }
    }
}

/// `[context] keep_turns` as the loop takes it: 0 is unlimited.
pub(crate) fn keep_turns(n: u64) -> Option<usize> {
    (n > 0).then(|| usize::try_from(n).unwrap_or(usize::MAX))
}

/// Why the loop stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    FinalAnswer,
    MaxSteps,
    TokenBudget,
    RepeatedCall,
    Interrupted,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::FinalAnswer => "final_answer",
            StopReason::MaxSteps => "max_steps",
            StopReason::TokenBudget => "token_budget",
            StopReason::RepeatedCall => "repeated_call",
            StopReason::Interrupted => "interrupted",
        }
    }
}

/// How a run ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub stop: StopReason,
    /// The final answer (or the last assistant text, for other stops).
    pub text: String,
    pub steps: u32,
    pub usage: Usage,
}

/// A harness fault that ended a run: the model could not answer, or the journal could not
/// record. Tool failures are results, never this.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Batch(#[from] BatchError),
}

/// One conversation with a model over one session.
pub struct Agent<'s> {
    session: &'s Session,
    provider: Arc<dyn Provider>,
    pub config: LoopConfig,
    system: String,
    history: Vec<Message>,
    /// Where each turn (a `run`'s prompt) starts in `history`.
    turn_starts: Vec<usize>,
    tools: Vec<ToolSchema>,
    usage: Usage,
    step: u32,
}

impl std::fmt::Debug for Agent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.provider.name())
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

/// A rough token count for text a provider did not count: four characters a token.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

impl<'s> Agent<'s> {
    pub fn new(session: &'s Session, provider: Arc<dyn Provider>, config: LoopConfig) -> Self {
        let tools = session
            .pipeline
            .registry()
            .specs()
            .map(|s| ToolSchema {
                name: s.name.clone(),
                description: s.description.clone(),
                parameters: s.input_schema.clone(),
            })
            .collect();
        Agent {
            system: crate::prompt::system_prompt(&session.workspace),
            session,
            provider,
            config,
            history: Vec::new(),
            turn_starts: Vec::new(),
            tools,
            usage: Usage::default(),
            step: 0,
        }
    }

    /// The tools offered to the model.
    pub fn tools(&self) -> &[ToolSchema] {
        &self.tools
    }

    /// The system prompt.
    pub fn system_prompt(&self) -> &str {
        &self.system
    }

    /// The conversation so far (without the system prompt).
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    fn record(&self, record: &Record<'_>) -> Result<(), JournalError> {
        self.session.pipeline.journal().append(record).map(|_| ())
    }

    /// What this agent spent so far.
    pub fn totals(&self) -> Totals {
        Totals {
            steps: self.step,
            prompt_tokens: self.usage.prompt_tokens,
            completion_tokens: self.usage.completion_tokens,
            cost_usd: None,
        }
    }

    fn stop(&self, stop: StopReason, text: String) -> Result<Outcome, AgentError> {
        self.session
            .record_stop(stop.as_str(), None, self.totals())?;
        Ok(Outcome {
            stop,
            text,
            steps: self.step,
            usage: self.usage,
        })
    }

    /// Runs `prompt` to a stop line. Streaming text and reasoning go to `on_event`. Every
    /// way out writes `stop` with the totals: a stop line, or on a fault `model_error` /
    /// `journal_error` (tried even though the journal failed; see `ending.rs`).
    pub async fn run(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Outcome, AgentError> {
        let result = self.run_steps(prompt, cancel, on_event).await;
        if let Err(e) = &result {
            let reason = match e {
                AgentError::Model(_) => "model_error",
                AgentError::Journal(_) | AgentError::Batch(_) => "journal_error",
            };
            let _ = self
                .session
                .record_stop(reason, Some(&e.to_string()), self.totals());
        }
        result
    }

    async fn run_steps(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Outcome, AgentError> {
        self.record(&Record::UserMessage {
            text: prompt.into(),
        })?;
        self.turn_starts.push(self.history.len());
        self.history.push(Message::user(prompt));
        let mut last_text = String::new();
        let mut previous: Option<Vec<(String, String)>> = None;
        let mut repeats = 0;
        let first_step = self.step + 1;
        loop {
            if cancel.is_cancelled() {
                return self.stop(StopReason::Interrupted, last_text);
            }
            if self.step + 1 - first_step >= self.config.max_steps {
                return self.stop(StopReason::MaxSteps, last_text);
            }
            self.step += 1;
            let step = self.step;
            let mut messages = vec![Message::system(self.system.clone())];
            messages.extend(crate::trim::trim(
                &self.history,
                &self.turn_starts,
                self.config.keep_turns,
            ));
            let request = ChatRequest {
                model: self.provider.model().to_owned(),
                messages,
                tools: self.tools.clone(),
                max_tokens: None,
            };
            let begun = Instant::now();
            let completion = match self.provider.complete(&request, on_event, cancel).await {
                Ok(c) => c,
                Err(ModelError::Cancelled) => return self.stop(StopReason::Interrupted, last_text),
                Err(e) => return Err(e.into()),
            };
            let elapsed_ms = u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX);
            let message = completion.message;
            let (usage, estimated) = match completion.usage {
                Some(u) => (u, false),
                None => (
                    Usage {
                        prompt_tokens: request
                            .messages
                            .iter()
                            .map(|m| estimate_tokens(&m.content))
                            .sum::<u64>()
                            + estimate_tokens(
                                &serde_json::to_string(&request.tools).unwrap_or_default(),
                            ),
                        completion_tokens: estimate_tokens(&message.content)
                            + message
                                .tool_calls
                                .iter()
                                .map(|c| estimate_tokens(&c.arguments))
                                .sum::<u64>(),
                    },
                    true,
                ),
            };
            self.usage.prompt_tokens += usage.prompt_tokens;
            self.usage.completion_tokens += usage.completion_tokens;
            self.record(&Record::LlmCall {
                step,
                provider: self.provider.name().into(),
                model: self.provider.model().into(),
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
                tokens_estimated: estimated,
                elapsed_ms,
                has_tool_calls: !message.tool_calls.is_empty(),
                finish_reason: Cow::Owned(json!(completion.finish_reason)),
            })?;
            let mut message = message;
            unique_call_ids(&mut message, step);
            self.record(&Record::AssistantMessage {
                step,
                content: Cow::Borrowed(&message.content),
                tool_calls: message
                    .tool_calls
                    .iter()
                    .map(|c| RequestedCall {
                        id: Cow::Borrowed(&c.id),
                        name: Cow::Borrowed(&c.name),
                        arguments: Cow::Borrowed(&c.arguments),
                    })
                    .collect(),
                reasoning: message.reasoning.as_deref().map(Cow::Borrowed),
            })?;
            if !message.content.is_empty() {
                last_text.clone_from(&message.content);
            }
            let calls = message.tool_calls.clone();
            self.history.push(message);
            if calls.is_empty() {
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

            let tool_calls: Vec<ToolCall> = calls
                .iter()
                .map(|c| {
                    ToolCall::new(c.id.clone(), c.name.clone(), parse_args(&c.arguments))
                        .with_step(step)
                })
                .collect();
            let batch = self.session.pipeline.run_batch(tool_calls, cancel).await?;
            for r in &batch.results {
                self.history.push(Message::tool(r.call_id(), r.content()));
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
            if self.config.max_tokens > 0
                && self.usage.prompt_tokens + self.usage.completion_tokens >= self.config.max_tokens
            {
                return self.stop(StopReason::TokenBudget, last_text);
            }
        }
    }
}

/// The model's argument text as JSON; text that is not JSON is passed on as a string, which
/// the registry refuses as `invalid_args` with a message the model can act on.
fn parse_args(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// Arguments compared for repetition: parsed and re-serialized when they are JSON.
fn canonical_args(raw: &str) -> String {
    serde_json::from_str::<Value>(raw).map_or_else(|_| raw.to_owned(), |v| v.to_string())
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
