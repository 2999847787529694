//! Session ids — sortable by start time, unique across processes — and where the journals
//! they name are kept.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

/// The directory holding the journals.
pub fn sessions_dir(dsh_home: &Path) -> PathBuf {
    dsh_home.join("sessions")
}

/// `20261130T031502Z-1a2b3c4d`: the UTC start time, then 8 hex digits from the clock, the
/// process id and a per-process counter.
pub fn new_session_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now();
    let stamp = dsh_core::journal::rfc3339_millis(now);
    // 2026-11-30T03:15:02.123Z → 20261130T031502Z
    let compact: String = stamp
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect();
    let nanos = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let digest = Sha256::digest(format!("{nanos}:{}:{n}", std::process::id()).as_bytes());
    let tail: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{compact}Z-{tail}")
}

/// Whether `s` has the shape [`new_session_id`] gives.
pub(crate) fn looks_like(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 25
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && &b[15..17] == b"Z-"
        && b[17..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_unique_and_shaped() {
        let a = super::new_session_id();
        let b = super::new_session_id();
        assert!(super::looks_like(&a), "{a}");
        assert!(!super::looks_like("../../etc"));
        assert!(!super::looks_like("20261130T031502Z-1a2b3c4g"));
        assert_ne!(a, b);
        assert_eq!(a.len(), "20261130T031502Z-1a2b3c4d".len(), "{a}");
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    }
}
