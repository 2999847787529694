//! Judging a parsed line: its findings, writes and assignments, then every command — doors
//! and the Python audit first (no rule lifts them), then a matching rule, else the lists.

use std::path::{Path, PathBuf};

use dsh_core::{quote_capped, quote_capped_path};

use super::commands::{self, Wrapped};
use super::destinations;
use super::free::NotFree;
use super::parse::{self, Parsed};
use super::places::{Place, from, lexical};
use super::words::{Word, short};
use super::{
    Decision, Judgement, MAX_DEPTH, MAX_LINE_BYTES, ShellPolicy, rule_matches, suspicious_char,
};
use dsh_core::Rule;

/// Where a command runs and how it was reached.
#[derive(Clone, Copy)]
pub(crate) struct At<'a> {
    /// Every directory it may run in (workspace-relative).
    pub dirs: &'a [PathBuf],
    /// How deep in `bash -c` and wrappers.
    pub depth: usize,
    /// Reached as a wrapper's payload (`env cd x`, `command cd x`).
    pub payload: bool,
}

/// An assignment a command runs with: in front of it, under `env`, or earlier on the line.
pub(crate) type Env<'a> = [(&'a str, &'a Word)];

fn structural(decision: Decision, reason: String) -> Judgement {
    Judgement {
        decision,
        by_rule: true,
        firm: false,
        reads_only: false,
        auto_liftable: false,
        reason,
    }
}

/// A structural decision no rule lifts.
pub(crate) fn firm(decision: Decision, reason: String) -> Judgement {
    Judgement {
        decision,
        by_rule: true,
        firm: true,
        reads_only: false,
        auto_liftable: false,
        reason,
    }
}

impl ShellPolicy {
    pub(crate) fn judge_line(
        &self,
        line: &str,
        start: &[PathBuf],
        depth: usize,
        out: &mut Vec<Judgement>,
    ) {
        let mut refuse = |reason: String| out.push(firm(Decision::Deny, reason));
        if line.len() > MAX_LINE_BYTES {
            return refuse(format!(
                "the line is {} bytes long; lines over {MAX_LINE_BYTES} bytes are refused (write a script file and ask to run it)",
                line.len()
            ));
        }
        if let Some(c) = line.chars().find(|&c| suspicious_char(c)) {
            return refuse(format!(
                "the line holds the control or invisible character U+{:04X}, which is refused",
                u32::from(c)
            ));
        }
        if line.trim().is_empty() {
            return refuse("the line is empty".to_owned());
        }
        let tmpdir = self.temp_dir.as_deref().and_then(Path::to_str);
        let cd = |from: &Path, args: &[Word]| self.cd(from, args);
        let parsed = match parse::parse(line, start.to_vec(), tmpdir, &cd) {
            Ok(p) => p,
            Err(why) => return refuse(format!("`{}`: {why}", short(line))),
        };
        if parsed.commands.len() > self.max_commands {
            return refuse(format!(
                "the line runs {} commands; more than {} are refused",
                parsed.commands.len(),
                self.max_commands
            ));
        }
        let literal_commands: Vec<Vec<Option<&str>>> = parsed
            .commands
            .iter()
            .map(|c| c.words.iter().map(Word::literal).collect())
            .collect();
        if let Some(why) = crate::python::hidden_context(line, &literal_commands) {
            return refuse(why);
        }
        for f in &parsed.findings {
            out.push(firm(f.decision, f.reason.clone()));
        }
        self.judge_expansions(&parsed, out);
        for r in &parsed.redirects {
            self.judge_redirect(r, &parsed.dirs[r.dirs], out);
        }
        self.judge_read_rules(&parsed, out);
        // Assignments on their own hold for the rest of the line.
        let line_env: Vec<(&str, &Word)> = parsed
            .assigns
            .iter()
            .map(|(a, _)| (a.name.as_str(), &a.value))
            .collect();
        for (a, dirs) in &parsed.assigns {
            self.judge_assignment(&a.name, &a.value, &a.text, &parsed.dirs[*dirs], out);
        }
        for c in &parsed.commands {
            let dirs = &parsed.dirs[c.dirs];
            for a in &c.assigns {
                self.judge_assignment(&a.name, &a.value, &a.text, dirs, out);
            }
            let mut env = line_env.clone();
            env.extend(c.assigns.iter().map(|a| (a.name.as_str(), &a.value)));
            let at = At {
                dirs,
                depth,
                payload: false,
            };
            self.judge_command(&c.words, &env, at, out);
        }
    }

