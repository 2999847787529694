//! The helper as the command's parent, so that no command outlives the dsh that started it.
//!
//! `dsh sandbox-exec` does not `execve` the command itself: it makes itself the leader of a
//! new session and a *child subreaper*, forks, and the child confines itself and `execve`s
//! the command. The helper stays behind, unconfined, as the parent of the whole tree — every
//! process the command starts is in its session (seccomp forbids `setsid` below it), and an
//! orphan anywhere below is re-parented to the helper rather than to init. It then waits for
//! one of two things:
//!
//! * **the command ends**: it kills whatever the command left running in its session or
//!   below it, and exits as the command did (the same exit code, or the same signal), so
//!   `run_shell` reports exactly what it would have reported had bash been its child;
//! * **dsh is gone**: its standard input is the read end of a *lifeline* pipe whose only
//!   write end dsh holds and never writes ([`crate::shell`] passes it with `--lifeline`).
//!   When dsh dies, however it dies — `SIGKILL` included — the kernel closes that end and
//!   the helper reads end-of-file. It then kills the session and everything below it and
//!   exits. A parent-death signal on the helper would fire when the *thread* that spawned it
//!   ends, which in a multi-threaded runtime is not when dsh ends; a pipe closes only when
//!   the process is gone.
//!
//! A command that runs without Landlock (its kernel has none, or `--sandbox off`) can open
//! `/proc/<helper>/fd/0` and so hold a write end of the lifeline itself; the helper
//! therefore also looks, at least every [`PARENT_CHECK`], whether its parent is still the
//! dsh that started it (a dead parent's children are re-parented), and treats a change like
//! end-of-file. With Landlock the command cannot reach the helper's descriptors or signal it:
//! both are ptrace-class accesses across the domain boundary.
//!
//! The command's child process gets a parent-death signal (`SIGKILL`) of its own, so if the
//! helper itself is killed, bash dies with it; `run_shell` then sweeps the session as before.
//! The helper never reads the command's output and writes nothing after the fork.

use std::time::{Duration, Instant};

use super::{ExecSpec, SETUP_FAILED, fail};

/// How long the helper keeps killing before it gives up and exits anyway.
const SWEEP_DEADLINE: Duration = Duration::from_secs(3);

/// How often the helper checks that dsh is still its parent, besides the lifeline.
const PARENT_CHECK: Duration = Duration::from_millis(500);

/// The helper's exit code when dsh went away and it killed the command.
const ORPHANED: i32 = 137;

/// Runs `spec` under supervision; never returns. Call it single-threaded (as `main` does,
/// before any runtime exists): the child runs ordinary Rust code between `fork` and `execve`.
#[allow(unsafe_code)]
pub(super) fn run(spec: &ExecSpec) -> ! {
    rustix::process::setsid().unwrap_or_else(|e| fail(&format!("setsid: {e}")));
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers and touches no memory.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        fail(&format!(
            "cannot become a child subreaper: {}",
            std::io::Error::last_os_error()
        ));
    }
    let helper = rustix::process::getpid();
    let dsh = rustix::process::getppid();
    // SAFETY: this process has a single thread (see above), so the child may run any code:
    // no lock can be held by a thread that does not exist in it.
    match unsafe { libc::fork() } {
        -1 => fail(&format!("fork: {}", std::io::Error::last_os_error())),
        0 => child(spec, helper.as_raw_nonzero().get()),
        pid => {
            if let Some(fd) = spec.stdin_fd {
                // Only the command holds its input: its end of file is the writer's.
                // SAFETY: closes a descriptor this process owns and no Rust object wraps.
                unsafe { libc::close(fd) };
            }
            parent(
                pid,
                helper.as_raw_nonzero().get(),
                spec.lifeline.then_some(dsh),
            )
        }
    }
}

/// The command's side: die with the helper, give up the lifeline, confine, `execve`.
#[allow(unsafe_code)]
fn child(spec: &ExecSpec, helper: i32) -> ! {
    // SAFETY: plain integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
    // The helper may have died before the signal was armed.
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) != Some(helper) {
        std::process::exit(SETUP_FAILED);
    }
    if let Some(fd) = spec.stdin_fd {
        // The command reads what dsh gave it (a plugin's arguments), never the lifeline.
        // SAFETY: plain descriptors; dup2 replaces descriptor 0 only, then `fd` is closed.
        if unsafe { libc::dup2(fd, 0) } < 0 {
            fail("cannot give the command its input");
        }
        // SAFETY: closes a descriptor this process owns and no Rust object wraps.
        unsafe { libc::close(fd) };
    } else if spec.lifeline {
        // The command reads from /dev/null, never from the lifeline.
        match std::fs::File::open("/dev/null") {
            Ok(null) => {
                use std::os::fd::AsRawFd;
                // SAFETY: both descriptors are open; dup2 replaces descriptor 0 only.
                if unsafe { libc::dup2(null.as_raw_fd(), 0) } < 0 {
                    fail("cannot give the command /dev/null as its input");
                }
            }
            Err(e) => fail(&format!("cannot open /dev/null: {e}")),
        }
    }
    if spec.confine
        && let Err(e) = super::linux::confine(spec)
    {
        fail(&e);
    }
    super::exec(&spec.program)
}

