//! dsh's built-in tools (DESIGN §2, SPEC A2–A3, P5): `read_file`, `list_dir`, `grep`,
//! `find_files`, the changing `write_file` and `edit_file` behind the file seam (observed
//! versions, see `fs/seam.rs`), `read_output` for spilled outputs, and `run_shell`
//! ([`shell`]), which runs commands inside the OS sandbox ([`sandbox`]).
//!
//! Tools declare; policies decide. Each tool states what a call reads
//! ([`dsh_core::Tool::accesses`]) so that policies can judge it without knowing the tool, and
//! each keeps its own promise of confinement on top of whatever policies decide, because a
//! policy judges a path *string* while the tool touches the file system:
//!
//! * A path the model names goes through [`Workspace::resolve`]; a file is opened with
//!   [`Workspace::open_read`], which re-checks the opened handle (its real path, its type, its
//!   link count). Anything outside the workspace, a hard link, a dangling symlink is `denied`;
//!   a FIFO, a device or a directory where a file is expected is `invalid_args` — and is never
//!   opened, since opening a device can have effects of its own.
//! * Walks (`grep`, `find_files`) never follow symlinks: a symlink is listed as one and never
//!   searched through. A file met while walking is opened beneath the workspace root with no
//!   symlink allowed anywhere on its path (Linux `openat2`, else a check of the handle's real
//!   path), and searched only if it is a regular file with one link. `.gitignore`/`.ignore`
//!   files are read by this crate, not by the walker, and only when they are regular files: a
//!   `.gitignore` that is a symlink to `/dev/zero` is skipped rather than read forever.
//! * Everything the model sees says what went wrong and what to do instead.
//!
//! File-system work is blocking; it runs on tokio's blocking pool, watches the call's
//! cancellation token, and the tool returns only once that work has stopped (DESIGN §3: a
//! call keeps its slot until its work has really stopped).
//!
//! What remains racy: a walk lists directories by path, so a directory swapped for a symlink
//! *while* it is being walked could have its entry *names* listed by `find_files`; never a
//! file's content, since each file is opened as described above.

mod confine;
mod fs;
mod output;
pub mod plugin;
#[cfg(target_os = "linux")]
mod private_dir;
mod procfs;
pub mod sandbox;
mod search;
pub mod shell;
pub mod skill;

use std::sync::Arc;

use dsh_core::{CancellationToken, Tool, ToolError, ToolErrorKind, Workspace};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use fs::edit::EditFile;
pub use fs::list::ListDir;
pub use fs::pre_images::{MAX_PRE_IMAGE_BYTES, PreImages};
pub use fs::read::ReadFile;
pub use fs::restore::{RESTORE_FILE, RestoreFile};
pub use fs::seam::{FileSeam, Version};
pub use fs::sweep::sweep_stale_temp_files;
pub use fs::write::WriteFile;
pub use output::read_output::ReadOutput;
pub use plugin::{PluginTool, PluginToolSpec};
pub use search::find::FindFiles;
pub use search::grep::Grep;
pub use shell::{NetworkGrant, RunShell, ShellSettings};
pub use skill::{SKILL, SkillTool};

/// The caps of the read-only tools (`read_file`, `list_dir`, `grep`, `find_files`): how much
/// one call shows. Every cap, when reached, is *said* in the content the model sees, with how
/// to get the rest. (The session's `[limits]`, dsh-config's `Limits`, fill two of them.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadCaps {
    /// `read_file`: the most bytes of file content one page shows (default 256 KiB).
    /// Lines skipped to reach `offset` do not count: paging to the end of a big file works.
    pub max_read_bytes: usize,
    /// `read_file`: the default and the largest `limit`, in lines (default 2000).
    pub max_read_lines: usize,
    /// `grep` and `find_files`: the most matches or paths shown (default 50).
    pub max_results: usize,
    /// `list_dir`: the most entries shown (default 1000).
    pub max_list_entries: usize,
}

