//! The spill disposition: an output over the limit is saved in the session's spill store and
//! the model gets its head and tail, a locator, and how to page the rest with `read_output`
//! (SPEC P6). It changes only what the model sees, never whether the call succeeded.

use std::sync::Arc;

use dsh_core::{Action, Candidate, Disposition, SpillStore, ToolCall, async_trait};

/// Spills any result whose content exceeds `max_chars` characters.
#[derive(Debug)]
pub struct Spill {
    store: Arc<SpillStore>,
    max_chars: usize,
}

impl Spill {
    /// `max_chars` is also the largest page `read_output` should return, so a page read back
    /// is never spilled again.
    pub fn new(store: Arc<SpillStore>, max_chars: usize) -> Self {
        Spill {
            store,
            max_chars: max_chars.max(200),
        }
    }
}

#[async_trait]
impl Disposition for Spill {
    fn name(&self) -> &str {
        "spill"
    }

    async fn dispose(&self, call: &ToolCall, candidate: &Candidate) -> Action {
        let content = candidate.content();
        let total = content.chars().count();
        if total <= self.max_chars {
            return Action::Accept;
        }
        // Keep two thirds of the budget for the head and one third for the tail.
        let budget = self.max_chars.saturating_sub(200);
        let head_n = budget * 2 / 3;
        let tail_n = budget - head_n;
        let head: String = content.chars().take(head_n).collect();
        let tail: String = content.chars().skip(total - tail_n).collect();
        let omitted = total - head_n - tail_n;
        let note = match self.store.save(call.id(), content) {
            Ok(id) => format!(
                "[{omitted} of {total} characters omitted here; the full output is saved as `{id}`: \
                 page it with read_output{{\"id\":\"{id}\",\"offset\":{head_n},\"limit\":{}}}]",
                self.max_chars
            ),
            Err(e) => format!(
                "[{omitted} of {total} characters omitted here; the full output could not be saved ({e})]"
            ),
        };
        Action::Replace(format!("{head}\n…\n{note}\n…\n{tail}"))
    }
}
