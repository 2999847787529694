//! The permission mode as a gate-1 listener (name `mode`; DESIGN §5 "Permission modes"): one
//! switch over the same gates, never a second path.
//!
//! - `read-only`: every declared write, every command line that is not free (the shell
//!   policy's read-only list, judged as it judges it) and every network access is denied,
//!   each saying "read-only mode" — a confirm-list `make` too.
//! - `ask` (the default): abstains; the other listeners and a person decide.
//! - `auto`: would lift the rule-liftable asks of builds and workspace writes, running them in
//!   a hardened workspace-write profile. That profile (UNIX sockets refused, reads confined,
//!   protected paths read-only through bind mounts in a private mount namespace) is **not
//!   implemented yet**, and `auto` may lift nothing where it is not enforced: so `auto`
//!   abstains, behaving as `ask`, and the session says so once when it starts or switches.
//! - `yolo`: abstains; the approver approves every ask (guards, the sandbox and the network
//!   ban still hold).
//!
//! The mode may change while the session runs ([`ModeSwitch`], shared with the runtime that
//! journals each change as `mode_changed`); a call is judged under the mode in force when it
//! reaches gate 1.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use dsh_config::PermissionMode;
use dsh_core::{Access, PolicyContext, PrePolicy, Tier, ToolCall, Vote, async_trait, quote_capped};

use crate::ShellPolicy;

/// Why `auto` behaves as `ask` in this build.
pub const AUTO_UNAVAILABLE: &str = "auto mode needs the hardened workspace-write sandbox (UNIX sockets refused, reads confined, protected paths read-only in a private mount namespace), which is not implemented yet; it behaves as ask";

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

/// The `mode` listener.
#[derive(Clone, Debug)]
pub struct ModePolicy {
    switch: ModeSwitch,
    /// Judges whether a command line only reads, as the shell policy does.
    shell: ShellPolicy,
}

impl ModePolicy {
    pub fn new(switch: ModeSwitch, shell: ShellPolicy) -> Self {
        ModePolicy { switch, shell }
    }
}

#[async_trait]
impl PrePolicy for ModePolicy {
    fn name(&self) -> &str {
        "mode"
    }

    async fn vote(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        if self.switch.get() != PermissionMode::ReadOnly {
            return Vote::abstain();
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
                _ => {}
            }
        }
        Vote::abstain()
    }
}
