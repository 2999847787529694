//! The shell policy (DESIGN §3): the one gate-1 voter that reads `run_shell` rules. It parses
//! the line with tree-sitter-bash and judges every command anywhere in it — pipelines, lists,
//! subshells, substitutions, heredocs, the payloads of wrappers (`env`, `timeout`, `xargs`,
//! `find -exec`, `bash -c`, …) — never the raw text.
//!
//! Each command's decision is its matching rule's (deny > ask > allow among matching rules),
//! else the default lists': on the safe list and read-only by its flag table → allow; on the
//! confirm list → ask; anything else → `[shell] unlisted` (ask by default, deny if set). The
//! line's decision is the strictest command or
//! structural decision, with tier `Rule` when any rule or structural check decided a part of
//! it, else `Default`.
//!
//! **What runs free runs read-only.** The safe list is the built-in read-only list
//! (`readers.rs`: each program with the flags that make it write or run a program; `sed`'s
//! script, `jq`'s arguments and git's reading subcommands judged by passes of their own in
//! `free.rs`, `sed.rs` and `git_reads.rs`). A line whose every command keeps its free pass —
//! or is allowed by a rule but would have kept it — votes allow only on the condition that
//! it runs in the read-only sandbox ([`dsh_core::Vote::reading_only`]); an allow rule on
//! anything else clears writing. git's reading subcommands, and `xargs` running a free
//! command, run free only where that sandbox is enforced ([`SandboxCheck`]): a pager or
//! diff driver the repository configures, or an argument the input adds, then runs confined;
//! elsewhere they ask, saying why.
//!
//! **Approval is for ordinary use of a confirm-list program, never a disguise test.** Where
//! the danger is structural the policy denies at tier `Rule` — no allow rule lifts it, not
//! even one matching a wrapper around it — and the reason names the setting, flag or path:
//! - control characters, invisible or bidirectional Unicode, lines over 16 KiB, more than 256
//!   commands, constructs nested over 200 deep, a line that does not parse;
//! - doors: a setting, flag or variable that makes `git`, `make`, `npm` or `node` run a
//!   different program than the one a person sees (`doors.rs`); an unknown `git -c` key asks
//!   at tier `Rule`;
//! - assignments that change what programs load or run (`LD_*`, `PATH`, `BASH_ENV`,
//!   `PYTHONHOME`, `PAGER=vim`, …), wherever they stand (`assign.rs`);
//! - writes no approval could make succeed: a redirection or an output flag (`sort -o`,
//!   `find -fprint`, `git --output`, …) into a place outside the workspace and the session's
//!   temporary directory (`$TMPDIR` is known; `$HOME`, `$(…)` are not), into a device other
//!   than `/dev/null`/`/dev/stdout`/`/dev/stderr`, or into a protected path, matched as a
//!   case-folding file system resolves it and where a protected symlink leads (`places.rs`,
//!   `guarded.rs`); writes inside ask at tier `Rule`, and where a file tool's `deny`/`ask`
//!   path rule keeps the path they are refused or asked so in every mode (`guarded.rs`);
//! - expansions that evaluate a value: `${x@P}`, `${x@E}`, `${!x}` (but not `${!arr[@]}` or
//!   `${!prefix*}`); arithmetic on a variable the line sets from something it does not spell
//!   out (input, a file name, a substitution) asks, since `a[$(cmd)]` in it would run; an
//!   expansion of a `shell.pass_env` variable named like a credential asks;
//! - `sudo`, `su`, `doas`; `env -i`/`exec -c` and `unset GIT_CONFIG_*` (they drop the git
//!   settings dsh gives every command).
//!
//! A safe-list program in a destructive mode is judged as the program it acts as: `find
//! -delete` as `rm`, `date -s` as a clock setter (denied by the lists, naming the flag).
//! Shells other than bash (`sh`, `dash`, `zsh`, `busybox`, …) are unlisted: the parser speaks
//! bash, so only `bash -c LITERAL` is unwrapped.
//!
//! **The working directory is followed** (`parse.rs`): `cd DIR` inside the workspace (not a
//! protected path, not through a symlink) is allowed, and the directory it sets applies to
//! every later path judgement of the same list — path arguments, redirections, output flags,
//! protected paths, the file tools' rules carried over to shell words and the Python audit.
//! It ends at subshell, pipeline-stage, background and `$(…)` boundaries; where either
//! directory is possible (`a || cd x; b`, or after `;`, since a failed `cd` leaves the shell
//! where it was) every path is judged from both. `cd` outside the workspace or into a
//! protected path, `cd -`, `cd` alone, `cd` in a loop or under a wrapper, `pushd`/`popd` are
//! refused.
//!
//! Python (`python script.py`, `python -c CODE`, `python -m MODULE`, any `pythonX.Y`) is
//! audited first by [`crate::python`], from the directory it runs in and with `PYTHONPATH`
//! directories inside the workspace searched for local modules: a refusal is a `Rule` deny
//! that no rule lifts; a pass leaves the command to the rules and lists; `python -m pytest`
//! and `-m pip` are judged as `pytest` and `pip`.
//!
//! Rule matching: a rule's specifier is words, matched against a command's words after quote
//! removal. A trailing `*` (or `word:*`) matches any further words. Without it an `allow`
//! rule matches exactly those words, while a `deny` or `ask` rule matches any command that
//! starts with them (`deny run_shell(curl)` refuses `curl -s x`). A bare `run_shell` rule
//! matches every command. A word known only at run time, or holding a glob or a brace, may be
//! anything: it satisfies a `deny`/`ask` rule's word, never an `allow` rule's. A rule from an
//! untrusted project may only tighten a command's decision.

