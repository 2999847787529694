//! Doors: the ways a confirm-list program runs a *different* program than the one a person
//! sees — from a setting, a flag or an environment variable. A person approving `git status`
//! approves git, not the `rm -rf` a `core.pager` setting would run, so these are decided here,
//! before the rules, at tier `Rule`: no allow rule lifts them, and the reason names the
//! setting or flag.
//!
//! **git.** Every `-c KEY=VALUE`, `--config-env KEY=VAR`, `git clone -c/--config`, every key
//! written by `git config` (any scope) and every `GIT_CONFIG_KEY_n` is classified, matched
//! case-insensitively as git does ([`git_config_key`]):
//! - a key that names a program or moves where git loads code (`core.pager`, `pager.*`,
//!   `core.editor`, `sequence.editor`, `core.sshCommand`, `core.gitProxy`, `core.askPass`,
//!   `core.fsmonitor`, `core.hooksPath`, `core.worktree`, `core.alternateRefsCommand`,
//!   `diff.external`, `diff.*.command`, `diff.*.textconv`, `filter.*`, `merge.*.driver`,
//!   `mergetool.*.cmd`, `difftool.*.cmd`, `alias.*` starting with `!`, `include.path`,
//!   `includeIf.*`, `uploadpack.*`, `receivepack.*`, `remote.*.uploadpack`,
//!   `remote.*.receivepack`, `remote.*.proxy`, `protocol.*.allow`, `credential.helper`,
//!   `credential.*.helper`, `gpg.program`, `gpg.*.program`, `init.templateDir`,
//!   `interactive.diffFilter`, `trailer.*.command`, `trailer.*.cmd`, `submodule.*.update`
//!   starting with `!`, `sendemail.*` commands, `browser.*`, `web.browser`, `man.*`,
//!   `imap.tunnel`, `safe.bareRepository`) → **deny**;
//! - a known harmless key ([`GIT_HARMLESS`]: `user.*`, `color.*`, `advice.*`, `log.*`,
//!   `core.quotepath`, `core.autocrlf`, `diff.renames`, `diff.algorithm`,
//!   `merge.conflictStyle`, `pull.rebase`, `init.defaultBranch`, `commit.gpgSign=false`, …) →
//!   git's own decision (ask);
//! - any other key → **ask** at tier `Rule`, naming the key.
//!
//! Flags that take a command → deny: `--exec-path=DIR`, `--upload-pack`, `--receive-pack`,
//! `clone -u`, `archive`/`fetch-pack`/`send-pack --exec`, `rebase --exec`/`-x`, `bisect run`,
//! `difftool --extcmd`/`-x`, `grep --open-files-in-pager`/`-O`, `submodule foreach`,
//! `send-email --sendmail-cmd`/`--to-cmd`/`--cc-cmd`/`--header-cmd`/`--smtp-server`; the
//! subcommands `filter-branch`, `instaweb`, `daemon` and `credential` (it prints stored
//! credentials); the `ext::` and `fd::` transports; `git config --edit` (runs the editor);
//! `git config --global`/`--system` writes (outside the workspace). `-C DIR`, `--git-dir`,
//! `--work-tree`, `--template` outside the workspace → deny; inside, `-C` is the directory
//! git's output flags are judged from. `-x` is an exec flag only for `rebase` and `difftool`
//! (`git cherry-pick -x`, `git clean -fdx` keep git's decision). Output flags (`--output=`,
//! `format-patch -o`, `archive -o`) are file writes ([`super::places`]). The `GIT_*`
//! variables are judged as assignments ([`super::assign`]). Every command dsh runs also gets
//! `safe.bareRepository=explicit` and `core.fsmonitor=false` in its environment (the shell
//! tool's `env.rs`), so a bare repository or a planted `core.fsmonitor` in the workspace
//! cannot run code through an approved `git status`.
//!
//! **make.** `SHELL=…`, `.SHELLFLAGS=…`, `MAKESHELL=…` as arguments, `--eval`/`-E`, and a
//! variable whose value holds `$(shell`, `$(eval`, `$(file` or `$(guile` → deny; `MAKEFLAGS`
//! likewise ([`super::assign`]). `make -f Makefile.ci test` keeps make's decision.
//!
//! **npm.** `npm exec`, `npm x`, `npx` (they run a package from the registry), `npm init X` /
//! `npm create X` (they run `create-X`), `npm explore` (a shell), `--script-shell`,
//! `--node-options`, `--userconfig`, `--globalconfig`, and `npm config set` of those → deny;
//! `npm_config_*` variables likewise. `npm test -- -c jest.config.js` keeps npm's decision.
//!
//! **node.** `NODE_OPTIONS` with `--require`/`--import`/`--loader`/`--experimental-loader`
//! → deny ([`super::assign`]); `node -r ts-node/register t.ts` and `node --import tsx app.ts`
//! keep node's decision (a person sees what is loaded).
//!
//! What remains: settings already in a repository's own `.git/config`, `.npmrc` or
//! `Makefile` are the project's (other than `core.fsmonitor`, which dsh turns off); a person
//! approving `git diff` in a cloned repository with a `diff.external` in `.git/config` runs
//! it. The sandbox bounds what such a program can do.

