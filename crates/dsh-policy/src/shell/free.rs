//! The free pass: whether a program on the read-only list (`[shell] safe`) keeps running
//! without a person with the arguments it was given — by its flag table (`readers.rs`), or by
//! a pass of its own: `find`'s expression, `sed`'s script, `jq`'s arguments, git's reading
//! subcommands. A command that keeps it runs in the read-only sandbox.

use dsh_core::quote_capped;

use super::judge::At;
use super::readers::{self, FlagTable};
use super::words::Word;
use super::{Judgement, ShellPolicy, commands};

/// Why a listed program loses its free pass.
pub(crate) enum NotFree {
    /// Its arguments make it write, run something or reach outside: asks at tier `Rule`.
    Structural(String),
    /// It is used in a way that is not reading at all (`git commit`): asks as a
    /// confirm-list program would, at tier `Default`.
    Listed(String),
}

impl From<String> for NotFree {
    fn from(why: String) -> Self {
        NotFree::Structural(why)
    }
}

impl ShellPolicy {
    /// Whether a safe-list command keeps its free pass with these arguments.
    pub(crate) fn free_pass(
        &self,
        name: &str,
        args: &[Word],
        at: At<'_>,
        out: &mut Vec<Judgement>,
    ) -> Result<(), NotFree> {
        // `test -v 'a[$(cmd)]'` and `printf -v 'a[$(cmd)]'` evaluate an array subscript,
        // running what it holds; `printf -v PATH` sets a variable the rest of the line uses.
        if matches!(name, "test" | "[" | "printf") && args.iter().any(|w| w.literal() == Some("-v"))
        {
            return Err(NotFree::Structural(format!(
                "`{name} -v` evaluates or sets a variable named by its argument, which may run a command"
            )));
        }
        match name {
            "find" => return Ok(self.find_pass(args, at, out)?),
            "sed" => return Ok(self.sed_pass(args, at)?),
            "jq" => return Ok(self.jq_pass(args, at)?),
            "git" => {
                super::git_reads::judge(args).map_err(NotFree::Listed)?;
                return self.read_only_sandbox().map_err(|why| {
                    NotFree::Structural(format!(
                        "git's reading subcommands run free only in the read-only sandbox, which is not available here ({why}): a pager, diff driver or hook the repository configures would run unconfined"
                    ))
                });
            }
            _ => {}
        }
        let table = readers::table(name).unwrap_or(readers::PLAIN);
        Ok(self.table_pass(&table, args, at)?)
    }

