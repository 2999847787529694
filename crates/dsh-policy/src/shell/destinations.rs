//! The files a program writes, creates, moves or deletes through its operands — `cp`, `mv`,
//! `install`, `ln`, `touch`, `rm`, `mkdir`, `chmod`, `tar -x`, `unzip -d`, `patch`, `sed -i`,
//! `dd of=`, `find -delete`, … — judged like a redirection's target: outside the workspace
//! and the session's temporary directory, into a device, a protected path or a prompt file,
//! they are refused whatever the lists, rules or approvals say; where a file tool's path rule
//! keeps them, they are refused or asked as its writes are (`guarded.rs`). Elsewhere inside,
//! the program's own decision (its list, a rule, a person) decides.
//!
//! A destination holding a glob (`rm *.o`) is judged as a pattern: it must stay inside the
//! workspace lexically, and none of its components may match a protected path's (`.g*` would
//! match `.git`, `*.md` would match `AGENTS.md`).

use std::path::PathBuf;

use dsh_core::quote_capped;

use super::judge::firm;
use super::places::{Place, Write, from};
use super::words::Word;
use super::{Decision, Judgement, ShellPolicy};

/// How a destination is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// The path itself is written, created, moved or removed.
    Path,
    /// Everything beneath it too (`rm -r`, `find -delete`, `chmod -R`): refused when it
    /// holds a protected path.
    Tree,
    /// A symbolic link will point there: refused when it is protected (a later write through
    /// the link would reach it).
    LinkTarget,
}

/// One destination: the word, how it was written, how it is reached.
pub(crate) struct Destination {
    pub write: Write,
    pub reach: Reach,
}