impl Default for ReadCaps {
    fn default() -> Self {
        ReadCaps {
            max_read_bytes: 256 * 1024,
            max_read_lines: 2000,
            max_results: 50,
            max_list_entries: 1000,
        }
    }
}

/// The read-only tools over one workspace, ready for [`dsh_core::Registry::register_arc`]:
/// `read_file`, `list_dir`, `grep`, `find_files`.
/// Every built-in tool of a session: the read-only ones, with `read_file` recording what it
/// reads in `seam`; `write_file` and `edit_file` behind the same seam; and `read_output` over
/// the session's spill store, paging at most `spill_chars` characters at a time.
pub fn session_tools(
    ws: Arc<Workspace>,
    limits: &ReadCaps,
    seam: Arc<FileSeam>,
    spill: Arc<dsh_core::SpillStore>,
    spill_chars: usize,
) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(
            ReadFile::new(ws.clone(), limits)
                .with_seam(seam.clone())
                .with_scrub(spill.clone()),
        ),
        Arc::new(ListDir::new(ws.clone(), limits)),
        Arc::new(Grep::new(ws.clone(), limits).with_scrub(spill.clone())),
        Arc::new(FindFiles::new(ws.clone(), limits)),
        Arc::new(WriteFile::new(ws.clone(), seam.clone())),
        Arc::new(EditFile::new(ws.clone(), seam.clone())),
        Arc::new(RestoreFile::new(ws, seam)),
        Arc::new(ReadOutput::new(spill, spill_chars)),
    ]
}

pub fn read_only_tools(ws: Arc<Workspace>, limits: &ReadCaps) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadFile::new(ws.clone(), limits)),
        Arc::new(ListDir::new(ws.clone(), limits)),
        Arc::new(Grep::new(ws.clone(), limits)),
        Arc::new(FindFiles::new(ws, limits)),
    ]
}

/// Parses arguments that already passed the input schema; a mismatch here is the schema's
/// bug, reported as `invalid_args` all the same.
fn parse_args<T: DeserializeOwned>(tool: &str, args: &Value) -> Result<T, ToolError> {
    serde_json::from_value(args.clone()).map_err(|e| {
        ToolError::new(
            ToolErrorKind::InvalidArgs,
            format!("{tool}: unusable arguments: {e}"),
        )
    })
}

/// The `path` argument as a string, for [`dsh_core::Tool::accesses`] (which runs before the
/// arguments are validated, so it must not assume their shape).
fn path_arg(args: &Value, default: Option<&str>) -> Option<String> {
    match args.get("path") {
        Some(Value::String(p)) => Some(p.clone()),
        None | Some(Value::Null) => default.map(str::to_owned),
        Some(_) => None,
    }
}

/// The `path` argument (or `default` when it is absent) as one declared access — what
/// [`dsh_core::Tool::accesses`] returns for the file tools. Nothing when the argument is not a
/// string: the registry refuses such a call before any policy looks at it.
fn path_access(args: &Value, default: Option<&str>, write: bool) -> Vec<dsh_core::Access> {
    path_arg(args, default)
        .map(|p| {
            let path = std::path::PathBuf::from(p);
            if write {
                dsh_core::Access::Write { path }
            } else {
                dsh_core::Access::Read { path }
            }
        })
        .into_iter()
        .collect()
}

/// Runs blocking file-system work on tokio's blocking pool and waits for it to finish: a tool
/// never returns while its work still runs. The work receives the call's cancellation token
/// and must check it between units of work. A panic in the work is re-raised here, for the
/// pipeline to turn into `crashed`.
async fn blocking<T, F>(cancel: &CancellationToken, work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(CancellationToken) -> Result<T, ToolError> + Send + 'static,
{
    let token = cancel.clone();
    match tokio::task::spawn_blocking(move || work(token)).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(cancelled()),
    }
}

/// The failure of work that stopped because the call was cancelled.
fn cancelled() -> ToolError {
    ToolError::failed("the call was cancelled before it finished; nothing partial is reported")
}
