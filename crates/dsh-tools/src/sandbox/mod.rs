//! The OS sandbox `run_shell` commands run in (DESIGN §2, §7; SPEC A4 **+**).
//!
//! # Shape
//!
//! The sandbox is applied by a helper process, never inside the async parent: `run_shell`
//! spawns `<dsh> sandbox-exec [options] -- bash -c <command>`; the helper forks, and its child
//! confines *itself* and then `execve`s bash, so the command and every process it starts
//! inherit the confinement, which cannot be lifted from inside. Doing this in a `pre_exec`
//! hook of the multi-threaded tokio process would run non-async-signal-safe code between
//! `fork` and `exec`; a re-exec of our own binary costs one more `execve` and keeps the
//! parent simple. The helper itself stays as the command's parent and kills the whole tree
//! when the command ends or when dsh dies, however it dies (see `supervise.rs`): a command
//! never outlives the dsh that started it. With `--sandbox off` the same helper runs the
//! command unconfined (`--no-confine`), for the same supervision.
//!
//! In order:
//!
//! 1. the helper calls `setsid()`: the command gets its own session and process group (whose
//!    id is the helper's pid, known to the parent) and no controlling terminal, so it can
//!    neither read nor inject (`TIOCSTI`) keystrokes into the user's terminal; it becomes a
//!    child subreaper and forks; the child, with a parent-death signal armed and `/dev/null`
//!    as its input,
//! 2. sets `no_new_privs` (setuid binaries and file capabilities grant nothing), keeps only
//!    the file-ownership capabilities of a root caller (`CHOWN`, `DAC_*`, `FOWNER`, `FSETID`)
//!    and drops the rest (`KILL`, `NET_*`, `SYS_*`, `MKNOD`, `SETUID`, …), and marks every
//!    inherited descriptor above 2 close-on-exec (an inherited writable descriptor would
//!    bypass Landlock, which checks paths at `open`);
//! 3. applies a **Landlock** ruleset: reading and executing stay allowed everywhere; writing,
//!    creating, removing, renaming, truncating and device `ioctl`s are allowed only beneath
//!    the workspace, the session's private `TMPDIR`, and on `/dev/null` (device nodes cannot
//!    be created anywhere); TCP `bind`/`connect` are denied unless the network is lifted;
//!    signals and abstract-socket connections to processes outside the sandbox are denied
//!    (ABI 6 scoping) — so the command cannot kill dsh;
//! 4. installs a **seccomp** filter returning `EPERM` for: `socket`/`socketpair` of any family
//!    but `AF_UNIX` (unless the network is lifted); `io_uring_*` (it can open sockets without
//!    passing through `socket(2)`); `setsid` and `setpgid` (so nothing leaves the session and
//!    the process group dsh kills at the end: a chain of processes that each change group
//!    and fork would outrun the sweeps of /proc); `ptrace`, `process_vm_readv/writev`; `bpf`, `perf_event_open`, `userfaultfd`;
//!    module and kexec loading, `reboot`, `swapon/off`, `acct`, the clock setters; the mount
//!    family; the kernel keyring; `ioctl(TIOCSTI/TIOCLINUX)`; `iopl`/`ioperm` on x86-64; and on
//!    x86-64 every x32-ABI system call (the filter matches numbers, and x32 numbers differ).
//!    A foreign-architecture system call (e.g. 32-bit `int 0x80`) kills the process;
//! 5. `execve`s the command with the environment dsh prepared (see `shell::env`).
//!
//! **The read-only profile** (`--read-only`, for calls cleared [`dsh_core::Clearance::ReadOnly`]:
//! the shell policy let them run without a person because they only read) changes steps 2–4:
//! no capability is kept; Landlock handles reading, listing and executing too and grants them
//! only beneath the `--read` paths ([`readable`]: the workspace, the system's directories,
//! git's global files, the enclosing repository, the `PATH` directories), `/dev/{null,zero,
//! urandom}` and the shell's own `/proc/self`; writing only beneath the session's TMPDIR and
//! on `/dev/null`; and seccomp refuses `socket(2)` of every family, `AF_UNIX` included
//! (`socketpair` still works), so no daemon outside is reachable either; and it refuses
//! changing a file's mode, owner, times or extended attributes (`chmod`, `chown`,
//! `utimensat`, `setxattr`, …), which Landlock up to ABI 6 does not confine (in the
//! workspace-write profile a command may still change those of any file its user owns). The result says
//! `"sandbox":"landlock-read-only"`. It is used only where the probe found Landlock fully
//! enforced; the probe applies this profile's ruleset, which handles every right the
//! workspace-write one does.
//!
//! **The hardened workspace-write profile** (`--hardened`, with `--protect PATH`… and
//! `--hide PATH`…), for calls the `auto` permission mode allowed
//! ([`dsh_core::Clearance::Hardened`]). Before anything else the child enters a private
//! mount namespace (a user namespace too when it is not root) where every mount is
//! read-only and `nosuid` but the `--write` trees, each `--protect` path that exists is
//! bind-mounted onto itself read-only, and each `--hide` path is covered (`protect.rs`).
//! `run_shell` decides those paths before each command and settles what no mount could
//! prevent afterwards (a protected path the command created is moved to
//! `DSH_HOME/quarantine/<session>/`, a replaced symlink put back: `shell/keep.rs`). Then no
//! capability is kept; reads are confined as in the read-only profile plus the toolchains'
//! directories ([`toolchains`]: `~/.cargo/bin`, `~/.rustup`, the package caches — readable,
//! never writable, never their credentials); writes go to the `--write` trees; and seccomp
//! refuses `socket(2)` of every family, `openat2`, and any set-user-ID or set-group-ID bit in
//! a mode (`chmod`, `open`, `mknod`) — a file's mode and times may otherwise change inside
//! the workspace, as builds need. The probe says whether such a mount namespace can be made
//! here (`mounts=yes`; it needs `mount_setattr`, Linux 5.12).
//!
//! A setup failure is reported as `dsh sandbox-exec: …` with exit code [`SETUP_FAILED`] —
//! on the `--status-fd` descriptor when `run_shell` passes one (a pipe only the helper
//! writes to, closed on `execve`: a command printing the same words cannot pass for a
//! failed setup), else on stderr; nothing runs.
//!
//! # Modes (`--sandbox`, `sandbox.mode`)
//!
//! * `required` — every command runs fully confined as above, or not at all: when Landlock is
//!   missing or lacks any of the rights above (ABI < 6) the call fails closed and says why.
//! * `auto` (default) — confined as far as the kernel allows. Without Landlock the command
//!   runs with seccomp only (the network ban holds; writes and signals are not confined): the
//!   result says `"sandbox":"none"` and its content starts with a warning, which the journal
//!   records with the result. A partial Landlock (ABI < 6) runs with a warning naming what is
//!   missing. On other operating systems commands run unsandboxed, with the same warning.
//! * `off` — the helper runs bash unconfined (on Linux; elsewhere bash runs directly in its
//!   own process group), with a warning in every result. Only the environment scrub, timeout,
//!   output limits and the supervision (nothing outlives dsh) apply.
//!
//! The sandbox applies to every command, whoever approved it: `--yolo` approves calls, it
//! does not loosen the sandbox. The network is lifted for one command only when the call asks
//! for it (`network: true`) *and* the tool's settings allow that — see `shell::NetworkGrant`.
//!
//! # What this does not protect
//!
//! * **Inside the workspace, everything is writable.** Landlock grants whole hierarchies: a
//!   command can rewrite `.git/` (hooks, config), `.dsh/` (project config, rules) or any file
//!   the protected-paths guard protects. That guard covers dsh's file tools, and the shell
//!   policy judges a command's redirections and known destinations against the same
//!   patterns — but a program that writes on its own is not seen (in `auto`'s hardened
//!   profile `.git` and `.dsh` are read-only). Review what a command did to `.git/hooks`
//!   before running git there.
//! * **Reads are not restricted.** A command can read anything its user can (`~/.ssh`,
//!   other projects); with the network banned it cannot send it anywhere but into its
//!   output, which the model sees.
//! * **Pathname UNIX sockets are reachable** (Landlock restricts them only from ABI 9): a
//!   command can talk to `/var/run/docker.sock` or the D-Bus system bus if its user may.
//! * **Hard links and descriptors made before the call.** Landlock checks the path used to
//!   open; a hard link inside the workspace to a file outside it is writable through.
//! * **No resource limits.** CPU, memory, disk space and process counts are not limited
//!   (only wall time, by the timeout). A fork bomb is stopped by the timeout at best.
//! * **Root stays root for files it may write**: ownership and mode bits are not enforced
//!   against a root caller inside the writable trees.
//! * `dsh`'s own state (`DSH_HOME`: journals, spills) is protected only while it lies outside
//!   the workspace; the session's `TMPDIR` is under it and is the one writable part.
//!
//! # What it breaks (on purpose)
//!
//! Writes to `~/.cache`, `~/.cargo`, `/tmp` and the like fail (point such tools at the
//! workspace or `$TMPDIR`, e.g. with `shell.pass_env`); `/dev/shm` (POSIX semaphores, so
//! Python's `multiprocessing` locks) and pseudo-terminals are not writable; `setsid`,
//! `setpgid` (`timeout(1)` and job control run, in the command's own group),
//! `ptrace` (strace, gdb) and 32-bit binaries fail; nothing can be left running in the
//! background past the end of the command.