use std::path::PathBuf;

use dsh_core::quote_capped;

use super::judge::firm;
use super::places::{Place, from};
use super::words::{Word, short};
use super::{Decision, Judgement, ShellPolicy};

/// Git keys that change nothing git runs or loads (matched lowercase; `section.*` covers the
/// section). `commit.gpgsign` and `tag.gpgsign` only with the value `false`.
pub(crate) const GIT_HARMLESS: &[&str] = &[
    "user.*",
    "author.*",
    "committer.*",
    "color.*",
    "advice.*",
    "log.*",
    "pretty.*",
    "column.*",
    "i18n.*",
    "core.quotepath",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.filemode",
    "core.ignorecase",
    "core.abbrev",
    "core.whitespace",
    "diff.renames",
    "diff.algorithm",
    "diff.colormoved",
    "diff.mnemonicprefix",
    "diff.noprefix",
    "diff.context",
    "diff.statgraphwidth",
    "merge.conflictstyle",
    "merge.ff",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "init.defaultbranch",
    "commit.verbose",
    "commit.cleanup",
    "status.short",
    "status.branch",
    "status.showuntrackedfiles",
    "branch.sort",
    "tag.sort",
    "rerere.enabled",
    "fetch.prune",
    "rebase.autosquash",
    "rebase.autostash",
    "format.pretty",
    "blame.date",
    "grep.linenumber",
    "grep.extendedregexp",
];

/// Flags of `git clone`/`fetch`/`pull`/… that name the program run on the other side.
const GIT_REMOTE_PROGRAM: &[&str] = &["--upload-pack", "--receive-pack"];

impl ShellPolicy {
    /// The doors of `git`, `make`, `npm` and `npx` in one command (see the module docs).
    pub(crate) fn judge_doors(&self, words: &[Word], dirs: &[PathBuf], out: &mut Vec<Judgement>) {
        let Some(name) = words[0].exact() else {
            return;
        };
        let base = name.rsplit('/').next().unwrap_or(name);
        let text = short(&words.iter().map(Word::text).collect::<Vec<_>>().join(" "));
        let args = &words[1..];
        match base {
            "git" => self.git(args, &text, dirs, out),
            "make" | "gmake" => make(args, &text, out),
            "npm" => npm(args, &text, out),
            "npx" => out.push(firm(
                Decision::Deny,
                format!(
                    "{text}: `npx` runs a package from the registry, code nobody here has seen",
                    text = quote_capped(&text)
                ),
            )),
            _ => {}
        }
    }

