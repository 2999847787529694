//! The files a program writes, creates, moves or deletes through its operands — `cp`, `mv`,
//! `install`, `ln`, `touch`, `rm`, `mkdir`, `chmod`, `tar -x`, `unzip -d`, `patch`, `sed -i`,
//! `dd of=`, `find -delete`, … — judged like a redirection's target: outside the workspace
//! and the session's temporary directory, into a device, a protected path or a prompt file,
//! they are refused whatever the lists, rules or approvals say. Inside, the program's own
//! verdict (its list, a rule, a person) decides.
//!
//! A destination holding a glob (`rm *.o`) is judged as a pattern: it must stay inside the
//! workspace lexically, and none of its components may match a protected path's (`.g*` would
//! match `.git`, `*.md` would match `AGENTS.md`).

use std::path::{Component, Path, PathBuf};

use dsh_core::quote_capped;

use super::judge::firm;
use super::places::{Place, Write, from};
use super::words::Word;
use super::{Judgement, ShellPolicy, Verdict};

/// The destinations of `name ARGS`, each with how it was written (for reasons).
pub(crate) fn destinations(name: &str, args: &[Word]) -> Vec<Write> {
    let base = name.rsplit('/').next().unwrap_or(name);
    let mut out = Vec::new();
    let mut push = |w: &Word, how: String| {
        out.push(Write {
            target: w.clone(),
            how,
        });
    };
    let how = |w: &Word| format!("{base} {}", w.text());
    match base {
        "rm" | "rmdir" | "mkdir" | "touch" | "shred" | "truncate" | "unlink" => {
            let values: &[&str] = match base {
                "mkdir" => &["-m", "--mode", "--context"],
                "touch" => &["-d", "-t", "-r", "--date", "--reference"],
                "truncate" => &["-s", "-r", "--size", "--reference"],
                "shred" => &["-n", "-s", "--iterations", "--size", "--random-source"],
                _ => &[],
            };
            for w in operands(args, values) {
                push(w, how(w));
            }
        }
        "chmod" | "chown" | "chgrp" => {
            let reference = args
                .iter()
                .any(|w| w.literal().is_some_and(|a| a.starts_with("--reference")));
            let ops = operands(args, &["--from"]);
            // The mode or owner comes first unless `--reference` gives it.
            for w in ops.into_iter().skip(usize::from(!reference)) {
                push(w, how(w));
            }
        }
        "cp" | "install" | "ln" | "mv" => {
            let values: &[&str] = match base {
                "install" => &["-m", "-o", "-g", "-S", "--mode", "--owner", "--group"],
                _ => &["-S", "--suffix"],
            };
            if let Some(dir) = value_of(args, "-t", "--target-directory") {
                push(&dir, format!("{base} -t {}", dir.text()));
            }
            let ops = operands(args, &[values, &["-t", "--target-directory"]].concat());
            let makes_dirs = base == "install" && has_flag(args, 'd', "--directory");
            let targeted = value_of(args, "-t", "--target-directory").is_some();
            if base == "mv" || makes_dirs {
                // `mv` removes its sources too; `install -d` creates every operand.
                for w in &ops {
                    push(w, how(w));
                }
            } else if !targeted && ops.len() >= 2 {
                let last = ops[ops.len() - 1];
                push(last, how(last));
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
                push(w, format!("sed -i … {}", w.text()));
            }
        }
        "dd" => {
            for w in args {
                if let Some(rest) = w.literal().and_then(|a| a.strip_prefix("of=")) {
                    push(&retext(w, rest), format!("dd of={rest}"));
                }
            }
        }
        "tar" | "bsdtar" => tar(args, &mut push),
        "unzip" => {
            if let Some(dir) = value_of(args, "-d", "") {
                push(&dir, format!("unzip -d {}", dir.text()));
            }
        }
        "patch" => {
            if let Some(f) = value_of(args, "-o", "--output") {
                push(&f, format!("patch -o {}", f.text()));
            }
            if let Some(d) = value_of(args, "-d", "--directory") {
                push(&d, format!("patch -d {}", d.text()));
            }
            let values = &[
                "-p", "-i", "-o", "-d", "-D", "-F", "-r", "-B", "-V", "-z", "-Y",
            ];
            if let Some(f) = operands(args, values).first() {
                push(f, how(f));
            }
        }
        "find" if args.iter().any(|w| w.literal() == Some("-delete")) => {
            for w in args {
                match w.literal() {
                    Some(a) if a.starts_with('-') || a == "(" || a == "!" => break,
                    _ => push(w, format!("find {} … -delete", w.text())),
                }
            }
        }
        _ => {}
    }
    out
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
                if values.contains(&a) {
                    i += 1;
                }
            }
            _ => out.push(w),
        }
    }
    out
}