mod gitconfig;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod protect;
mod reads;
mod status;
#[cfg(target_os = "linux")]
mod supervise;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

pub use gitconfig::{global_configs, named_in_workspace, submodule_files};
pub use reads::{enclosing_work_tree, readable, toolchains};
pub use status::StatusPipe;

/// The helper's exit code when it could not set the sandbox up (nothing ran).
pub const SETUP_FAILED: i32 = 125;

/// How the helper's own messages on stderr start.
pub const MESSAGE_PREFIX: &str = "dsh sandbox-exec: ";

/// The subcommand name the helper is reached by: `dsh sandbox-exec …`.
pub const SUBCOMMAND: &str = "sandbox-exec";

/// `--sandbox auto|required|off` (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SandboxMode {
    /// No sandbox at all; a warning in every result.
    Off,
    /// As much sandbox as the OS offers; a warning in the result when that is not all of it.
    #[default]
    Auto,
    /// The full sandbox or nothing runs.
    Required,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::Auto => "auto",
            SandboxMode::Required => "required",
        }
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(SandboxMode::Off),
            "auto" => Ok(SandboxMode::Auto),
            "required" => Ok(SandboxMode::Required),
            other => Err(format!(
                "`{other}` is not a sandbox mode (auto, required, off)"
            )),
        }
    }
}