    fn git(&self, args: &[Word], text: &str, dirs: &[PathBuf], out: &mut Vec<Judgement>) {
        let deny = |why: String| {
            firm(
                Decision::Deny,
                format!("{text}: {why}", text = quote_capped(text)),
            )
        };
        let mut git_dirs: Vec<PathBuf> = dirs.to_vec();
        let mut i = 0;
        // Global options, up to the subcommand.
        while let Some(w) = args.get(i) {
            let Some(a) = w.exact() else {
                return out.push(deny(format!(
                    "{} is computed at run time, so which git command runs cannot be checked",
                    quote_capped(w.text())
                )));
            };
            let (flag, attached) = split_long(a);
            let value = |i: usize| -> Option<&Word> {
                if attached.is_some() {
                    None
                } else {
                    args.get(i + 1)
                }
            };
            let taken = usize::from(attached.is_none()) + 1;
            match flag {
                "-c" => {
                    let Some(kv) = value(i).and_then(Word::exact) else {
                        return out.push(deny(
                            "`-c` is given a setting computed at run time".to_owned(),
                        ));
                    };
                    let (key, val) = kv
                        .split_once('=')
                        .map_or((kv, Some("true")), |(k, v)| (k, Some(v)));
                    out.extend(git_config_key(key, val, &format!("git -c {kv}")));
                    i += 2;
                    continue;
                }
                "--config-env" => {
                    let kv = attached.or_else(|| value(i).and_then(Word::exact));
                    let Some(kv) = kv else {
                        return out.push(deny(
                            "`--config-env` is given a setting computed at run time".to_owned(),
                        ));
                    };
                    let key = kv.split_once('=').map_or(kv, |(k, _)| k);
                    out.extend(git_config_key(key, None, &format!("git --config-env {kv}")));
                    i += taken;
                    continue;
                }
                "-C" | "--git-dir" | "--work-tree" => {
                    let place = attached.or_else(|| value(i).and_then(Word::exact));
                    let Some(place) = place else {
                        return out.push(deny(format!(
                            "{flag} is given a directory named at run time",
                            flag = quote_capped(flag)
                        )));
                    };
                    let mut next = Vec::new();
                    for dir in &git_dirs {
                        match self.place(dir, place) {
                            Place::Inside(rel) => next.push(rel),
                            _ => {
                                return out.push(deny(format!(
                                    "{quoted}{} is outside the workspace",
                                    from(dir),
                                    quoted = quote_capped(&format!("{flag} {place}"))
                                )));
                            }
                        }
                    }
                    if flag == "-C" {
                        git_dirs = next;
                    }
                    i += taken;
                    continue;
                }
                "--exec-path" if attached.is_some() => {
                    return out.push(deny(format!(
                        "{a} makes git load its commands from another directory",
                        a = quote_capped(a)
                    )));
                }
                "--exec-path"
                | "-p"
                | "--paginate"
                | "-P"
                | "--no-pager"
                | "--bare"
                | "--no-replace-objects"
                | "--literal-pathspecs"
                | "--glob-pathspecs"
                | "--noglob-pathspecs"
                | "--icase-pathspecs"
                | "--no-optional-locks"
                | "--no-advice"
                | "--html-path"
                | "--man-path"
                | "--info-path"
                | "--version"
                | "-v"
                | "--help"
                | "-h"
                | "--namespace"
                | "--list-cmds"
                | "--super-prefix" => {
                    i += if matches!(flag, "--namespace" | "--super-prefix") && attached.is_none() {
                        2
                    } else {
                        1
                    };
                    continue;
                }
                _ if a.starts_with('-') => {
                    return out.push(firm(
                        Decision::Ask,
                        format!(
                            "{text}: the git option {a} is not one the policy knows",
                            text = quote_capped(text),
                            a = quote_capped(a)
                        ),
                    ));
                }
                _ => break,
            }
        }
        let Some(sub) = args.get(i).and_then(Word::exact) else {
            return;
        };
        let rest = &args[i + 1..];
        let lits: Vec<&str> = rest.iter().filter_map(Word::literal).collect();
        let has = |f: &str| {
            lits.iter()
                .any(|a| *a == f || a.strip_prefix(f).is_some_and(|r| r.starts_with('=')))
        };
        if let Some(t) = lits
            .iter()
            .find(|a| a.starts_with("ext::") || a.starts_with("fd::"))
        {
            return out.push(deny(format!(
                "`{}` is a transport that runs a command",
                short(t)
            )));
        }
        if let Some(f) = GIT_REMOTE_PROGRAM.iter().find(|f| has(f)) {
            return out.push(deny(format!(
                "{f} names the program git runs for the other side",
                f = quote_capped(f)
            )));
        }
        let refusal: Option<String> = match sub {
            "filter-branch" => Some(
                "`filter-branch` runs the shell snippets it is given on every commit".to_owned(),
            ),
            "instaweb" => Some("`instaweb` starts a web server and a browser".to_owned()),
            "daemon" => Some("`daemon` runs a server".to_owned()),
            "credential" | "credential-store" | "credential-cache" => {
                Some("`credential` prints or stores the credentials git keeps".to_owned())
            }
            "rebase" if has("--exec") || lits.iter().any(|a| short_cluster(a, 'x')) => {
                Some("`rebase --exec`/`-x` runs a command after each commit".to_owned())
            }
            "bisect" if lits.first() == Some(&"run") => {
                Some("`bisect run` runs a command at each step".to_owned())
            }
            "difftool" if has("--extcmd") || lits.iter().any(|a| short_cluster(a, 'x')) => {
                Some("`difftool --extcmd`/`-x` runs the command it is given".to_owned())
            }
            "grep"
                if has("--open-files-in-pager") || lits.iter().any(|a| short_cluster(a, 'O')) =>
            {
                Some("`grep --open-files-in-pager`/`-O` runs a pager program".to_owned())
            }
            "submodule" if lits.contains(&"foreach") => {
                Some("`submodule foreach` runs a command in every submodule".to_owned())
            }
            "clone" if lits.iter().any(|a| short_cluster(a, 'u')) => {
                Some("`clone -u` names the program git runs for the other side".to_owned())
            }
            "archive" | "fetch-pack" | "send-pack" if has("--exec") => {
                Some("`--exec` names the program git runs for the other side".to_owned())
            }
            "send-email" => [
                "--sendmail-cmd",
                "--to-cmd",
                "--cc-cmd",
                "--header-cmd",
                "--smtp-server",
            ]
            .iter()
            .find(|f| has(f))
            .map(|f| {
                format!(
                    "{quoted} runs the program it is given",
                    quoted = quote_capped(&format!("send-email {f}"))
                )
            }),
            _ => None,
        };
        if let Some(why) = refusal {
            return out.push(deny(why));
        }
        if matches!(sub, "clone" | "init") {
            self.git_template(rest, text, &git_dirs, out);
        }
        if sub == "clone" {
            // `git clone -c KEY=VALUE` / `--config KEY=VALUE` writes the new repository's config.
            let mut j = 0;
            while let Some(a) = rest.get(j).and_then(Word::literal) {
                let (flag, attached) = split_long(a);
                if flag == "-c" || flag == "--config" {
                    let kv = attached.or_else(|| rest.get(j + 1).and_then(Word::exact));
                    if let Some(kv) = kv {
                        let (key, val) =
                            kv.split_once('=').map_or((kv, None), |(k, v)| (k, Some(v)));
                        out.extend(git_config_key(key, val, &format!("git clone {flag} {kv}")));
                    }
                }
                j += 1;
            }
        }
        if sub == "config" {
            self.git_config(rest, text, &git_dirs, out);
        }
        for w in super::commands::output_files("git", args) {
            self.judge_write(&w, &git_dirs, out);
        }
    }

