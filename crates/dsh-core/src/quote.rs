//! Quoting what a model sent inside the reasons and messages dsh writes.
//!
//! A reason names the argument it is about (SPEC P12: "which layer stopped this, and why"),
//! but an argument can be megabytes: a 10 MB path copied into `decided_by.reason` becomes
//! 10 MB in the journal, in the result line and in the model's next input, once per place it
//! is quoted. Every reason therefore quotes arguments through [`quote_capped`], which keeps
//! the head and the tail of a long one and says how long it was — enough to recognise it,
//! never more than a few hundred characters. [`cap_reason`] is the pipeline's backstop for a
//! reason that still grew too long (several quotes, or a listener that quoted raw).

use std::path::Path;

/// Arguments of at most this many characters are quoted whole.
pub const QUOTE_MAX_CHARS: usize = 200;

/// Characters kept from each end of a longer argument.
const QUOTE_END_CHARS: usize = 80;

/// The longest reason the pipeline records, in bytes; [`cap_reason`] cuts longer ones.
pub const REASON_MAX_BYTES: usize = 8 * 1024;

/// `s` in backticks, as reasons quote arguments: whole when it has at most
/// [`QUOTE_MAX_CHARS`] characters, else its first and last 80 characters around `…`, followed
/// by its length: `` `a/a/a…a/a/a` (10485760 bytes) ``.
pub fn quote_capped(s: &str) -> String {
    match cut(s, QUOTE_MAX_CHARS, QUOTE_END_CHARS) {
        None => format!("`{s}`"),
        Some((head, tail)) => format!("`{head}…{tail}` ({} bytes)", s.len()),
    }
}

/// [`quote_capped`] for a path, which need not be UTF-8 (it is shown lossily). Only the ends
/// of a long path are decoded, so a huge one costs no more than a short one.
pub fn quote_capped_path(path: &Path) -> String {
    let bytes = path.as_os_str().as_encoded_bytes();
    // A character is at most 4 bytes: this many bytes from each end hold what is shown.
    let span = 4 * QUOTE_MAX_CHARS;
    if bytes.len() <= 2 * span {
        return quote_capped(&path.to_string_lossy());
    }
    let head = String::from_utf8_lossy(&bytes[..span]);
    let tail = String::from_utf8_lossy(&bytes[bytes.len() - span..]);
    let head: String = head.chars().take(QUOTE_END_CHARS).collect();
    let skip = tail.chars().count().saturating_sub(QUOTE_END_CHARS);
    let tail: String = tail.chars().skip(skip).collect();
    format!("`{head}…{tail}` ({} bytes)", bytes.len())
}

/// A reason of at most about [`REASON_MAX_BYTES`]: longer ones keep their head and tail and
/// say how much was left out.
pub(crate) fn cap_reason(reason: String) -> String {
    if reason.len() <= REASON_MAX_BYTES {
        return reason;
    }
    let end = REASON_MAX_BYTES / 2;
    let head = floor_boundary(&reason, end);
    let tail = ceil_boundary(&reason, reason.len() - end);
    format!(
        "{}[… {} bytes of this reason left out …]{}",
        &reason[..head],
        tail - head,
        &reason[tail..]
    )
}

/// When `s` has more than `max` characters: its first and last `end` characters.
fn cut(s: &str, max: usize, end: usize) -> Option<(&str, &str)> {
    // Bytes bound characters from above: a short string is decided without counting.
    if s.len() <= max {
        return None;
    }
    let mut chars = s.char_indices();
    let head_end = chars.nth(end).map_or(s.len(), |(i, _)| i);
    // `max + 1` characters exist only if the iterator goes on past `max`.
    chars.nth(max - end - 1)?;
    let tail_start = s
        .char_indices()
        .rev()
        .nth(end - 1)
        .map_or(0, |(i, _)| i)
        .max(head_end);
    Some((&s[..head_end], &s[tail_start..]))
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_arguments_are_quoted_whole() {
        assert_eq!(quote_capped("src/lib.rs"), "`src/lib.rs`");
        let exactly = "é".repeat(QUOTE_MAX_CHARS);
        assert_eq!(quote_capped(&exactly), format!("`{exactly}`"));
    }

    #[test]
    fn long_arguments_keep_head_tail_and_length() {
        let path = "a/".repeat(5_000_000);
        let q = quote_capped(&path);
        assert_eq!(
            q,
            format!("`{}…{}` (10000000 bytes)", "a/".repeat(40), "a/".repeat(40))
        );
        let wide = "é".repeat(QUOTE_MAX_CHARS + 1);
        assert_eq!(
            quote_capped(&wide),
            format!("`{}…{}` (402 bytes)", "é".repeat(80), "é".repeat(80))
        );
    }

    #[test]
    fn long_paths_are_quoted_like_strings() {
        let path = "a/".repeat(5_000_000);
        assert_eq!(quote_capped_path(Path::new(&path)), quote_capped(&path));
        assert_eq!(quote_capped_path(Path::new("src")), "`src`");
    }

    #[test]
    fn long_reasons_are_cut_in_the_middle() {
        let reason = format!("start {} end", "x".repeat(100_000));
        let capped = cap_reason(reason);
        assert!(capped.len() < REASON_MAX_BYTES + 100, "{}", capped.len());
        assert!(capped.starts_with("start x"));
        assert!(capped.ends_with("x end"));
        assert!(capped.contains("bytes of this reason left out"));
        assert_eq!(cap_reason("short".to_owned()), "short");
        let wide = "é".repeat(REASON_MAX_BYTES);
        assert!(cap_reason(wide).len() <= REASON_MAX_BYTES + 100);
    }
}
