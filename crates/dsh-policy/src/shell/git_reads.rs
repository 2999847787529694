//! git's reading subcommands: the ones that run free in the read-only sandbox (`git status`,
//! `git log`, `git diff`, …), without the options that make them write or run a program of
//! the command line's choosing. What a repository's own configuration makes git run (a
//! pager, a diff driver, a textconv filter) runs inside the read-only sandbox too, so it can
//! neither change nor leak anything.

use super::words::Word;

/// Subcommands that only read, whatever (other) options they get.
const READING: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "rev-parse",
    "ls-files",
    "ls-tree",
    "blame",
    "annotate",
    "grep",
    "describe",
    "shortlog",
    "rev-list",
    "cat-file",
    "show-ref",
    "for-each-ref",
    "merge-base",
    "name-rev",
    "count-objects",
    "whatchanged",
    "diff-tree",
    "diff-files",
    "diff-index",
    "check-ignore",
    "check-attr",
    "version",
    "var",
];

/// Options of any reading subcommand that write a file or run a program.
const NOT_FREE: &[&str] = &[
    "--output",
    "--output-directory",
    "--ext-diff",
    "-O",
    "--open-files-in-pager",
];

/// Global options before the subcommand that keep git read-only (`-C DIR` is judged with
/// its doors; `-c` asks there unless the key is known harmless, so it loses the pass here).
const GLOBAL_OK: &[&str] = &[
    "--no-pager",
    "-P",
    "--no-optional-locks",
    "--literal-pathspecs",
    "--no-replace-objects",
    "--bare",
];

/// `branch` and `tag` options that only list.
const LISTING: &[&str] = &[
    "-a",
    "-r",
    "-v",
    "-vv",
    "-l",
    "-n",
    "-i",
    "--all",
    "--remotes",
    "--verbose",
    "--list",
    "--show-current",
    "--color",
    "--no-color",
    "--column",
    "--no-column",
    "--ignore-case",
    "--omit-empty",
];

/// `branch` and `tag` listing options that take a value (the next word, or after `=`).
const LISTING_WITH_VALUE: &[&str] = &[
    "--contains",
    "--no-contains",
    "--merged",
    "--no-merged",
    "--points-at",
    "--sort",
    "--format",
];

/// Whether `git ARGS` is a reading subcommand without writing options: `Err(why)` if not.
pub(crate) fn judge(args: &[Word]) -> Result<(), String> {
    let mut i = 0;
    let sub = loop {
        let Some(word) = args.get(i) else {
            return Err("`git` alone prints its help through a pager".to_owned());
        };
        let Some(a) = word.exact() else {
            return Err(format!("`{}` is known only at run time", word.text()));
        };
        if a == "-C" {
            i += 2;
            continue;
        }
        // `-c KEY=VALUE` with a key git's doors know to be harmless (`color.ui`).
        if a == "-c" {
            let setting = args.get(i + 1).and_then(Word::exact).unwrap_or_default();
            let (key, value) = setting.split_once('=').unwrap_or((setting, ""));
            let how = format!("git -c {setting}");
            if !key.is_empty() && super::doors::git_config_key(key, Some(value), &how).is_none() {
                i += 2;
                continue;
            }
            return Err(format!(
                "`git -c {setting}` sets a key git's reading subcommands do not run free with"
            ));
        }
        if GLOBAL_OK.contains(&a) {
            i += 1;
            continue;
        }
        if a.starts_with('-') {
            return Err(format!(
                "the global option `{a}` is not among those git's reading subcommands run free with"
            ));
        }
        break a;
    };
    let rest = &args[i + 1..];
    let flags = || rest.iter().filter_map(Word::literal);
    let flag_name = |a: &str| a.split_once('=').map_or(a, |(f, _)| f).to_owned();
    // git takes any unambiguous prefix of a long option (`--outp` is `--output`).
    let not_free = |a: &str| {
        let f = flag_name(a);
        NOT_FREE
            .iter()
            .any(|n| *n == f || (f.starts_with("--") && super::free::abbreviates(&f, n)))
    };
    if let Some(bad) = flags().find(|a| not_free(a)) {
        return Err(format!(
            "`git {sub} {bad}` writes a file or runs a program of the command's choosing"
        ));
    }
    match sub {
        s if READING.contains(&s) => Ok(()),
        "branch" | "tag" => listing(sub, rest),
        "remote" => match rest.iter().map(Word::exact).collect::<Vec<_>>().as_slice() {
            [] | [Some("-v" | "--verbose")] | [Some("get-url"), Some(_)] => Ok(()),
            _ => Err(format!(
                "only `git remote`, `git remote -v` and `git remote get-url NAME` run free (`git remote {}` may change the remotes or contact one)",
                rest.iter().map(Word::text).collect::<Vec<_>>().join(" ")
            )),
        },
        "stash" | "worktree" | "reflog" => {
            let first = rest.first().map(Word::exact);
            let reads = match sub {
                "stash" => matches!(first, Some(Some("list" | "show"))),
                "worktree" => matches!(first, Some(Some("list"))),
                _ => matches!(first, None | Some(Some("show" | "list"))),
            };
            if reads {
                Ok(())
            } else {
                Err(format!("`git {sub}` runs free only to list or show"))
            }
        }
        "config" => {
            let reads = flags().any(|a| {
                matches!(
                    a,
                    "--get" | "--get-all" | "--get-regexp" | "-l" | "--list" | "--get-urlmatch"
                ) || a.starts_with("--get")
            });
            // `git config NAME` alone reads it too.
            let operands: Vec<&Word> = rest
                .iter()
                .filter(|w| !w.literal().is_some_and(|a| a.starts_with('-')))
                .collect();
            let plain_read = operands.len() == 1
                && flags().all(|a| {
                    matches!(
                        a,
                        "--global"
                            | "--local"
                            | "--system"
                            | "--show-origin"
                            | "--show-scope"
                            | "--null"
                            | "-z"
                            | "--bool"
                            | "--int"
                            | "--path"
                    ) || a.starts_with("--type=")
                        || !a.starts_with('-')
                });
            if (reads || plain_read) && !flags().any(|a| a.starts_with("--edit") || a == "-e") {
                Ok(())
            } else {
                Err("only `git config --get…` and `git config --list` run free".to_owned())
            }
        }
        other => Err(format!(
            "`git {other}` is not one of git's reading subcommands"
        )),
    }
}