    fn git_template(&self, rest: &[Word], text: &str, dirs: &[PathBuf], out: &mut Vec<Judgement>) {
        for (j, w) in rest.iter().enumerate() {
            let Some(a) = w.literal() else { continue };
            let (flag, attached) = split_long(a);
            if flag != "--template" {
                continue;
            }
            let Some(t) = attached.or_else(|| rest.get(j + 1).and_then(Word::exact)) else {
                return out.push(firm(
                    Decision::Deny,
                    format!(
                        "{text}: `--template` is given a directory named at run time",
                        text = quote_capped(text)
                    ),
                ));
            };
            if self.outside_from(dirs, t).is_some() {
                return out.push(firm(
                    Decision::Deny,
                    format!(
                        "{text}: {quoted} copies hooks from outside the workspace into the new repository",
                        text = quote_capped(text),
                        quoted = quote_capped(&format!("--template {t}"))
                    ),
                ));
            }
            out.push(firm(
                Decision::Ask,
                format!(
                    "{text}: {quoted} copies the hooks found there into the new repository",
                    text = quote_capped(text),
                    quoted = quote_capped(&format!("--template {t}"))
                ),
            ));
        }
    }

    /// `git config …`: an edit runs the editor; a write is judged by its scope and its key.
    fn git_config(&self, rest: &[Word], text: &str, dirs: &[PathBuf], out: &mut Vec<Judgement>) {
        let deny = |why: String| {
            firm(
                Decision::Deny,
                format!("{text}: {why}", text = quote_capped(text)),
            )
        };
        let mut positional: Vec<&Word> = Vec::new();
        let mut scope: Option<&str> = None;
        let mut action: Option<&str> = None;
        let mut j = 0;
        while let Some(w) = rest.get(j) {
            j += 1;
            let Some(a) = w.literal() else {
                positional.push(w);
                continue;
            };
            let (flag, attached) = split_long(a);
            match flag {
                "--global" | "--system" => scope = Some(flag),
                "--local" | "--worktree" | "--includes" | "--no-includes" | "--show-origin"
                | "--show-scope" | "--name-only" | "-z" | "--null" | "--bool" | "--int"
                | "--bool-or-int" | "--path" | "--expiry-date" | "--all" | "--fixed-value" => {}
                "--file" | "-f" | "--blob" => {
                    let f = attached.or_else(|| rest.get(j).and_then(Word::exact));
                    if attached.is_none() {
                        j += 1;
                    }
                    let Some(f) = f else {
                        return out.push(deny(format!(
                            "{flag} is given a file named at run time",
                            flag = quote_capped(flag)
                        )));
                    };
                    if flag != "--blob"
                        && let Some(dir) = self.outside_from(dirs, f)
                    {
                        return out.push(deny(format!(
                            "{quoted}{} is outside the workspace",
                            from(dir),
                            quoted = quote_capped(&format!("{flag} {f}"))
                        )));
                    }
                }
                "--type" | "--default" | "--comment" => {
                    if attached.is_none() {
                        j += 1;
                    }
                }
                "-e" | "--edit" => action = Some("edit"),
                "-l" | "--list" | "--get" | "--get-all" | "--get-regexp" | "--get-urlmatch"
                | "--get-color" | "--get-colorbool" => action = Some("get"),
                "--add" | "--replace-all" => action = Some("set"),
                "--unset" | "--unset-all" | "--rename-section" | "--remove-section" => {
                    action = Some("unset");
                }
                _ if a.starts_with('-') => {
                    return out.push(firm(
                        Decision::Ask,
                        format!(
                            "{text}: the `git config` option {a} is not one the policy knows",
                            text = quote_capped(text),
                            a = quote_capped(a)
                        ),
                    ));
                }
                _ => positional.push(w),
            }
        }
        // The subcommand forms (git 2.46+): `git config set KEY VALUE`, `get`, `list`, …
        if action.is_none()
            && let Some(first) = positional.first().and_then(|w| w.exact())
            && matches!(
                first,
                "list" | "get" | "set" | "unset" | "rename-section" | "remove-section" | "edit"
            )
        {
            action = Some(match first {
                "list" | "get" => "get",
                "set" => "set",
                "edit" => "edit",
                _ => "unset",
            });
            positional.remove(0);
        }
        let action = action.unwrap_or(if positional.len() >= 2 { "set" } else { "get" });
        match action {
            "edit" => out.push(deny(
                "`git config --edit` runs the configured editor, a program".to_owned(),
            )),
            "get" => {}
            _ => {
                if let Some(s) = scope {
                    return out.push(deny(format!(
                        "{quoted} writes a configuration file outside the workspace; the sandbox would refuse it, so no approval is asked",
                        quoted = quote_capped(&format!("git config {s}"))
                    )));
                }
                if action == "set" {
                    let Some(key) = positional.first().and_then(|w| w.exact()) else {
                        return out.push(deny(
                            "`git config` writes a key named at run time".to_owned(),
                        ));
                    };
                    let value = positional.get(1).map(|w| w.exact());
                    match value {
                        Some(None) => {
                            out.extend(git_config_key(key, None, &format!("git config {key} …")))
                        }
                        Some(Some(v)) => out.extend(git_config_key(
                            key,
                            Some(v),
                            &format!("git config {key} {v}"),
                        )),
                        None => out.extend(git_config_key(key, None, &format!("git config {key}"))),
                    }
                }
            }
        }
    }
}