/// The destinations of `name ARGS`, each with how it was written (for reasons). Brace
/// expansions in the operands are expanded first (`cp {a,AGENTS.md}` has two operands).
///
/// `any_output`: also the output flags any program may have (`-o F`, `--output F`,
/// `--out-dir D`, …) — not for the read-only list, whose flags mean other things (`ls -o`).
pub(crate) fn destinations(name: &str, args: &[Word], any_output: bool) -> Vec<Destination> {
    let base = name.rsplit('/').next().unwrap_or(name);
    let expanded: Vec<Word> = args.iter().flat_map(expand_braces).collect();
    let args = expanded.as_slice();
    let mut out = Vec::new();
    let mut push = |w: &Word, how: String, reach: Reach| {
        out.push(Destination {
            write: Write {
                target: w.clone(),
                how,
            },
            reach,
        });
    };
    let how = |w: &Word| format!("{base} {}", w.text());
    let recursive = has_flag(args, 'r', "--recursive") || has_flag(args, 'R', "--recursive");
    match base {
        "rm" | "rmdir" | "mkdir" | "touch" | "shred" | "truncate" | "unlink" => {
            let values: &[&str] = match base {
                "mkdir" => &["-m", "--mode", "--context"],
                "touch" => &["-d", "-t", "-r", "--date", "--reference"],
                "truncate" => &["-s", "-r", "--size", "--reference"],
                "shred" => &["-n", "-s", "--iterations", "--size", "--random-source"],
                _ => &[],
            };
            let reach = if base == "rm" && recursive {
                Reach::Tree
            } else {
                Reach::Path
            };
            for w in operands(args, values) {
                push(w, how(w), reach);
            }
        }
        "chmod" | "chown" | "chgrp" => {
            let reference = args
                .iter()
                .any(|w| w.literal().is_some_and(|a| a.starts_with("--reference")));
            let ops = operands(args, &["--from"]);
            let reach = if recursive { Reach::Tree } else { Reach::Path };
            // The mode or owner comes first unless `--reference` gives it.
            for w in ops.into_iter().skip(usize::from(!reference)) {
                push(w, how(w), reach);
            }
        }
        "cp" | "install" | "ln" | "mv" | "rsync" | "link" => {
            let values: &[&str] = match base {
                "install" => &["-m", "-o", "-g", "-S", "--mode", "--owner", "--group"],
                "rsync" => &["-e", "--rsh", "--exclude", "--include", "--filter", "-f"],
                _ => &["-S", "--suffix"],
            };
            let dir = value_of(args, 't', "--target-directory");
            if let Some(d) = &dir {
                push(d, format!("{base} -t {}", d.text()), Reach::Path);
            }
            let ops = operands(args, &[values, &["-t", "--target-directory"]].concat());
            let makes_dirs = base == "install" && has_flag(args, 'd', "--directory");
            let symbolic = base == "ln" && has_flag(args, 's', "--symbolic");
            let hard = (base == "ln" && !symbolic)
                || base == "link"
                || (base == "cp" && has_flag(args, 'l', "--link"));
            // Remote rsync operands (`host:path`) are not local files.
            let ops: Vec<&Word> = ops
                .into_iter()
                .filter(|w| base != "rsync" || !w.text().contains(':'))
                .collect();
            let (sources, target): (Vec<&Word>, Option<&Word>) = match (&dir, ops.split_last()) {
                (Some(_), _) => (ops.clone(), None),
                (None, Some((last, rest))) if !rest.is_empty() => (rest.to_vec(), Some(*last)),
                (None, Some((only, _))) if base == "ln" => (vec![*only], None),
                _ => (Vec::new(), None),
            };
            if makes_dirs {
                for w in &ops {
                    push(w, how(w), Reach::Path);
                }
                return out;
            }
            if let Some(t) = target {
                push(t, how(t), Reach::Path);
            }
            // Into a directory, each source lands as DIR/NAME: `cp -r x/.git .` writes
            // `.git`.
            let into = dir.as_ref().or(target);
            for src in &sources {
                if let Some(d) = into
                    && let Some(landed) = joined(d, src)
                {
                    push(
                        &landed,
                        format!("{base} {} {}", src.text(), d.text()),
                        Reach::Path,
                    );
                }
                if base == "mv" {
                    push(src, how(src), Reach::Path);
                } else if hard {
                    // A hard link makes the source writable under another name.
                    push(
                        src,
                        format!("{base} {} (a hard link to it)", src.text()),
                        Reach::Path,
                    );
                } else if symbolic {
                    push(src, format!("ln -s {}", src.text()), Reach::LinkTarget);
                }
            }
        }
        "tee" => {
            for w in operands(args, &[]) {
                push(w, how(w), Reach::Path);
            }
        }
        "sed" if has_flag(args, 'i', "--in-place") => {
            let scripted = args.iter().any(|w| {
                w.literal().is_some_and(|a| {
                    a == "-e"
                        || a == "-f"
                        || a.starts_with("--expression")
                        || a.starts_with("--file")
                })
            });
            for w in operands(args, &["-e", "-f", "-l", "--expression", "--file"])
                .into_iter()
                .skip(usize::from(!scripted))
            {
                push(w, format!("sed -i … {}", w.text()), Reach::Path);
            }
        }
        "dd" => {
            for w in args {
                if let Some(rest) = w.literal().and_then(|a| a.strip_prefix("of=")) {
                    push(&retext(w, rest), format!("dd of={rest}"), Reach::Path);
                }
            }
        }
        "tar" | "bsdtar" => tar(args, &mut push),
        "unzip" => {
            if let Some(dir) = value_of(args, 'd', "") {
                push(&dir, format!("unzip -d {}", dir.text()), Reach::Path);
            }
        }
        "patch" => {
            if let Some(f) = value_of(args, 'o', "--output") {
                push(&f, format!("patch -o {}", f.text()), Reach::Path);
            }
            if let Some(d) = value_of(args, 'd', "--directory") {
                push(&d, format!("patch -d {}", d.text()), Reach::Path);
            }
            let values = &[
                "-p", "-i", "-o", "-d", "-D", "-F", "-r", "-B", "-V", "-z", "-Y",
            ];
            if let Some(f) = operands(args, values).first() {
                push(f, how(f), Reach::Path);
            }
        }
        "find" if args.iter().any(|w| w.literal() == Some("-delete")) => {
            for w in args {
                match w.literal() {
                    Some("-L" | "-H" | "-P") => {}
                    Some(a) if a.starts_with('-') || a == "(" || a == "!" => break,
                    _ => push(w, format!("find {} … -delete", w.text()), Reach::Tree),
                }
            }
        }
        "git" if super::doors::git_subcommand(args).is_some_and(|(s, _)| s == "config") => {
            // `git config -f FILE` writes FILE.
            if let Some(f) = value_of(args, 'f', "--file") {
                push(&f, format!("git config --file {}", f.text()), Reach::Path);
            }
        }
        _ => {}
    }
    // Output flags any program may have (`go build -o F`, `--out-dir D`).
    if any_output && !matches!(base, "tar" | "bsdtar" | "patch" | "git") {
        if let Some(i) = args.iter().position(|w| w.literal() == Some("-o"))
            && let Some(f) = args.get(i + 1)
        {
            push(f, format!("{base} -o {}", f.text()), Reach::Path);
        }
        for long in [
            "--output",
            "--out-dir",
            "--outdir",
            "--output-file",
            "--target-dir",
        ] {
            if let Some(f) = value_of(args, '\0', long) {
                push(&f, format!("{base} {long} {}", f.text()), Reach::Path);
            }
        }
    }
    out
}