/// The helper's side: wait for the command or for dsh's end, sweep, exit.
fn parent(child: i32, helper: i32, dsh: Option<Option<rustix::process::Pid>>) -> ! {
    // Setup failures from here on are the child's to report.
    super::status::release();
    let status = wait(child, dsh);
    sweep(helper);
    match status {
        Some(status) => exit_as(status),
        None => std::process::exit(ORPHANED),
    }
}

/// The command's wait status, or `None` when dsh went away first. `dsh` is dsh's pid when
/// standard input is its lifeline.
#[allow(unsafe_code)]
fn wait(child: i32, dsh: Option<Option<rustix::process::Pid>>) -> Option<i32> {
    let lifeline = dsh.is_some();
    // SAFETY: pidfd_open takes a pid and flags; it returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, child, 0) };
    let pidfd = i32::try_from(pidfd).unwrap_or(-1);
    loop {
        let mut fds = [
            libc::pollfd {
                fd: if lifeline { 0 } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // Without a pidfd (kernels before 5.3), look at the child every 20 ms.
        let timeout = match (pidfd >= 0, lifeline) {
            (false, _) => 20,
            (true, true) => i32::try_from(PARENT_CHECK.as_millis()).unwrap_or(500),
            (true, false) => -1,
        };
        // SAFETY: `fds` is a valid array of two pollfd; negative fds are ignored by poll.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
        if let Some(status) = reap(child) {
            return Some(status);
        }
        if fds[0].revents != 0 && lifeline_closed() {
            return None;
        }
        if let Some(dsh) = dsh
            && rustix::process::getppid() != dsh
        {
            return None;
        }
    }
}

/// Whether the lifeline reads end-of-file (dsh is gone). Nothing writes to it, so any data
/// is discarded.
#[allow(unsafe_code)]
fn lifeline_closed() -> bool {
    let mut buf = [0u8; 64];
    // SAFETY: reading into a local buffer of the given length.
    let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
    match n {
        0 => true,
        n if n > 0 => false,
        _ => !matches!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EINTR | libc::EAGAIN)
        ),
    }
}

/// Reaps `child` if it ended, returning its wait status.
#[allow(unsafe_code)]
fn reap(child: i32) -> Option<i32> {
    let mut status = 0;
    // SAFETY: waitpid writes the status into a local integer.
    let r = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
    (r == child).then_some(status)
}

/// Kills every process in the helper's session or below it (orphans re-parented to the
/// helper included), reaping them, until none runs or [`SWEEP_DEADLINE`] passes.
#[allow(unsafe_code)]
fn sweep(helper: i32) {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        // SAFETY: waitpid with a null status pointer reaps any child without blocking.
        let reaped = loop {
            let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
            if r <= 0 {
                break r;
            }
        };
        // No child at all: every process of the session descends from the helper (orphans
        // are re-parented to it, the subreaper), so none is left and `/proc` need not be read.
        if reaped < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
            return;
        }
        let Some(all) = crate::procfs::processes() else {
            return;
        };
        let parents: std::collections::HashMap<i32, i32> =
            all.iter().map(|p| (p.pid, p.ppid)).collect();
        let below = |mut pid: i32| {
            for _ in 0..4096 {
                match parents.get(&pid) {
                    Some(&ppid) if ppid == helper => return true,
                    Some(&ppid) if ppid > 1 => pid = ppid,
                    _ => return false,
                }
            }
            false
        };
        let mut alive = false;
        for p in all.iter().filter(|p| p.runs() && p.pid != helper) {
            if p.sid == helper || below(p.pid) {
                alive = true;
                // SAFETY: kill takes plain integers.
                unsafe { libc::kill(p.pid, libc::SIGKILL) };
            }
        }
        if !alive || start.elapsed() > SWEEP_DEADLINE {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Exits with the command's exit code, or dies of the signal that killed it (without a core
/// file: the command's crash is reported, not duplicated in the workspace).
#[allow(unsafe_code)]
fn exit_as(status: i32) -> ! {
    if libc::WIFEXITED(status) {
        std::process::exit(libc::WEXITSTATUS(status));
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: setrlimit reads a local struct; signal/raise take plain integers. The
        // handler is reset to the default so that raising the signal ends this process.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(sig);
        }
        std::process::exit(128 + sig);
    }
    std::process::exit(SETUP_FAILED)
}