    /// Expansions of a variable dsh passes to commands whose name looks like a credential.
    fn judge_expansions(&self, parsed: &Parsed, out: &mut Vec<Judgement>) {
        for (name, text) in &parsed.expanded {
            if self.pass_env.iter().any(|p| p == name) && looks_like_credential(name) {
                out.push(firm(
                    Decision::Ask,
                    format!(
                        "{text} expands {name}, which dsh passes to commands (`shell.pass_env`) and whose name looks like a credential; its value would reach the command's output",
                        text = quote_capped(text),
                        name = quote_capped(name)
                    ),
                ));
            }
        }
    }

    /// Where `cd ARGS` leads from `from`: a directory inside the workspace that is not
    /// protected and is reached without a symlink; anything else is refused.
    pub(crate) fn cd(&self, from: &Path, args: &[Word]) -> Result<PathBuf, String> {
        let mut rest = args;
        while let Some(flag) = rest.first().and_then(Word::exact) {
            match flag {
                "-L" | "-P" => rest = &rest[1..],
                "--" => {
                    rest = &rest[1..];
                    break;
                }
                "-" => break,
                f if f.starts_with('-') => {
                    return Err(format!(
                        "{quoted} is an option the policy does not follow",
                        quoted = quote_capped(&format!("cd {f}"))
                    ));
                }
                _ => break,
            }
        }
        let dir = match rest {
            [] => {
                return Err(
                    "`cd` alone goes to the home directory, outside the workspace".to_owned(),
                );
            }
            [one] => one,
            _ => return Err("`cd` is given more than one directory".to_owned()),
        };
        let Some(target) = dir.exact() else {
            return Err(format!(
                "{} goes to a directory named at run time, which the policy cannot follow",
                quote_capped(&format!("cd {}", dir.text()))
            ));
        };
        if target == "-" {
            return Err("`cd -` goes back to a directory the policy does not follow".to_owned());
        }
        match self.place(from, target) {
            Place::Inside(rel) => {
                let lexical_rel = lexical(&from.join(target));
                if !Path::new(target).is_absolute() && lexical_rel != rel {
                    return Err(format!(
                        "{quoted}{} passes through a symlink (it leads to {}), so bash's directory and the real one differ",
                        super::places::from(from),
                        quote_capped_path(&rel),
                        quoted = quote_capped(&format!("cd {target}"))
                    ));
                }
                if let Some(why) = self.protected_place(&rel) {
                    return Err(format!(
                        "{quoted} enters {}, {why}",
                        quote_capped_path(&rel),
                        quoted = quote_capped(&format!("cd {target}"))
                    ));
                }
                Ok(rel)
            }
            Place::Unknown(why) => Err(format!(
                "{quoted} cannot be checked: {why}",
                quoted = quote_capped(&format!("cd {target}"))
            )),
            _ => Err(format!(
                "{quoted}{} leaves the workspace",
                super::places::from(from),
                quoted = quote_capped(&format!("cd {target}"))
            )),
        }
    }