mod assign;
mod commands;
mod destinations;
mod doors;
mod free;
mod git_reads;
mod guarded;
mod judge;
mod parse;
mod places;
mod readers;
mod sed;
mod words;

pub use readers::READ_ONLY_PROGRAMS;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_core::{Access, PolicyContext, PrePolicy, Tier, ToolCall, Vote, Workspace, async_trait};

use crate::rules::Matcher;
pub use dsh_core::Decision;
use dsh_core::Rule;
use words::Word;

/// Lines longer than this are refused.
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Lines with more commands than this are refused.
pub const MAX_COMMANDS: usize = 256;
/// How deep `bash -c 'bash -c …'` is followed.
const MAX_DEPTH: usize = 4;

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
    /// What a program on neither list gets: asks (tier `Default`, so a rule lifts it) or is
    /// refused (seed 003's strict allowlist).
    pub unlisted: dsh_core::Unlisted,
    /// Where the lists came from, for reasons (e.g. "configuration").
    pub origin: String,
}

impl Default for ShellLists {
    /// The built-in read-only list and the confirm list (`dsh_config::defaults` holds the
    /// same, which a test in dsh-agent checks).
    fn default() -> Self {
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect();
        ShellLists {
            safe: READ_ONLY_PROGRAMS.iter().map(|s| (*s).to_owned()).collect(),
            confirm: words("python python3 pip pip3 pytest make npm node awk gawk mawk"),
            unlisted: dsh_core::Unlisted::Ask,
            origin: "the default lists".to_owned(),
        }
    }
}

/// One judged part of a line.
#[derive(Clone, Debug)]
pub struct Judgement {
    pub decision: Decision,
    /// Decided by a rule or a structural check (tier `Rule`), not the default lists.
    pub by_rule: bool,
    /// A structural check no rule lifts, not even one matching a wrapper around it.
    pub firm: bool,
    /// An allow the policy gives because the command only reads (it runs free in the
    /// read-only sandbox); `false` on every other part.
    pub reads_only: bool,
    /// An ask the `auto` mode may lift (in the hardened sandbox): a program on the confirm
    /// list or on none (not one that always asks, nor git: its sandbox keeps `.git`
    /// read-only), or a write inside the workspace no file tool's rule keeps.
    pub auto_liftable: bool,
    pub reason: String,
}

/// The shell policy's ruling on a whole line.
#[derive(Clone, Debug)]
pub struct Ruling {
    pub decision: Decision,
    pub tier: Tier,
    pub reason: String,
    /// Every judged part, in the order found.
    pub parts: Vec<Judgement>,
}

impl Ruling {
    /// An allowed line whose every part only reads: it runs in the read-only sandbox.
    pub fn reads_only(&self) -> bool {
        self.decision == Decision::Allow && self.parts.iter().all(|j| j.reads_only)
    }