/// `dir/basename(src)`, when both are literal.
fn joined(dir: &Word, src: &Word) -> Option<Word> {
    let name = std::path::Path::new(src.literal()?.trim_end_matches('/')).file_name()?;
    let d = dir.literal()?;
    let text = format!("{}/{}", d.trim_end_matches('/'), name.to_string_lossy());
    Some(match (dir, src) {
        (Word::Lit { glob: a, .. }, Word::Lit { glob: b, .. }) => Word::Lit {
            text,
            glob: *a || *b,
        },
        _ => Word::Dyn(text),
    })
}

/// A literal word's brace expansions (`{a,b}/c` → `a/c`, `b/c`; at most 64), each a word of
/// its own; other words as they are.
pub(crate) fn expand_braces(w: &Word) -> Vec<Word> {
    let Word::Lit { text, .. } = w else {
        return vec![w.clone()];
    };
    let mut out = Vec::new();
    expand_into(text, &mut out);
    if out.len() > 64 || out.is_empty() {
        return vec![w.clone()];
    }
    out.into_iter()
        .map(|t| Word::Lit {
            glob: t.contains(['*', '?', '[', '{']),
            text: t,
        })
        .collect()
}

fn expand_into(text: &str, out: &mut Vec<String>) {
    if out.len() > 64 {
        return;
    }
    // The first `{` whose group has a top-level comma.
    let bytes = text.as_bytes();
    for (open, _) in text.match_indices('{') {
        let mut depth = 0;
        let mut commas = Vec::new();
        let mut close = None;
        for (i, &b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(i);
                        break;
                    }
                }
                b',' if depth == 1 => commas.push(i),
                _ => {}
            }
        }
        let (Some(close), false) = (close, commas.is_empty()) else {
            continue;
        };
        let (head, tail) = (&text[..open], &text[close + 1..]);
        let mut start = open + 1;
        for end in commas.into_iter().chain(std::iter::once(close)) {
            expand_into(&format!("{head}{}{tail}", &text[start..end]), out);
            start = end + 1;
        }
        return;
    }
    out.push(text.to_owned());
}

/// A word like `w` holding `text` (the value after `of=` or `--x=`).
fn retext(w: &Word, text: &str) -> Word {
    match w {
        Word::Lit { glob, .. } => Word::Lit {
            text: text.to_owned(),
            glob: *glob,
        },
        Word::Dyn(t) => Word::Dyn(t.clone()),
    }
}

/// The non-option operands, skipping the values of `values` (short or long, as the next
/// word) and everything a `--` does not end.
fn operands<'a>(args: &'a [Word], values: &[&str]) -> Vec<&'a Word> {
    let mut out = Vec::new();
    let mut options = true;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        match w.literal() {
            Some("--") if options => options = false,
            Some(a) if options && a.starts_with('-') && a.len() > 1 => {
                // `-t DIR`, or a cluster ending in a short option that takes a value
                // (`-rt DIR`).
                let last = a.chars().last().map(|c| format!("-{c}"));
                let clustered = !a.starts_with("--")
                    && last.is_some_and(|l| l.len() == 2 && values.contains(&l.as_str()));
                // `--targ DIR`: getopt_long's abbreviation of a long option with a value.
                let abbreviated = a.starts_with("--")
                    && !a.contains('=')
                    && a.len() > 3
                    && values
                        .iter()
                        .any(|v| v.starts_with("--") && v.starts_with(a));
                if values.contains(&a) || clustered || abbreviated {
                    i += 1;
                }
            }
            _ => out.push(w),
        }
    }
    out
}

