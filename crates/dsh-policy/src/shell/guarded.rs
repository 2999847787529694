//! What a shell write may not reach freely: the protected paths, refused whatever the rules,
//! the lists or a person say, and the file tools' `deny`/`ask` path rules
//! (`deny write_file(migrations/**)`, `ask edit_file(migrations/**)`), which a command's write
//! meets as the file tools' writes do — refused, or asked at tier `Rule` in every mode, so no
//! allow rule lifts the ask and `auto` does not either. Without them `cp x migrations/001.sql`
//! would be a way around a rule the file tools keep.
//!
//! A write is matched on its resolved path: the path itself or what lies beneath it (`mv .git
//! x` writes `.git/**`), for a tree a kept path that exists beneath it (`rm -rf .` holds
//! `.git`), and for a glob every kept path its names may match. A protected name that is a
//! symlink is protected where it leads too (`crate::linked`): with `AGENTS.md ->
//! docs/agents.md`, `docs/agents.md` is refused as `AGENTS.md` is. Protected paths are
//! compared as a folding file system resolves names ([`crate::protected_match`]); rules as
//! the file tools compare them, exactly.

use std::path::{Component, Path, PathBuf};

use dsh_core::{quote_capped, quote_capped_path};

use super::destinations::Reach;
use super::judge::firm;
use super::{Decision, Judgement, ShellPolicy};
use crate::glob::PathPattern;
use crate::rules::Matcher;

/// What keeps a path from shell writes.
#[derive(Clone, Copy)]
enum Keeper<'a> {
    /// A protected path: every write is refused.
    Protected(&'a PathPattern),
    /// A file tool's `deny` or `ask` path rule: a write is refused or asked.
    Rule(&'a Matcher),
}

impl<'a> Keeper<'a> {
    fn decision(self) -> Decision {
        match self {
            Keeper::Protected(_) => Decision::Deny,
            Keeper::Rule(r) => r.rule.decision,
        }
    }

    fn pattern(self) -> &'a str {
        match self {
            Keeper::Protected(p) => p.as_str(),
            Keeper::Rule(r) => r.rule.specifier.as_deref().unwrap_or_default(),
        }
    }

    /// Whether it keeps `rel` itself or what lies beneath it.
    fn holds(self, rel: &Path) -> bool {
        let matches = |p: &Path| match self {
            Keeper::Protected(pattern) => {
                crate::protected_match(std::slice::from_ref(pattern), p).is_some()
            }
            Keeper::Rule(r) => r.path_matches(p),
        };
        matches(rel) || matches(&rel.join("x"))
    }

    /// What it says of a path it keeps, after "which".
    fn says(self) -> String {
        match self {
            Keeper::Protected(p) => format!("is protected (`{}`)", p.as_str()),
            Keeper::Rule(r) => format!(
                "{} rule `{}` from {} governs for dsh's file tools, so a shell command's write {} too",
                r.rule.decision.as_str(),
                r.rule,
                r.rule.origin,
                if r.rule.decision == Decision::Deny {
                    "is refused"
                } else {
                    "asks"
                }
            ),
        }
    }
}

/// A keeper, with where its name really leads when that name is a symlink.
struct Held<'a> {
    keeper: Keeper<'a>,
    link: Option<Link>,
}

/// A protected name that is a symlink inside the workspace (`AGENTS.md`), and where it
/// leads (`docs/agents.md`).
struct Link {
    named: PathBuf,
    real: PathBuf,
}

impl Held<'_> {
    /// Whether it keeps `rel` (resolved, workspace-relative), named or where its link leads:
    /// the words after "writes `rel`, ".
    fn holds(&self, rel: &Path) -> Option<String> {
        if self.keeper.holds(rel) {
            return Some(format!("which {}", self.keeper.says()));
        }
        let link = self.link.as_ref()?;
        let rest = crate::linked::beneath(rel, &link.real)?;
        let as_named = if rest.as_os_str().is_empty() {
            link.named.clone()
        } else {
            link.named.join(rest)
        };
        self.keeper.holds(&as_named).then(|| {
            format!(
                "where {} leads, which {}",
                quote_capped_path(&link.named),
                self.keeper.says()
            )
        })
    }

    /// Its pattern's literal leading names, as written and where its link leads, and
    /// whether the pattern goes on beneath them.
    fn anchors(&self) -> (Vec<PathBuf>, bool) {
        let (named, beyond) = anchor(self.keeper.pattern());
        let named: PathBuf = named.iter().collect();
        let real = self.link.as_ref().map(|l| l.real.clone());
        (std::iter::once(named).chain(real).collect(), beyond)
    }
}

