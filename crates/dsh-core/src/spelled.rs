//! [`spelled_enum!`](crate::spelled_enum): a fieldless enum whose values have one spelling
//! each in files, journals, flags and the environment — the one notation for every such
//! setting (`PermissionMode`, dsh-config's `SandboxMode`, `Provider`, …).

/// Declares a fieldless enum with its spellings: `ALL`, `as_str`, `Display`, `FromStr` (its
/// error lists every spelling) and serde under those spellings. The crate using it needs
/// `serde` (with `derive`) as a dependency.
#[macro_export]
macro_rules! spelled_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
        pub enum $name { $($(#[$vm])* #[serde(rename = $text)] $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The spelling used in files, environment and flags.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
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
