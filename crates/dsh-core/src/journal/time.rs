//! UTC timestamps for journal records, without a date-time dependency.

use std::time::{SystemTime, UNIX_EPOCH};

/// `2026-11-30T03:15:02.123Z`.
pub fn rfc3339_millis(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let millis = d.subsec_millis();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// The instant a journal timestamp (`2026-11-30T03:15:02.123Z`, as [`rfc3339_millis`] writes
/// it) names; `None` for any other text.
pub fn parse_rfc3339_millis(ts: &str) -> Option<SystemTime> {
    let b = ts.as_bytes();
    if b.len() != 24 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[23] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<u64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, min, s, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || min > 59 || s > 60 {
        return None;
    }
    let days = u64::try_from(days_from_civil(i64::try_from(y).ok()?, m, d)).ok()?;
    let secs = days * 86_400 + h * 3600 + min * 60 + s;
    Some(UNIX_EPOCH + std::time::Duration::from_millis(secs * 1000 + ms))
}

/// A proleptic Gregorian date to days since 1970-01-01 (the inverse of [`civil_from_days`]).
fn days_from_civil(y: i64, m: u64, d: u64) -> i64 {
    let (m, d) = (m as i64, d as i64);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_instants() {
        let at = |s: u64, ms: u64| UNIX_EPOCH + Duration::from_millis(s * 1000 + ms);
        assert_eq!(rfc3339_millis(at(0, 0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_millis(at(951_782_400, 5)),
            "2000-02-29T00:00:00.005Z"
        );
        assert_eq!(
            rfc3339_millis(at(1_796_008_502, 123)),
            "2026-11-30T03:15:02.123Z"
        );
    }

    #[test]
    fn parses_what_it_formats_and_nothing_else() {
        for (s, ms) in [
            (0, 0),
            (951_782_400, 5),
            (1_796_008_502, 123),
            (4_102_444_799, 999),
        ] {
            let t = UNIX_EPOCH + Duration::from_millis(s * 1000 + ms);
            assert_eq!(parse_rfc3339_millis(&rfc3339_millis(t)), Some(t));
        }
        for bad in [
            "",
            "2026-11-30 03:15:02.123Z",
            "2026-13-30T03:15:02.123Z",
            "x026-11-30T03:15:02.123Z",
        ] {
            assert_eq!(parse_rfc3339_millis(bad), None, "{bad}");
        }
    }
}
