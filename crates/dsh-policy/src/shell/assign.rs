//! Assignments that change what a program loads or runs — in front of a command (`X=1 cmd`),
//! under `env`, on their own (`X=1; cmd`) or under `export`. They are judged whatever the
//! command, and no rule lifts the decision:
//!
//! | variables | decision |
//! |---|---|
//! | `LD_*`, `DYLD_*`, `BASH_FUNC_*`, `PATH`, `IFS`, `PS4`, `PROMPT_COMMAND`, `BASH_ENV`, `ENV`, `SHELLOPTS`, `BASHOPTS`, `CDPATH`, `GLOBIGNORE`, `PERL5OPT`, `PERL5LIB`, `RUBYOPT`, `RUBYLIB`, `JAVA_TOOL_OPTIONS`, `GCONV_PATH`, `LESSOPEN`, `HOME`, `XDG_CONFIG_HOME`, `GIT_EXEC_PATH`, `GIT_CONFIG`, `GIT_CONFIG_GLOBAL`, `GIT_CONFIG_SYSTEM`, `GIT_CONFIG_PARAMETERS`, … ([`LOADS_CODE`]) | deny |
//! | `PAGER`, `EDITOR`, `VISUAL`, `GIT_PAGER`, `GIT_EDITOR`, `GIT_SEQUENCE_EDITOR`, `GIT_SSH`, `GIT_SSH_COMMAND`, `GIT_EXTERNAL_DIFF`, `GIT_ASKPASS`, `SSH_ASKPASS`, `GIT_PROXY_COMMAND`, `MANPAGER`, `BROWSER` ([`NAMES_A_PROGRAM`]) | deny, unless the value is itself a free command (`cat`, `true`, …) |
//! | `PYTHONPATH`, `NODE_PATH` | every entry inside the workspace: the command's own decision (the audit looks for local modules there too); outside or named at run time: deny |
//! | `GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`, `GIT_COMMON_DIR`, `GIT_OBJECT_DIRECTORY`, `GIT_TEMPLATE_DIR` | outside the workspace or named at run time: deny |
//! | `GIT_CONFIG_KEY_n` | judged as a `git -c` key ([`super::doors`]) |
//! | `NODE_OPTIONS` | with `--require`/`-r`/`--import`/`--loader`/`--experimental-loader`: deny |
//! | `npm_config_script_shell`, `npm_config_node_options`, `npm_config_userconfig`, `npm_config_globalconfig`, `npm_config_shell` (any case) | deny |
//! | `MAKEFLAGS`, `MFLAGS` | holding `SHELL`, `--eval`, `-E` or `$(shell`: deny |
//! | other `PYTHON*` | deny, except the harmless [`PYTHON_HARMLESS`] (`PYTHONUNBUFFERED=1`, …) |
//! | anything else (`NO_COLOR=1`, `CI=1`, `RUST_BACKTRACE=1`, `LANG=C`, …) | the command's own decision |

use std::path::{Path, PathBuf};

use dsh_core::quote_capped;

use super::judge::{Env, firm};
use super::places::{Place, from};
use super::words::{Word, short};
use super::{Decision, Judgement, ShellPolicy};

/// Variables whose value makes a program load or run code, or read configuration that may.
pub(crate) const LOADS_CODE: &[&str] = &[
    "PATH",
    "IFS",
    "PS4",
    "PROMPT_COMMAND",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "CDPATH",
    "GLOBIGNORE",
    "BASH_LOADABLES_PATH",
    "BASH_XTRACEFD",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONINSPECT",
    "PYTHONUSERBASE",
    "PYTHONPLATLIBDIR",
    "PYTHONEXECUTABLE",
    "PYTHONBREAKPOINT",
    "PYTHONWARNINGS",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "GCONV_PATH",
    "LUA_INIT",
    "LUA_PATH",
    "LUA_CPATH",
    "LESSOPEN",
    "LESSCLOSE",
    // A configuration file of flags (`--pre=PROGRAM`) the line does not show.
    "RIPGREP_CONFIG_PATH",
    // Where programs read their user configuration (`~/.gitconfig`, `~/.npmrc`).
    "HOME",
    "XDG_CONFIG_HOME",
    "GIT_EXEC_PATH",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_PARAMETERS",
];

