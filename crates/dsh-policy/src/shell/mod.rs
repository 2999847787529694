//! The shell policy (DESIGN §3): the one gate-1 voter that reads `run_shell` rules. It parses
//! the line with tree-sitter-bash and judges every command anywhere in it — pipelines, lists,
//! subshells, substitutions, heredocs, the payloads of wrappers (`env`, `timeout`, `xargs`,
//! `find -exec`, `bash -c`, …) — never the raw text.
//!
//! Each command's verdict is its matching rule's (deny > ask > allow among matching rules),
//! else the default lists': on the safe list and read-only by its flag table → allow; on the
//! confirm list → ask; anything else → deny. The line's verdict is the strictest command or
//! structural verdict, with tier `Rule` when any rule or structural check decided a part of
//! it, else `Default`.
//!
//! Structural checks, whatever the rules say: control characters, invisible or bidirectional
//! Unicode, lines over 16 KiB, more than 256 commands, a line that does not parse, and
//! assignments to `PATH`, `LD_PRELOAD`, `BASH_ENV`, … are refused; a redirection that writes a
//! file (other than `/dev/null`) asks at tier `Rule` (so no allow rule lifts it, inside the
//! workspace or out: the sandbox is the backstop for what a person approves); a redirection
//! that reads outside the workspace asks; a construct the policy does not know asks; `sudo`,
//! `su`, `doas` and `env PATH=…` are refused whatever the rules say.
//!
//! Python (`python script.py`, `python -c CODE`, any `pythonX.Y`) is audited first by
//! [`crate::python`]: a refusal is a `Rule` deny that no rule lifts (not even one that matches a
//! wrapper such as `env *`); a pass leaves the command to the rules and lists. A line that runs
//! Python after `cd`, under `env -C`/`-S` or with a `PYTHON*` assignment is refused.
//!
//! Rule matching: a rule's specifier is words, matched against a command's words after quote
//! removal. A trailing `*` (or `word:*`) matches any further words. Without it an `allow`
//! rule matches exactly those words, while a `deny` or `ask` rule matches any command that
//! starts with them (`deny run_shell(curl)` refuses `curl -s x`). A bare `run_shell` rule
//! matches every command. A word known only at run time, or holding a glob or a brace, may be
//! anything: it satisfies a `deny`/`ask` rule's word, never an `allow` rule's. A rule from an
//! untrusted project may only tighten a command's verdict.

mod commands;
mod parse;

use std::sync::Arc;

use dsh_core::{PolicyContext, PrePolicy, Tier, ToolCall, Vote, Workspace, async_trait};

use crate::rules::{Rule, RuleKind};
use commands::Wrapped;
use parse::{Word, short};

/// Lines longer than this are refused.
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Lines with more commands than this are refused.
pub const MAX_COMMANDS: usize = 256;
/// How deep `bash -c 'bash -c …'` is followed.
const MAX_DEPTH: usize = 4;

/// A verdict, ordered from loosest to strictest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Allow,
    Ask,
    Deny,
}

impl Verdict {
    fn from_rule(kind: RuleKind) -> Self {
        match kind {
            RuleKind::Allow => Verdict::Allow,
            RuleKind::Ask => Verdict::Ask,
            RuleKind::Deny => Verdict::Deny,
        }
    }
}

/// Whether `network: true` may be granted to a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NetworkVote {
    /// Refused: the call is denied (headless default, `--yolo` too).
    #[default]
    Refused,
    /// A person approves each such call: the call asks at tier `Rule`.
    Ask,
    /// The user's configuration grants it: no vote on the network.
    Granted,
}

/// The shell policy's configuration.
#[derive(Clone, Debug)]
pub struct ShellLists {
    /// Commands that run freely when their flags keep them read-only.
    pub safe: Vec<String>,
    /// Commands that ask.
    pub confirm: Vec<String>,
    /// Where the lists came from, for reasons (e.g. "configuration").
    pub origin: String,
}

impl Default for ShellLists {
    /// The seed's lists.
    fn default() -> Self {
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect();
        ShellLists {
            safe: words("ls cat head tail wc find grep tree pwd whoami date echo diff stat file"),
            confirm: words("python python3 pip pip3 pytest git make npm node"),
            origin: "the default lists".to_owned(),
        }
    }
}

