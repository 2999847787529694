//! Running one hook's command: `sh -c COMMAND` in the workspace, in a process group of its
//! own, with exactly the environment it is given (the command environment's allowlist, the
//! hook's own variables, `CLAUDE_PROJECT_DIR`), the event JSON on its standard input, its
//! output read up to a bound, and the whole group killed at the timeout, when dropped (a
//! cancelled turn) and once it has answered (nothing it started outlives it).

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// The most a hook may print on each of stdout and stderr.
pub const MAX_OUTPUT: usize = 1024 * 1024;

/// How a hook's run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code.
    Exit(i32),
    /// It could not be started, was killed by a signal, printed too much, or its output was
    /// not UTF-8: what happened, in words.
    Failed(String),
    /// It ran past its timeout and was killed.
    TimedOut(Duration),
}

/// What a hook did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub ended: Ended,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` with `input` on its standard input.
pub async fn run(
    command: &str,
    input: &[u8],
    env: &[(OsString, OsString)],
    cwd: &Path,
    timeout: Duration,
) -> Outcome {
    let failed = |why: String| Outcome {
        ended: Ended::Failed(why),
        stdout: String::new(),
        stderr: String::new(),
    };
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("could not be started: {e}")),
    };
    let _group = Group(child.id());
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return failed("could not be given its pipes".into());
    };
    let input = input.to_vec();
    // A hook that does not read its input must not hang the write: the write is its own task
    // and a closed pipe is fine.
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    });
    let work = async {
        let (out, err, status) = tokio::join!(bounded(stdout), bounded(stderr), child.wait());
        (out, err, status)
    };
    let result = tokio::time::timeout(timeout, work).await;
    writer.abort();
    let Ok((out, err, status)) = result else {
        return Outcome {
            ended: Ended::TimedOut(timeout),
            stdout: String::new(),
            stderr: String::new(),
        };
    };
    let text = |r: std::io::Result<Vec<u8>>, which: &str| -> Result<String, String> {
        let bytes = r.map_err(|e| format!("its {which} could not be read: {e}"))?;
        if bytes.len() > MAX_OUTPUT {
            return Err(format!(
                "it printed more than {} KiB on {which}",
                MAX_OUTPUT / 1024
            ));
        }
        String::from_utf8(bytes).map_err(|_| format!("its {which} is not UTF-8"))
    };
    let (stdout, stderr) = match (text(out, "stdout"), text(err, "stderr")) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(why), _) | (_, Err(why)) => return failed(why),
    };
    let ended = match status {
        Ok(s) => match s.code() {
            Some(code) => Ended::Exit(code),
            None => Ended::Failed(signalled(s)),
        },
        Err(e) => Ended::Failed(format!("could not be waited for: {e}")),
    };
    Outcome {
        ended,
        stdout,
        stderr,
    }
}

/// Reads to the end, keeping at most [`MAX_OUTPUT`] + 1 bytes (one more says it printed too
/// much); the rest is read and dropped, so a hook that prints a lot still gets to exit.
async fn bounded(mut r: impl AsyncRead + Unpin) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    (&mut r)
        .take(MAX_OUTPUT as u64 + 1)
        .read_to_end(&mut buf)
        .await?;
    tokio::io::copy(&mut r, &mut tokio::io::sink()).await?;
    Ok(buf)
}

#[cfg(unix)]
fn signalled(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match s.signal() {
        Some(sig) => format!("it was killed by signal {sig}"),
        None => format!("it ended without an exit code ({s})"),
    }
}

#[cfg(not(unix))]
fn signalled(s: std::process::ExitStatus) -> String {
    format!("it ended without an exit code ({s})")
}

/// The hook's process group, killed when the run is over or abandoned.
struct Group(Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self
            .0
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}