/// How much of the Landlock ruleset the helper insists on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LandlockLevel {
    /// Every right must be enforced, else the helper fails ([`SETUP_FAILED`]).
    Required,
    /// What the kernel supports; nothing when it has no Landlock.
    BestEffort,
    /// No Landlock ruleset (seccomp and the rest still apply).
    Off,
}

impl LandlockLevel {
    fn as_str(self) -> &'static str {
        match self {
            LandlockLevel::Required => "required",
            LandlockLevel::BestEffort => "best-effort",
            LandlockLevel::Off => "off",
        }
    }
}

/// How much of the Landlock ruleset this kernel enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    /// All of it.
    Full,
    /// Some of it (an older ABI); [`Probe::detail`] names what is missing.
    Partial,
    /// None: no Landlock in this kernel (or not enabled, or blocked by a container).
    None,
}

/// What [`probe`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub landlock: Enforcement,
    /// The Landlock ABI version in effect (0 without Landlock).
    pub abi: u32,
    /// Whether a private mount namespace (for the hardened profile's read-only bind mounts)
    /// can be made here: `Err` says why not.
    pub mounts: Result<(), String>,
    /// For people: what is enforced, or what is missing and why.
    pub detail: String,
}

/// What the helper is asked to do: the arguments of `dsh sandbox-exec`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecSpec {
    pub landlock: LandlockLevel,
    /// The read-only profile (see the module docs): reads confined to `readable`, writes to
    /// `writable` (the session's TMPDIR), no socket of any family, no capabilities.
    pub read_only: bool,
    /// The hardened workspace-write profile (for `auto`): reads confined to `readable` (and
    /// `writable`), writes to `writable`, no socket of any family, and `protect` read-only.
    pub hardened: bool,
    /// The trees and files the command may read and execute beneath, in the read-only and
    /// hardened profiles (ignored otherwise: the workspace-write profile reads everywhere).
    pub readable: Vec<PathBuf>,
    /// Paths inside the writable trees made read-only by bind mounts in a private mount
    /// namespace (the hardened profile: `.git`, `.dsh`, prompt files). One that does not
    /// exist is skipped: nothing can be mounted over it.
    pub protect: Vec<PathBuf>,
    /// Paths inside the readable trees made unreadable in the hardened profile's mount
    /// namespace (what the file tools' deny/ask rules keep from reading: `.env`): a file is
    /// covered by an inaccessible device node, a directory by an empty read-only file system.
    pub hide: Vec<PathBuf>,
    /// The trees the command may write beneath (the workspace and the session's TMPDIR; in
    /// the read-only profile only the TMPDIR).
    pub writable: Vec<PathBuf>,
    /// Lifts the network ban (seccomp socket families, Landlock TCP).
    pub allow_network: bool,
    /// Applies the confinement (capabilities, Landlock, seccomp). `false` only supervises:
    /// `--sandbox off`, where the command still must not outlive dsh.
    pub confine: bool,
    /// Standard input is dsh's lifeline (see `supervise`): when it reads end-of-file, dsh is
    /// gone and the command is killed. The command itself reads `/dev/null`.
    pub lifeline: bool,
    /// A descriptor the helper reports a setup failure on (and nothing else): closed
    /// without a word once the command is `execve`d. Output and exit code are the
    /// command's to choose, so a command could fake a failure printed there; it cannot
    /// reach this one (close-on-exec).
    pub status_fd: Option<i32>,
    /// A descriptor the command gets as its standard input instead of `/dev/null` (a
    /// plugin's arguments); the helper itself keeps no copy once it has forked.
    pub stdin_fd: Option<i32>,
    /// The program and its arguments, e.g. `bash -c …`.
    pub program: Vec<OsString>,
}

