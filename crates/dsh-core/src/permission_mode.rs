//! [`PermissionMode`] and [`Unlisted`]: the two switches over gate 1 that configuration,
//! flags and the REPL set and the policies read (DESIGN §5).

crate::spelled_enum! {
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

crate::spelled_enum! {
    /// `[shell] unlisted`: what happens to a program on neither of the shell policy's lists.
    Unlisted {
        /// A person is asked; a rule may lift it (the default).
        Ask = "ask",
        /// Refused: seed 003's strict allowlist, for teams that want it.
        Deny = "deny",
    }
}