    /// An asking line whose every ask the `auto` mode may lift.
    pub fn auto_liftable(&self) -> bool {
        self.decision == Decision::Ask
            && self.parts.iter().all(|j| {
                j.decision == Decision::Allow || (j.decision == Decision::Ask && j.auto_liftable)
            })
    }

    pub fn vote(&self) -> Vote {
        match self.decision {
            Decision::Allow if self.reads_only() => {
                Vote::allow(self.tier, self.reason.clone()).reading_only()
            }
            Decision::Allow => Vote::allow(self.tier, self.reason.clone()),
            Decision::Ask => Vote::ask(self.tier, self.reason.clone()),
            Decision::Deny => Vote::deny(self.tier, self.reason.clone()),
        }
    }
}

/// The shell policy as a gate-1 listener (name `shell`).
#[derive(Clone, Debug)]
pub struct ShellPolicy {
    workspace: Arc<Workspace>,
    /// The `run_shell` rules; one from an untrusted project ([`Rule::tighten_only`]) may only
    /// tighten a command's decision.
    rules: Vec<Matcher>,
    /// `deny`/`ask` rules of dsh's reading tools with a path pattern: a shell word naming such
    /// a path gets the same decision, so `cat .env` is not a way around `deny read_file(.env)`.
    read_rules: Vec<Matcher>,
    /// `deny`/`ask` rules of dsh's other tools with a path pattern (`write_file(migrations/**)`):
    /// a command writing such a path is refused or asked as the file tools' writes are.
    write_rules: Vec<Matcher>,
    /// Protected paths: no shell write may reach them.
    protected: Vec<crate::PathPattern>,
    lists: ShellLists,
    network: NetworkVote,
    max_commands: usize,
    /// The session's private temporary directory (`$TMPDIR` of every command), if known.
    temp_dir: Option<PathBuf>,
    /// Variables dsh passes to commands (`shell.pass_env`).
    pass_env: Vec<String>,
    /// `run_shell` allow rules added while the session runs.
    added: crate::AddedRules,
    /// Whether the read-only sandbox is enforced where the commands run.
    read_only_sandbox: SandboxCheck,
    /// The session's permission mode: under `auto`, where the hardened sandbox is enforced,
    /// the asks it may lift are left to the `mode` listener.
    mode: Option<crate::ModeSwitch>,
    /// Whether the hardened workspace-write sandbox is enforced where the commands run.
    pub(crate) hardened_sandbox: SandboxCheck,
}

/// Says whether a sandbox profile (read-only, hardened) is enforced where commands run:
/// `Ok`, or why not (asked only when a line's decision depends on it, and cached by whoever
/// answers).
#[derive(Clone)]
pub struct SandboxCheck(pub Arc<dyn Fn() -> Result<(), String> + Send + Sync>);

impl Default for SandboxCheck {
    /// Unknown, so not enforced: what needs it asks.
    fn default() -> Self {
        SandboxCheck(Arc::new(|| {
            Err("no sandbox is known to this policy".to_owned())
        }))
    }
}

impl std::fmt::Debug for SandboxCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SandboxCheck")
    }
}

impl ShellPolicy {
    /// `rules` may hold rules for any tool: only the `run_shell` ones are kept.
    pub fn new(
        workspace: Arc<Workspace>,
        rules: impl IntoIterator<Item = Rule>,
        lists: ShellLists,
        network: NetworkVote,
    ) -> Self {
        ShellPolicy {
            workspace,
            rules: rules
                .into_iter()
                .filter(|r| r.tool == "run_shell")
                .map(Matcher::command)
                .collect(),
            lists,
            network,
            max_commands: MAX_COMMANDS,
            read_rules: Vec::new(),
            write_rules: Vec::new(),
            protected: Vec::new(),
            temp_dir: None,
            pass_env: Vec::new(),
            added: crate::AddedRules::new(),
            read_only_sandbox: SandboxCheck::default(),
            mode: None,
            hardened_sandbox: SandboxCheck::default(),
        }
    }

