//! The pre-images the file seam keeps before each change (checkpoints, for `/undo`): a file's
//! content as it was, stored under its SHA-256 in the session's own directory (the same
//! content is stored once, however often it is written over).
//!
//! A pre-image is written to a temporary name and renamed into place, so a reader never sees
//! half of one; it is not flushed to the disk (the journal's checkpoint record is flushed with
//! its batch), so a power cut may lose the last pre-images, never the files. Reading one
//! checks its digest: a pre-image that changed on disk is refused, never restored.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest file whose pre-image is kept; a change to a larger file is refused (nothing
/// could restore it).
pub const MAX_PRE_IMAGE_BYTES: u64 = 64 * 1024 * 1024;

/// The SHA-256 of `bytes`, in lowercase hex: a pre-image's name and the digest journaled.
pub fn digest(bytes: &[u8]) -> String {
    dsh_core::journal::sha256_hex(bytes)
}

/// A session's pre-image store: one directory, created when the first pre-image is kept.
#[derive(Debug)]
pub struct PreImages {
    dir: PathBuf,
}

/// Why a pre-image cannot be kept or read back.
#[derive(Debug, thiserror::Error)]
pub enum PreImageError {
    #[error("cannot keep the file's previous content in {dir} for /undo: {source}")]
    Keep { dir: String, source: std::io::Error },
    #[error("`{0}` is not a checkpoint digest (64 hex characters)")]
    BadDigest(String),
    #[error("the checkpoint {digest} is not kept in {dir} ({source})")]
    Missing {
        digest: String,
        dir: String,
        source: std::io::Error,
    },
    #[error("the checkpoint {0} changed on disk since it was kept; it is not restored")]
    Corrupt(String),
}

impl PreImages {
    /// A store in `dir` (created with mode 0700 when first written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        PreImages { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keeps `bytes` and returns their digest. Always written (and renamed over whatever
    /// has the name): a file already under the digest is not trusted to hold it.
    pub fn keep(&self, bytes: &[u8]) -> Result<String, PreImageError> {
        let name = digest(bytes);
        let target = self.dir.join(&name);
        self.write(&target, bytes)
            .map_err(|source| PreImageError::Keep {
                dir: self.dir.display().to_string(),
                source,
            })?;
        Ok(name)
    }

    fn write(&self, target: &Path, bytes: &[u8]) -> std::io::Result<()> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        crate::private_dir::create(&self.dir)?;
        let tmp = self.dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut file = options.open(&tmp)?;
            file.write_all(bytes)?;
            std::fs::rename(&tmp, target)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// The content kept under `digest`, checked against it.
    pub fn get(&self, digest_hex: &str) -> Result<Vec<u8>, PreImageError> {
        let well_formed = digest_hex.len() == 64
            && digest_hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !well_formed {
            return Err(PreImageError::BadDigest(digest_hex.to_owned()));
        }
        let bytes =
            std::fs::read(self.dir.join(digest_hex)).map_err(|source| PreImageError::Missing {
                digest: digest_hex.to_owned(),
                dir: self.dir.display().to_string(),
                source,
            })?;
        if digest(&bytes) != digest_hex {
            return Err(PreImageError::Corrupt(digest_hex.to_owned()));
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_content_reads_back_and_a_changed_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = PreImages::new(dir.path().join("cp"));
        let d = store.keep(b"hello\n").unwrap();
        assert_eq!(d, digest(b"hello\n"));
        assert_eq!(store.keep(b"hello\n").unwrap(), d, "kept once");
        assert_eq!(store.get(&d).unwrap(), b"hello\n");
        std::fs::write(store.dir().join(&d), b"tampered").unwrap();
        assert!(matches!(store.get(&d), Err(PreImageError::Corrupt(_))));
        store.keep(b"hello\n").unwrap();
        assert_eq!(
            store.get(&d).unwrap(),
            b"hello\n",
            "kept again over the damage"
        );
        std::fs::write(store.dir().join(&d), b"tampered").unwrap();
        assert!(matches!(
            store.get("../../etc/passwd"),
            Err(PreImageError::BadDigest(_))
        ));
        assert!(matches!(
            store.get(&digest(b"never kept")),
            Err(PreImageError::Missing { .. })
        ));
    }
}
