//! How a command is launched: through the sandbox helper in the profile the kernel
//! enforces, supervised only (`--sandbox off`), or directly — and whether the read-only and
//! hardened profiles can be used here at all.

use std::path::PathBuf;

use dsh_core::{SandboxState, ToolError};

use super::RunShell;
use crate::sandbox::{self, Enforcement, LandlockLevel, SandboxMode};

/// How one command is launched.
pub(super) enum Plan {
    /// Through `dsh sandbox-exec`.
    Helper {
        helper: PathBuf,
        landlock: LandlockLevel,
        /// `false`: supervision only (`--sandbox off`).
        confine: bool,
        state: SandboxState,
        warning: Option<String>,
    },
    /// `bash -c` directly, unconfined.
    Direct { warning: String },
}

impl RunShell {
    /// Decides how to launch under the configured mode, probing the kernel once.
    pub(super) async fn plan(&self) -> Result<Plan, ToolError> {
        let mode = self.settings.sandbox;
        if mode == SandboxMode::Off {
            let warning = "not sandboxed (sandbox mode off): this command can write anywhere \
                           its user can, signal its user's processes and use the network"
                .to_owned();
            // On Linux the helper still runs it, unconfined, so that it cannot outlive dsh.
            return Ok(match self.settings.helper.clone() {
                Some(helper) if cfg!(target_os = "linux") => Plan::Helper {
                    helper,
                    landlock: LandlockLevel::Off,
                    confine: false,
                    state: SandboxState::None,
                    warning: Some(warning),
                },
                _ => Plan::Direct { warning },
            });
        }
        let refuse = |why: &str| {
            ToolError::failed(format!(
                "the command did not run: the sandbox is required (--sandbox required / \
                 sandbox.mode) but {why}. Fix that, or use --sandbox auto to run \
                 unsandboxed with a warning"
            ))
        };
        if !cfg!(target_os = "linux") {
            if mode == SandboxMode::Required {
                return Err(refuse(
                    "the OS sandbox is unavailable on this OS (it uses Linux Landlock and seccomp)",
                ));
            }
            return Ok(Plan::Direct {
                warning: "not sandboxed: the OS sandbox is unavailable on this OS (it uses \
                          Linux Landlock and seccomp); writes, signals and the network are \
                          not confined"
                    .to_owned(),
            });
        }
        let Some(helper) = self.settings.helper.clone() else {
            if mode == SandboxMode::Required {
                return Err(refuse(
                    "no sandbox helper (the dsh executable) is configured",
                ));
            }
            return Ok(Plan::Direct {
                warning: "not sandboxed: no sandbox helper is configured; writes, signals and \
                          the network are not confined"
                    .to_owned(),
            });
        };
        let probe = match self.probe.get() {
            Some(p) => p.clone(),
            None => {
                let (cell, helper) = (self.probe.clone(), helper.clone());
                tokio::task::spawn_blocking(move || {
                    cell.get_or_init(|| sandbox::probe(&helper)).clone()
                })
                .await
                .unwrap_or_else(|e| Err(format!("the probe did not finish: {e}")))
            }
        };
        let probe = match &probe {
            Ok(p) => p,
            Err(e) => {
                return Err(ToolError::failed(format!(
                    "the command did not run: {e}. Use --sandbox off to run commands without \
                     the sandbox"
                )));
            }
        };
        match (probe.landlock, mode) {
            (Enforcement::Full, _) => Ok(Plan::Helper {
                helper,
                landlock: if mode == SandboxMode::Required {
                    LandlockLevel::Required
                } else {
                    LandlockLevel::BestEffort
                },
                confine: true,
                state: SandboxState::Landlock,
                warning: None,
            }),
            (_, SandboxMode::Required) => Err(refuse(&format!(
                "Landlock is not fully available: {}",
                probe.detail
            ))),
            (Enforcement::Partial, _) => Ok(Plan::Helper {
                helper,
                landlock: LandlockLevel::BestEffort,
                confine: true,
                state: SandboxState::Landlock,
                warning: Some(format!("sandbox partially enforced: {}", probe.detail)),
            }),
            (Enforcement::None, _) => Ok(Plan::Helper {
                helper,
                landlock: LandlockLevel::Off,
                confine: true,
                state: SandboxState::None,
                warning: Some(format!(
                    "not sandboxed: {}. Writes and signals are not confined; the network ban \
                     (seccomp) still holds. Use --sandbox required to refuse to run like this",
                    probe.detail
                )),
            }),
        }
    }

    /// Whether commands cleared to read only run in the read-only profile here: `Ok`, or why
    /// not (the sandbox is off, there is no helper or no Landlock, or Landlock is not fully
    /// enforced). Probes the kernel on first use, blocking; the answer is kept.
    pub fn read_only_profile(&self) -> Result<(), String> {
        if self.settings.sandbox == SandboxMode::Off {
            return Err("the sandbox is off (--sandbox off / sandbox.mode)".to_owned());
        }
        if !cfg!(target_os = "linux") {
            return Err(
                "the OS sandbox is unavailable on this OS (it uses Linux Landlock and seccomp)"
                    .to_owned(),
            );
        }
        let Some(helper) = &self.settings.helper else {
            return Err("no sandbox helper is configured".to_owned());
        };
        match self.probe.get_or_init(|| sandbox::probe(helper)) {
            Ok(p) if p.landlock == Enforcement::Full => Ok(()),
            Ok(p) => Err(format!("Landlock is not fully enforced: {}", p.detail)),
            Err(e) => Err(e.clone()),
        }
    }

    /// Whether commands `auto` lifts can run in the hardened workspace-write profile here:
    /// the read-only profile's conditions and a private mount namespace.
    pub fn hardened_profile(&self) -> Result<(), String> {
        self.read_only_profile()?;
        let Some(helper) = &self.settings.helper else {
            return Err("no sandbox helper is configured".to_owned());
        };
        match self.probe.get_or_init(|| sandbox::probe(helper)) {
            Ok(p) => p.mounts.clone(),
            Err(e) => Err(e.clone()),
        }
    }
}
