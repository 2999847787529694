//! The free commands' flag tables and the wrappers that run another command.

use super::parse::Word;

/// What a free (safe-list) command may be given and keep its free pass.
pub(crate) struct FlagTable {
    /// Arguments are plain data (`echo`): never paths, may be computed at run time.
    pub data_args: bool,
    /// Short flags that make the command write or change something.
    pub not_free_short: &'static str,
    /// Long flags (without `=value`) that do.
    pub not_free_long: &'static [&'static str],
    /// Short flags that take a value (attached or as the next word); an attached value is
    /// checked as a path.
    pub value_short: &'static str,
    /// Why the `not_free` flags lose the pass.
    pub why: &'static str,
}

const PLAIN: FlagTable = FlagTable {
    data_args: false,
    not_free_short: "",
    not_free_long: &[],
    value_short: "",
    why: "",
};

/// The flag table of a free command, `None` for the ones with their own handling (`find`)
/// or a safe-list entry dsh has no table for (checked generically: flags pass, paths must be
/// inside the workspace).
pub(crate) fn table(name: &str) -> Option<FlagTable> {
    Some(match name {
        "echo" => FlagTable {
            data_args: true,
            ..PLAIN
        },
        "ls" | "cat" | "head" | "tail" | "wc" | "pwd" | "whoami" | "diff" | "stat" => PLAIN,
        "grep" => FlagTable {
            value_short: "efmABCDd",
            ..PLAIN
        },
        "tree" => FlagTable {
            // `-R` reruns tree in each directory with `-o 00Tree.html`.
            not_free_short: "oR",
            not_free_long: &["--output"],
            value_short: "LPIo",
            why: "writes its output to a file",
            ..PLAIN
        },
        "date" => FlagTable {
            not_free_short: "s",
            not_free_long: &["--set"],
            value_short: "dfrI",
            why: "sets the system clock",
            ..PLAIN
        },
        "file" => FlagTable {
            not_free_short: "C",
            not_free_long: &["--compile"],
            value_short: "mfFeP",
            why: "compiles a magic file, writing it",
            ..PLAIN
        },
        _ => return None,
    })
}

/// `find` primaries that write or delete (and lose the free pass).
pub(crate) const FIND_WRITES: &[&str] = &["-delete", "-fprint", "-fprint0", "-fprintf", "-fls"];
/// `find` primaries that run a command, up to `;` or `+`.
pub(crate) const FIND_EXEC: &[&str] = &["-exec", "-execdir", "-ok", "-okdir"];
/// `find` primaries taking a value that is a pattern or number.
pub(crate) const FIND_VALUE: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-regextype",
    "-type",
    "-xtype",
    "-size",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-used",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-perm",
    "-links",
    "-inum",
    "-maxdepth",
    "-mindepth",
    "-lname",
    "-ilname",
    "-fstype",
    "-printf",
    "-context",
];
/// `find` primaries taking a file name.
pub(crate) const FIND_FILE: &[&str] =
    &["-newer", "-anewer", "-cnewer", "-samefile", "-files0-from"];
/// `find` primaries and options without a value.
pub(crate) const FIND_BARE: &[&str] = &[
    "-print",
    "-print0",
    "-ls",
    "-prune",
    "-quit",
    "-empty",
    "-true",
    "-false",
    "-readable",
    "-writable",
    "-executable",
    "-depth",
    "-follow",
    "-xdev",
    "-mount",
    "-noleaf",
    "-nouser",
    "-nogroup",
    "-daystart",
    "-not",
    "-a",
    "-and",
    "-o",
    "-or",
    "(",
    ")",
    "!",
    ",",
    "-ignore_readdir_race",
    "-noignore_readdir_race",
];

/// A command that runs another one.
pub(crate) enum Wrapped<'a> {
    /// Not a wrapper (or a wrapper given nothing to run: judge it by name).
    No,
    /// Runs `payload`; `note` when the payload can never be free (e.g. `xargs`).
    Runs {
        payload: &'a [Word],
        ask_note: Option<&'static str>,
    },
    /// Refused outright.
    Deny(String),
    /// Cannot be judged: at least ask.
    Ask(String),
    /// `bash -c STR`: STR is parsed as a line of its own.
    Shell(&'a Word),
}