/// The subcommand of `git ARGS` and its index in ARGS, skipping global options.
pub(crate) fn git_subcommand(args: &[Word]) -> Option<(&str, usize)> {
    let mut i = 0;
    while let Some(a) = args.get(i).and_then(Word::exact) {
        match a {
            "-c" | "-C" | "--config-env" | "--git-dir" | "--work-tree" | "--namespace"
            | "--super-prefix" => i += 2,
            _ if a.starts_with('-') => i += 1,
            _ => return Some((a, i)),
        }
    }
    None
}

/// Classifies one git configuration key (see the module docs): `Some` firm deny for a key
/// that runs a program or moves where git loads code, `None` for a harmless key, `Some` firm
/// ask for any other. `value` is `None` when it is not known before the run. `how` is how the
/// setting was written, for the reason.
pub(crate) fn git_config_key(key: &str, value: Option<&str>, how: &str) -> Option<Judgement> {
    let k = key.to_ascii_lowercase();
    let section = k.split('.').next().unwrap_or_default();
    let name = k.rsplit('.').next().unwrap_or_default();
    let has_sub = k.matches('.').count() >= 2;
    let bang = value.is_none_or(|v| v.trim_start().starts_with('!'));
    let runs = matches!(
        k.as_str(),
        "core.pager"
            | "core.editor"
            | "sequence.editor"
            | "core.sshcommand"
            | "core.gitproxy"
            | "core.askpass"
            | "core.fsmonitor"
            | "core.hookspath"
            | "core.worktree"
            | "core.alternaterefscommand"
            | "diff.external"
            | "include.path"
            | "credential.helper"
            | "gpg.program"
            | "init.templatedir"
            | "interactive.difffilter"
            | "web.browser"
            | "imap.tunnel"
            | "safe.barerepository"
            | "sendemail.sendmailcmd"
            | "sendemail.smtpserver"
            | "sendemail.tocmd"
            | "sendemail.cccmd"
            | "sendemail.headercmd"
    ) || matches!(
        section,
        "pager" | "filter" | "includeif" | "uploadpack" | "receivepack" | "browser" | "man"
    ) || (section == "diff" && has_sub && matches!(name, "command" | "textconv"))
        || (section == "merge" && has_sub && name == "driver")
        || (matches!(section, "mergetool" | "difftool") && has_sub && name == "cmd")
        || (section == "alias" && bang)
        || (section == "remote"
            && has_sub
            && matches!(name, "uploadpack" | "receivepack" | "proxy"))
        || (section == "protocol" && name == "allow")
        || (section == "credential" && name == "helper")
        || (section == "gpg" && has_sub && name == "program")
        || (section == "trailer" && has_sub && matches!(name, "command" | "cmd"))
        || (section == "submodule" && has_sub && name == "update" && bang);
    if runs {
        let what = if k == "safe.barerepository" {
            "dsh keeps it `explicit`, so a bare repository in the workspace cannot run code"
        } else {
            "it names a program git runs or moves where git loads code from"
        };
        return Some(firm(
            Decision::Deny,
            format!(
                "`{}` sets the git setting {key}: {what}",
                short(how),
                key = quote_capped(key)
            ),
        ));
    }
    let harmless = GIT_HARMLESS.iter().any(|h| match h.strip_suffix(".*") {
        Some(sec) => section == sec,
        None => *h == k,
    }) || (matches!(k.as_str(), "commit.gpgsign" | "tag.gpgsign")
        && value.is_some_and(|v| v.eq_ignore_ascii_case("false")));
    if harmless {
        return None;
    }
    Some(firm(
        Decision::Ask,
        format!(
            "`{}` sets the git setting {key}, which the policy does not know to be harmless; a person must approve it, whatever the rules say",
            short(how),
            key = quote_capped(key)
        ),
    ))
}