/// A write a keeper stops, and why (the words after how it was written).
pub(crate) struct Kept {
    pub decision: Decision,
    pub why: String,
}

impl Kept {
    /// The judgement on the write made as `how` (quoted): firm, so no rule lifts it and
    /// `auto` neither.
    pub(crate) fn judgement(&self, how: &str) -> Judgement {
        firm(self.decision, format!("{how} {}", self.why))
    }
}

impl ShellPolicy {
    /// Everything that keeps paths from shell writes, strictest first: protected paths (each
    /// with where its name leads, looked up now), deny rules, ask rules.
    fn keepers(&self) -> Vec<Held<'_>> {
        let rules = |kind| {
            self.write_rules
                .iter()
                .filter(move |r| r.rule.decision == kind)
                .map(|r| Held {
                    keeper: Keeper::Rule(r),
                    link: None,
                })
        };
        self.protected
            .iter()
            .map(|p| Held {
                keeper: Keeper::Protected(p),
                link: self.link(p),
            })
            .chain(rules(Decision::Deny))
            .chain(rules(Decision::Ask))
            .collect()
    }

    /// Where a protected pattern's literal name leads, when it is a symlink inside the
    /// workspace.
    fn link(&self, pattern: &PathPattern) -> Option<Link> {
        let named: PathBuf = anchor(pattern.as_str()).0.iter().collect();
        if named.as_os_str().is_empty() {
            return None;
        }
        let real = crate::linked::real_rel(&self.workspace, &named)?;
        (real != named).then_some(Link { named, real })
    }

    /// What keeps a write to `rel` (resolved, workspace-relative) reached as `reach`, the
    /// strictest first: `rel` itself or what lies beneath it, or for a tree a kept path that
    /// exists beneath `rel`.
    pub(crate) fn kept_write(&self, rel: &Path, reach: Reach) -> Option<Kept> {
        for held in self.keepers() {
            let kept = |why: String| Kept {
                decision: held.keeper.decision(),
                why,
            };
            if let Some(how) = held.holds(rel) {
                return Some(kept(format!("writes {}, {how}", quote_capped_path(rel))));
            }
            if reach != Reach::Tree {
                continue;
            }
            let beneath = held.anchors().0.into_iter().find(|a| {
                !a.as_os_str().is_empty()
                    && crate::linked::beneath(a, rel).is_some()
                    && self.workspace.root().join(a).exists()
            });
            if let Some(anchor) = beneath {
                let place = if rel.as_os_str().is_empty() {
                    "the workspace".to_owned()
                } else {
                    quote_capped_path(rel)
                };
                let holding = match held.keeper {
                    Keeper::Protected(p) => format!(
                        "the protected {} (`{}`)",
                        quote_capped_path(&anchor),
                        p.as_str()
                    ),
                    Keeper::Rule(_) => format!(
                        "{}, which {}",
                        quote_capped_path(&anchor),
                        held.keeper.says()
                    ),
                };
                return Some(kept(format!(
                    "reaches everything beneath {place}, which holds {holding}; name what to remove"
                )));
            }
        }
        None
    }

    /// Why `cd` may not enter `rel`: a protected path keeps it or what lies beneath it (the
    /// words after "enters `rel`, ").
    pub(crate) fn protected_place(&self, rel: &Path) -> Option<String> {
        self.keepers()
            .iter()
            .filter(|h| matches!(h.keeper, Keeper::Protected(_)))
            .find_map(|h| h.holds(rel))
    }

    /// What a glob destination may reach that a named one could not: a place outside the
    /// workspace (refused), a protected path (refused) or a path a file tool's rule keeps
    /// (asked: the files are named only when it runs). `None` when it reaches none.
    pub(crate) fn kept_glob(&self, pattern: &str, dirs: &[PathBuf]) -> Option<Kept> {
        let given = Path::new(pattern);
        if given.is_absolute()
            || pattern.starts_with('~')
            || given.components().any(|c| c == Component::ParentDir)
        {
            return Some(Kept {
                decision: Decision::Deny,
                why: format!(
                    "names files by a pattern ({}) that may lead outside the workspace",
                    quote_capped(pattern)
                ),
            });
        }
        let keepers = self.keepers();
        for dir in dirs {
            let full: Vec<String> = names_of(&dir.join(given));
            for held in &keepers {
                let (anchors, beyond) = held.anchors();
                if !anchors
                    .iter()
                    .any(|a| glob_reaches(&full, &names_of(a), beyond))
                {
                    continue;
                }
                let shown = quote_capped(pattern);
                return Some(match held.keeper {
                    Keeper::Protected(p) => Kept {
                        decision: Decision::Deny,
                        why: format!(
                            "names files by a pattern ({shown}) that may match the protected `{}`; name the files",
                            p.as_str()
                        ),
                    },
                    Keeper::Rule(r) => Kept {
                        decision: Decision::Ask,
                        why: format!(
                            "names files by a pattern ({shown}) that may match what {} rule `{}` from {} governs for dsh's file tools; name the files",
                            r.rule.decision.as_str(),
                            r.rule,
                            r.rule.origin
                        ),
                    },
                });
            }
        }
        None
    }
}

