//! Where the paths a line names lead, judged from every directory the line may be in: inside
//! the workspace, in the session's temporary directory, outside, or a device. Writes that no
//! approval could make succeed are refused here, and the file tools' path rules and protected
//! paths are carried over to shell words.

use std::path::{Component, Path, PathBuf};

use dsh_core::{quote_capped, quote_capped_path};

use super::destinations::Reach;
use super::judge::firm;
use super::parse::{Parsed, Redirect};
use super::words::Word;
use super::{Decision, Judgement, ShellPolicy};

/// Where a path leads.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Inside the workspace: the resolved workspace-relative path.
    Inside(PathBuf),
    /// In the session's temporary directory.
    Temp,
    /// `/dev/null`, `/dev/stdout`, `/dev/stderr`: writing there writes no file.
    Sink,
    /// Any other device, `/dev/tcp/…` and `/dev/udp/…` included.
    Device,
    Outside,
    /// Cannot be resolved (a symlink loop, an I/O error): why.
    Unknown(String),
}

/// A file a command writes, by redirection or by an output flag.
pub(crate) struct Write {
    pub target: Word,
    /// How it was written, for messages (`> out`, `sort -o out`).
    pub how: String,
}

/// `path` with every symlink of its longest existing prefix resolved, the rest appended.
fn resolve_existing(path: &Path) -> PathBuf {
    let mut prefix = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = prefix.canonicalize() {
            return rest
                .iter()
                .rev()
                .fold(real, |p, c: &std::ffi::OsString| p.join(c));
        }
        match (prefix.file_name().map(|n| n.to_owned()), prefix.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                prefix = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// `path` with `.` and `..` applied, lexically.
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

impl ShellPolicy {
    /// Where `path`, named by a command running in `dir`, leads.
    pub(crate) fn place(&self, dir: &Path, path: &str) -> Place {
        if path.starts_with('~') {
            return Place::Outside;
        }
        let given = Path::new(path);
        if given.is_absolute() {
            let abs = lexical(given);
            if matches!(
                abs.to_str(),
                Some("/dev/null" | "/dev/stdout" | "/dev/stderr")
            ) {
                return Place::Sink;
            }
            if abs.starts_with("/dev") {
                return Place::Device;
            }
            if let Some(tmp) = &self.temp_dir
                && abs.starts_with(tmp)
            {
                // A symlink planted there (`ln -s WS/.git $TMPDIR/g`) may lead anywhere: the
                // path is judged where it really leads.
                let real = resolve_existing(&abs);
                let real_tmp = resolve_existing(tmp);
                if real.starts_with(&real_tmp) || real == abs {
                    return Place::Temp;
                }
                return match real.to_str().map(|r| self.workspace.resolve(r)) {
                    Some(Ok(p)) => Place::Inside(p.rel),
                    Some(Err(dsh_core::PathError::Outside { .. })) => Place::Outside,
                    Some(Err(e)) => Place::Unknown(e.to_string()),
                    None => Place::Unknown("the path is not UTF-8".to_owned()),
                };
            }
        }
        let joined = if given.is_absolute() || dir.as_os_str().is_empty() {
            path.to_owned()
        } else {
            dir.join(path).to_string_lossy().into_owned()
        };
        match self.workspace.resolve(&joined) {
            Ok(p) => Place::Inside(p.rel),
            Err(dsh_core::PathError::Outside { .. }) => Place::Outside,
            Err(e) => Place::Unknown(e.to_string()),
        }
    }

    /// The first directory of `dirs` from which `path` does not lead inside the workspace.
    pub(crate) fn outside_from<'d>(&self, dirs: &'d [PathBuf], path: &str) -> Option<&'d Path> {
        dirs.iter()
            .find(|dir| !matches!(self.place(dir, path), Place::Inside(_)))
            .map(PathBuf::as_path)
    }

    /// Ok when `path` resolves inside the workspace (or the session's temporary directory)
    /// from every directory in `dirs`.
    pub(crate) fn path_inside(&self, dirs: &[PathBuf], path: &str) -> Result<(), String> {
        if path.is_empty() || path == "{}" {
            return Ok(());
        }
        if path.contains('{') {
            return Err(format!(
                "{path} may be a brace expansion, so the files it names cannot be checked",
                path = quote_capped(path)
            ));
        }
        for dir in dirs {
            match self.place(dir, path) {
                Place::Inside(_) | Place::Temp | Place::Sink => {}
                Place::Outside | Place::Device => {
                    return Err(format!(
                        "{path} is outside the workspace{}",
                        from(dir),
                        path = quote_capped(path)
                    ));
                }
                Place::Unknown(why) => {
                    return Err(format!(
                        "{path} cannot be checked: {why}",
                        path = quote_capped(path)
                    ));
                }
            }
        }
        Ok(())
    }

    /// A file write (redirection or output flag): outside the workspace and the session's
    /// temporary directory, into a device, or to a place named at run time → deny; into a
    /// protected path or one a file tool's deny rule keeps → deny; one a file tool's ask rule
    /// keeps → ask at tier `Rule`, never lifted (`guarded.rs`); anywhere else → ask at tier
    /// `Rule` (the sandbox bounds what a person approves).
    pub(crate) fn judge_write(&self, w: &Write, dirs: &[PathBuf], out: &mut Vec<Judgement>) {
        let deny = |reason: String| firm(Decision::Deny, reason);
        let how = &w.how;
        let Some(target) = w.target.exact() else {
            let what = if w.target.literal().is_some() {
                "a pattern"
            } else {
                "a place named at run time"
            };
            return out.push(deny(format!(
                "{how} writes to {what} ({}), which cannot be checked; only `$TMPDIR` is known ahead of the run",
                quote_capped(w.target.text()),
                how = quote_capped(how)
            )));
        };
        let mut asks = false;
        // A file tool's ask rule on the path: asked so, and never lifted.
        let mut kept_ask = None;
        for dir in dirs {
            match self.place(dir, target) {
                Place::Sink => {}
                Place::Temp => asks = true,
                Place::Inside(rel) => match self.kept_write(&rel, Reach::Path) {
                    Some(kept) if kept.decision == Decision::Deny => {
                        return out.push(kept.judgement(&quote_capped(how)));
                    }
                    Some(kept) => kept_ask = kept_ask.or(Some(kept)),
                    None => asks = true,
                },
                Place::Device => {
                    return out.push(deny(format!(
                        "{how} writes to the device {target}; only /dev/null, /dev/stdout and /dev/stderr may be written",
                        how = quote_capped(how),
                        target = quote_capped(target)
                    )));
                }
                Place::Outside => {
                    return out.push(deny(format!(
                        "{how} writes {target}, outside the workspace and the session's temporary directory{}; the sandbox would refuse it, so no approval is asked",
                        from(dir),
                        how = quote_capped(how),
                        target = quote_capped(target)
                    )));
                }
                Place::Unknown(why) => {
                    return out.push(deny(format!(
                        "{how} writes {target}, which cannot be checked: {why}",
                        how = quote_capped(how),
                        target = quote_capped(target)
                    )));
                }
            }
        }
        if let Some(kept) = kept_ask {
            out.push(kept.judgement(&quote_capped(how)));
        } else if asks {
            // A person approves it, or `auto` lifts it (its sandbox keeps protected paths).
            let mut j = firm(
                Decision::Ask,
                format!("{how} writes a file", how = quote_capped(how)),
            );
            j.auto_liftable = true;
            out.push(j);
        }
    }

    /// A redirection: writes as [`Self::judge_write`]; a read from outside the workspace asks.
    pub(crate) fn judge_redirect(&self, r: &Redirect, dirs: &[PathBuf], out: &mut Vec<Judgement>) {
        if r.write {
            let w = Write {
                target: r.target.clone(),
                how: r.text.clone(),
            };
            return self.judge_write(&w, dirs, out);
        }
        let ask = |reason: String| firm(Decision::Ask, reason);
        match r.target.exact() {
            None => out.push(ask(format!(
                "{} reads from a file named at run time",
                quote_capped(&r.text)
            ))),
            Some(target) => {
                if self.path_inside(dirs, target).is_err() {
                    out.push(ask(format!(
                        "{} reads from outside the workspace",
                        quote_capped(&r.text)
                    )));
                }
            }
        }
    }

    /// Paths the file tools' rules keep, named by any word or redirection of the line.
    pub(crate) fn judge_read_rules(&self, parsed: &Parsed, out: &mut Vec<Judgement>) {
        if self.read_rules.is_empty() {
            return;
        }
        let words = parsed
            .commands
            .iter()
            .flat_map(|c| c.words.iter().skip(1).map(move |w| (w, c.dirs)))
            .chain(parsed.redirects.iter().map(|r| (&r.target, r.dirs)));
        for (word, dirs) in words {
            let Word::Lit { text, glob } = word else {
                continue;
            };
            if *glob {
                out.push(firm(
                    Decision::Ask,
                    format!(
                        "{text} is a pattern that may expand to a file the permission rules keep from dsh's file tools",
                        text = quote_capped(text)
                    ),
                ));
                continue;
            }
            // `--file=PATH` names a path after the `=`.
            let candidates = [Some(text.as_str()), text.split_once('=').map(|(_, v)| v)];
            for candidate in candidates.into_iter().flatten() {
                if candidate.is_empty() || candidate.starts_with('-') {
                    continue;
                }
                for dir in &parsed.dirs[dirs] {
                    self.read_rule(dir, candidate, out);
                }
            }
        }
    }

    fn read_rule(&self, dir: &Path, candidate: &str, out: &mut Vec<Judgement>) {
        let Place::Inside(rel) = self.place(dir, candidate) else {
            return;
        };
        // Deny before ask: the strictest matching rule names the decision.
        let hit = [Decision::Deny, Decision::Ask]
            .into_iter()
            .find_map(|kind| {
                self.read_rules
                    .iter()
                    .find(|r| r.rule.decision == kind && r.path_matches(&rel))
            });
        if let Some(rule) = hit.map(|m| &m.rule) {
            out.push(firm(
                rule.decision,
                format!(
                    "{candidate}{} names {}, which {} rule `{}` from {} keeps from dsh's file tools; a shell command may not read it either",
                    from(dir),
                    quote_capped_path(&rel),
                    rule.decision.as_str(),
                    rule,
                    rule.origin,
                    candidate = quote_capped(candidate)
                ),
            ));
        }
    }
}

/// " (from `dir`)" for a directory other than the root, for messages.
pub(crate) fn from(dir: &Path) -> String {
    if dir.as_os_str().is_empty() {
        String::new()
    } else {
        format!(" (from {})", quote_capped_path(dir))
    }
}
