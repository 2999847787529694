//! What gates 1 and 2 cleared a call to do when it runs: the profile a tool that confines its
//! work (a command in the OS sandbox) applies (DESIGN §4, the result's `sandbox`).
//!
//! A call allowed without a person because a policy knows it only reads — the shell policy's
//! free commands, a tool that declares itself read-only — is cleared [`Clearance::ReadOnly`]:
//! its allow holds *on that condition*, so a confining tool runs it where it can write nothing
//! that outlives the session and reach nothing but what it needs to read. A call a person
//! approved, or one a rule allows although no policy knows it only reads, is cleared
//! [`Clearance::Write`]. Conditions add up: when any allowing vote asked for the read-only
//! profile, the call gets it.

use crate::decision::Decision;
use crate::policy::Vote;

/// The profile a call was cleared for (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Clearance {
    /// Allowed without a person on the condition that it only reads.
    ReadOnly,
    /// Allowed without a person by the `auto` permission mode: the hardened workspace-write
    /// profile (protected paths read-only, reads confined, no sockets).
    Hardened,
    /// Approved by a person, or allowed by a rule on something not known to only read.
    #[default]
    Write,
}

impl Clearance {
    /// The clearance of a call gate 1 allowed (no person involved): read-only when any
    /// allowing vote holds only on that condition, or when no policy voted and the tool
    /// declares itself read-only; else hardened when any allowing vote holds only in the
    /// hardened profile; else write.
    pub(crate) fn of_allow(votes: &[Vote], tool_read_only: bool) -> Self {
        let allows: Vec<&Vote> = votes
            .iter()
            .filter(|v| v.decision == Some(Decision::Allow))
            .collect();
        if allows.iter().any(|v| v.reading_only) || (allows.is_empty() && tool_read_only) {
            Clearance::ReadOnly
        } else if allows.iter().any(|v| v.hardened) {
            Clearance::Hardened
        } else {
            Clearance::Write
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Tier;

    #[test]
    fn a_read_only_condition_holds_whoever_else_allows() {
        let votes = [
            Vote::allow(Tier::Rule, "a hook allows"),
            Vote::allow(Tier::Default, "free").reading_only(),
        ];
        assert_eq!(Clearance::of_allow(&votes, false), Clearance::ReadOnly);
    }

    #[test]
    fn an_allow_without_the_condition_clears_writing() {
        let votes = [Vote::abstain(), Vote::allow(Tier::Rule, "rule")];
        assert_eq!(Clearance::of_allow(&votes, true), Clearance::Write);
    }

    #[test]
    fn no_vote_on_a_read_only_tool_clears_reading() {
        assert_eq!(
            Clearance::of_allow(&[Vote::abstain()], true),
            Clearance::ReadOnly
        );
        assert_eq!(Clearance::of_allow(&[], false), Clearance::Write);
    }
}
