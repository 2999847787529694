//! [`PermissionMode`] and [`Unlisted`]: the two switches over gate 1 that configuration,
//! flags and the REPL set and the policies read (DESIGN §5).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Declares a fieldless enum with its spellings: `ALL`, `as_str`, `Display`, `FromStr` and
/// serde under those spellings.
macro_rules! spelled {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name { $($(#[$vm])* #[serde(rename = $text)] $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The spelling used in files, environment and flags.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $name::ALL.iter().copied().find(|v| v.as_str() == s).ok_or_else(|| {
                    let all: Vec<&str> = $name::ALL.iter().map(|v| v.as_str()).collect();
                    format!("{s:?} is not one of: {}", all.join(", "))
                })
            }
        }
    };
}

spelled! {
    /// `[permissions] mode` (also `--mode`, `/mode`, Shift-Tab): one switch over the same
    /// gates (DESIGN §5).
    PermissionMode {
        /// Every write and every program not on the read-only list is denied.
        ReadOnly = "read-only",
        /// A person is asked for writes and for programs the lists do not free (the default).
        Ask = "ask",
        /// Rule-liftable asks of builds and workspace writes run without a person, in a
        /// hardened sandbox profile, where that profile is enforced.
        Auto = "auto",
        /// Every ask is approved (guards, the sandbox and the network ban still apply).
        Yolo = "yolo",
    }
}

spelled! {
    /// `[shell] unlisted`: what happens to a program on neither of the shell policy's lists.
    Unlisted {
        /// A person is asked; a rule may lift it (the default).
        Ask = "ask",
        /// Refused: seed 003's strict allowlist, for teams that want it.
        Deny = "deny",
    }
}
