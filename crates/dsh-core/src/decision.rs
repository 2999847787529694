//! [`Decision`]: allow, ask or deny — the one answer a permission rule, a policy's vote, the
//! combined gate 1 and `dsh check` give, under one name in every crate.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Allow, ask or deny. Ordered by severity (`Allow < Ask < Deny`): the worst of several
/// decisions is their maximum. A vote that decides nothing is `None` where a decision is
/// optional (an abstaining listener), never a fourth variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The call runs without asking.
    Allow,
    /// A person is asked.
    Ask,
    /// The call is refused.
    Deny,
}

impl Decision {
    /// Every decision, least severe first.
    pub const ALL: [Decision; 3] = [Decision::Allow, Decision::Ask, Decision::Deny];

    /// The spelling used in files, journals and `dsh check`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Decision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Decision::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| format!("{s:?} is not one of: allow, ask, deny"))
    }
}
