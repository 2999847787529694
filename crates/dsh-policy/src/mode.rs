//! The permission mode as a gate-1 listener (name `mode`; DESIGN §5 "Permission modes"): one
//! switch over the same gates, never a second path.
//!
//! - `read-only`: every declared write, every command line that is not free (the shell
//!   policy's read-only list, judged as it judges it) and every network access is denied,
//!   each saying "read-only mode" — a confirm-list `make` too; so is a call handed to a
//!   service dsh does not confine (an MCP server's tool), unless the service says the tool
//!   only reads *and* a permission rule allows the call (the service's word alone is never
//!   enough).
//! - `ask` (the default): abstains; the other listeners and a person decide.
//! - `auto`: lifts the asks a rule could lift for a program on the confirm list or on none
//!   (not one that always asks: docker, ssh, gh, kubectl, …; nor git beyond its reading
//!   subcommands, which could only fail with `.git` read-only), the shell policy's "writes a
//!   file inside the workspace" asks, and file-tool writes — a Rule allow that holds only in
//!   the hardened workspace-write sandbox (protected paths read-only through bind mounts,
//!   reads confined, no sockets). It never lifts reads outside the workspace, the network,
//!   protected paths, memory files or configured ask rules (a file tool's path rule included,
//!   wherever a command writes): those listeners' Rule asks and denials outrank this allow.
//!   Where the hardened sandbox is not enforced, `auto` abstains — behaving as `ask` — and
//!   the session says why. A call handed to a service dsh does not confine is never lifted.
//! - `yolo`: abstains; the approver approves every ask (guards, the sandbox and the network
//!   ban still hold).
//!
//! The mode may change while the session runs ([`ModeSwitch`], shared with the runtime that
//! journals each change as `mode_changed`); a call is judged under the mode in force when it
//! reaches gate 1.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use dsh_core::PermissionMode;
use dsh_core::{Access, PolicyContext, PrePolicy, Tier, ToolCall, Vote, async_trait, quote_capped};

use crate::ShellPolicy;

/// What `auto` needs, for the notice when it behaves as `ask`.
pub const AUTO_NEEDS: &str = "auto mode needs the hardened workspace-write sandbox (Landlock in full and a private mount namespace)";

/// The session's permission mode, shared between the `mode` listener, the approver and the
/// runtime that switches it.
#[derive(Clone, Debug)]
pub struct ModeSwitch(Arc<AtomicU8>);

impl ModeSwitch {
    pub fn new(mode: PermissionMode) -> Self {
        ModeSwitch(Arc::new(AtomicU8::new(code(mode))))
    }

    pub fn get(&self) -> PermissionMode {
        match self.0.load(Ordering::SeqCst) {
            0 => PermissionMode::ReadOnly,
            2 => PermissionMode::Auto,
            3 => PermissionMode::Yolo,
            _ => PermissionMode::Ask,
        }
    }

    pub fn set(&self, mode: PermissionMode) {
        self.0.store(code(mode), Ordering::SeqCst);
    }
}

fn code(mode: PermissionMode) -> u8 {
    match mode {
        PermissionMode::ReadOnly => 0,
        PermissionMode::Ask => 1,
        PermissionMode::Auto => 2,
        PermissionMode::Yolo => 3,
    }
}

/// Says whether the hardened sandbox keeps a path from `auto` (a protected path, a file the
/// repository's git configuration names, what a deny/ask rule matches): a file tool's write
/// there is not lifted, since the file tools run outside the sandbox's mounts.
#[derive(Clone)]
pub struct KeptCheck(pub Arc<dyn Fn(&std::path::Path) -> bool + Send + Sync>);

impl std::fmt::Debug for KeptCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeptCheck(..)")
    }
}

/// The `mode` listener.
#[derive(Clone, Debug)]
pub struct ModePolicy {
    switch: ModeSwitch,
    /// Judges command lines as the shell policy does (with the same mode).
    shell: ShellPolicy,
    /// What `auto` must not let a file tool write (`None`: nothing beyond the other
    /// listeners' protections).
    kept: Option<KeptCheck>,
    /// The session's permission rules, for the read-only mode's question about a call to a
    /// service that says it only reads (`None`: no rule allows it).
    rules: Option<crate::PermissionRules>,
}