/// `--flag=value` as (`--flag`, Some(value)); anything else as (word, None).
fn split_long(a: &str) -> (&str, Option<&str>) {
    match a.split_once('=') {
        Some((f, v)) if f.starts_with("--") => (f, Some(v)),
        _ => (a, None),
    }
}

/// Whether `a` is a short-flag cluster (`-x`, `-ix`) holding `flag`.
fn short_cluster(a: &str, flag: char) -> bool {
    a.starts_with('-') && !a.starts_with("--") && a.len() > 1 && a[1..].contains(flag)
}

fn make(args: &[Word], text: &str, out: &mut Vec<Judgement>) {
    let deny = |why: String| {
        firm(
            Decision::Deny,
            format!("{text}: {why}", text = quote_capped(text)),
        )
    };
    for (i, w) in args.iter().enumerate() {
        let a = w.literal().unwrap_or_else(|| w.text());
        let (flag, _) = split_long(a);
        if flag == "--eval" || (a.starts_with("-E") && !a.starts_with("--")) {
            return out.push(deny(format!(
                "{a} makes make evaluate the text it is given",
                a = quote_capped(a)
            )));
        }
        if a.starts_with('-') {
            continue;
        }
        let Some((var, value)) = a.split_once('=') else {
            continue;
        };
        let var = var.trim_end_matches([':', '?', '+', '!']);
        if matches!(var, "SHELL" | ".SHELLFLAGS" | "MAKESHELL") {
            return out.push(deny(format!(
                "`{var}=…` replaces the shell make runs every recipe with"
            )));
        }
        let value_dyn = w.literal().is_none();
        if let Some(f) = ["shell", "eval", "file", "guile"]
            .iter()
            .find(|f| value.contains(&format!("$({f}")) || value.contains(&format!("${{{f}")))
        {
            return out.push(deny(format!(
                "{var} holds `$({f} …)`, which make evaluates to run or write something else",
                var = quote_capped(var)
            )));
        }
        if value_dyn && (value.contains("$(") || value.contains('`')) {
            return out.push(deny(format!(
                "{} (argument {}) gives make a variable computed at run time",
                quote_capped(w.text()),
                i + 1
            )));
        }
    }
}