impl ExecSpec {
    /// The arguments after `dsh sandbox-exec`.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = vec![OsString::from(format!(
            "--landlock={}",
            self.landlock.as_str()
        ))];
        if self.read_only {
            args.push("--read-only".into());
        }
        if self.hardened {
            args.push("--hardened".into());
        }
        for p in &self.protect {
            args.push("--protect".into());
            args.push(p.clone().into_os_string());
        }
        for p in &self.hide {
            args.push("--hide".into());
            args.push(p.clone().into_os_string());
        }
        for r in &self.readable {
            args.push("--read".into());
            args.push(r.clone().into_os_string());
        }
        for w in &self.writable {
            args.push("--write".into());
            args.push(w.clone().into_os_string());
        }
        if self.allow_network {
            args.push("--net".into());
        }
        if !self.confine {
            args.push("--no-confine".into());
        }
        if self.lifeline {
            args.push("--lifeline".into());
        }
        if let Some(fd) = self.status_fd {
            args.push(format!("--status-fd={fd}").into());
        }
        if let Some(fd) = self.stdin_fd {
            args.push(format!("--stdin-fd={fd}").into());
        }
        args.push("--".into());
        args.extend(self.program.iter().cloned());
        args
    }
}

/// A parsed helper command line.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    /// Apply the ruleset to the helper itself and report [`Probe`] on stdout.
    Probe,
    Exec(ExecSpec),
}