/// The value of the short option `short` (`-t V`, `-tV`, `-at V` at the end of a cluster;
/// `'\0'` for none) or of `long` (`--long V`, `--long=V`, or an abbreviation getopt_long
/// accepts: `--targ V`).
fn value_of(args: &[Word], short: char, long: &str) -> Option<Word> {
    let takes_long = |a: &str| {
        let flag = a.split_once('=').map_or(a, |(f, _)| f);
        !long.is_empty() && flag.len() > 3 && long.starts_with(flag)
    };
    for (i, w) in args.iter().enumerate() {
        let Some(a) = w.literal() else { continue };
        if a == "--" {
            return None;
        }
        if a.starts_with("--") {
            if takes_long(a) {
                return match a.split_once('=') {
                    Some((_, v)) => Some(retext(w, v)),
                    None => args.get(i + 1).cloned(),
                };
            }
            continue;
        }
        if short == '\0' || !a.starts_with('-') || a.len() < 2 {
            continue;
        }
        if let Some(pos) = a[1..].find(short) {
            let rest = &a[1 + pos + short.len_utf8()..];
            return if rest.is_empty() {
                args.get(i + 1).cloned()
            } else {
                Some(retext(w, rest))
            };
        }
    }
    None
}

/// Whether the short flag `c` (in a cluster) or `long` (alone or with `=`) is given.
fn has_flag(args: &[Word], c: char, long: &str) -> bool {
    args.iter().filter_map(Word::literal).any(|a| {
        a == long
            || a.starts_with(&format!("{long}="))
            || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains(c))
    })
}

/// `tar`: an extraction writes beneath `-C DIR` (or the working directory); a creation or
/// append writes the archive `-f FILE`.
fn tar(args: &[Word], push: &mut impl FnMut(&Word, String, Reach)) {
    let mut modes = String::new();
    let mut file = None;
    let mut dir = None;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        let Some(a) = w.literal() else { continue };
        // The first word may be a cluster without a dash (`tar xzf a.tgz`).
        let cluster = if let Some(c) = a.strip_prefix('-').filter(|c| !c.starts_with('-')) {
            Some(c)
        } else if i == 1 && !a.starts_with('-') {
            Some(a)
        } else {
            None
        };
        if let Some(c) = cluster {
            let dashed = a.starts_with('-');
            for (at, ch) in c.char_indices() {
                let rest = &c[at + ch.len_utf8()..];
                let value = |i: &mut usize| {
                    if dashed && !rest.is_empty() {
                        // `-C.git`, `-fout.tar`: the value attached.
                        Some(retext(w, rest))
                    } else {
                        *i += 1;
                        args.get(*i - 1).cloned()
                    }
                };
                match ch {
                    'f' => file = value(&mut i),
                    'C' => dir = value(&mut i),
                    other => {
                        modes.push(other);
                        continue;
                    }
                }
                if dashed && !rest.is_empty() {
                    break;
                }
            }
            continue;
        }
        let (flag, value) = a.split_once('=').map_or((a, None), |(f, v)| (f, Some(v)));
        let mut value = || match value {
            Some(v) => Some(retext(w, v)),
            None => {
                i += 1;
                args.get(i - 1).cloned()
            }
        };
        match flag {
            "--file" => file = value(),
            "--directory" => dir = value(),
            "--extract" | "--get" => modes.push('x'),
            "--create" | "--append" | "--update" => modes.push('c'),
            _ => {}
        }
    }
    if modes.contains(['c', 'r', 'u'])
        && let Some(f) = &file
    {
        push(f, format!("tar -f {}", f.text()), Reach::Path);
    }
    if modes.contains('x')
        && let Some(d) = &dir
    {
        push(d, format!("tar -C {}", d.text()), Reach::Path);
    }
}

