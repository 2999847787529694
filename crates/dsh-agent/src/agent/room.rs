//! Room in the model's context window, as one agent makes it (SPEC A5): before a request
//! that would pass `max_fraction` of the window, old tool results are pruned, then the
//! oldest turns compacted into a summary (the mechanisms are `crate::context`'s).

use std::borrow::Cow;
use std::time::Instant;

use dsh_core::CancellationToken;
use dsh_core::journal::Record;
use dsh_model::{ChatRequest, Message, ModelError};

use super::{Agent, AgentError};
use crate::context::estimate_tokens;
use crate::events::EventKind;

impl Agent {
    /// Before a request: with the model's window known, when the request would pass
    /// `max_fraction` of it, prunes old tool results, then compacts old turns if that was not
    /// enough (see `context`).
    pub(super) async fn make_room(&mut self, cancel: &CancellationToken) -> Result<(), AgentError> {
        let Some(window) = self.window else {
            return Ok(());
        };
        let request = self.request();
        let fixed = estimate_tokens(&request.messages[0].content)
            + estimate_tokens(&serde_json::to_string(&request.tools).unwrap_or_default());
        let budget = (window as f64 * self.config.max_fraction) as u64;
        let room = budget.saturating_sub(fixed);
        if crate::context::estimate(&request.messages[1..]) <= room {
            return Ok(());
        }
        // Down to three quarters of the budget at once: each change restarts a prompt
        // cache, so it should not recur each step.
        let target = (room * 3 / 4).max(1);
        if self.prune(target).tokens_after > target {
            self.compact(cancel).await?;
        }
        Ok(())
    }

    /// Compaction: asks the model for a summary of the oldest turns (all but the last
    /// `context::KEEP_TURNS`) in a bounded request of its own, journaled as an `llm_call`,
    /// and puts it in their place; journals `context_compacted`. `Ok(false)`: nothing to
    /// compact, the summary came back empty, or it was refused for its size
    /// (`context::bound_summary`; reported as `CompactionRefused`, nothing journaled).
    pub(super) async fn compact(&mut self, cancel: &CancellationToken) -> Result<bool, AgentError> {
        self.compact_with(cancel, None, "auto").await
    }

    /// [`Self::compact`], the summary asked to keep `focus` in particular (`/compact FOCUS`).
    pub(super) async fn compact_with(
        &mut self,
        cancel: &CancellationToken,
        focus: Option<&str>,
        trigger: &str,
    ) -> Result<bool, AgentError> {
        use crate::context;
        let turns = context::compactable(&self.turn_starts);
        // With `keep_turns` no larger than what compaction keeps, the turns it would
        // replace are not sent anyway.
        let within_window = self
            .config
            .keep_turns
            .is_none_or(|k| k > context::KEEP_TURNS);
        if turns <= self.compacted || !within_window {
            return Ok(false);
        }
        self.pre_compact_hooks(trigger, focus).await;
        let end = self.turn_starts[turns];
        let tokens_before = context::estimate(&self.history);
        let request = ChatRequest {
            model: self.provider.model().to_owned(),
            messages: vec![
                Message::system(match focus {
                    Some(f) => format!(
                        "{} The user asks the summary to keep in particular: {f}",
                        context::SUMMARY_PROMPT
                    ),
                    None => context::SUMMARY_PROMPT.to_owned(),
                }),
                Message::user(context::transcript(&self.history[..end], self.window)),
            ],
            tools: Vec::new(),
            max_tokens: Some(context::SUMMARY_MAX_TOKENS),
        };
        // A sub-agent's summary request is reserved against its parent's budgets like its
        // steps; when it does not fit, the turn goes on uncompacted.
        let Ok(reservation) = self.reserve(|| &request) else {
            return Ok(false);
        };
        let begun = Instant::now();
        // Tried once for these turns, whatever comes of it: a failed or empty summary is not
        // asked again every step (it costs a model call each time).
        self.compacted = turns;
        let completion = match self.provider.complete(&request, &mut |_| {}, cancel).await {
            Ok(c) => c,
            Err(ModelError::Cancelled) => return Err(ModelError::Cancelled.into()),
            // No summary: the turn goes on uncompacted (the main request may still fit).
            Err(_) => return Ok(false),
        };
        self.record_model_call(
            self.step,
            &request,
            &completion,
            begun.elapsed(),
            reservation,
        )?;
        let summary = completion.message.content.trim();
        if summary.is_empty() {
            return Ok(false);
        }
        // Held to its bound: cut to it, then refused unless it halves what it replaces.
        let summary = match context::bound_summary(summary, &self.history, &self.turn_starts, turns)
        {
            Ok(s) => s,
            Err(refused) => {
                self.emit(EventKind::CompactionRefused { turns, refused });
                return Ok(false);
            }
        };
        // This file's records of the replaced turns: from the first compacted turn written
        // here (else just after `session_start`) to the first kept turn's `user_message`.
        let replaced: Vec<u64> = match self.turn_seqs.get(turns).copied().flatten() {
            Some(kept) => {
                let first = self.turn_seqs[..turns]
                    .iter()
                    .flatten()
                    .next()
                    .copied()
                    .unwrap_or(2);
                (first..kept).collect()
            }
            None => Vec::new(),
        };
        context::apply_compaction(&mut self.history, &mut self.turn_starts, turns, &summary);
        let kept_seqs = self.turn_seqs.split_off(turns.min(self.turn_seqs.len()));
        self.turn_seqs = vec![None; turns];
        self.turn_seqs.extend(kept_seqs);
        let tokens_after = context::estimate(&self.history);
        self.record(&Record::ContextCompacted {
            replaced,
            turns: turns as u64,
            summary: Cow::Borrowed(&summary),
            tokens_before,
            tokens_after,
        })?;
        self.emit(EventKind::ContextCompacted {
            turns,
            tokens_before,
            tokens_after,
        });
        Ok(true)
    }

    /// Prunes the part of the history that is sent down to `budget` tokens (0: all it can)
    /// and says so.
    pub(super) fn prune(&mut self, budget: u64) -> crate::context::Pruned {
        let from = crate::context::trim::kept_from(
            self.history.len(),
            &self.turn_starts,
            self.config.keep_turns,
        );
        let p = crate::context::prune(&mut self.history[from..], budget, &self.session.spill);
        if p.results > 0 {
            self.emit(EventKind::ContextPruned {
                results: p.results,
                tokens_before: p.tokens_before,
                tokens_after: p.tokens_after,
            });
        }
        p
    }
}