fn parse(args: Vec<OsString>) -> Result<Request, String> {
    let mut spec = ExecSpec {
        landlock: LandlockLevel::Required,
        read_only: false,
        hardened: false,
        readable: Vec::new(),
        protect: Vec::new(),
        hide: Vec::new(),
        writable: Vec::new(),
        allow_network: false,
        confine: true,
        lifeline: false,
        status_fd: None,
        stdin_fd: None,
        program: Vec::new(),
    };
    let mut probe = false;
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let Some(text) = arg.to_str() else {
            return Err(format!("unexpected argument {}", arg.to_string_lossy()));
        };
        match text {
            "--" => {
                spec.program = it.collect();
                break;
            }
            "--probe" => probe = true,
            "--net" => spec.allow_network = true,
            "--no-confine" => spec.confine = false,
            "--read-only" => spec.read_only = true,
            "--hardened" => spec.hardened = true,
            "--protect" => {
                let path = it.next().ok_or("--protect needs a path")?;
                spec.protect.push(PathBuf::from(path));
            }
            "--hide" => {
                let path = it.next().ok_or("--hide needs a path")?;
                spec.hide.push(PathBuf::from(path));
            }
            "--read" => {
                let path = it.next().ok_or("--read needs a path")?;
                spec.readable.push(PathBuf::from(path));
            }
            "--lifeline" => spec.lifeline = true,
            "--write" => {
                let path = it.next().ok_or("--write needs a directory")?;
                spec.writable.push(PathBuf::from(path));
            }
            "--landlock=required" => spec.landlock = LandlockLevel::Required,
            "--landlock=best-effort" => spec.landlock = LandlockLevel::BestEffort,
            "--landlock=off" => spec.landlock = LandlockLevel::Off,
            other if other.starts_with("--status-fd=") => {
                let fd = other["--status-fd=".len()..]
                    .parse::<i32>()
                    .ok()
                    .filter(|fd| *fd > 2)
                    .ok_or("--status-fd needs a descriptor above 2")?;
                spec.status_fd = Some(fd);
            }
            other if other.starts_with("--stdin-fd=") => {
                let fd = other["--stdin-fd=".len()..]
                    .parse::<i32>()
                    .ok()
                    .filter(|fd| *fd > 2)
                    .ok_or("--stdin-fd needs a descriptor above 2")?;
                spec.stdin_fd = Some(fd);
            }
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    if probe {
        return Ok(Request::Probe);
    }
    if spec.program.is_empty() {
        return Err(
            "usage: dsh sandbox-exec [--landlock=required|best-effort|off] [--read-only] \
                    [--read PATH]... [--write DIR]... [--net] [--no-confine] [--lifeline] \
                    -- PROGRAM [ARGS]..."
                .to_owned(),
        );
    }
    Ok(Request::Exec(spec))
}

/// The entry of the hidden `dsh sandbox-exec` subcommand: `args` are the arguments after
/// the subcommand's name. Runs the program confined, as the parent of its tree (see
/// `supervise.rs`); never returns. Call it before starting any thread or runtime.
pub fn sandbox_exec_main(args: Vec<OsString>) -> ! {
    let request = match parse(args) {
        Ok(r) => r,
        Err(e) => fail(&e),
    };
    if let Request::Exec(ExecSpec {
        status_fd: Some(fd),
        ..
    }) = &request
    {
        status::claim(*fd);
    }
    run(request)
}

#[cfg(target_os = "linux")]
fn run(request: Request) -> ! {
    match request {
        Request::Probe => {
            let probe = linux::probe_self();
            println!(
                "landlock={} abi={} mounts={} {}",
                match probe.landlock {
                    Enforcement::Full => "full",
                    Enforcement::Partial => "partial",
                    Enforcement::None => "none",
                },
                probe.abi,
                if probe.mounts.is_ok() { "yes" } else { "no" },
                match &probe.mounts {
                    Ok(()) => probe.detail.clone(),
                    Err(why) => format!("{}; {why}", probe.detail),
                }
            );
            std::process::exit(0)
        }
        Request::Exec(spec) => supervise::run(&spec),
    }
}

#[cfg(not(target_os = "linux"))]
fn run(request: Request) -> ! {
    match request {
        Request::Probe => {
            println!("landlock=none abi=0 mounts=no {}", UNAVAILABLE_HERE);
            std::process::exit(0)
        }
        Request::Exec(_) => fail(UNAVAILABLE_HERE),
    }
}

/// Why there is no sandbox on this OS.
#[cfg(not(target_os = "linux"))]
const UNAVAILABLE_HERE: &str =
    "the OS sandbox is unavailable on this OS (it uses Linux Landlock and seccomp)";

#[cfg(target_os = "linux")]
fn exec(program: &[OsString]) -> ! {
    use std::os::unix::process::CommandExt;
    let (first, rest) = program
        .split_first()
        .unwrap_or_else(|| fail("no program to run"));
    let err = std::process::Command::new(first).args(rest).exec();
    eprintln!(
        "{MESSAGE_PREFIX}cannot run {}: {err}",
        first.to_string_lossy()
    );
    // As shells do: 127 when the program is not found, 126 when it cannot be run.
    let code = if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    std::process::exit(code)
}

/// Reports a setup failure — on the status descriptor when there is one, else on stderr —
/// and exits with [`SETUP_FAILED`].
fn fail(message: &str) -> ! {
    status::report(&format!("{MESSAGE_PREFIX}{message}"));
    std::process::exit(SETUP_FAILED)
}

/// Whether the helper `dsh` at `helper` can sandbox on this machine: runs
/// `dsh sandbox-exec --probe`, which applies the full ruleset to itself (so a container that
/// blocks Landlock's system calls is detected too) and reports. `Err` when the helper cannot
/// be run at all.
pub fn probe(helper: &Path) -> Result<Probe, String> {
    let out = std::process::Command::new(helper)
        .args([OsStr::new(SUBCOMMAND), OsStr::new("--probe")])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run the sandbox helper {}: {e}", helper.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_probe(&text).ok_or_else(|| {
        format!(
            "the sandbox helper {} did not answer the probe (exit {:?}): {}{}",
            helper.display(),
            out.status.code(),
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

fn parse_probe(line: &str) -> Option<Probe> {
    let line = line.lines().next()?;
    let mut words = line.splitn(4, ' ');
    let landlock = match words.next()? {
        "landlock=full" => Enforcement::Full,
        "landlock=partial" => Enforcement::Partial,
        "landlock=none" => Enforcement::None,
        _ => return None,
    };
    let abi = words.next()?.strip_prefix("abi=")?.parse().ok()?;
    let mounts = words.next()?;
    let detail = words.next().unwrap_or("").to_owned();
    let mounts = match mounts {
        "mounts=yes" => Ok(()),
        "mounts=no" => Err(format!("no private mount namespace here ({detail})")),
        _ => return None,
    };
    Some(Probe {
        landlock,
        abi,
        mounts,
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_arguments_round_trip() {
        let spec = ExecSpec {
            landlock: LandlockLevel::BestEffort,
            read_only: true,
            hardened: true,
            readable: vec![PathBuf::from("/usr"), PathBuf::from("/h/.gitconfig")],
            protect: vec![PathBuf::from("/w s/.git")],
            hide: vec![PathBuf::from("/w s/.env")],
            writable: vec![PathBuf::from("/w s"), PathBuf::from("/tmp/x")],
            allow_network: true,
            confine: false,
            lifeline: true,
            status_fd: Some(3),
            stdin_fd: Some(4),
            program: vec!["bash".into(), "-c".into(), "--net -- x".into()],
        };
        assert_eq!(parse(spec.to_args()), Ok(Request::Exec(spec)));
        assert_eq!(parse(vec!["--probe".into()]), Ok(Request::Probe));
        assert!(parse(vec!["--landlock=none".into()]).is_err());
        assert!(parse(vec!["--".into()]).is_err());
        assert!(parse(vec!["--status-fd=1".into(), "--".into(), "x".into()]).is_err());
        assert!(parse(vec!["--stdin-fd=0".into(), "--".into(), "x".into()]).is_err());
    }

    #[test]
    fn probe_lines_parse() {
        assert_eq!(
            parse_probe("landlock=partial abi=5 mounts=yes missing: signal scoping (ABI 6)\n"),
            Some(Probe {
                landlock: Enforcement::Partial,
                abi: 5,
                mounts: Ok(()),
                detail: "missing: signal scoping (ABI 6)".into()
            })
        );
        assert_eq!(parse_probe("garbage"), None);
    }
}
