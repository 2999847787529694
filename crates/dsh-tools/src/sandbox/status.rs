//! How the helper tells `run_shell` that it could not set the sandbox up: on a pipe of its
//! own, never on the command's output.
//!
//! The command's output and exit code are the command's to choose: a command that prints
//! `dsh sandbox-exec: …` and exits 125 would otherwise pass for a setup failure — "the
//! command did not run" in the journal, for a command that ran (and, under `auto`, skipped
//! what `run_shell` does after a command). So `run_shell` hands the helper the write end of
//! a [`StatusPipe`] as descriptor [`StatusPipe::FD`]; the helper marks it close-on-exec at
//! once, writes a setup failure there and nowhere else, and the pipe closes without a word
//! when the command is `execve`d. What `run_shell` reads from it after the command ended is
//! the whole truth about setup.

use std::sync::atomic::{AtomicI32, Ordering};

/// The helper's status descriptor, or -1 (report on stderr).
static CLAIMED: AtomicI32 = AtomicI32::new(-1);

/// The helper takes `fd` as its status descriptor: close-on-exec from now on, so neither
/// the command nor anything it starts inherits it. An `fd` that is not open is ignored.
#[cfg(unix)]
#[allow(unsafe_code)]
pub(super) fn claim(fd: i32) {
    // SAFETY: fcntl with F_SETFD takes plain integers; a closed descriptor fails with EBADF.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } == 0 {
        CLAIMED.store(fd, Ordering::SeqCst);
    }
}

#[cfg(not(unix))]
pub(super) fn claim(_: i32) {}

/// The helper's side after its fork: only the child, which may still fail to set up, keeps
/// the descriptor.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(super) fn release() {
    let fd = CLAIMED.swap(-1, Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: closes a descriptor this process owns and no Rust object wraps.
        unsafe { libc::close(fd) };
    }
}

/// Reports `message` (one line) on the status descriptor, or on stderr without one.
#[cfg(unix)]
#[allow(unsafe_code)]
pub(super) fn report(message: &str) {
    let fd = CLAIMED.load(Ordering::SeqCst);
    if fd < 0 {
        eprintln!("{message}");
        return;
    }
    let bytes = message.as_bytes();
    let mut done = 0;
    while done < bytes.len() {
        // SAFETY: writes from a live slice of the given length to a descriptor this process
        // owns.
        let n = unsafe { libc::write(fd, bytes[done..].as_ptr().cast(), bytes.len() - done) };
        match usize::try_from(n) {
            Ok(n) if n > 0 => done += n,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return,
        }
    }
}

#[cfg(not(unix))]
pub(super) fn report(message: &str) {
    eprintln!("{message}");
}

/// `run_shell`'s end of the status pipe.
#[derive(Debug)]
pub struct StatusPipe {
    reader: std::io::PipeReader,
    writer: Option<std::io::PipeWriter>,
}

impl StatusPipe {
    /// The descriptor number the helper gets the write end as.
    pub const FD: i32 = 3;

    /// A new pipe; both ends close-on-exec in this process.
    pub fn new() -> std::io::Result<Self> {
        let (reader, writer) = std::io::pipe()?;
        Ok(StatusPipe {
            reader,
            writer: Some(writer),
        })
    }

    /// The write end, which the spawner maps to [`Self::FD`] in the helper and then drops
    /// (this process must not keep it, or the pipe never closes).
    pub fn take_writer(&mut self) -> Option<std::io::PipeWriter> {
        self.writer.take()
    }

    /// What the helper reported, once it has ended: `None` when the setup succeeded (or the
    /// helper was killed before it could say anything). Never blocks: a write end still open
    /// somewhere counts as nothing reported.
    #[cfg(unix)]
    pub fn report(self) -> Option<String> {
        use std::io::Read;
        let StatusPipe { mut reader, writer } = self;
        drop(writer);
        rustix::io::ioctl_fionbio(&reader, true).ok()?;
        let mut text = String::new();
        let _ = reader.read_to_string(&mut text);
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_owned())
    }

    #[cfg(not(unix))]
    pub fn report(self) -> Option<String> {
        None
    }
}
