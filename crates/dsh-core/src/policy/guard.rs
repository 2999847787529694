//! Gate 3, deny-only guards (SPEC P4).

use crate::call::ToolCall;
use crate::policy::PolicyContext;

/// A guard's refusal. A guard returns `Option<Denial>`: there is no value that means "allow",
/// so no registration order and no permissive listener can turn a denial back into permission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    pub reason: String,
    /// Whether the guard could not decide ([`Denial::failed`]).
    failed: bool,
}

impl Denial {
    pub fn new(reason: impl Into<String>) -> Self {
        Denial {
            reason: reason.into(),
            failed: false,
        }
    }

    /// The guard could not decide because of an OS error on the way (`EMFILE` while
    /// resolving a path, a path that changed while being resolved). The call is refused all
    /// the same — a guard that cannot decide fails closed — but its result is `tool_error`
    /// naming the error, not `denied` (DESIGN §4).
    pub fn failed(reason: impl Into<String>) -> Self {
        Denial {
            reason: reason.into(),
            failed: true,
        }
    }

    /// Whether this is a [`Denial::failed`].
    pub fn is_failure(&self) -> bool {
        self.failed
    }
}

/// A deployment red line ("never touch this directory").
///
/// **Lifetime:** one per session or process.
///
/// **Must be pure:** a function of the call, the declaration and the world it inspects, with
/// no state of its own. The pipeline may consult a guard twice for one call — before a person
/// is asked (so a call a guard will refuse is never sent to a person, and `dsh check` agrees
/// with `dsh batch`) and again after the approval (authoritative: approval decides before the
/// guards speak, and the world may have changed while the person thought). Order-sensitive
/// policies belong in gate 1.
///
/// **On panic:** the call is refused (`crashed` at gate `guard`): a guard that cannot decide
/// fails closed.
pub trait Guard: Send + Sync {
    /// Short stable name, shown in results.
    fn name(&self) -> &str;

    /// The denial, when this guard refuses the call; `None` lets it pass (a guard never
    /// allows: it only refuses). Named apart from the dry run (`Pipeline::check`).
    fn refuses(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Option<Denial>;
}
