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

#[cfg(test)]
mod tests {
    use super::plural;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(plural(1u64, "turn"), "1 turn");
        assert_eq!(plural(0u64, "turn"), "0 turns");
        assert_eq!(plural(2u64, "whole turn"), "2 whole turns");
    }
}
