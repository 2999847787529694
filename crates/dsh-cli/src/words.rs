//! Words for a person: a count with its noun in the right number.

/// `1 turn`, `2 turns`, `0 turns`: the noun's plural is its singular with an `s`, which holds
/// for every noun dsh counts.
pub(crate) fn plural(n: impl TryInto<u64>, noun: &str) -> String {
    let n: u64 = n.try_into().unwrap_or(u64::MAX);
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// How long ago `then` was, in the largest unit that fits: `just now`, `12 min ago`,
/// `3 h ago`, `5 d ago`; `-` when it is not before `now` by a readable amount.
pub(crate) fn ago(then: std::time::SystemTime, now: std::time::SystemTime) -> String {
    let Ok(d) = now.duration_since(then) else {
        return "just now".to_owned();
    };
    let s = d.as_secs();
    match s {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", s / 60),
        3600..86_400 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// `text` on one line, cut to `max` characters with `…`.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::sessions::shorten(&flat, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn ages_and_one_line_texts() {
        let now = UNIX_EPOCH + Duration::from_secs(10_000_000);
        let before = |s: u64| now - Duration::from_secs(s);
        assert_eq!(ago(before(5), now), "just now");
        assert_eq!(ago(before(125), now), "2 min ago");
        assert_eq!(ago(before(7200), now), "2 h ago");
        assert_eq!(ago(before(3 * 86_400 + 5), now), "3 d ago");
        assert_eq!(ago(now + Duration::from_secs(9), now), "just now");
        assert_eq!(one_line("fix the\n  tests  now", 40), "fix the tests now");
        assert_eq!(one_line("abcdefghij", 5), "abcd…");
    }

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(plural(1u64, "turn"), "1 turn");
        assert_eq!(plural(0u64, "turn"), "0 turns");
        assert_eq!(plural(2u64, "whole turn"), "2 whole turns");
    }
}
