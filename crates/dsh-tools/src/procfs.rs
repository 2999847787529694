//! Linux `/proc`: the processes that run now, with their parent, group and session. Both ends
//! of a command's lifetime read it — the sandbox helper sweeping what its command left, and
//! `run_shell` making sure a command's tree is gone.

/// One process as `/proc/<pid>/stat` describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    pub pid: i32,
    /// `R`, `S`, `D`, `T`, `Z` (zombie), `X` (dead), …
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub sid: i32,
}

impl Stat {
    /// Whether it can still run: not dead, not a zombie waiting to be reaped (which holds
    /// nothing and runs nothing).
    pub fn runs(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Every process `/proc` lists now; `None` when `/proc` cannot be read.
pub(crate) fn processes() -> Option<Vec<Stat>> {
    let dir = std::fs::read_dir("/proc").ok()?;
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // A process that ended between the listing and here is simply not counted.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(s) = parse_stat(pid, &stat) {
            out.push(s);
        }
    }
    Some(out)
}

/// A `/proc/<pid>/stat` line. The command name in parentheses may contain anything, so
/// fields are counted after its last `)`.
pub(crate) fn parse_stat(pid: i32, stat: &str) -> Option<Stat> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let sid = fields.next()?.parse().ok()?;
    Some(Stat {
        pid,
        state,
        ppid,
        pgrp,
        sid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_whatever_the_command_name() {
        assert_eq!(
            parse_stat(42, "42 (a) b) (c) S 1 42 40 0 -1 4194560 ..."),
            Some(Stat {
                pid: 42,
                state: 'S',
                ppid: 1,
                pgrp: 42,
                sid: 40
            })
        );
        assert_eq!(parse_stat(1, "garbage"), None);
    }

    #[test]
    fn this_process_is_listed() {
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        let all = processes().unwrap_or_default();
        assert!(all.iter().any(|s| s.pid == me && s.runs()));
    }
}
