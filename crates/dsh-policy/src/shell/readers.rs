//! The read-only list's flag tables: for each program that runs free, the flags that make it
//! write a file or run another program (they lose the free pass), the flags that take a value,
//! and which values and operands name files (judged like any path of the line).
//!
//! Anchored on codex-rs's `command_safety` and Claude Code's read-only command set, and past
//! them: `sed` is judged on its parsed script (`sed.rs`), `git`'s reading subcommands on
//! theirs (`git_reads.rs`), `xargs` as the command it runs, `jq` and `find` on their own
//! grammars (`free.rs`). What runs free runs in the read-only sandbox, so a flag missed here
//! still writes nothing outside the session's temporary directory and reaches no socket.

/// What a free command may be given and keep its free pass.
pub(crate) struct FlagTable {
    /// Operands are plain data (`echo`, `seq`): never paths, may be computed at run time.
    pub data_args: bool,
    /// The first operand is a pattern or script (`grep PATTERN FILE…`), not a path — unless
    /// one of `pattern_flags` gave it.
    pub pattern_first: bool,
    /// Flags that give the pattern, so that every operand is a path (`grep -e P FILE`).
    pub pattern_flags: &'static [&'static str],
    /// Short flags that make the command write or run something.
    pub not_free_short: &'static str,
    /// Long flags (without `=value`) that do.
    pub not_free_long: &'static [&'static str],
    /// Short flags that take a value (attached, or as the next word): data.
    pub value_short: &'static str,
    /// Long flags whose value may be the next word: data.
    pub value_long: &'static [&'static str],
    /// Short flags whose value is a file, judged as a path.
    pub file_short: &'static str,
    /// Long flags whose value is a file, judged as a path.
    pub file_long: &'static [&'static str],
    /// More operands than this make it write: `uniq IN OUT`, `xxd IN OUT`.
    pub max_operands: Option<usize>,
    /// Why the `not_free` flags lose the pass.
    pub why: &'static str,
}

pub(crate) const PLAIN: FlagTable = FlagTable {
    data_args: false,
    pattern_first: false,
    pattern_flags: &[],
    not_free_short: "",
    not_free_long: &[],
    value_short: "",
    value_long: &[],
    file_short: "",
    file_long: &[],
    max_operands: None,
    why: "",
};

/// Operands are data.
const DATA: FlagTable = FlagTable {
    data_args: true,
    ..PLAIN
};

/// Every program on the built-in read-only list (`dsh_config`'s default `[shell] safe`
/// holds the same names). `find`, `sed`, `git`, `jq`, `xargs` and `command` have passes of
/// their own; the rest have a table here.
pub const READ_ONLY_PROGRAMS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "find",
    "grep",
    "egrep",
    "fgrep",
    "tree",
    "pwd",
    "whoami",
    "date",
    "echo",
    "diff",
    "stat",
    "file",
    "sort",
    "uniq",
    "cut",
    "tr",
    "nl",
    "seq",
    "rev",
    "tac",
    "column",
    "comm",
    "paste",
    "fold",
    "join",
    "expand",
    "unexpand",
    "fmt",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "which",
    "command",
    "type",
    "uname",
    "id",
    "groups",
    "du",
    "printf",
    "true",
    "false",
    "test",
    "[",
    "sleep",
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "sum",
    "cmp",
    "od",
    "xxd",
    "hexdump",
    "base64",
    "base32",
    "strings",
    "jq",
    "rg",
    "fd",
    "fdfind",
    "sed",
    "xargs",
    "git",
    "env",
    "printenv",
    "nproc",
    "arch",
];