/// `git branch`/`git tag` run free only to list: listing options, and names only with
/// `-l`/`--list` (as patterns).
fn listing(sub: &str, rest: &[Word]) -> Result<(), String> {
    let mut list = false;
    let mut operands = false;
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        i += 1;
        let Some(a) = w.literal().filter(|a| a.starts_with('-')) else {
            operands = true;
            continue;
        };
        let name = a.split_once('=').map_or(a, |(f, _)| f);
        let takes_value = LISTING_WITH_VALUE.contains(&name);
        if !LISTING.contains(&name) && !takes_value {
            return Err(format!("`git {sub} {a}` does more than list"));
        }
        list |= matches!(name, "-l" | "--list");
        if takes_value && !a.contains('=') {
            i += 1;
        }
    }
    if operands && !list {
        return Err(format!(
            "`git {sub} NAME` creates a {sub}; only listing runs free"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Word> {
        line.split_whitespace().map(Word::lit).collect()
    }

    #[test]
    fn reading_subcommands_run_free() {
        for line in [
            "status",
            "status --short",
            "log --oneline -5",
            "--no-pager log -p",
            "diff HEAD~1 -- src",
            "show HEAD:README.md",
            "branch",
            "branch -a",
            "branch --list feat*",
            "branch -vv",
            "tag",
            "tag -l v1.*",
            "rev-parse --show-toplevel",
            "ls-files -m",
            "blame src/main.rs",
            "grep -n foo",
            "describe --tags",
            "remote",
            "remote -v",
            "stash list",
            "config --get user.name",
            "config --list",
            "-C sub status",
        ] {
            assert_eq!(judge(&words(line)), Ok(()), "git {line}");
        }
    }

    #[test]
    fn writing_or_running_forms_do_not() {
        for line in [
            "",
            "commit -m x",
            "push",
            "checkout main",
            "branch new-feature",
            "branch -d old",
            "branch -m a b",
            "tag v2",
            "tag -d v1",
            "remote add o url",
            "remote show origin",
            "log --output=x",
            "diff --ext-diff",
            "grep -O foo",
            "grep --open-files-in-pager=vim foo",
            "stash",
            "stash pop",
            "worktree add x",
            "config user.name x",
            "config --edit",
            "-c core.pager=x log",
            "-p log",
            "--exec-path=/x status",
            "fetch",
            "reflog expire --all",
        ] {
            assert!(judge(&words(line)).is_err(), "git {line} must not be free");
        }
    }
}