/// Variables that name a program to run: allowed only when the value is a free command.
pub(crate) const NAMES_A_PROGRAM: &[&str] = &[
    "PAGER",
    "EDITOR",
    "VISUAL",
    "MANPAGER",
    "BROWSER",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PROXY_COMMAND",
];

/// `PYTHON*` variables that change nothing Python loads.
pub(crate) const PYTHON_HARMLESS: &[&str] = &[
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONHASHSEED",
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "PYTHONFAULTHANDLER",
    "PYTHONOPTIMIZE",
    "PYTHONNOUSERSITE",
    "PYTHONSAFEPATH",
    "PYTHONDEVMODE",
    "PYTHONWARNDEFAULTENCODING",
    "PYTHONINTMAXSTRDIGITS",
    "PYTHONTRACEMALLOC",
    "PYTHONVERBOSE",
    "PYTHONCOERCECLOCALE",
];

/// Git variables naming a directory or file: outside the workspace they are refused.
const GIT_PLACES: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_TEMPLATE_DIR",
];

/// npm settings (as `npm_config_*`, any case) that run a program or load more settings.
const NPM_DOORS: &[&str] = &[
    "script_shell",
    "script-shell",
    "node_options",
    "node-options",
    "userconfig",
    "globalconfig",
    "shell",
];

/// Why removing `name` from the environment is refused, if it is.
pub(crate) fn unset_refusal(name: &str) -> Option<String> {
    name.starts_with("GIT_CONFIG").then(|| {
        format!(
            "removing {name} drops the settings dsh gives every command (safe.bareRepository=explicit, core.fsmonitor=false)",
            name = quote_capped(name)
        )
    })
}

impl ShellPolicy {
    /// Judges one assignment (see the module docs). `text` is the assignment as written.
    pub(crate) fn judge_assignment(
        &self,
        name: &str,
        value: &Word,
        text: &str,
        dirs: &[PathBuf],
        out: &mut Vec<Judgement>,
    ) {
        let text = short(text);
        let deny = |why: String| {
            firm(
                Decision::Deny,
                format!("{text} {why}", text = quote_capped(&text)),
            )
        };
        let upper = name.to_ascii_uppercase();
        if LOADS_CODE.contains(&name)
            || name.starts_with("LD_")
            || name.starts_with("DYLD_")
            || name.starts_with("BASH_FUNC_")
        {
            return out.push(deny(format!(
                "assigns {name}, which changes what programs load or run"
            )));
        }
        if NAMES_A_PROGRAM.contains(&name) {
            if !self.free_command(value) {
                out.push(deny(format!(
                    "sets {name}, which names a program to run, to {}, which is not a free command",
                    quote_capped(value.text())
                )));
            }
            return;
        }
        if name == "PYTHONPATH" || name == "NODE_PATH" {
            return self.judge_search_path(name, value, &text, dirs, out);
        }
        if GIT_PLACES.contains(&name) {
            return self.judge_git_place(name, value, &text, dirs, out);
        }
        if name.starts_with("GIT_CONFIG_") {
            if let Some(key_no) = name.strip_prefix("GIT_CONFIG_KEY_") {
                let Some(key) = value.exact() else {
                    return out.push(deny(format!(
                        "sets a git configuration key (#{key_no}) named at run time"
                    )));
                };
                if let Some(j) = super::doors::git_config_key(key, None, &text) {
                    out.push(j);
                }
            }
            return;
        }
        if name.starts_with("PYTHON") && !PYTHON_HARMLESS.contains(&name) {
            return out.push(deny(format!(
                "sets {name}; `PYTHON*` variables other than the harmless ones (PYTHONUNBUFFERED, PYTHONDONTWRITEBYTECODE, PYTHONHASHSEED, …) change what the interpreter loads"
            )));
        }
        if name == "NODE_OPTIONS" {
            let Some(v) = value.exact() else {
                return out.push(deny("sets NODE_OPTIONS at run time".to_owned()));
            };
            if let Some(flag) = v.split_whitespace().find(|t| {
                let t = t.split('=').next().unwrap_or_default();
                matches!(
                    t,
                    "--require" | "-r" | "--import" | "--loader" | "--experimental-loader"
                )
            }) {
                out.push(deny(format!(
                    "puts {flag} in NODE_OPTIONS, which makes every node process load code first",
                    flag = quote_capped(flag)
                )));
            }
            return;
        }
        if let Some(key) = upper.strip_prefix("NPM_CONFIG_") {
            let key = key.to_ascii_lowercase();
            if NPM_DOORS.contains(&key.as_str()) {
                out.push(deny(format!(
                    "sets npm's {key}, which makes npm run a program or read other settings",
                    key = quote_capped(&key)
                )));
            }
            return;
        }
        if matches!(name, "MAKEFLAGS" | "MFLAGS") {
            let risky = value.exact().is_none_or(|v| {
                v.contains("SHELL")
                    || v.contains("--eval")
                    || v.contains("$(shell")
                    || v.split_whitespace().any(|t| t.starts_with("-E"))
            });
            if risky {
                out.push(deny(format!(
                    "sets {name} with a shell, an `--eval` or a `$(shell …)`, which makes make run other code"
                )));
            }
        }
    }