/// One judged part of a line.
#[derive(Clone, Debug)]
pub struct Judgement {
    pub verdict: Verdict,
    /// Decided by a rule or a structural check (tier `Rule`), not the default lists.
    pub by_rule: bool,
    pub reason: String,
}

/// The decision on a whole line.
#[derive(Clone, Debug)]
pub struct Decision {
    pub verdict: Verdict,
    pub tier: Tier,
    pub reason: String,
    /// Every judged part, in the order found.
    pub parts: Vec<Judgement>,
}

impl Decision {
    pub fn vote(&self) -> Vote {
        match self.verdict {
            Verdict::Allow => Vote::allow(self.tier, self.reason.clone()),
            Verdict::Ask => Vote::ask(self.tier, self.reason.clone()),
            Verdict::Deny => Vote::deny(self.tier, self.reason.clone()),
        }
    }
}

/// A `run_shell` rule for the shell policy.
#[derive(Clone, Debug)]
pub struct ShellRule {
    pub rule: Rule,
    /// From an untrusted project: it may only tighten a command's verdict.
    pub tighten_only: bool,
}

impl ShellRule {
    pub fn new(rule: Rule, tighten_only: bool) -> Self {
        ShellRule { rule, tighten_only }
    }
}

/// The shell policy as a gate-1 listener (name `shell`).
#[derive(Clone, Debug)]
pub struct ShellPolicy {
    workspace: Arc<Workspace>,
    rules: Vec<ShellRule>,
    /// `deny`/`ask` rules of dsh's reading tools with a path pattern: a shell word naming such
    /// a path gets the same verdict, so `cat .env` is not a way around `deny read_file(.env)`.
    read_rules: Vec<Rule>,
    /// Protected paths: a redirection may never write them.
    protected: Vec<crate::PathPattern>,
    lists: ShellLists,
    network: NetworkVote,
    max_commands: usize,
}

impl ShellPolicy {
    /// `rules` may hold rules for any tool: only the `run_shell` ones are kept.
    pub fn new(
        workspace: Arc<Workspace>,
        rules: impl IntoIterator<Item = ShellRule>,
        lists: ShellLists,
        network: NetworkVote,
    ) -> Self {
        ShellPolicy {
            workspace,
            rules: rules
                .into_iter()
                .filter(|r| r.rule.tool == "run_shell")
                .collect(),
            lists,
            network,
            max_commands: MAX_COMMANDS,
            read_rules: Vec::new(),
            protected: Vec::new(),
        }
    }

    /// Carries the file tools' path rules over to the shell: `deny`/`ask` rules of the reading
    /// tools (`read_file`, `grep`, `find_files`, `list_dir`) that name a path apply to every
    /// shell word and redirection naming that path, and `protected` paths may not be written
    /// by redirection.
    #[must_use]
    pub fn with_file_rules(
        mut self,
        rules: impl IntoIterator<Item = Rule>,
        protected: Vec<crate::PathPattern>,
    ) -> Self {
        const READERS: [&str; 4] = ["read_file", "grep", "find_files", "list_dir"];
        self.read_rules = rules
            .into_iter()
            .filter(|r| {
                r.kind != RuleKind::Allow
                    && r.specifier.is_some()
                    && READERS.contains(&r.tool.as_str())
            })
            .collect();
        self.protected = protected;
        self
    }

    /// Changes the most commands a line may hold (default [`MAX_COMMANDS`]).
    #[must_use]
    pub fn with_max_commands(mut self, max: usize) -> Self {
        self.max_commands = max;
        self
    }

    /// Judges one line.
    pub fn decide(&self, line: &str) -> Decision {
        let mut parts = Vec::new();
        self.judge_line(line, 0, &mut parts);
        summarize(parts)
    }

