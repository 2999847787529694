//! A directory of dsh's own state (a session's TMPDIR, its pre-images): made with its
//! parents, readable by its owner only.

use std::path::Path;

/// Creates `dir` and its missing parents, mode 0700 on Unix; an existing one is fine.
pub(crate) fn create(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}
