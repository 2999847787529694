//! The session's permission mode (DESIGN §5 "Permission modes"): read by the `mode` listener
//! and the shell policy
//! at gate 1 ([`dsh_policy::ModePolicy`]), switched by a front end (`/mode`, Shift-Tab) —
//! each switch journaled as `mode_changed` before any later call is judged under it.

use dsh_config::PermissionMode;
use dsh_core::journal::Record;

use crate::Session;

/// Why a mode could not be switched.
#[derive(Debug, thiserror::Error)]
pub enum ModeError {
    #[error(
        "`yolo` approves every ask; it is chosen only by a flag (--mode yolo, --yolo) or your user configuration, never mid-session"
    )]
    IntoYolo,
    #[error("this session approves every ask (yolo); start it without --yolo to switch modes")]
    FromYolo,
    #[error(transparent)]
    Journal(#[from] dsh_core::journal::JournalError),
}

impl Session {
    /// The mode in force.
    pub fn mode(&self) -> PermissionMode {
        self.mode.get()
    }

    /// Why `auto` behaves as `ask` here, when it does: its hardened sandbox is not enforced.
    pub fn mode_notice(&self, mode: PermissionMode) -> Option<String> {
        if mode != PermissionMode::Auto {
            return None;
        }
        (self.hardened.0)().err().map(|why| {
            format!(
                "{}, which is not available here ({why}): auto behaves as ask",
                dsh_policy::AUTO_NEEDS
            )
        })
    }

    /// Switches the mode (never into or out of `yolo`): journals `mode_changed` first, so
    /// that no call is judged under a mode the journal does not show.
    pub fn set_mode(&self, mode: PermissionMode, by: &str) -> Result<(), ModeError> {
        if mode == PermissionMode::Yolo {
            return Err(ModeError::IntoYolo);
        }
        if self.mode() == PermissionMode::Yolo {
            return Err(ModeError::FromYolo);
        }
        if mode == self.mode() {
            return Ok(());
        }
        self.pipeline.journal().append(&Record::ModeChanged {
            mode: mode.as_str().into(),
            by: by.into(),
        })?;
        self.mode.set(mode);
        Ok(())
    }
}

/// The next mode Shift-Tab selects: read-only → ask → auto → read-only.
pub fn next_mode(mode: PermissionMode) -> PermissionMode {
    match mode {
        PermissionMode::ReadOnly => PermissionMode::Ask,
        PermissionMode::Ask => PermissionMode::Auto,
        PermissionMode::Auto | PermissionMode::Yolo => PermissionMode::ReadOnly,
    }
}
