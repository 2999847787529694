//! The sandbox checks: what the helper (this very binary, `dsh sandbox-exec`) enforces here —
//! Landlock in full, in part or not at all, and its ABI; whether the hardened profile's
//! private mount namespace can be made; whether the seccomp filter installs — judged against
//! `[sandbox] mode`; then what `auto` does here (the session's own check).
//!
//! The sandbox fails the report only where no command could run: `required` without Landlock
//! in full, or a seccomp filter that does not install (every confined command needs it).
//! Less than everything under `auto` is a warning.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_agent::Session;
use dsh_config::{PermissionMode, SandboxMode};
use dsh_tools::sandbox::{Enforcement, Probe};

use super::{Check, NETWORK_TIMEOUT};

/// How long the helper may take to answer (it runs in milliseconds).
const HELPER_TIMEOUT: Duration = NETWORK_TIMEOUT;

pub(super) async fn check(mode: SandboxMode, session: Option<&Session>) -> Vec<Check> {
    let mut out = vec![machine(mode).await];
    if let Some(session) = session {
        out.push(auto(mode, session));
    }
    out
}

/// The `sandbox` line.
async fn machine(mode: SandboxMode) -> Check {
    let helper = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            return Check::fail(
                "sandbox",
                format!("cannot find dsh's own executable, the sandbox helper: {e}"),
                "run dsh from a path it can read back (/proc mounted)",
            );
        }
    };
    let probed = blocking(move || {
        let probe = dsh_tools::sandbox::probe(&helper);
        let seccomp = seccomp(&helper);
        (probe, seccomp)
    })
    .await;
    let (probe, seccomp) = match probed {
        Some(p) => p,
        None => {
            return Check::fail(
                "sandbox",
                "the sandbox helper did not answer the probe",
                "check that dsh's executable can run",
            );
        }
    };
    let probe = match probe {
        Ok(p) => p,
        Err(e) if mode == SandboxMode::Off => {
            return Check::warn(
                "sandbox",
                format!("off; the helper cannot run anyway: {e}"),
                "`[sandbox] mode = \"auto\"` once the helper runs",
            );
        }
        Err(e) => return Check::fail("sandbox", e, "check that dsh's executable can run"),
    };
    let said = describe(&probe, &seccomp, mode);
    if mode == SandboxMode::Off {
        return Check::warn(
            "sandbox",
            format!("{said}: commands run unconfined"),
            "`[sandbox] mode = \"auto\"` in your config (or drop --sandbox off)",
        );
    }
    if let Err(why) = &seccomp {
        return Check::fail(
            "sandbox",
            format!("{said}: the seccomp filter does not install ({why}), so no command can run"),
            "a kernel with seccomp filters; or, unconfined, `[sandbox] mode = \"off\"`",
        );
    }
    let full = probe.landlock == Enforcement::Full && probe.abi >= 6;
    match (probe.landlock, mode) {
        _ if full => Check::ok("sandbox", said),
        (_, SandboxMode::Required) => Check::fail(
            "sandbox",
            format!("{said}: `required` refuses every command without Landlock ABI 6 in full"),
            "a kernel with Landlock ABI ≥ 6 (Linux 6.7+, `landlock` in the `lsm=` boot parameter), or `[sandbox] mode = \"auto\"`",
        ),
        (Enforcement::None, _) => Check::warn(
            "sandbox",
            format!("{said}: commands are not confined beyond seccomp's network ban"),
            "enable Landlock: Linux 5.13+ with `landlock` in the `lsm=` boot parameter",
        ),
        _ => Check::warn(
            "sandbox",
            format!("{said}: some rights are not enforced"),
            "a newer kernel (Landlock ABI 6: Linux 6.7+)",
        ),
    }
}

/// `mode auto: Landlock full (ABI 7), private mounts yes, seccomp yes`, and what is missing.
fn describe(probe: &Probe, seccomp: &Result<(), String>, mode: SandboxMode) -> String {
    let landlock = match probe.landlock {
        Enforcement::Full => "full",
        Enforcement::Partial => "partial",
        Enforcement::None => "none",
    };
    let yes = |ok: bool| if ok { "yes" } else { "no" };
    let mut out = format!(
        "mode {mode}: Landlock {landlock} (ABI {}), private mounts {}, seccomp {}",
        probe.abi,
        yes(probe.mounts.is_ok()),
        yes(seccomp.is_ok())
    );
    if probe.landlock != Enforcement::Full && !probe.detail.is_empty() {
        out.push_str(&format!(" ({})", probe.detail));
    }
    out
}

/// Whether the helper can install its seccomp filter: it confines itself as for a command
/// without Landlock (no_new_privs, capabilities, seccomp) and runs `dsh --version`.
fn seccomp(helper: &Path) -> Result<(), String> {
    if !cfg!(target_os = "linux") {
        return Err("not on this OS".to_owned());
    }
    let mut child = Command::new(helper)
        .args([dsh_tools::sandbox::SUBCOMMAND, "--landlock=off", "--"])
        .arg(helper)
        .arg("--version")
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run the helper: {e}"))?;
    let deadline = Instant::now() + HELPER_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                let err = err.trim();
                let err = err
                    .strip_prefix(dsh_tools::sandbox::MESSAGE_PREFIX)
                    .unwrap_or(err);
                return Err(format!("exit {:?}: {err}", status.code()));
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("the helper did not finish".to_owned());
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The `auto` line: what the mode lifts here, or why it behaves as `ask`.
fn auto(mode: SandboxMode, session: &Session) -> Check {
    let now = format!("the mode now is {}", session.mode());
    match session.mode_notice(PermissionMode::Auto) {
        None => Check::ok(
            "auto",
            format!(
                "runs builds and workspace writes unasked in the hardened sandbox (mounts outside the workspace read-only, .git and .dsh read-only, no network); {now}"
            ),
        ),
        Some(why) => {
            let fix = if mode == SandboxMode::Off {
                "`[sandbox] mode = \"auto\"` (or drop --sandbox off)"
            } else {
                "Landlock ABI ≥ 6 in full and unprivileged user namespaces (e.g. `sysctl kernel.apparmor_restrict_unprivileged_userns=0`)"
            };
            // The session's notice is "auto mode needs …, which is not available here
            // (WHY): auto behaves as ask"; the line says it shorter when it can.
            let why = why
                .split_once("which is not available here (")
                .and_then(|(_, rest)| rest.strip_suffix("): auto behaves as ask"))
                .map_or(why.clone(), str::to_owned);
            Check::warn(
                "auto",
                format!(
                    "behaves as ask here: {why}; it needs the hardened sandbox (Landlock in full and a private mount namespace); {now}"
                ),
                fix,
            )
        }
    }
}

/// Runs `f` off the runtime's threads, at most [`HELPER_TIMEOUT`] (and a little) long.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let task = tokio::task::spawn_blocking(f);
    tokio::time::timeout(HELPER_TIMEOUT + Duration::from_secs(1), task)
        .await
        .ok()?
        .ok()
}