    /// One command: the structural checks no rule lifts, then a matching rule, else the lists.
    pub(crate) fn judge_command(
        &self,
        words: &[Word],
        env: &Env<'_>,
        at: At<'_>,
        out: &mut Vec<Judgement>,
    ) {
        if words.is_empty() {
            return;
        }
        let text = short(&words.iter().map(Word::text).collect::<Vec<_>>().join(" "));
        if words[0].exact() == Some("unset")
            && let Some(why) = words[1..]
                .iter()
                .find_map(|w| super::assign::unset_refusal(w.text()))
        {
            return out.push(firm(
                Decision::Deny,
                format!("{text}: {why}", text = quote_capped(&text)),
            ));
        }
        // Running as another user, or with a dangerous variable: no rule lifts it.
        if let Wrapped::Deny(why) = commands::unwrap(words) {
            return out.push(firm(Decision::Deny, why));
        }
        // Programs that run other programs from their configuration or flags.
        let before = out.len();
        self.judge_doors(words, at.dirs, out);
        let door_denied = out[before..].iter().any(|j| j.decision == Decision::Deny);
        // Python: the script or `-c` code is audited first; a refusal holds whatever the
        // rules say, a pass leaves the decision to them and the lists (see `crate::python`).
        if let Some(name) = words[0].exact()
            && crate::python::is_python(name)
        {
            if let Some(as_program) = self.judge_python(words, env, at, &text, out) {
                let (program, rest) = as_program;
                let mut rewritten = vec![Word::lit(program)];
                rewritten.extend(words[rest..].iter().cloned());
                return self.judge_command(&rewritten, env, at, out);
            }
            if out[before..].iter().any(|j| j.decision == Decision::Deny) {
                return;
            }
        }
        if door_denied {
            return;
        }
        let mut defaults = Vec::new();
        self.judge_default(words, &text, env, at, &mut defaults);
        let default = defaults
            .iter()
            .map(|j| j.decision)
            .max()
            .unwrap_or(Decision::Allow);
        // Matching rules, less those from an untrusted project that would loosen; then the
        // ones a person added while the session runs.
        let added = self.added.rules();
        let matching: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| !(r.rule.tighten_only() && r.rule.decision < default))
            .chain(added.iter().filter(|r| r.rule.tool == "run_shell"))
            .map(|r| &r.rule)
            .filter(|r| rule_matches(r, words))
            .collect();
        let strictest = matching.iter().max_by_key(|r| r.decision);
        match strictest {
            Some(rule) => {
                let decision = rule.decision;
                let did = match decision {
                    Decision::Allow => "allowed",
                    Decision::Ask => "asks",
                    Decision::Deny => "denied",
                };
                // An allow rule on a command the lists know only reads keeps it in the
                // read-only sandbox; on anything else it clears writing.
                let reads_only = !defaults.is_empty() && defaults.iter().all(|j| j.reads_only);
                out.push(Judgement {
                    decision,
                    by_rule: true,
                    firm: false,
                    reads_only,
                    // A configured ask rule is the team's: `auto` never lifts it.
                    auto_liftable: false,
                    reason: format!(
                        "{text} {did} by rule `{}` from {}",
                        rule,
                        rule.origin,
                        text = quote_capped(&text)
                    ),
                });
                // A rule on a wrapper (`env *`) lifts neither an audit refusal of its payload
                // nor a structural refusal inside it.
                out.extend(defaults.into_iter().filter(|j| j.firm));
            }
            None => out.extend(defaults),
        }
    }

    /// The Python audit of an interpreter command, from every directory it may run in.
    /// `Some((program, from))` when it is to be judged as another program (`python -m pytest`).
    fn judge_python(
        &self,
        words: &[Word],
        env: &Env<'_>,
        at: At<'_>,
        text: &str,
        out: &mut Vec<Judgement>,
    ) -> Option<(&'static str, usize)> {
        let literals: Vec<Option<&str>> = words.iter().map(Word::exact).collect();
        for dir in at.dirs {
            let path = self.python_path(dir, env);
            let decision = crate::python::judge(&self.workspace, dir, &literals, &path)?;
            let tag = crate::python::TAG;
            match decision {
                crate::python::AuditOutcome::Passed(note) => out.push(Judgement {
                    decision: Decision::Allow,
                    by_rule: false,
                    firm: false,
                    reads_only: false,
                    auto_liftable: false,
                    reason: format!(
                        "{tag}{text}{}: {note}",
                        from(dir),
                        text = quote_capped(text)
                    ),
                }),
                crate::python::AuditOutcome::Refused(why) => out.push(firm(
                    Decision::Deny,
                    format!("{tag}{text}{}: {why}", from(dir), text = quote_capped(text)),
                )),
                crate::python::AuditOutcome::AsProgram { program, from } => {
                    return Some((program, from));
                }
            }
        }
        None
    }

    /// What the default lists (and the structure of the command) say.
    fn judge_default(
        &self,
        words: &[Word],
        text: &str,
        env: &Env<'_>,
        at: At<'_>,
        out: &mut Vec<Judgement>,
    ) {
        let Some(name) = words[0].literal() else {
            out.push(structural(
                Decision::Deny,
                format!(
                    "{text}: the command name is computed at run time, so it cannot be checked",
                    text = quote_capped(text)
                ),
            ));
            return;
        };
        match commands::unwrap(words) {
            Wrapped::Deny(why) => return out.push(firm(Decision::Deny, why)),
            Wrapped::Ask(why) => return out.push(structural(Decision::Ask, why)),
            Wrapped::Shell(script) => {
                let Some(script) = script.exact() else {
                    return out.push(structural(
                        Decision::Deny,
                        format!(
                            "{text} runs a string computed at run time",
                            text = quote_capped(text)
                        ),
                    ));
                };
                if at.depth >= MAX_DEPTH {
                    return out.push(structural(
                        Decision::Deny,
                        format!(
                            "{text} nests shells too deeply to follow",
                            text = quote_capped(text)
                        ),
                    ));
                }
                return self.judge_line(script, at.dirs, at.depth + 1, out);
            }
            Wrapped::Runs {
                payload,
                ask_note,
                assigns,
            } => {
                let mut inner_env = env.to_vec();
                for (name, value, written) in &assigns {
                    self.judge_assignment(name, value, &format!("env {written}"), at.dirs, out);
                    inner_env.push((name.as_str(), value));
                }
                let start = out.len();
                let inner = At {
                    depth: at.depth + 1,
                    payload: true,
                    ..at
                };
                self.judge_command(payload, &inner_env, inner, out);
                // xargs appends operands from its input: where the payload writes through its
                // operands, those destinations are named only at run time.
                if ask_note.is_some()
                    && let Some(program) = payload.first().and_then(Word::literal)
                {
                    let mut with_input = payload[1..].to_vec();
                    with_input.push(Word::Dyn("(xargs input)".to_owned()));
                    for d in destinations::destinations(program, &with_input, false) {
                        self.judge_destination(&d, at.dirs, out);
                    }
                }
                // A payload that only reads runs free in the read-only sandbox whatever
                // arguments the input adds: there they can neither write nor leak.
                let free = out[start..]
                    .iter()
                    .all(|j| j.decision == Decision::Allow && j.reads_only);
                let note = match ask_note {
                    Some(_) if free && self.read_only_sandbox().is_ok() => None,
                    other => other,
                };
                if let Some(note) = note {
                    for j in &mut out[start..] {
                        if j.decision == Decision::Allow {
                            j.decision = Decision::Ask;
                            j.by_rule = true;
                            j.firm = false;
                            j.reads_only = false;
                            j.reason = format!("{text}: {note}", text = quote_capped(text));
                        }
                    }
                }
                return;
            }
            Wrapped::No => {}
        }
        if name == "cd" {
            // Its checks ran during the walk, where the directory it sets is followed.
            return out.push(if at.payload {
                firm(
                    Decision::Deny,
                    format!(
                        "{text}: `cd` under a wrapper changes directory in a way the policy does not follow",
                        text = quote_capped(text)
                    ),
                )
            } else {
                Judgement {
                    decision: Decision::Allow,
                    by_rule: false,
                    firm: false,
                    reads_only: true,
                    auto_liftable: false,
                    reason: format!(
                        "{text} changes directory inside the workspace",
                        text = quote_capped(text)
                    ),
                }
            });
        }
        if matches!(name, "pushd" | "popd") {
            return out.push(structural(
                Decision::Deny,
                format!(
                    "{text}: `{name}` keeps a directory stack the policy does not follow; use `cd DIR &&`",
                    text = quote_capped(text)
                ),
            ));
        }
        if matches!(name, "eval" | "source" | ".") {
            return out.push(structural(
                Decision::Deny,
                format!(
                    "{text}: {name} runs code the policy cannot see; allow it with a rule",
                    text = quote_capped(text),
                    name = quote_capped(name)
                ),
            ));
        }
        if let Some(why) = commands::other_shell(name) {
            return out.push(Judgement {
                decision: Decision::Deny,
                by_rule: false,
                firm: false,
                reads_only: false,
                auto_liftable: false,
                reason: format!("{text}: {why}", text = quote_capped(text)),
            });
        }
        // `printenv NAME`, or the whole environment, shows what `$NAME` would.
        if matches!(name, "printenv" | "env")
            && let Some(secret) = self.pass_env.iter().find(|p| {
                looks_like_credential(p)
                    && (words.len() == 1 || words[1..].iter().any(|w| w.literal() == Some(p)))
            })
        {
            out.push(firm(
                Decision::Ask,
                format!(
                    "{text} prints {secret}, which dsh passes to commands (`shell.pass_env`) and whose name looks like a credential",
                    text = quote_capped(text),
                    secret = quote_capped(secret)
                ),
            ));
        }
        // What it writes through its operands, whatever list it is on.
        let free_listed = self.lists.safe.iter().any(|s| s == name);
        for d in destinations::destinations(name, &words[1..], !free_listed) {
            self.judge_destination(&d, at.dirs, out);
        }
        if commands::network_client(name) {
            return out.push(if self.network == super::NetworkVote::Refused {
                firm(
                    Decision::Deny,
                    format!(
                        "{text}: {name} is a network client, and commands have no network here (`sandbox.allow_network` in your user configuration lifts that)",
                        text = quote_capped(text),
                        name = quote_capped(name)
                    ),
                )
            } else {
                structural(
                    Decision::Ask,
                    format!(
                        "{text}: {name} is a network client",
                        text = quote_capped(text),
                        name = quote_capped(name)
                    ),
                )
            });
        }
        let origin = &self.lists.origin;
        let safe = self.lists.safe.iter().any(|s| s == name);
        let confirm = self.lists.confirm.iter().any(|s| s == name);
        if safe || confirm {
            // A destructive mode of a listed program is judged as the program it acts as:
            // one on no list.
            if let Some(why) = commands::acts_as_unlisted(name, &words[1..]) {
                return out.push(
                    self.unlisted(name, format!("{text}: {why}", text = quote_capped(text))),
                );
            }
            // git's output flags are judged with its doors, from its `-C` directory.
            if name != "git" {
                for w in commands::output_files(name, &words[1..]) {
                    self.judge_write(&w, at.dirs, out);
                }
            }
        }
        if safe {
            match self.free_pass(name, &words[1..], at, out) {
                Ok(()) => out.push(Judgement {
                    decision: Decision::Allow,
                    by_rule: false,
                    firm: false,
                    reads_only: true,
                    auto_liftable: false,
                    reason: format!(
                        "{text} is on the safe list ({origin}) and only reads",
                        text = quote_capped(text)
                    ),
                }),
                Err(NotFree::Structural(why)) => out.push(structural(
                    Decision::Ask,
                    format!("{text}: {why}", text = quote_capped(text)),
                )),
                Err(NotFree::Listed(why)) => out.push(listed(
                    Decision::Ask,
                    name,
                    format!("{text}: {why}, so it asks", text = quote_capped(text)),
                )),
            }
        } else if confirm {
            out.push(listed(
                Decision::Ask,
                name,
                format!(
                    "{text} is on the confirm list ({origin})",
                    text = quote_capped(text)
                ),
            ));
            if name == "find" {
                // Its `-exec` payloads are still judged.
                let _ = self.find_pass(&words[1..], at, out);
            }
        } else {
            out.push(self.unlisted(
                name,
                format!(
                    "{text} is not on the read-only or confirm lists ({origin})",
                    text = quote_capped(text)
                ),
            ));
        }
    }

    /// A program on no list: asks (a rule may lift it) or, under `[shell] unlisted =
    /// "deny"`, is refused.
    fn unlisted(&self, name: &str, why: String) -> Judgement {
        let (decision, how) = match self.lists.unlisted {
            dsh_core::Unlisted::Ask => (Decision::Ask, "so it asks"),
            dsh_core::Unlisted::Deny => (
                Decision::Deny,
                "and `[shell] unlisted = \"deny\"` refuses such programs",
            ),
        };
        listed(decision, name, format!("{why}, {how}"))
    }
}

/// What the lists say of `name` (a confirm-list program, one on no list, or a read-only one
/// used in a way that does not read): an ask `auto` may lift, unless the program always asks
/// ([`commands::always_asks`]) or is git. auto's sandbox keeps `.git` read-only, so git
/// doing anything but read would be allowed there only to fail: it keeps asking, saying so.
fn listed(decision: Decision, name: &str, reason: String) -> Judgement {
    let git = name.rsplit('/').next() == Some("git");
    Judgement {
        decision,
        by_rule: false,
        firm: false,
        reads_only: false,
        auto_liftable: !commands::always_asks(name) && !git,
        reason: if git && decision == Decision::Ask {
            format!(
                "{reason}; auto mode never writes `.git` (its sandbox keeps it read-only), so git beyond its reading subcommands asks there too"
            )
        } else {
            reason
        },
    }
}

/// Whether a variable's name looks like it holds a credential.
pub(crate) fn looks_like_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"]
        .iter()
        .any(|w| upper.contains(w))
}