/// The flag table of a free program; `None` for the ones with a pass of their own and for
/// `[shell] safe` entries dsh has no table for (judged generically: flags pass, operands are
/// paths that must lead inside the workspace).
pub(crate) fn table(name: &str) -> Option<FlagTable> {
    Some(match name {
        "echo" | "printf" | "seq" | "true" | "false" | "test" | "[" | "sleep" | "basename"
        | "dirname" | "which" | "type" | "uname" | "id" | "groups" | "tr" | "printenv"
        | "nproc" | "arch" | "env" | "command" => DATA,
        "ls" => FlagTable {
            value_short: "ITw",
            value_long: &["--hide", "--ignore", "--width", "--tabsize"],
            ..PLAIN
        },
        "cat" | "pwd" | "whoami" | "rev" | "comm" | "stat" | "md5sum" | "sha1sum" | "sha224sum"
        | "sha256sum" | "sha384sum" | "sha512sum" | "b2sum" | "cksum" | "sum" | "realpath"
        | "readlink" | "strings" | "base64" | "base32" => PLAIN,
        "head" | "tail" => FlagTable {
            value_short: "cns",
            value_long: &["--bytes", "--lines", "--sleep-interval", "--pid"],
            ..PLAIN
        },
        "wc" | "du" => FlagTable {
            value_short: "dBt",
            value_long: &["--max-depth", "--block-size", "--threshold", "--exclude"],
            file_short: "X",
            file_long: &["--files0-from", "--exclude-from"],
            ..PLAIN
        },
        "diff" => FlagTable {
            value_short: "CUDFIxS",
            value_long: &["--label", "--ignore-matching-lines", "--exclude"],
            file_long: &["--from-file", "--to-file", "--exclude-from"],
            ..PLAIN
        },
        "grep" | "egrep" | "fgrep" => FlagTable {
            pattern_first: true,
            pattern_flags: &["-e", "-f", "--regexp", "--file"],
            value_short: "emABCDd",
            value_long: &[
                "--regexp",
                "--max-count",
                "--context",
                "--after-context",
                "--before-context",
                "--include",
                "--exclude",
                "--exclude-dir",
                "--label",
            ],
            file_short: "f",
            file_long: &["--file", "--exclude-from"],
            ..PLAIN
        },
        "tree" => FlagTable {
            // `-R` reruns tree in each directory with `-o 00Tree.html`.
            not_free_short: "oR",
            not_free_long: &["--output"],
            value_short: "LPI",
            why: "writes its output to a file",
            ..PLAIN
        },
        "date" => FlagTable {
            not_free_short: "s",
            not_free_long: &["--set"],
            value_short: "dI",
            value_long: &["--date"],
            file_short: "fr",
            file_long: &["--file", "--reference"],
            why: "sets the system clock",
            ..PLAIN
        },
        "file" => FlagTable {
            not_free_short: "C",
            not_free_long: &["--compile"],
            value_short: "FeP",
            file_short: "mf",
            file_long: &["--magic-file", "--files-from"],
            why: "compiles a magic file, writing it",
            ..PLAIN
        },
        "sort" => FlagTable {
            not_free_short: "oT",
            not_free_long: &["--output", "--temporary-directory", "--compress-program"],
            value_short: "ktS",
            value_long: &["--key", "--field-separator", "--buffer-size", "--parallel"],
            file_long: &["--files0-from"],
            why: "writes a file or runs a program",
            ..PLAIN
        },
        "uniq" => FlagTable {
            value_short: "fsw",
            value_long: &["--skip-fields", "--skip-chars", "--check-chars"],
            max_operands: Some(1),
            why: "writes its second operand",
            ..PLAIN
        },
        "cut" => FlagTable {
            value_short: "bcdf",
            value_long: &[
                "--bytes",
                "--characters",
                "--delimiter",
                "--fields",
                "--output-delimiter",
            ],
            ..PLAIN
        },
        "nl" => FlagTable {
            value_short: "bdfhilnpsvw",
            ..PLAIN
        },
        "tac" => FlagTable {
            value_short: "s",
            value_long: &["--separator"],
            ..PLAIN
        },
        "column" => FlagTable {
            value_short: "cCdEHlNoORrsW",
            value_long: &[
                "--output-width",
                "--separator",
                "--output-separator",
                "--table-columns",
                "--table-name",
            ],
            ..PLAIN
        },
        "paste" => FlagTable {
            value_short: "d",
            value_long: &["--delimiters"],
            ..PLAIN
        },
        "fold" | "fmt" => FlagTable {
            value_short: "wgp",
            value_long: &["--width", "--goal", "--prefix"],
            ..PLAIN
        },
        "join" => FlagTable {
            value_short: "aejotv12",
            ..PLAIN
        },
        "expand" | "unexpand" => FlagTable {
            value_short: "t",
            value_long: &["--tabs"],
            ..PLAIN
        },
        "cmp" => FlagTable {
            value_short: "in",
            value_long: &["--ignore-initial", "--bytes"],
            ..PLAIN
        },
        "hexdump" => FlagTable {
            value_short: "ens",
            file_short: "f",
            ..PLAIN
        },
        "od" => FlagTable {
            value_short: "AjNStw",
            value_long: &[
                "--address-radix",
                "--skip-bytes",
                "--read-bytes",
                "--format",
                "--width",
            ],
            ..PLAIN
        },
        "xxd" => FlagTable {
            value_short: "cglosnR",
            max_operands: Some(1),
            why: "writes its second operand",
            ..PLAIN
        },
        "rg" => FlagTable {
            pattern_first: true,
            pattern_flags: &["-e", "-f", "--regexp", "--file"],
            not_free_short: "z",
            not_free_long: &["--pre", "--pre-glob", "--search-zip", "--hostname-bin"],
            value_short: "ABCEMTdegjmrtV",
            value_long: &[
                "--after-context",
                "--before-context",
                "--context",
                "--encoding",
                "--max-columns",
                "--type-not",
                "--max-depth",
                "--regexp",
                "--glob",
                "--iglob",
                "--threads",
                "--max-count",
                "--replace",
                "--type",
                "--type-add",
                "--type-clear",
                "--sort",
                "--sortr",
                "--max-filesize",
                "--color",
                "--colors",
                "--context-separator",
                "--field-context-separator",
                "--field-match-separator",
                "--path-separator",
                "--engine",
                "--dfa-size-limit",
                "--regex-size-limit",
            ],
            file_short: "f",
            file_long: &["--file", "--ignore-file"],
            why: "runs another program on each file",
            ..PLAIN
        },
        "fd" | "fdfind" => FlagTable {
            pattern_first: true,
            not_free_short: "xX",
            not_free_long: &["--exec", "--exec-batch"],
            value_short: "cdEejStoj",
            value_long: &[
                "--color",
                "--max-depth",
                "--min-depth",
                "--exact-depth",
                "--exclude",
                "--extension",
                "--threads",
                "--size",
                "--type",
                "--owner",
                "--changed-within",
                "--changed-before",
                "--max-results",
                "--format",
            ],
            file_long: &["--ignore-file", "--base-directory", "--search-path"],
            why: "runs a command on each file found",
            ..PLAIN
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_has_a_table_or_a_pass_of_its_own() {
        let own = ["find", "sed", "git", "jq", "xargs"];
        for p in READ_ONLY_PROGRAMS {
            assert!(
                table(p).is_some() || own.contains(p),
                "{p} has no flag table"
            );
        }
    }
}
