//! What a call changed in the workspace's files, as the tool that changed them reports it:
//! the file's content digest before and after. The pipeline journals each change as a
//! `checkpoint` record before the call's `tool_result` (DESIGN §6), and a session's `/undo`
//! restores a pre-image by its digest. Only tools that change files through the file seam
//! report changes (and keep the pre-images); what a command changes is not known here.

/// One file changed by one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    /// The file, relative to the workspace root.
    pub path: String,
    /// The SHA-256 (hex) of its content before the call; `None`: it did not exist.
    pub before: Option<String>,
    /// The SHA-256 (hex) of its content after the call; `None`: the call removed it.
    pub after: Option<String>,
}