    fn judge_line(&self, line: &str, depth: usize, out: &mut Vec<Judgement>) {
        let mut refuse = |reason: String| {
            out.push(Judgement {
                verdict: Verdict::Deny,
                by_rule: true,
                reason,
            });
        };
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
        let parsed = match parse::parse(line) {
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
            .map(|c| c.iter().map(Word::literal).collect())
            .collect();
        if let Some(why) = crate::python::hidden_context(line, &literal_commands) {
            return refuse(why);
        }
        for f in &parsed.findings {
            out.push(Judgement {
                verdict: f.verdict,
                by_rule: true,
                reason: f.reason.clone(),
            });
        }
        for r in &parsed.redirects {
            if let Some(j) = self.judge_redirect(r) {
                out.push(j);
            }
        }
        self.judge_paths(&parsed, out);
        for words in &parsed.commands {
            self.judge_command(words, depth, out);
        }
    }

    /// Paths the file tools' rules keep, named by any word or redirection of the line.
    fn judge_paths(&self, parsed: &parse::Parsed, out: &mut Vec<Judgement>) {
        for r in parsed.redirects.iter().filter(|r| r.write) {
            let Some(target) = r.target.literal() else {
                continue;
            };
            if let Ok(p) = self.workspace.resolve(target)
                && let Some(hit) = self.protected.iter().find(|pat| pat.matches(&p.rel))
            {
                out.push(Judgement {
                    verdict: Verdict::Deny,
                    by_rule: true,
                    reason: format!(
                        "`{}` writes `{}`, which is protected (`{}`)",
                        r.text,
                        p.rel.display(),
                        hit.as_str()
                    ),
                });
            }
        }
        if self.read_rules.is_empty() {
            return;
        }
        let words = parsed
            .commands
            .iter()
            .flat_map(|c| c.iter().skip(1))
            .chain(parsed.redirects.iter().map(|r| &r.target));
        for word in words {
            let parse::Word::Lit { text, glob } = word else {
                continue;
            };
            if *glob {
                out.push(Judgement {
                    verdict: Verdict::Ask,
                    by_rule: true,
                    reason: format!(
                        "`{text}` is a pattern that may expand to a file the permission rules keep from dsh's file tools"
                    ),
                });
                continue;
            }
            // `--file=PATH` names a path after the `=`.
            let candidates = [Some(text.as_str()), text.split_once('=').map(|(_, v)| v)];
            for candidate in candidates.into_iter().flatten() {
                if candidate.is_empty() || candidate.starts_with('-') {
                    continue;
                }
                let Ok(p) = self.workspace.resolve(candidate) else {
                    continue;
                };
                // Deny before ask: the strictest matching rule names the verdict.
                let hit = [RuleKind::Deny, RuleKind::Ask]
                    .into_iter()
                    .find_map(|kind| {
                        self.read_rules
                            .iter()
                            .find(|r| r.kind == kind && r.path_matches(&p.rel))
                    });
                if let Some(rule) = hit {
                    out.push(Judgement {
                        verdict: Verdict::from_rule(rule.kind),
                        by_rule: true,
                        reason: format!(
                            "`{candidate}` names `{}`, which {} rule `{}` from {} keeps from dsh's file tools; a shell command may not read it either",
                            p.rel.display(),
                            rule.kind.as_str(),
                            rule.text(),
                            rule.origin
                        ),
                    });
                }
            }
        }
    }

    fn judge_redirect(&self, r: &parse::Redirect) -> Option<Judgement> {
        let ask = |verdict, reason| {
            Some(Judgement {
                verdict,
                by_rule: true,
                reason,
            })
        };
        let Some(target) = r.target.literal() else {
            return ask(
                Verdict::Ask,
                format!("`{}` redirects to a file named at run time", r.text),
            );
        };
        if target == "/dev/null" {
            return None;
        }
        let inside = self.path_inside(target).is_ok();
        match (r.write, inside) {
            (true, false) => ask(
                Verdict::Ask,
                format!("`{}` writes outside the workspace", r.text),
            ),
            (true, true) => ask(
                Verdict::Ask,
                format!("`{}` writes a file by redirection", r.text),
            ),
            (false, false) => ask(
                Verdict::Ask,
                format!("`{}` reads from outside the workspace", r.text),
            ),
            (false, true) => None,
        }
    }

    /// One command: a matching rule decides; else the default lists.
    fn judge_command(&self, words: &[Word], depth: usize, out: &mut Vec<Judgement>) {
        if words.is_empty() {
            return;
        }
        let text = short(&words.iter().map(Word::text).collect::<Vec<_>>().join(" "));
        // Running as another user, or with a dangerous variable: no rule lifts it.
        if let Wrapped::Deny(why) = commands::unwrap(words) {
            out.push(Judgement {
                verdict: Verdict::Deny,
                by_rule: true,
                reason: why,
            });
            return;
        }
        // Python: the script or `-c` code is audited first; a refusal holds whatever the
        // rules say, a pass leaves the verdict to them and the lists (see `crate::python`).
        let literals: Vec<Option<&str>> = words
            .iter()
            .map(|w| match w {
                Word::Lit { text, glob: false } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let audit = crate::python::judge(&self.workspace, &literals).map(|r| match r {
            Ok(note) => Judgement {
                verdict: Verdict::Allow,
                by_rule: false,
                reason: format!("{}`{text}`: {note}", crate::python::TAG),
            },
            Err(why) => Judgement {
                verdict: Verdict::Deny,
                by_rule: true,
                reason: format!("{}`{text}`: {why}", crate::python::TAG),
            },
        });
        if let Some(j) = audit {
            let refused = j.verdict == Verdict::Deny;
            out.push(j);
            if refused {
                return;
            }
        }
        let mut defaults = Vec::new();
        self.judge_default(words, &text, depth, &mut defaults);
        let default = defaults
            .iter()
            .map(|j| j.verdict)
            .max()
            .unwrap_or(Verdict::Allow);
        // Matching rules, less those from an untrusted project that would loosen.
        let matching: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| !(r.tighten_only && Verdict::from_rule(r.rule.kind) < default))
            .map(|r| &r.rule)
            .filter(|r| rule_matches(r, words))
            .collect();
        let strictest = matching.iter().max_by_key(|r| Verdict::from_rule(r.kind));
        match strictest {
            Some(rule) => {
                let verdict = Verdict::from_rule(rule.kind);
                let did = match verdict {
                    Verdict::Allow => "allowed",
                    Verdict::Ask => "asks",
                    Verdict::Deny => "denied",
                };
                out.push(Judgement {
                    verdict,
                    by_rule: true,
                    reason: format!(
                        "`{text}` {did} by rule `{}` from {}",
                        rule.text(),
                        rule.origin
                    ),
                });
                // A rule on a wrapper (`env *`) does not lift an audit refusal of its payload.
                out.extend(defaults.into_iter().filter(|j| {
                    j.verdict == Verdict::Deny && j.reason.starts_with(crate::python::TAG)
                }));
            }
            None => out.extend(defaults),
        }
    }

    /// What the default lists (and the structure of the command) say.
    fn judge_default(&self, words: &[Word], text: &str, depth: usize, out: &mut Vec<Judgement>) {
        let structural = |verdict, reason: String| Judgement {
            verdict,
            by_rule: true,
            reason,
        };
        let Some(name) = words[0].literal() else {
            out.push(structural(
                Verdict::Deny,
                format!(
                    "`{text}`: the command name is computed at run time, so it cannot be checked"
                ),
            ));
            return;
        };
        match commands::unwrap(words) {
            Wrapped::Deny(why) => return out.push(structural(Verdict::Deny, why)),
            Wrapped::Ask(why) => return out.push(structural(Verdict::Ask, why)),
            Wrapped::Shell(script) => {
                let Some(script) = script.literal() else {
                    return out.push(structural(
                        Verdict::Deny,
                        format!("`{text}` runs a string computed at run time"),
                    ));
                };
                if depth >= MAX_DEPTH {
                    return out.push(structural(
                        Verdict::Deny,
                        format!("`{text}` nests shells too deeply to follow"),
                    ));
                }
                return self.judge_line(script, depth + 1, out);
            }
            Wrapped::Runs { payload, ask_note } => {
                let start = out.len();
                self.judge_command(payload, depth + 1, out);
                if let Some(note) = ask_note {
                    for j in &mut out[start..] {
                        if j.verdict == Verdict::Allow {
                            j.verdict = Verdict::Ask;
                            j.by_rule = true;
                            j.reason = format!("`{text}`: {note}");
                        }
                    }
                }
                return;
            }
            Wrapped::No => {}
        }
        if matches!(name, "eval" | "source" | ".") {
            return out.push(structural(
                Verdict::Deny,
                format!("`{text}`: `{name}` runs code the policy cannot see; allow it with a rule"),
            ));
        }
        let origin = &self.lists.origin;
        if self.lists.safe.iter().any(|s| s == name) {
            match self.free_pass(name, &words[1..], depth, out) {
                Ok(()) => out.push(Judgement {
                    verdict: Verdict::Allow,
                    by_rule: false,
                    reason: format!("`{text}` is on the safe list ({origin})"),
                }),
                Err(why) => out.push(structural(Verdict::Ask, format!("`{text}`: {why}"))),
            }
        } else if self.lists.confirm.iter().any(|s| s == name) {
            out.push(Judgement {
                verdict: Verdict::Ask,
                by_rule: false,
                reason: format!("`{text}` is on the confirm list ({origin})"),
            });
            if name == "find" {
                // Its `-exec` payloads are still judged.
                let _ = self.find_pass(&words[1..], depth, out);
            }
        } else {
            out.push(Judgement {
                verdict: Verdict::Deny,
                by_rule: false,
                reason: format!("`{text}` is not on the safe or confirm lists ({origin})"),
            });
        }
    }

    /// Whether a safe-list command keeps its free pass with these arguments.
    fn free_pass(
        &self,
        name: &str,
        args: &[Word],
        depth: usize,
        out: &mut Vec<Judgement>,
    ) -> Result<(), String> {
        if name == "find" {
            return self.find_pass(args, depth, out);
        }
        let table = commands::table(name).unwrap_or(commands::FlagTable {
            data_args: false,
            not_free_short: "",
            not_free_long: &[],
            value_short: "",
            why: "",
        });
        let mut options = true;
        for arg in args {
            let Some(a) = arg.literal() else {
                if table.data_args {
                    continue;
                }
                return Err(format!(
                    "`{}` is computed at run time, so the file it names cannot be checked",
                    arg.text()
                ));
            };
            if options && a == "--" {
                options = false;
            } else if options && a.starts_with("--") {
                let (flag, value) = match a.split_once('=') {
                    Some((f, v)) => (f, Some(v)),
                    None => (a, None),
                };
                if table.not_free_long.contains(&flag) {
                    return Err(format!("`{flag}` {}, so it is not read-only", table.why));
                }
                if let Some(v) = value.filter(|_| !table.data_args) {
                    self.path_inside(v)?;
                }
            } else if options && a.len() > 1 && a.starts_with('-') {
                for (i, c) in a.char_indices().skip(1) {
                    if table.not_free_short.contains(c) {
                        return Err(format!("`-{c}` {}, so it is not read-only", table.why));
                    }
                    if table.value_short.contains(c) {
                        let rest = &a[i + c.len_utf8()..];
                        if !rest.is_empty() && !table.data_args {
                            self.path_inside(rest)?;
                        }
                        break;
                    }
                }
            } else if !table.data_args {
                self.path_inside(a)?;
            }
        }
        Ok(())
    }

    /// `find`'s expression: writing primaries lose the pass; `-exec` payloads are judged.
    fn find_pass(
        &self,
        args: &[Word],
        depth: usize,
        out: &mut Vec<Judgement>,
    ) -> Result<(), String> {
        let mut i = 0;
        // Starting points.
        while let Some(w) = args.get(i) {
            match w.literal() {
                Some(a) if a.starts_with('-') || a == "(" || a == "!" => break,
                Some(a) => self.path_inside(a)?,
                None => {
                    return Err(format!(
                        "`{}` is computed at run time, so the file it names cannot be checked",
                        w.text()
                    ));
                }
            }
            i += 1;
        }
        while let Some(w) = args.get(i) {
            let Some(a) = w.literal() else {
                return Err(format!("`{}` is computed at run time", w.text()));
            };
            i += 1;
            if commands::FIND_WRITES.contains(&a) {
                return Err(format!(
                    "`{a}` writes or deletes files, so it is not read-only"
                ));
            } else if commands::FIND_EXEC.contains(&a) {
                let end = args[i..]
                    .iter()
                    .position(|w| matches!(w.literal(), Some(";" | "+")))
                    .ok_or_else(|| format!("`{a}` has no terminating `;` or `+`"))?;
                self.judge_command(&args[i..i + end], depth + 1, out);
                i += end + 1;
            } else if commands::FIND_VALUE.contains(&a) {
                i += 1;
            } else if commands::FIND_FILE.contains(&a) || a.starts_with("-newer") {
                match args.get(i).and_then(Word::literal) {
                    Some(v) => self.path_inside(v)?,
                    None => return Err(format!("`{a}` names a file computed at run time")),
                }
                i += 1;
            } else if !commands::FIND_BARE.contains(&a) {
                return Err(format!("`find` option `{a}` is not in its flag table"));
            }
        }
        Ok(())
    }

    /// Ok when `path` resolves inside the workspace.
    fn path_inside(&self, path: &str) -> Result<(), String> {
        if path.starts_with('~') {
            return Err(format!("`{path}` is outside the workspace"));
        }
        if path.is_empty() || path == "{}" {
            return Ok(());
        }
        if path.contains('{') {
            return Err(format!(
                "`{path}` may be a brace expansion, so the files it names cannot be checked"
            ));
        }
        match self.workspace.resolve(path) {
            Ok(_) => Ok(()),
            Err(dsh_core::PathError::Outside { .. }) => {
                Err(format!("`{path}` is outside the workspace"))
            }
            Err(e) => Err(format!("`{path}` cannot be checked: {e}")),
        }
    }
}

/// Whether `rule`'s words match `words` (see the module docs).
fn rule_matches(rule: &Rule, words: &[Word]) -> bool {
    // A bare `run_shell` rule matches every command, like `run_shell(*)`.
    let spec = rule.specifier.as_deref().unwrap_or("*");
    let mut pattern: Vec<&str> = spec.split_whitespace().collect();
    let mut open = rule.kind != RuleKind::Allow;
    if let Some(last) = pattern.last_mut() {
        if *last == "*" {
            pattern.pop();
            open = true;
        } else if let Some(stem) = last.strip_suffix(":*") {
            *last = stem;
            open = true;
        }
    }
    if words.len() < pattern.len() || (!open && words.len() != pattern.len()) {
        return false;
    }
    if rule.kind == RuleKind::Allow && !matches!(words[0], Word::Lit { glob: false, .. }) {
        return false;
    }
    pattern.iter().zip(words).all(|(p, w)| match w {
        Word::Lit { text, glob: false } => text == p,
        // A word known only at run time (or after globbing or brace expansion) may be
        // anything: it can carry a deny or ask rule, never an allow.
        _ => rule.kind != RuleKind::Allow,
    })
}

/// Control characters other than newline and tab, and invisible or bidirectional Unicode.
fn suspicious_char(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

fn summarize(parts: Vec<Judgement>) -> Decision {
    let verdict = parts
        .iter()
        .map(|j| j.verdict)
        .max()
        .unwrap_or(Verdict::Deny);
    let tier = if parts.iter().any(|j| j.by_rule) {
        Tier::Rule
    } else {
        Tier::Default
    };
    let deciding: Vec<&Judgement> = parts.iter().filter(|j| j.verdict == verdict).collect();
    let reason = match deciding.as_slice() {
        [] => "the line runs no command the policy can judge".to_owned(),
        [one] => one.reason.clone(),
        [first, rest @ ..] if verdict != Verdict::Allow => {
            format!("{} (and {} more)", first.reason, rest.len())
        }
        many => {
            let shown: Vec<&str> = many.iter().take(3).map(|j| j.reason.as_str()).collect();
            let more = many.len().saturating_sub(3);
            if more > 0 {
                format!("{}; and {more} more", shown.join("; "))
            } else {
                shown.join("; ")
            }
        }
    };
    Decision {
        verdict,
        tier,
        reason,
        parts,
    }
}

#[async_trait]
impl PrePolicy for ShellPolicy {
    fn name(&self) -> &str {
        "shell"
    }

    async fn vote(&self, call: &ToolCall, _cx: &PolicyContext<'_>) -> Vote {
        if call.name() != "run_shell" {
            return Vote::abstain();
        }
        let args = call.args();
        let Some(command) = args.get("command").and_then(|c| c.as_str()) else {
            // The tool's own argument check reports the missing command.
            return Vote::abstain();
        };
        let network = args
            .get("network")
            .and_then(|n| n.as_bool())
            .unwrap_or(false);
        if network {
            match self.network {
                NetworkVote::Refused => {
                    return Vote::deny(
                        Tier::Rule,
                        "`network: true` is refused: only `sandbox.allow_network = true` in your user configuration grants the network",
                    );
                }
                NetworkVote::Ask => {
                    let d = self.decide(command);
                    if d.verdict == Verdict::Deny {
                        return d.vote();
                    }
                    return Vote::ask(
                        Tier::Rule,
                        format!("`network: true` needs a person's consent; {}", d.reason),
                    );
                }
                NetworkVote::Granted => {}
            }
        }
        self.decide(command).vote()
    }
}
