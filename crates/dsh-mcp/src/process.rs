//! A stdio server's process: its own process group (so a server that starts helpers — `npx`
//! starts node — goes as a whole), a clean environment, stderr appended to the session's log
//! file for it, never to the terminal.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// A running server process. Dropped, its process group is killed.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Child,
    /// Its process group (its own pid).
    group: Option<u32>,
}

/// Starts `program` with exactly `env`, in `cwd`, stderr appended to `log`.
pub(crate) fn spawn(
    program: &str,
    args: &[String],
    env: &[(OsString, OsString)],
    cwd: &Path,
    log: &Path,
) -> std::io::Result<(ServerProcess, ChildStdout, ChildStdin)> {
    let stderr = open_log(log)?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd.spawn()?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(std::io::Error::other(
            "the server's stdin or stdout was not piped",
        ));
    };
    let group = child.id();
    Ok((ServerProcess { child, group }, stdout, stdin))
}

/// The log file, created with its directory (private to the user) if missing.
fn open_log(log: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = log.parent() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
}

impl ServerProcess {
    /// How it ended, if it has.
    pub(crate) fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(describe(status)),
            Ok(None) => None,
            Err(e) => Some(format!("its state cannot be read: {e}")),
        }
    }

    /// Waits until it ends.
    pub(crate) async fn wait(&mut self) {
        let _ = self.child.wait().await;
    }

    /// Kills its process group and reaps it.
    pub(crate) async fn kill(&mut self) {
        self.kill_group();
        let _ = self.child.kill().await;
    }

    /// Kills its process group and the child, without waiting.
    pub(crate) fn kill_now(&mut self) {
        self.kill_group();
        let _ = self.child.start_kill();
    }

    fn kill_group(&self) {
        #[cfg(unix)]
        if let Some(pid) = self
            .group
            .and_then(|g| i32::try_from(g).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // `kill_on_drop` kills the child itself; its helpers are in its group.
        self.kill_group();
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => "ended".to_owned(),
    }
}

/// The last non-empty line of a log file (at most 300 characters, control characters made
/// visible), for an error that points at it.
pub(crate) fn last_log_line(log: &PathBuf) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(log).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(4096))).ok()?;
    let mut tail = Vec::new();
    file.take(4096).read_to_end(&mut tail).ok()?;
    let text = String::from_utf8_lossy(&tail);
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
    let shown: String = line
        .trim()
        .chars()
        .take(300)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    Some(shown)
}