fn npm(args: &[Word], text: &str, out: &mut Vec<Judgement>) {
    let deny = |why: String| {
        firm(
            Decision::Deny,
            format!("{text}: {why}", text = quote_capped(text)),
        )
    };
    let lits: Vec<&str> = args
        .iter()
        .map(|w| w.literal().unwrap_or_else(|| w.text()))
        .take_while(|a| *a != "--")
        .collect();
    for a in &lits {
        let (flag, _) = split_long(a);
        if matches!(
            flag,
            "--script-shell" | "--node-options" | "--userconfig" | "--globalconfig" | "--shell"
        ) {
            return out.push(deny(format!(
                "{flag} makes npm run another program or read other settings",
                flag = quote_capped(flag)
            )));
        }
    }
    let sub_at = lits.iter().position(|a| !a.starts_with('-'));
    let Some(sub) = sub_at.map(|i| lits[i]) else {
        return;
    };
    let after: Vec<&str> = lits[sub_at.unwrap_or(0) + 1..]
        .iter()
        .copied()
        .filter(|a| !a.starts_with('-'))
        .collect();
    let why = match sub {
        "exec" | "x" => Some(format!(
            "`npm {sub}` runs a package from the registry, code nobody here has seen"
        )),
        "init" | "create" | "innit" if !after.is_empty() => Some(format!(
            "{} runs the {} package from the registry",
            quote_capped(&format!("npm {sub} {}", after[0])),
            quote_capped(&format!("create-{}", after[0]))
        )),
        "explore" => Some("`npm explore` runs a shell in a package".to_owned()),
        "config" | "c" if matches!(after.first(), Some(&"set")) => after
            .get(1)
            .map(|k| k.split('=').next().unwrap_or_default().to_ascii_lowercase())
            .filter(|k| {
                matches!(
                    k.as_str(),
                    "script-shell"
                        | "script_shell"
                        | "node-options"
                        | "node_options"
                        | "userconfig"
                        | "globalconfig"
                        | "shell"
                )
            })
            .map(|k| {
                format!(
                    "{quoted} makes npm run another program or read other settings",
                    quoted = quote_capped(&format!("npm config set {k}"))
                )
            }),
        _ => None,
    };
    if let Some(why) = why {
        out.push(deny(why));
    }
}
