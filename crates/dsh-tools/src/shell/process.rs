//! Spawning a command tree and making sure it is gone.
//!
//! A command runs as the leader of a process group of its own: directly (`process_group(0)`,
//! sandbox off) or through the sandbox helper, which calls `setsid()` and so leads a new
//! session *and* group, and whose seccomp filter forbids `setsid` to everything below it.
//! When the command ends — normally, by timeout or by cancellation — [`kill_tree`] kills the
//! group (background children included) and, for the helper's tree, every process still in
//! its session (a descendant that moved to a group of its own with `setpgid`, as `timeout(1)`
//! does), then waits until none of them runs. A process that died but that init has not
//! reaped yet counts as stopped: it holds nothing and runs nothing.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long [`kill_tree`] waits for the tree to stop before giving up.
const KILL_DEADLINE: Duration = Duration::from_secs(3);

/// What to spawn: a program and its arguments, and whether it makes itself a session leader
/// (the sandbox helper) or is put in a process group of its own here.
#[derive(Debug)]
pub(crate) struct Launch {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// The program calls `setsid()` itself; the group and session ids are its pid. It is the
    /// sandbox helper, and its standard input is this process's [`lifeline`].
    pub own_session: bool,
}

/// The read end of a pipe whose write end this process holds until it exits and never
/// writes: the sandbox helper reads end-of-file from it exactly when dsh is gone, however it
/// ended, and then kills the command (`sandbox/supervise.rs`). Both ends are close-on-exec,
/// so no other program inherits the write end; each helper gets a duplicate of the read end
/// as its standard input.
#[cfg(unix)]
fn lifeline() -> std::io::Result<std::process::Stdio> {
    use std::sync::OnceLock;
    static LIFELINE: OnceLock<Result<(std::io::PipeReader, std::io::PipeWriter), String>> =
        OnceLock::new();
    match LIFELINE.get_or_init(|| std::io::pipe().map_err(|e| e.to_string())) {
        Ok((reader, _writer)) => Ok(reader.try_clone()?.into()),
        Err(e) => Err(std::io::Error::other(format!(
            "cannot create the lifeline pipe: {e}"
        ))),
    }
}

/// A spawned command: its child handle and the id of its group (and session, when
/// `own_session`), which is its pid.
#[derive(Debug)]
pub(crate) struct Spawned {
    pub child: tokio::process::Child,
    pub pgid: Option<u32>,
}

/// Where a spawned command's standard streams go.
#[derive(Debug)]
pub(crate) struct Streams {
    /// Standard error, and standard output too unless [`Streams::stdout`] is given (one
    /// pipe, so the two interleave as written).
    pub output: std::io::PipeWriter,
    /// Standard output apart from standard error (a plugin's answer).
    pub stdout: Option<std::io::PipeWriter>,
    /// Standard input instead of `/dev/null` (a plugin's arguments). The helper gets it as
    /// descriptor [`INPUT_FD`] and hands it to the command (`--stdin-fd`).
    pub input: Option<std::io::PipeReader>,
    /// The helper's status pipe, as descriptor [`StatusPipe::FD`](crate::sandbox::StatusPipe::FD).
    pub status: Option<std::io::PipeWriter>,
}

/// The descriptor the sandbox helper gets the command's input on.
pub(crate) const INPUT_FD: i32 = 4;