/// A pattern's literal leading names (`.git` of `.git/**`, all of `AGENTS.md`), and whether
/// it goes on beneath them.
fn anchor(pattern: &str) -> (Vec<&str>, bool) {
    let parts: Vec<&str> = pattern
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let literal: Vec<&str> = parts
        .iter()
        .copied()
        .take_while(|c| !c.contains(['*', '?', '[', '{']))
        .collect();
    let beyond = parts.len() > literal.len();
    (literal, beyond)
}

/// A path's names, without `.` (`./src/*.rs` is `src`, `*.rs`).
fn names_of(path: &Path) -> Vec<String> {
    path.components()
        .filter(|c| *c != Component::CurDir)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect()
}

/// Whether the glob path `full` (shell pattern components) may reach the kept `anchor`: a
/// pattern without one may hold anything; a longer glob cannot reach into a file's anchor
/// (`*/x` and `AGENTS.md`), while one that is a prefix of it, or any glob beneath an anchor
/// the pattern goes on beneath, reaches what is there.
fn glob_reaches(full: &[String], anchor: &[String], beyond: bool) -> bool {
    anchor.is_empty()
        || ((full.len() <= anchor.len() || beyond)
            && full
                .iter()
                .zip(anchor)
                .all(|(g, a)| component_matches(g, &a.to_ascii_lowercase())))
}

/// Whether the shell pattern component `glob` may match `name` (compared case-folded):
/// `*`, `?` and bracket classes as bash reads them without `dotglob` (a leading dot is
/// matched only by a leading dot).
fn component_matches(glob: &str, name: &str) -> bool {
    let glob = glob.to_ascii_lowercase();
    if name.starts_with('.') && !glob.starts_with('.') {
        return false;
    }
    fn matches(g: &[u8], n: &[u8]) -> bool {
        match (g.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => matches(&g[1..], n) || (!n.is_empty() && matches(g, &n[1..])),
            (Some(b'?'), Some(_)) => matches(&g[1..], &n[1..]),
            (Some(b'['), Some(&c)) => match class(&g[1..], c) {
                Some((true, rest)) => matches(rest, &n[1..]),
                Some((false, _)) => false,
                // Not a class: a literal `[`.
                None => c == b'[' && matches(&g[1..], &n[1..]),
            },
            (Some(a), Some(b)) if a == b => matches(&g[1..], &n[1..]),
            _ => false,
        }
    }
    /// Whether `c` is in the class that starts `g` (after `[`), and what follows it.
    fn class(g: &[u8], c: u8) -> Option<(bool, &[u8])> {
        let (negate, body) = match g.first() {
            Some(b'!' | b'^') => (true, &g[1..]),
            _ => (false, g),
        };
        let end = body.iter().skip(1).position(|&b| b == b']')? + 1;
        let set = &body[..end];
        let mut hit = false;
        let mut i = 0;
        while i < set.len() {
            if i + 2 < set.len() && set[i + 1] == b'-' {
                hit |= (set[i]..=set[i + 2]).contains(&c);
                i += 3;
            } else {
                hit |= set[i] == c;
                i += 1;
            }
        }
        Some((hit != negate, &body[end + 1..]))
    }
    matches(glob.as_bytes(), name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_components_match_as_bash_does_without_dotglob() {
        assert!(component_matches(".g*", ".git"));
        assert!(component_matches("*.md", "agents.md"));
        assert!(!component_matches("*", ".git"));
        assert!(!component_matches("*.rs", "agents.md"));
        assert!(component_matches("?gents.md", "agents.md"));
        assert!(component_matches(".[a-z]*", ".git"));
        assert!(!component_matches(".[a-z]*cache", ".git"));
        assert!(!component_matches("[!.]*", ".git"));
        assert!(component_matches("[a-z]gents.md", "agents.md"));
    }

    #[test]
    fn an_anchor_is_the_literal_names_a_pattern_starts_with() {
        assert_eq!(anchor(".git/**"), (vec![".git"], true));
        assert_eq!(anchor("AGENTS.md"), (vec!["AGENTS.md"], false));
        assert_eq!(anchor("/migrations/"), (vec!["migrations"], false));
        assert_eq!(anchor("**/*.sql"), (vec![], true));
    }
}
