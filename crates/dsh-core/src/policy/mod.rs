//! The decision traits a policy implements, one per gate that takes decisions. The pipeline
//! (`crate::pipeline`) owns their order; each trait documents what its decision may express.

mod approval;
mod disposition;
mod guard;
mod vote;

pub(crate) use approval::ask_once;
pub use approval::{ApprovalAnswer, ApprovalError, ApprovalOutcome, ApprovalRequest, Approver};
pub use disposition::{Action, Disposition};
pub use guard::{Denial, Guard};
pub use vote::{PolicyContext, PrePolicy, Tier, Vote, combine_votes};
