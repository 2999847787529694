//! Gate 5, disposition (SPEC P6).

use async_trait::async_trait;

use crate::call::ToolCall;
use crate::result::Candidate;

/// What a disposition does with a result. None of these can change whether the call succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Leave the result as it is.
    Accept,
    /// Replace what the model sees (e.g. a spill locator for oversized output). The structured
    /// `value` is cleared with it, so a rewrite cannot leave the original in the record.
    Replace(String),
    /// Withhold the content (e.g. a secret was found); the model sees this reason instead.
    /// `ok` is unchanged; `decided_by` names this disposition.
    Block(String),
    /// Queue context for the model's next input, released after the whole batch is journaled.
    AttachContext(String),
    /// Rewrite the result's text, structured value and reason in place (a redactor replacing
    /// secrets with markers): unlike `Replace`, the value is kept as given and `decided_by`
    /// keeps naming who decided the call. `ok` is unchanged.
    Redact {
        content: String,
        value: Option<serde_json::Value>,
        reason: String,
    },
}

/// A gate-5 listener.
///
/// **Lifetime:** one per session. Dispositions run in registration order, each seeing the
/// candidate as the previous one left it; denied and failed calls pass here too.
///
/// **On panic:** fails closed — the result becomes `crashed` at gate `disposition` with its
/// content withheld (a crashed redactor must not leak what it was redacting).
#[async_trait]
pub trait Disposition: Send + Sync {
    fn name(&self) -> &str;

    async fn dispose(&self, call: &ToolCall, candidate: &Candidate) -> Action;
}
