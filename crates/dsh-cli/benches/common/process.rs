//! Measuring one `dsh` process, as the end-to-end benches share it: wall and CPU time from
//! `wait4(2)`, peak RSS through GNU time.
#![allow(dead_code, unsafe_code, clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One child's figures, from `wait4(2)`. Its `ru_maxrss` is not used: a child spawned with
/// `vfork`/`posix_spawn` (or `fork`) inherits the spawning process's high-water mark at
/// `execve`, so it reports the bench's own RSS (about 12 MB) — see [`peak_rss_kib`].
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    pub wall: Duration,
    pub cpu: Duration,
}

/// Spawns `cmd`, waits for it with `wait4`, and checks it exited 0.
pub fn run(mut cmd: Command) -> Usage {
    let begun = Instant::now();
    let child = cmd.spawn().unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain old data, fully written by a successful wait4.
    let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own unwaited child; both pointers are valid for the call.
    let r = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut rusage) };
    let wall = begun.elapsed();
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child failed: status {status:#x}"
    );
    drop(child); // already reaped; dropping a Child never waits
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap())
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap())
    };
    Usage {
        wall,
        cpu: tv(rusage.ru_utime) + tv(rusage.ru_stime),
    }
}

/// The peak RSS of `cmd` in KiB, through GNU time (`/usr/bin/time -f %M`): time is small
/// (about 1 MB) and `fork`s the command itself, so the figure is dsh's own. `None` without
/// `/usr/bin/time`.
pub fn peak_rss_kib(cmd: &Command) -> Option<u64> {
    let time = Path::new("/usr/bin/time");
    if !time.exists() {
        return None;
    }
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut wrapped = Command::new(time);
    wrapped
        .args(["-f", "%M", "-o"])
        .arg(out.path())
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            wrapped.env(k, v);
        }
    }
    run(wrapped);
    std::fs::read_to_string(out.path())
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}