    /// The generic pass: flags by the table, operands as paths inside the workspace (or as
    /// data).
    fn table_pass(&self, table: &FlagTable, args: &[Word], at: At<'_>) -> Result<(), String> {
        let mut options = true;
        let mut pattern_pending =
            table.pattern_first && !args.iter().any(|w| gives_pattern(table, w));
        let mut operands = 0usize;
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            i += 1;
            let Some(a) = arg.literal() else {
                if table.data_args || std::mem::take(&mut pattern_pending) {
                    continue;
                }
                return Err(format!(
                    "{} is computed at run time, so the file it names cannot be checked",
                    quote_capped(arg.text())
                ));
            };
            if options && a == "--" {
                options = false;
            } else if options && a.starts_with("--") && a.len() > 2 {
                let (flag, value) = match a.split_once('=') {
                    Some((f, v)) => (f, Some(v)),
                    None => (a, None),
                };
                // getopt_long takes any unambiguous prefix: `--out` is `--output`.
                if table.not_free_long.iter().any(|f| abbreviates(flag, f)) {
                    return Err(format!(
                        "{flag} {}, so it is not read-only",
                        table.why,
                        flag = quote_capped(flag)
                    ));
                }
                let is_file = table.file_long.contains(&flag);
                let takes = is_file || table.value_long.contains(&flag);
                match value {
                    // A value of a flag the table does not know as data may be a file.
                    Some(v) if is_file || !takes => self.path_inside(at.dirs, v)?,
                    Some(_) => {}
                    None if takes => {
                        if let Some(next) = args.get(i) {
                            i += 1;
                            if is_file {
                                self.operand_inside(next, at)?;
                            }
                        }
                    }
                    None => {}
                }
            } else if options && a.len() > 1 && a.starts_with('-') && !table.data_args {
                for (at_byte, c) in a.char_indices().skip(1) {
                    if table.not_free_short.contains(c) {
                        return Err(format!("`-{c}` {}, so it is not read-only", table.why));
                    }
                    let is_file = table.file_short.contains(c);
                    if is_file || table.value_short.contains(c) {
                        let rest = &a[at_byte + c.len_utf8()..];
                        if rest.is_empty() {
                            if let Some(next) = args.get(i) {
                                i += 1;
                                if is_file {
                                    self.operand_inside(next, at)?;
                                }
                            }
                        } else if is_file {
                            self.path_inside(at.dirs, rest)?;
                        }
                        break;
                    }
                }
            } else if table.data_args || std::mem::take(&mut pattern_pending) {
            } else {
                operands += 1;
                if table.max_operands.is_some_and(|max| operands > max) {
                    return Err(format!(
                        "{a} is an operand it {}, so it is not read-only",
                        table.why,
                        a = quote_capped(a)
                    ));
                }
                self.path_inside(at.dirs, a)?;
            }
        }
        Ok(())
    }

    /// A word that names a file: known, and inside the workspace.
    fn operand_inside(&self, w: &Word, at: At<'_>) -> Result<(), String> {
        match w.literal() {
            Some(v) => self.path_inside(at.dirs, v),
            None => Err(format!(
                "{} is computed at run time, so the file it names cannot be checked",
                quote_capped(w.text())
            )),
        }
    }

    /// `sed`: no `-i`, a script given on the line and judged by `sed.rs`, files inside.
    fn sed_pass(&self, args: &[Word], at: At<'_>) -> Result<(), String> {
        let in_place = || "`-i` makes `sed` edit files in place, so it is not read-only".to_owned();
        let script_file =
            || "`sed -f` reads its script from a file, which the policy does not judge".to_owned();
        let mut scripts: Vec<&str> = Vec::new();
        let mut operands: Vec<&Word> = Vec::new();
        let mut options = true;
        let mut i = 0;
        // The next word is the value of the option just read.
        let next_script = |i: &mut usize| -> Result<&str, String> {
            let v = args.get(*i).and_then(Word::exact);
            *i += 1;
            v.ok_or_else(|| "the script of `sed -e` is known only at run time".to_owned())
        };
        while let Some(w) = args.get(i) {
            i += 1;
            let Some(a) = w.literal() else {
                operands.push(w);
                continue;
            };
            if !options || a == "-" || !a.starts_with('-') {
                operands.push(w);
            } else if a == "--" {
                options = false;
            } else if let Some(long) = a.strip_prefix("--") {
                let (flag, value) = match long.split_once('=') {
                    Some((f, v)) => (f, Some(v)),
                    None => (long, None),
                };
                match (flag, value) {
                    // getopt_long takes any unambiguous prefix (`--i`, `--fi`, `--e`).
                    (f, _) if "in-place".starts_with(f) => return Err(in_place()),
                    (f, _) if f.len() > 1 && "file".starts_with(f) => {
                        return Err(script_file());
                    }
                    (f, Some(v)) if "expression".starts_with(f) => scripts.push(v),
                    (f, None) if "expression".starts_with(f) => {
                        scripts.push(next_script(&mut i)?);
                    }
                    (f, None) if f.len() > 1 && "line-length".starts_with(f) => i += 1,
                    _ => {}
                }
            } else {
                for (pos, c) in a.char_indices().skip(1) {
                    let rest = &a[pos + c.len_utf8()..];
                    match c {
                        'i' => return Err(in_place()),
                        'f' => return Err(script_file()),
                        'e' if rest.is_empty() => scripts.push(next_script(&mut i)?),
                        'e' => scripts.push(rest),
                        'l' if rest.is_empty() => i += 1,
                        'l' => {}
                        _ => continue,
                    }
                    break;
                }
            }
        }
        let mut files = operands.into_iter();
        if scripts.is_empty() {
            match files.next().map(|w| (w, w.exact())) {
                Some((_, Some(script))) => scripts.push(script),
                Some((w, None)) => {
                    return Err(format!(
                        "the script {} is known only at run time",
                        quote_capped(w.text())
                    ));
                }
                None => return Err("`sed` is given no script".to_owned()),
            }
        }
        for script in scripts {
            super::sed::judge_script(script).map_err(|why| {
                format!(
                    "the script {}: {why}, so it is not read-only",
                    quote_capped(script)
                )
            })?;
        }
        for f in files {
            self.operand_inside(f, at)?;
        }
        Ok(())
    }

    /// `jq`: its filter is data (jq cannot write or run anything), unless it imports a
    /// module (whose `search` path may lead anywhere); files it reads are paths.
    fn jq_pass(&self, args: &[Word], at: At<'_>) -> Result<(), String> {
        if args.iter().any(|w| {
            w.literal()
                .is_none_or(|a| a.contains("import") || a.contains("include"))
        }) {
            return Err(
                "a jq filter that imports or includes a module reads files the policy does not follow"
                    .to_owned(),
            );
        }
        let mut filter_pending = true;
        let mut positional_data = false;
        let mut options = true;
        let mut i = 0;
        while let Some(w) = args.get(i) {
            i += 1;
            let a = w.literal();
            match a {
                Some("--") if options => options = false,
                Some("--arg" | "--argjson") if options => i += 2,
                Some("--slurpfile" | "--rawfile") if options => {
                    if let Some(file) = args.get(i + 1) {
                        self.operand_inside(file, at)?;
                    }
                    i += 2;
                }
                Some("-f" | "--from-file") if options => {
                    if let Some(file) = args.get(i) {
                        self.operand_inside(file, at)?;
                    }
                    i += 1;
                    filter_pending = false;
                }
                Some("-L") if options => {
                    if let Some(dir) = args.get(i) {
                        self.operand_inside(dir, at)?;
                    }
                    i += 1;
                }
                Some("--indent") if options => i += 1,
                Some("--args" | "--jsonargs") if options => positional_data = true,
                Some(f) if options && f.starts_with('-') && f.len() > 1 => {
                    if let Some(dir) = f.strip_prefix("-L") {
                        self.path_inside(at.dirs, dir)?;
                    }
                }
                _ if std::mem::take(&mut filter_pending) => {}
                _ if positional_data => {}
                _ => self.operand_inside(w, at)?,
            }
        }
        Ok(())
    }

    /// Whether the read-only sandbox is enforced where commands run: `Ok`, or why not.
    pub(crate) fn read_only_sandbox(&self) -> Result<(), String> {
        (self.read_only_sandbox.0)()
    }

    /// `find`'s expression: writing primaries lose the pass; `-exec` payloads are judged.
    pub(crate) fn find_pass(
        &self,
        args: &[Word],
        at: At<'_>,
        out: &mut Vec<Judgement>,
    ) -> Result<(), String> {
        let mut i = 0;
        // How symlinks are followed (`-L`, `-H`, `-P`) and the optimisation level come
        // before the starting points.
        while let Some(a) = args.get(i).and_then(Word::literal) {
            if matches!(a, "-L" | "-H" | "-P") || (a.starts_with("-O") && a.len() > 2) {
                i += 1;
            } else {
                break;
            }
        }
        // Starting points.
        while let Some(w) = args.get(i) {
            match w.literal() {
                Some(a) if a.starts_with('-') || a == "(" || a == "!" => break,
                Some(a) => self.path_inside(at.dirs, a)?,
                None => {
                    return Err(format!(
                        "{} is computed at run time, so the file it names cannot be checked",
                        quote_capped(w.text())
                    ));
                }
            }
            i += 1;
        }
        let inner = At {
            depth: at.depth + 1,
            payload: true,
            ..at
        };
        while let Some(w) = args.get(i) {
            let Some(a) = w.literal() else {
                return Err(format!(
                    "{} is computed at run time",
                    quote_capped(w.text())
                ));
            };
            i += 1;
            if commands::FIND_WRITES.contains(&a) {
                return Err(format!(
                    "{a} writes or deletes files, so it is not read-only",
                    a = quote_capped(a)
                ));
            } else if commands::FIND_EXEC.contains(&a) {
                let end = args[i..]
                    .iter()
                    .position(|w| matches!(w.literal(), Some(";" | "+")))
                    .ok_or_else(|| {
                        format!("{a} has no terminating `;` or `+`", a = quote_capped(a))
                    })?;
                self.judge_command(&args[i..i + end], &[], inner, out);
                i += end + 1;
            } else if commands::FIND_VALUE.contains(&a) {
                i += 1;
            } else if commands::FIND_FILE.contains(&a) || a.starts_with("-newer") {
                match args.get(i).and_then(Word::literal) {
                    Some(v) => self.path_inside(at.dirs, v)?,
                    None => {
                        return Err(format!(
                            "{a} names a file computed at run time",
                            a = quote_capped(a)
                        ));
                    }
                }
                i += 1;
            } else if !commands::FIND_BARE.contains(&a) {
                return Err(format!(
                    "`find` option {a} is not in its flag table",
                    a = quote_capped(a)
                ));
            }
        }
        Ok(())
    }
}

/// Whether the long option `given` (`--out`) is `full` (`--output`) or an abbreviation of it
/// that getopt_long would accept (at least one letter after the dashes).
pub(crate) fn abbreviates(given: &str, full: &str) -> bool {
    given.len() > 2 && full.starts_with(given)
}

/// Whether `w` is one of the table's flags that give the pattern (`-e P`, `--regexp=P`,
/// `-ie P`).
fn gives_pattern(table: &FlagTable, w: &Word) -> bool {
    let Some(a) = w.literal() else {
        return false;
    };
    table.pattern_flags.iter().any(|f| {
        if f.starts_with("--") {
            a == *f || a.starts_with(&format!("{f}="))
        } else {
            let c = f.chars().nth(1).unwrap_or('-');
            a.starts_with('-') && !a.starts_with("--") && a[1..].contains(c)
        }
    })
}