/// The value of `-X V` or `--long V`/`--long=V`.
fn value_of(args: &[Word], short: &str, long: &str) -> Option<Word> {
    for (i, w) in args.iter().enumerate() {
        let Some(a) = w.literal() else { continue };
        if a == short || (!long.is_empty() && a == long) {
            return args.get(i + 1).cloned();
        }
        if !long.is_empty()
            && let Some(v) = a.strip_prefix(long).and_then(|r| r.strip_prefix('='))
        {
            return Some(retext(w, v));
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
fn tar(args: &[Word], push: &mut impl FnMut(&Word, String)) {
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
            for ch in c.chars() {
                match ch {
                    'f' => {
                        file = args.get(i).cloned();
                        i += 1;
                    }
                    'C' => {
                        dir = args.get(i).cloned();
                        i += 1;
                    }
                    other => modes.push(other),
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
        push(f, format!("tar -f {}", f.text()));
    }
    if modes.contains('x')
        && let Some(d) = &dir
    {
        push(d, format!("tar -C {}", d.text()));
    }
}

impl ShellPolicy {
    /// A program's destination: refused outside the workspace and the session's temporary
    /// directory, into a device, a protected path or a prompt file, or when it is named only
    /// at run time; inside, nothing is added (the program's own verdict decides).
    pub(crate) fn judge_destination(&self, w: &Write, dirs: &[PathBuf], out: &mut Vec<Judgement>) {
        let how = quote_capped(&w.how);
        let deny = |reason: String| firm(Verdict::Deny, reason);
        let target = match &w.target {
            Word::Lit { text, glob: false } => text.as_str(),
            Word::Lit { text, glob: true } => {
                if let Some(why) = self.glob_destination(text, dirs) {
                    out.push(deny(format!("{how} {why}")));
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
        for dir in dirs {
            let reason = match self.place(dir, target) {
                Place::Sink | Place::Temp => continue,
                Place::Inside(rel) => match crate::protected_match(&self.protected, &rel) {
                    Some(hit) => format!(
                        "{how} writes {}, which is protected (`{}`)",
                        dsh_core::quote_capped_path(&rel),
                        hit.as_str()
                    ),
                    None => continue,
                },
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

    /// Why a glob destination may reach what a named one could not, or `None`.
    fn glob_destination(&self, pattern: &str, dirs: &[PathBuf]) -> Option<String> {
        let given = Path::new(pattern);
        if given.is_absolute()
            || pattern.starts_with('~')
            || given.components().any(|c| c == Component::ParentDir)
        {
            return Some(format!(
                "names files by a pattern ({}) that may lead outside the workspace",
                quote_capped(pattern)
            ));
        }
        for dir in dirs {
            let full: Vec<String> = dir
                .components()
                .chain(given.components())
                .filter(|c| *c != Component::CurDir)
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            for p in &self.protected {
                let anchor: Vec<&str> = p
                    .as_str()
                    .split('/')
                    .take_while(|c| !c.contains(['*', '?', '[', '{']))
                    .collect();
                let reaches = anchor.is_empty()
                    || full
                        .iter()
                        .zip(&anchor)
                        .all(|(g, a)| component_matches(g, &a.to_ascii_lowercase()));
                if reaches {
                    return Some(format!(
                        "names files by a pattern ({}) that may match the protected `{}`; name the files",
                        quote_capped(pattern),
                        p.as_str()
                    ));
                }
            }
        }
        None
    }
}

/// Whether the shell pattern component `glob` may match `name` (compared case-folded):
/// `*` and `?` as bash reads them, a bracket class or a brace as any one character or more.
fn component_matches(glob: &str, name: &str) -> bool {
    let glob = glob.to_ascii_lowercase();
    if glob.contains(['[', '{']) {
        // Classes and braces: any name that the rest could reach; be conservative.
        return !name.starts_with('.') || glob.starts_with('.') || glob.starts_with('[');
    }
    fn matches(g: &[u8], n: &[u8]) -> bool {
        match (g.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => matches(&g[1..], n) || (!n.is_empty() && matches(g, &n[1..])),
            (Some(b'?'), Some(_)) => matches(&g[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => matches(&g[1..], &n[1..]),
            _ => false,
        }
    }
    // Without dotglob a leading `*` or `?` never matches a leading dot.
    if name.starts_with('.') && !glob.starts_with('.') {
        return false;
    }
    matches(glob.as_bytes(), name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(line: &str) -> Vec<Word> {
        line.split_whitespace().map(Word::lit).collect()
    }

    fn targets(line: &str) -> Vec<String> {
        let words = lits(line);
        destinations(words[0].text(), &words[1..])
            .into_iter()
            .map(|w| w.target.text().to_owned())
            .collect()
    }

    #[test]
    fn each_program_names_what_it_writes() {
        assert_eq!(targets("cp a b dest"), ["dest"]);
        assert_eq!(targets("cp -t dir a b"), ["dir"]);
        assert_eq!(targets("cp --target-directory=dir a"), ["dir"]);
        assert_eq!(targets("mv a b"), ["a", "b"]);
        assert_eq!(targets("install -m 755 a /usr/bin/a"), ["/usr/bin/a"]);
        assert_eq!(targets("install -d x y"), ["x", "y"]);
        assert_eq!(targets("ln -s a b"), ["b"]);
        assert_eq!(targets("rm -rf x y"), ["x", "y"]);
        assert_eq!(targets("mkdir -p -m 700 d"), ["d"]);
        assert_eq!(targets("touch -r ref f"), ["f"]);
        assert_eq!(targets("chmod 600 f"), ["f"]);
        assert_eq!(targets("chmod --reference=r f"), ["f"]);
        assert_eq!(targets("sed -i s/a/b/ f g"), ["f", "g"]);
        assert_eq!(targets("sed -n -e p -i f"), ["f"]);
        assert_eq!(targets("dd if=a of=b"), ["b"]);
        assert_eq!(targets("tar xzf a.tgz -C out"), ["out"]);
        assert_eq!(targets("tar -czf out.tgz src"), ["out.tgz"]);
        assert_eq!(targets("tar --extract --file=a --directory=d"), ["d"]);
        assert_eq!(targets("unzip a.zip -d out"), ["out"]);
        assert_eq!(targets("patch -p1 -o out f"), ["out", "f"]);
        assert_eq!(targets("find build -name x -delete"), ["build"]);
        assert!(targets("cat a b").is_empty());
    }

    #[test]
    fn glob_components_match_as_bash_does_without_dotglob() {
        assert!(component_matches(".g*", ".git"));
        assert!(component_matches("*.md", "agents.md"));
        assert!(!component_matches("*", ".git"));
        assert!(!component_matches("*.rs", "agents.md"));
        assert!(component_matches("?gents.md", "agents.md"));
        assert!(component_matches(".[a-z]*", ".git"));
    }
}