/// Recognises wrappers by name and finds their payload.
pub(crate) fn unwrap(words: &[Word]) -> Wrapped<'_> {
    let Some(name) = words.first().and_then(Word::literal) else {
        return Wrapped::No;
    };
    let args = &words[1..];
    let lit = |i: usize| args.get(i).and_then(Word::literal);
    match name {
        "sudo" | "su" | "doas" | "pkexec" | "run0" => {
            Wrapped::Deny(format!("`{name}` runs a command as another user"))
        }
        "bash" | "sh" | "zsh" | "dash" | "ksh" if lit(0) == Some("-c") => match args.get(1) {
            Some(s) => Wrapped::Shell(s),
            None => Wrapped::No,
        },
        "env" => {
            let mut i = 0;
            while let Some(a) = lit(i) {
                match a {
                    "-i" | "--ignore-environment" | "-0" | "--null" | "-" => i += 1,
                    "-u" => i += 2,
                    "-S" | "--split-string" | "-C" | "--chdir" => {
                        return Wrapped::Ask(format!(
                            "`env {a}` changes what runs in ways the policy does not follow"
                        ));
                    }
                    _ if a.starts_with("--unset=") => i += 1,
                    _ if a.starts_with('-') => {
                        return Wrapped::Ask(format!(
                            "`env {a}` is an option the policy does not know"
                        ));
                    }
                    _ if a.contains('=') => {
                        let var = a.split('=').next().unwrap_or_default();
                        if super::parse::dangerous_var(var) {
                            return Wrapped::Deny(format!(
                                "`env {a}` assigns {var}, which changes how commands are found or run"
                            ));
                        }
                        i += 1;
                    }
                    _ => break,
                }
            }
            if let Some(w) = args.get(i).filter(|w| w.literal().is_none()) {
                return Wrapped::Ask(format!(
                    "`env` is given `{}` computed at run time",
                    w.text()
                ));
            }
            payload(args, i, None)
        }
        "timeout" => {
            let mut i = 0;
            while let Some(a) = lit(i) {
                match a {
                    "-s" | "-k" | "--signal" | "--kill-after" => i += 2,
                    _ if a.starts_with('-') => i += 1,
                    _ => break,
                }
            }
            // The duration.
            payload(args, i + 1, None)
        }
        "nice" => {
            let mut i = 0;
            while let Some(a) = lit(i) {
                match a {
                    "-n" | "--adjustment" => i += 2,
                    _ if a.starts_with('-') => i += 1,
                    _ => break,
                }
            }
            payload(args, i, None)
        }
        "nohup" | "time" | "command" | "exec" | "setsid" | "stdbuf" | "ionice" => {
            let mut i = 0;
            while let Some(a) = lit(i) {
                match a {
                    "-a" if name == "exec" => i += 2,
                    "-c" | "-n" | "-t" if name == "ionice" => i += 2,
                    _ if a.starts_with('-') => i += 1,
                    _ => break,
                }
            }
            payload(args, i, None)
        }
        "xargs" => {
            let mut i = 0;
            while let Some(a) = lit(i) {
                match a {
                    "-n" | "-I" | "-P" | "-L" | "-d" | "-a" | "-E" | "-s" | "--arg-file"
                    | "--delimiter" | "--max-args" | "--max-procs" | "--max-lines"
                    | "--max-chars" => i += 2,
                    _ if a.starts_with('-') => i += 1,
                    _ => break,
                }
            }
            if i >= args.len() {
                // `xargs` alone runs `echo` with its input.
                return Wrapped::Ask("`xargs` runs a command with arguments from its input".into());
            }
            payload(
                args,
                i,
                Some("xargs adds arguments from its input, which the policy cannot see"),
            )
        }
        _ => Wrapped::No,
    }
}

fn payload<'a>(args: &'a [Word], at: usize, ask_note: Option<&'static str>) -> Wrapped<'a> {
    match args.get(at..) {
        Some(p) if !p.is_empty() => Wrapped::Runs {
            payload: p,
            ask_note,
        },
        _ => Wrapped::No,
    }
}
