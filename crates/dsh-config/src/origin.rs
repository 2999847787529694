//! Where a setting came from: its [`Layer`], file, line and key ([`Origin`], dsh-core's, so
//! that a rule carries the same one to the policy), and a value tagged with it ([`Sourced`]).

use serde::Serialize;

pub use dsh_core::{Layer, Origin};

/// A value together with its [`Origin`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub origin: Origin,
}

impl<T> Sourced<T> {
    pub(crate) fn builtin(value: T) -> Self {
        Sourced {
            value,
            origin: Origin::builtin(),
        }
    }
}