    /// Follows the session's permission mode: under `auto`, where `hardened` says the
    /// hardened sandbox is enforced, a line whose every ask `auto` may lift gets no vote of
    /// this policy — the `mode` listener allows it, to run in that sandbox.
    #[must_use]
    pub fn with_mode(mut self, mode: crate::ModeSwitch, hardened: SandboxCheck) -> Self {
        self.mode = Some(mode);
        self.hardened_sandbox = hardened;
        self
    }

    /// Whether `auto` lifts this decision's asks here.
    pub(crate) fn auto_lifts(&self, d: &Ruling) -> bool {
        self.mode
            .as_ref()
            .is_some_and(|m| m.get() == dsh_core::PermissionMode::Auto)
            && d.auto_liftable()
            && (self.hardened_sandbox.0)().is_ok()
    }

    /// Says whether the read-only sandbox is enforced: git's reading subcommands and
    /// `xargs` with a reading payload run free only where it is.
    #[must_use]
    pub fn with_read_only_sandbox(mut self, sandbox: SandboxCheck) -> Self {
        self.read_only_sandbox = sandbox;
        self
    }

    /// Also judges the `run_shell` allow rules added to `added` while the session runs, as
    /// each parsed command's rules (never the raw line).
    #[must_use]
    pub fn with_added(mut self, added: crate::AddedRules) -> Self {
        self.added = added;
        self
    }

    /// The session's private temporary directory: `$TMPDIR` in a line stands for it, and a
    /// redirection into it asks like one inside the workspace.
    #[must_use]
    pub fn with_temp_dir(mut self, dir: PathBuf) -> Self {
        self.temp_dir = Some(dir);
        self
    }

    /// The variables dsh passes to commands (`shell.pass_env`): expanding one whose name
    /// looks like a credential asks.
    #[must_use]
    pub fn with_pass_env(mut self, names: Vec<String>) -> Self {
        self.pass_env = names;
        self
    }

    /// Carries the file tools' path rules over to the shell exactly as `rules` spreads them
    /// over other tools' declarations (the same compiled rules, so the two cannot disagree):
    /// `deny`/`ask` rules that name a path for one of its readers — the session's tools that
    /// declare themselves read-only (the registry's flag, not a list of names) — apply to
    /// every shell word and redirection naming that path; those of any other tool
    /// (`write_file`, `edit_file`, …) to every place a command writes (redirections, output
    /// flags, the destinations of `cp`, `mv`, `touch`, `sed -i`, …). `protected` paths may
    /// not be written by any of them.
    #[must_use]
    pub fn with_file_rules(
        mut self,
        rules: &crate::PermissionRules,
        protected: Vec<crate::PathPattern>,
    ) -> Self {
        (self.read_rules, self.write_rules) = rules.spread_rules();
        self.protected = protected;
        self
    }

    /// Changes the most commands a line may hold (default [`MAX_COMMANDS`]).
    #[must_use]
    pub fn with_max_commands(mut self, max: usize) -> Self {
        self.max_commands = max;
        self
    }

    /// Judges one line, started in the workspace root.
    /// The rule an "always allow" would add for `line`: its one command's program and
    /// subcommand with ` *` (`run_shell(git commit *)`), or exactly the program when it is
    /// alone (`run_shell(make)`). `None` for a line of several commands, a second word that
    /// is an option, or a program or subcommand known only when it runs or not writable as
    /// a rule word. Whether the rule
    /// would really let the line run is for a check with it added to say.
    pub fn rule_for(&self, line: &str) -> Option<String> {
        let cd = |from: &Path, args: &[Word]| self.cd(from, args);
        let parsed = parse::parse(line, vec![PathBuf::new()], None, &cd).ok()?;
        let [command] = parsed.commands.as_slice() else {
            return None;
        };
        let program = command
            .words
            .first()?
            .exact()
            .filter(|p| !p.contains(['(', ')', ' ']))?;
        // The second word is the subcommand. A program alone gets an exact rule; one whose
        // second word is an option (`node -e …`, `python3 -c …`) or cannot be written as a
        // rule word gets none: `node *` would allow any program from then on.
        let sub = match command.words.get(1) {
            None => return Some(format!("run_shell({program})")),
            Some(w) => w
                .exact()
                .filter(|w| !w.starts_with('-') && !w.contains(['/', '=', '(', ')', ' ']))?,
        };
        Some(format!("run_shell({program} {sub} *)"))
    }