    /// Whether `value` names a free command: empty, `true`, `:`, or a line the policy allows.
    fn free_command(&self, value: &Word) -> bool {
        let Some(v) = value.exact() else {
            return false;
        };
        let v = v.trim();
        v.is_empty()
            || matches!(v, "true" | ":" | "false")
            || self.decide(v).decision == Decision::Allow
    }

    /// `PYTHONPATH` / `NODE_PATH`: every entry must be inside the workspace.
    fn judge_search_path(
        &self,
        name: &str,
        value: &Word,
        text: &str,
        dirs: &[PathBuf],
        out: &mut Vec<Judgement>,
    ) {
        let Some(v) = value.exact() else {
            return out.push(firm(
                Decision::Deny,
                format!(
                    "{text} sets {name} to directories named at run time",
                    text = quote_capped(text)
                ),
            ));
        };
        for entry in v.split(':').filter(|e| !e.is_empty()) {
            if let Some(dir) = self.outside_from(dirs, entry) {
                return out.push(firm(
                    Decision::Deny,
                    format!(
                        "{text} puts {entry}{}, outside the workspace, on {name}, so modules from there would be loaded",
                        from(dir),
                        text = quote_capped(text),
                        entry = quote_capped(entry)
                    ),
                ));
            }
        }
    }

    fn judge_git_place(
        &self,
        name: &str,
        value: &Word,
        text: &str,
        dirs: &[PathBuf],
        out: &mut Vec<Judgement>,
    ) {
        let Some(v) = value.exact() else {
            return out.push(firm(
                Decision::Deny,
                format!(
                    "{text} sets {name} to a place named at run time",
                    text = quote_capped(text)
                ),
            ));
        };
        if let Some(dir) = self.outside_from(dirs, v) {
            out.push(firm(
                Decision::Deny,
                format!(
                    "{text} points {name} at {v}{}, outside the workspace",
                    from(dir),
                    text = quote_capped(text),
                    v = quote_capped(v)
                ),
            ));
        }
    }

    /// The directories the audit looks for local modules in beyond the script's own:
    /// `PYTHONPATH` entries inside the workspace, absolute.
    pub(crate) fn python_path(&self, dir: &Path, env: &Env<'_>) -> Vec<PathBuf> {
        env.iter()
            .filter(|(name, _)| *name == "PYTHONPATH")
            .filter_map(|(_, value)| value.exact())
            .flat_map(|v| v.split(':'))
            .filter(|e| !e.is_empty())
            .filter_map(|e| match self.place(dir, e) {
                Place::Inside(rel) => Some(self.workspace.root().join(rel)),
                _ => None,
            })
            .collect()
    }
}
