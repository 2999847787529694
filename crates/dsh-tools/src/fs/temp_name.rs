//! The names of the file seam's temporary files: `.NAME.dsh-PID-N.tmp`, beside the target.
//!
//! A change writes its new content to such a file and renames it over the target
//! ([`crate::fs::seam`]); a process killed in between leaves it behind. The name is chosen so
//! that this litter stays out of the way and can be cleaned up safely:
//!
//! * **Hidden.** It starts with `.`, so `grep` and `find_files` never list or search it
//!   (they skip hidden entries, [`crate::search`]), nor do ripgrep, fd or editors' file
//!   pickers by default. git does show untracked hidden files; a leftover is removed by the
//!   sweep at the next session start ([`crate::fs::sweep`]).
//! * **Owned.** `PID` is the writing process, so a sweep can tell a dead writer's leftover
//!   from a write in progress; `N` counts this process's temporary files.
//! * **Exact.** [`parse`] accepts only what [`make`] produces — `NAME` is at most 64
//!   characters of the target's name, `PID` and `N` are canonical decimal numbers (no sign,
//!   no leading zero, `PID` not 0) — so the sweep never takes a file of someone else's
//!   naming for one of ours.

use std::ffi::OsStr;

/// The most characters of the target's name kept in the temporary name, so that a long name
/// still fits `NAME_MAX`.
const MAX_STEM_CHARS: usize = 64;

/// The temporary name for a change of the file `target` by process `pid`, its `n`th.
pub(crate) fn make(target: &OsStr, pid: u32, n: u64) -> String {
    let stem: String = target
        .to_string_lossy()
        .chars()
        .take(MAX_STEM_CHARS)
        .collect();
    format!(".{stem}.dsh-{pid}-{n}.tmp")
}

/// The writer's PID if `name` is exactly a name [`make`] gives, else `None`. (Only the
/// sweep needs it, which runs only on Linux.)
#[cfg(any(target_os = "linux", test))]
pub(crate) fn parse(name: &OsStr) -> Option<u32> {
    let inner = name.to_str()?.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (rest, n) = inner.rsplit_once('-')?;
    let (rest, pid) = rest.rsplit_once('-')?;
    let stem = rest.strip_suffix(".dsh")?;
    let stem_chars = stem.chars().count();
    if stem_chars == 0 || stem_chars > MAX_STEM_CHARS {
        return None;
    }
    canonical::<u64>(n)?;
    canonical::<u32>(pid).filter(|&p| p != 0)
}

/// `s` as a number, only if it is written exactly as `format!` writes that number.
#[cfg(any(target_os = "linux", test))]
fn canonical<T: std::str::FromStr + ToString>(s: &str) -> Option<T> {
    let value: T = s.parse().ok()?;
    (value.to_string() == s).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_exactly_what_make_gives() {
        for target in [
            "main.rs",
            ".env",
            "a-1-2.tmp",
            "x.dsh-3-4.tmp",
            &"n".repeat(300),
        ] {
            let name = make(OsStr::new(target), 4242, 7);
            assert!(name.starts_with('.'), "{name}: hidden");
            assert_eq!(parse(OsStr::new(&name)), Some(4242), "{name}");
        }
        assert_eq!(
            make(OsStr::new("main.rs"), 12, 0),
            ".main.rs.dsh-12-0.tmp",
            "the grammar documented above"
        );
    }

    #[test]
    fn parse_refuses_names_dsh_does_not_make() {
        for name in [
            "main.rs.dsh-12-0.tmp",   // not hidden
            ".main.rs.dsh-12-0.tmp~", // another suffix
            ".main.rs.dsh-12-0",      // no suffix
            "..dsh-12-0.tmp",         // empty stem
            ".main.rs.dsh-012-0.tmp", // leading zero
            ".main.rs.dsh-+12-0.tmp", // sign
            ".main.rs.dsh-0-0.tmp",   // PID 0
            ".main.rs.dsh-12-00.tmp", // leading zero in N
            ".main.rs.dsh-12.tmp",    // no N
            ".main.rs.dsh--0.tmp",    // no PID
            ".main.rs-12-0.tmp",      // no .dsh
            ".main.rs.dsh-99999999999-0.tmp",
            ".main.rs.dsh-12-0.TMP",
        ] {
            assert_eq!(parse(OsStr::new(name)), None, "{name}");
        }
        let long = format!(".{}.dsh-12-0.tmp", "n".repeat(MAX_STEM_CHARS + 1));
        assert_eq!(
            parse(OsStr::new(&long)),
            None,
            "stem longer than make keeps"
        );
    }
}