    pub fn decide(&self, line: &str) -> Ruling {
        let mut parts = Vec::new();
        self.judge_line(line, &[PathBuf::new()], 0, &mut parts);
        summarize(parts)
    }
}

/// Whether `rule`'s words match `words` (see the module docs).
fn rule_matches(rule: &Rule, words: &[Word]) -> bool {
    // A bare `run_shell` rule matches every command, like `run_shell(*)`.
    let spec = rule.specifier.as_deref().unwrap_or("*");
    let mut pattern: Vec<&str> = spec.split_whitespace().collect();
    let mut open = rule.decision != Decision::Allow;
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
    if rule.decision == Decision::Allow && !matches!(words[0], Word::Lit { glob: false, .. }) {
        return false;
    }
    pattern.iter().zip(words).all(|(p, w)| match w {
        Word::Lit { text, glob: false } => text == p,
        // A word known only at run time (or after globbing or brace expansion) may be
        // anything: it can carry a deny or ask rule, never an allow.
        _ => rule.decision != Decision::Allow,
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

fn summarize(parts: Vec<Judgement>) -> Ruling {
    let decision = parts
        .iter()
        .map(|j| j.decision)
        .max()
        .unwrap_or(Decision::Deny);
    let tier = if parts.iter().any(|j| j.by_rule) {
        Tier::Rule
    } else {
        Tier::Default
    };
    let deciding: Vec<&Judgement> = parts.iter().filter(|j| j.decision == decision).collect();
    let reason = match deciding.as_slice() {
        [] => "the line runs no command the policy can judge".to_owned(),
        [one] => one.reason.clone(),
        [first, rest @ ..] if decision != Decision::Allow => {
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
    Ruling {
        decision,
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

    /// Judges what the call *declares* (DESIGN §3 "Declarations, not names"): every command
    /// line it will run (`Access::Execute`), whichever tool declares it, by the `run_shell`
    /// rules and the lists; and a declared network access by the session's network grant.
    /// A call that declares neither is not this policy's business.
    async fn vote(&self, _call: &ToolCall, cx: &PolicyContext<'_>) -> Vote {
        let commands: Vec<&str> = cx
            .accesses
            .iter()
            .filter_map(|a| match a {
                Access::Execute { command } => Some(command.as_str()),
                _ => None,
            })
            .collect();
        let network = cx
            .accesses
            .iter()
            .any(|a| matches!(a, Access::Network { .. }));
        if commands.is_empty() && !network {
            return Vote::abstain();
        }
        let decisions: Vec<Ruling> = commands.iter().map(|c| self.decide(c)).collect();
        // Under `auto`, asks it may lift are the `mode` listener's to allow.
        if !network
            && decisions.iter().any(|d| d.decision == Decision::Ask)
            && decisions
                .iter()
                .all(|d| d.decision == Decision::Allow || self.auto_lifts(d))
        {
            return Vote::abstain();
        }
        // The worst of the commands' decisions (the first of equals names the reason).
        let decided = decisions.into_iter().reduce(|worst, d| {
            if d.decision > worst.decision {
                d
            } else {
                worst
            }
        });
        if network {
            match self.network {
                NetworkVote::Refused => {
                    return Vote::deny(
                        Tier::Rule,
                        "`network: true` is refused: only `sandbox.allow_network = true` in your user configuration grants the network",
                    );
                }
                NetworkVote::Ask => {
                    if let Some(d) = &decided
                        && d.decision == Decision::Deny
                    {
                        return d.vote();
                    }
                    let why = decided.as_ref().map_or("", |d| d.reason.as_str());
                    return Vote::ask(
                        Tier::Rule,
                        format!("`network: true` needs a person's consent; {why}"),
                    );
                }
                NetworkVote::Granted => {
                    // A free command runs in the read-only profile, which has no network: with
                    // `network: true` it would run unconfined by it, so it needs a person or a
                    // rule of its own.
                    if let Some(d) = &decided
                        && d.reads_only()
                    {
                        return Vote::ask(
                            Tier::Rule,
                            format!(
                                "`network: true` takes the command out of the read-only sandbox; {}",
                                d.reason
                            ),
                        );
                    }
                }
            }
        }
        match decided {
            Some(d) => d.vote(),
            None => Vote::abstain(),
        }
    }
}
