//! A `python` command line, as the shell policy sees it: which code it runs and whether that
//! code passes the audit.

use dsh_core::Workspace;

use super::{audit_code, audit_file};

/// Interpreter flags without a value that change nothing the audit relies on.
const PLAIN_FLAGS: &str = "uBEsSIOqbdRP";

/// Whether `name` (a command name, maybe a path) is a Python interpreter: `python`,
/// `python3`, `python3.12`, `.venv/bin/python`, …
pub(crate) fn is_python(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    let Some(version) = base.strip_prefix("python") else {
        return false;
    };
    version.is_empty()
        || (version.split('.').count() <= 2
            && version
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
}

/// Judges a command whose words are given as their literal values (`None`: known only at
/// run time, or a glob). `None` when the command is not a Python interpreter; else
/// `Ok(note)` when what it runs passed the audit, `Err(reason)` when it is refused.
pub(crate) fn judge(ws: &Workspace, words: &[Option<&str>]) -> Option<Result<String, String>> {
    let name = (*words.first()?)?;
    if !is_python(name) {
        return None;
    }
    Some(judge_args(ws, &words[1..]))
}

fn judge_args(ws: &Workspace, args: &[Option<&str>]) -> Result<String, String> {
    let stdin = || {
        Err("Python reading its program from standard input or a terminal cannot be audited; write a script file and run it".to_owned())
    };
    let mut i = 0;
    loop {
        let Some(arg) = args.get(i) else {
            return stdin();
        };
        let Some(arg) = *arg else {
            return Err(
                "an argument of `python` is computed at run time, so what it runs cannot be audited"
                    .to_owned(),
            );
        };
        match arg {
            "-" => return stdin(),
            "--" => {
                return match args.get(i + 1) {
                    Some(Some(script)) => script_file(ws, script),
                    Some(None) => Err("the script is named at run time".to_owned()),
                    None => stdin(),
                };
            }
            "-V" | "-VV" | "--version" | "-h" | "--help" | "-?" => {
                return Ok("prints its version or help".to_owned());
            }
            _ if arg.starts_with("--") => {
                return Err(format!(
                    "the interpreter option `{arg}` is not one the audit knows"
                ));
            }
            _ if arg.starts_with('-') => {
                let flags = &arg[1..];
                for (at, c) in flags.char_indices() {
                    match c {
                        _ if PLAIN_FLAGS.contains(c) => {}
                        'c' => {
                            let rest = &flags[at + 1..];
                            let code = if rest.is_empty() {
                                match args.get(i + 1) {
                                    Some(Some(code)) => *code,
                                    Some(None) => {
                                        return Err("`-c` is given code computed at run time, which cannot be audited".to_owned());
                                    }
                                    None => return Err("`-c` is given no code".to_owned()),
                                }
                            } else {
                                rest
                            };
                            return audit_code(ws, code)
                                .map(|()| "the `-c` code passed the audit".to_owned())
                                .map_err(|r| format!("the `-c` code is refused: {r}"));
                        }
                        'm' => {
                            return Err("`python -m` runs a module the audit cannot see; run `pytest` or `pip` directly, or write a script".to_owned());
                        }
                        'i' => {
                            return Err("`python -i` runs interactively, which cannot be audited"
                                .to_owned());
                        }
                        _ => {
                            return Err(format!(
                                "the interpreter option `-{c}` is not one the audit knows"
                            ));
                        }
                    }
                }
                i += 1;
            }
            script => return script_file(ws, script),
        }
    }
}

fn script_file(ws: &Workspace, script: &str) -> Result<String, String> {
    if script.starts_with('~') {
        return Err(format!(
            "`{script}` is expanded by the shell to a path outside the workspace"
        ));
    }
    let audited = audit_file(ws, script).map_err(|r| format!("`{script}` is refused: {r}"))?;
    Ok(format!(
        "`{}` passed the audit (sha256 {})",
        audited.rel.display(),
        &audited.sha256[..16]
    ))
}

/// A line-level reason to refuse a line that runs Python: it changes directory first (so the
/// script audited is not the one run), hides a payload the policy does not unwrap
/// (`env -S`, `env -C`), or sets a `PYTHON*` variable (`PYTHONHOME`, `PYTHONINSPECT`, …)
/// that changes what the interpreter loads. The check is on the text, so it is conservative:
/// any line that names `python` at all.
pub(crate) fn hidden_context(line: &str, commands: &[Vec<Option<&str>>]) -> Option<String> {
    if !line.contains("python") {
        return None;
    }
    for words in commands {
        let name = words.first().copied().flatten().unwrap_or_default();
        let name = name.rsplit('/').next().unwrap_or(name);
        if matches!(name, "cd" | "pushd" | "popd") {
            return Some(format!(
                "{}the line changes directory with `{name}` and runs Python; the audit checks scripts from the workspace root, so run the script by its path instead",
                super::TAG
            ));
        }
        if name == "env"
            && words[1..].iter().any(|w| {
                w.is_none_or(|w| {
                    w.starts_with("-C")
                        || w.starts_with("-S")
                        || w.starts_with("--chdir")
                        || w.starts_with("--split-string")
                })
            })
        {
            return Some(format!(
                "{}`env` changes directory or splits a string before running Python, so the audited script may not be the one run",
                super::TAG
            ));
        }
    }
    let bytes = line.as_bytes();
    for (at, _) in line.match_indices("PYTHON") {
        let rest = &bytes[at..];
        let end = rest
            .iter()
            .position(|b| !(b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_'))
            .unwrap_or(rest.len());
        if rest.get(end) == Some(&b'=') {
            return Some(format!(
                "{}the line sets `{}` and runs Python; `PYTHON*` variables change what the interpreter loads, so the line is refused",
                super::TAG,
                &line[at..at + end]
            ));
        }
    }
    None
}