impl ModePolicy {
    /// `shell` is the session's shell policy, following `switch` ([`ShellPolicy::with_mode`]).
    pub fn new(switch: ModeSwitch, shell: ShellPolicy) -> Self {
        ModePolicy {
            switch,
            shell,
            kept: None,
            rules: None,
        }
    }

    /// Lets the read-only mode run a remote service's call that says it only reads when
    /// `rules` allow it.
    #[must_use]
    pub fn with_rules(mut self, rules: crate::PermissionRules) -> Self {
        self.rules = Some(rules);
        self
    }

    /// Keeps `auto` from lifting file-tool writes to what `kept` says the hardened sandbox
    /// keeps.
    #[must_use]
    pub fn with_kept(mut self, kept: KeptCheck) -> Self {
        self.kept = Some(kept);
        self
    }

    /// `auto`: a Rule allow in the hardened sandbox when every command the call declares is
    /// free or has only asks `auto` lifts, and it declares a write or such a command.
    fn auto(&self, cx: &PolicyContext<'_>) -> Vote {
        // Where the hardened sandbox is not enforced, `auto` is `ask`.
        if (self.shell.hardened_sandbox.0)().is_err() {
            return Vote::abstain();
        }
        let mut lifted = Vec::new();
        for access in cx.accesses {
            match access {
                Access::Execute { command } => {
                    let d = self.shell.decide(command);
                    if self.shell.auto_lifts(&d) {
                        lifted.push(d.reason);
                    } else if d.decision != dsh_core::Decision::Allow {
                        return Vote::abstain();
                    }
                }
                Access::Write { path } => {
                    if self.kept.as_ref().is_some_and(|k| (k.0)(path)) {
                        return Vote::abstain();
                    }
                    lifted.push(format!("writes {}", dsh_core::quote_capped_path(path)));
                }
                Access::Network { .. } | Access::Remote { .. } => return Vote::abstain(),
                _ => {}
            }
        }
        if lifted.is_empty() {
            return Vote::abstain();
        }
        Vote::allow(
            Tier::Rule,
            format!(
                "auto mode: runs without a person in the hardened sandbox (protected paths read-only, no sockets): {}",
                lifted.join("; ")
            ),
        )
        .in_hardened_sandbox()
    }
}

#[async_trait]
impl PrePolicy for ModePolicy {
    fn name(&self) -> &str {
        "mode"
    }

    async fn vote(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        match self.switch.get() {
            PermissionMode::ReadOnly => {}
            PermissionMode::Auto => return self.auto(cx),
            PermissionMode::Ask | PermissionMode::Yolo => return Vote::abstain(),
        }
        let deny = |why: String| {
            Vote::deny(
                Tier::Rule,
                format!(
                    "read-only mode: {why}; switch modes to let it run (/mode ask, --mode ask)"
                ),
            )
        };
        for access in cx.accesses {
            match access {
                Access::Write { path } => {
                    return deny(format!(
                        "`{}` writes {}",
                        call.name(),
                        dsh_core::quote_capped_path(path)
                    ));
                }
                Access::Execute { command } => {
                    let decision = self.shell.decide(command);
                    if !decision.reads_only() {
                        return deny(format!(
                            "{} is not a command that only reads (the read-only list)",
                            quote_capped(command)
                        ));
                    }
                }
                Access::Network { .. } => return deny("no network".to_owned()),
                Access::Remote {
                    service,
                    claims_read_only,
                } => {
                    if !claims_read_only {
                        return deny(format!(
                            "`{}` is run by {service}, which does not say it only reads",
                            call.name()
                        ));
                    }
                    if !self
                        .rules
                        .as_ref()
                        .is_some_and(|r| r.allow(call, cx.accesses))
                    {
                        return deny(format!(
                            "`{}` is run by {service}, which says it only reads; that is its word alone, so it runs here only when an allow rule names it (e.g. `allow = [\"{}\"]`)",
                            call.name(),
                            call.name()
                        ));
                    }
                }
                _ => {}
            }
        }
        Vote::abstain()
    }
}