impl ShellPolicy {
    /// A program's destination: refused outside the workspace and the session's temporary
    /// directory, into a device, a protected path or a prompt file, or when it is named only
    /// at run time; refused or asked where a file tool's path rule keeps it (`guarded.rs`);
    /// elsewhere inside, nothing is added (the program's own decision decides).
    pub(crate) fn judge_destination(
        &self,
        d: &Destination,
        dirs: &[PathBuf],
        out: &mut Vec<Judgement>,
    ) {
        let w = &d.write;
        let how = quote_capped(&w.how);
        let deny = |reason: String| firm(Decision::Deny, reason);
        let target = match &w.target {
            Word::Lit { text, .. } if text == "{}" => {
                return out.push(deny(format!(
                    "{how} acts on the files `find` finds at run time, which cannot be checked; use `find … -delete` (judged from its starting points) or name the files"
                )));
            }
            Word::Lit { text, glob: false } => text.as_str(),
            Word::Lit { text, glob: true } => {
                if let Some(kept) = self.kept_glob(text, dirs) {
                    out.push(kept.judgement(&how));
                }
                return;
            }
            Word::Dyn(text) => {
                return out.push(deny(format!(
                    "{how} writes to a place named at run time ({}), which cannot be checked; name the files",
                    quote_capped(text)
                )));
            }
        };
        let mut asked = false;
        for dir in dirs {
            let reason = match self.place(dir, target) {
                Place::Sink | Place::Temp => continue,
                Place::Inside(rel) => match self.kept_write(&rel, d.reach) {
                    Some(kept) if kept.decision == Decision::Deny => format!("{how} {}", kept.why),
                    // A file tool's ask rule: asked once, while another directory may refuse.
                    Some(kept) => {
                        if !std::mem::replace(&mut asked, true) {
                            out.push(kept.judgement(&how));
                        }
                        continue;
                    }
                    None => continue,
                },
                _ if d.reach == Reach::LinkTarget => continue,
                Place::Device => format!("{how} writes to a device"),
                Place::Outside => format!(
                    "{how} writes {}, outside the workspace and the session's temporary directory{}; the sandbox would refuse it, so no approval is asked",
                    quote_capped(target),
                    from(dir)
                ),
                Place::Unknown(why) => format!(
                    "{how} writes {}, which cannot be checked: {why}",
                    quote_capped(target)
                ),
            };
            return out.push(deny(reason));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(line: &str) -> Vec<Word> {
        line.split_whitespace().map(Word::lit).collect()
    }

    fn targets(line: &str) -> Vec<String> {
        let words = lits(line);
        let mut seen: Vec<String> = Vec::new();
        for d in destinations(words[0].text(), &words[1..], true) {
            let t = d.write.target.text().to_owned();
            if !seen.contains(&t) {
                seen.push(t);
            }
        }
        seen
    }

    #[test]
    fn each_program_names_what_it_writes() {
        assert_eq!(targets("cp a b dest"), ["dest", "dest/a", "dest/b"]);
        assert_eq!(targets("cp -t dir a b"), ["dir", "dir/a", "dir/b"]);
        assert_eq!(targets("cp -tdir a"), ["dir", "dir/a"]);
        assert_eq!(targets("cp -rt dir a"), ["dir", "dir/a"]);
        assert_eq!(targets("cp --target-directory=dir a"), ["dir", "dir/a"]);
        assert_eq!(targets("cp --targ dir a"), ["dir", "dir/a"]);
        assert_eq!(targets("cp {a,b}"), ["b", "b/a"]);
        assert_eq!(targets("mv a b"), ["b", "b/a", "a"]);
        assert_eq!(
            targets("install -m 755 a /usr/bin/a"),
            ["/usr/bin/a", "/usr/bin/a/a"]
        );
        assert_eq!(targets("install -d x y"), ["x", "y"]);
        assert_eq!(targets("ln -s a b"), ["b", "b/a", "a"]);
        assert_eq!(targets("ln a b"), ["b", "b/a", "a"]);
        assert_eq!(targets("go build -o bin/app ."), ["bin/app"]);
        assert_eq!(targets("tee -a log"), ["log"]);
        assert_eq!(targets("git config -f AGENTS.md a.b c"), ["AGENTS.md"]);
        assert_eq!(targets("rm -rf x y"), ["x", "y"]);
        assert_eq!(targets("mkdir -p -m 700 d"), ["d"]);
        assert_eq!(targets("touch -r ref f"), ["f"]);
        assert_eq!(targets("chmod 600 f"), ["f"]);
        assert_eq!(targets("chmod --reference=r f"), ["f"]);
        assert_eq!(targets("sed -i s/a/b/ f g"), ["f", "g"]);
        assert_eq!(targets("sed -n -e p -i f"), ["f"]);
        assert_eq!(targets("dd if=a of=b"), ["b"]);
        assert_eq!(targets("tar xzf a.tgz -C out"), ["out"]);
        assert_eq!(targets("tar -xf a.tar -C.git"), [".git"]);
        assert_eq!(targets("tar -czf out.tgz src"), ["out.tgz"]);
        assert_eq!(targets("tar --extract --file=a --directory=d"), ["d"]);
        assert_eq!(targets("unzip a.zip -d out"), ["out"]);
        assert_eq!(targets("patch -p1 -o out f"), ["out", "f"]);
        assert_eq!(targets("find build -name x -delete"), ["build"]);
        assert!(targets("cat a b").is_empty());
    }
}