/// Spawns `launch` with exactly `env`, in `cwd`, stdin from `/dev/null` or `streams.input`
/// (the helper: the lifeline, the input as [`INPUT_FD`]), stdout and stderr as `streams`
/// say, and the helper's status pipe as descriptor
/// [`StatusPipe::FD`](crate::sandbox::StatusPipe::FD).
pub(crate) fn spawn(
    launch: &Launch,
    env: Vec<(OsString, OsString)>,
    cwd: &Path,
    streams: Streams,
) -> std::io::Result<Spawned> {
    let Streams {
        output,
        stdout,
        input,
        status,
    } = streams;
    // The helper's own stdin is the lifeline; a direct command reads its input there.
    let (stdin, input) = match input {
        Some(i) if !launch.own_session => (Stdio::from(i), None),
        other => (null_or_lifeline(launch)?, other),
    };
    let stdout = match stdout {
        Some(s) => s,
        None => output.try_clone()?,
    };
    let mut cmd = tokio::process::Command::new(&launch.program);
    cmd.args(&launch.args)
        .env_clear()
        .envs(env)
        .current_dir(cwd)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(output)
        .kill_on_drop(true);
    #[cfg(unix)]
    if !launch.own_session {
        cmd.process_group(0);
    }
    // Held until the child exists, then dropped: this process must not keep a write end.
    // The status descriptor first: its hook must read its source before the input's hook
    // could overwrite descriptor `INPUT_FD`.
    #[cfg(unix)]
    let status = status
        .map(|s| map_fd(&mut cmd, &s, crate::sandbox::StatusPipe::FD))
        .transpose()?;
    #[cfg(unix)]
    let input = input.map(|i| map_fd(&mut cmd, &i, INPUT_FD)).transpose()?;
    #[cfg(not(unix))]
    let _ = input;
    let child = cmd.spawn()?;
    drop(status);
    drop(input);
    // `cmd` holds the pipe's write ends; drop them now, or the reader never sees the end.
    drop(cmd);
    let pgid = child.id();
    Ok(Spawned { child, pgid })
}

/// `/dev/null`, or for the helper its lifeline.
fn null_or_lifeline(launch: &Launch) -> std::io::Result<Stdio> {
    #[cfg(unix)]
    if launch.own_session {
        return lifeline();
    }
    let _ = launch;
    Ok(Stdio::null())
}

/// Makes `source` the child's descriptor `target` (without close-on-exec there, so the
/// helper gets it).
#[cfg(unix)]
#[allow(unsafe_code)]
fn map_fd(
    cmd: &mut tokio::process::Command,
    source: &impl std::os::fd::AsFd,
    target: i32,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd;
    // Standard streams are set up before the hook below runs: a pipe that happened to get a
    // descriptor below 3 (dsh started with one closed) would be overwritten by them first;
    // and above every target, so that no hook overwrites another's source.
    let raw = rustix::io::fcntl_dupfd_cloexec(source, 10)?;
    let fd = raw.as_raw_fd();
    // SAFETY: the hook runs between fork and execve and calls only dup2, which is
    // async-signal-safe; `raw` stays open in this process until the spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, target) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(raw)
}

/// Kills the process group `pgid` — and, when `session`, the session `pgid` — and waits
/// until no process of them runs, at most [`KILL_DEADLINE`]. Returns whether they all
/// stopped in time.
#[cfg(unix)]
pub(crate) async fn kill_tree(pgid: u32, session: bool) -> bool {
    use rustix::process::{Pid, Signal, kill_process_group};
    let Some(group) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return true;
    };
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        let gone = kill_process_group(group, Signal::KILL) == Err(rustix::io::Errno::SRCH);
        // An empty group is the whole tree unless a session has to be swept too.
        if (gone && !session) || !others_alive(group, session) {
            return true;
        }
        if start.elapsed() > KILL_DEADLINE {
            return false;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

#[cfg(not(unix))]
pub(crate) async fn kill_tree(_pgid: u32, _session: bool) -> bool {
    // Without process groups only the direct child is killed (by the caller).
    true
}

/// Linux: scans `/proc` for running (not dead, not zombie) members of the group or session,
/// killing any it finds outside the group. Other Unixes: whether the group has members.
#[cfg(target_os = "linux")]
fn others_alive(group: rustix::process::Pid, session: bool) -> bool {
    use rustix::process::{Pid, Signal, kill_process};
    let id = group.as_raw_nonzero().get();
    let Some(all) = crate::procfs::processes() else {
        return rustix::process::test_kill_process_group(group).is_ok();
    };
    let mut alive = false;
    for p in all.iter().filter(|p| p.runs()) {
        if p.pgrp == id || (session && p.sid == id) {
            alive = true;
            if p.pgrp != id
                && let Some(pid) = Pid::from_raw(p.pid)
            {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
    }
    alive
}

#[cfg(all(unix, not(target_os = "linux")))]
fn others_alive(group: rustix::process::Pid, _session: bool) -> bool {
    rustix::process::test_kill_process_group(group).is_ok()
}
