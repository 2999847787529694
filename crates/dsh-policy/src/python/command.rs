//! A `python` command line, as the shell policy sees it: which code it runs and whether that
//! code passes the audit.

use std::path::{Path, PathBuf};

use dsh_core::{Workspace, quote_capped, quote_capped_path};

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

/// What the audit says of an interpreter command.
#[derive(Debug)]
pub(crate) enum AuditOutcome {
    /// What it runs passed the audit.
    Passed(String),
    Refused(String),
    /// `python -m pytest …` / `-m pip …`: judge the words from `from` on as `program`.
    AsProgram {
        program: &'static str,
        from: usize,
    },
}

/// Judges a command run in `cwd` (workspace-relative) whose words are given as their
/// literal values (`None`: known only at run time, or a glob), with `path` (absolute
/// `PYTHONPATH` directories inside the workspace) searched for local modules too. `None`
/// when the command is not a Python interpreter.
pub(crate) fn judge(
    ws: &Workspace,
    cwd: &Path,
    words: &[Option<&str>],
    path: &[PathBuf],
) -> Option<AuditOutcome> {
    let name = (*words.first()?)?;
    if !is_python(name) {
        return None;
    }
    let cx = Cx { ws, cwd, path };
    Some(match cx.args(&words[1..]) {
        Ok(Run::Passed(note)) => AuditOutcome::Passed(note),
        Ok(Run::As { program, at }) => AuditOutcome::AsProgram {
            program,
            from: at + 2,
        },
        Err(why) => AuditOutcome::Refused(why),
    })
}

enum Run {
    Passed(String),
    As { program: &'static str, at: usize },
}

struct Cx<'a> {
    ws: &'a Workspace,
    cwd: &'a Path,
    path: &'a [PathBuf],
}

impl Cx<'_> {
    fn args(&self, args: &[Option<&str>]) -> Result<Run, String> {
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
                        Some(Some(script)) => self.script(script).map(Run::Passed),
                        Some(None) => Err("the script is named at run time".to_owned()),
                        None => stdin(),
                    };
                }
                "-V" | "-VV" | "--version" | "-h" | "--help" | "-?" => {
                    return Ok(Run::Passed("prints its version or help".to_owned()));
                }
                _ if arg.starts_with("--") => {
                    return Err(format!(
                        "the interpreter option {arg} is not one the audit knows",
                        arg = quote_capped(arg)
                    ));
                }
                _ if arg.starts_with('-') => {
                    let flags = &arg[1..];
                    for (at, c) in flags.char_indices() {
                        match c {
                            _ if PLAIN_FLAGS.contains(c) => {}
                            'c' | 'm' => {
                                let rest = &flags[at + 1..];
                                let (value, next) = if rest.is_empty() {
                                    match args.get(i + 1) {
                                        Some(Some(v)) => (*v, i + 1),
                                        Some(None) => {
                                            return Err(format!(
                                                "`-{c}` is given a value computed at run time, which cannot be audited"
                                            ));
                                        }
                                        None => return Err(format!("`-{c}` is given nothing")),
                                    }
                                } else {
                                    (rest, i)
                                };
                                if c == 'c' {
                                    return super::audit_code_in(
                                        self.ws,
                                        &self.ws.root().join(self.cwd),
                                        self.path,
                                        value,
                                    )
                                    .map(|()| {
                                        Run::Passed("the `-c` code passed the audit".to_owned())
                                    })
                                    .map_err(|r| format!("the `-c` code is refused: {r}"));
                                }
                                return self.module(value, next);
                            }
                            'i' => {
                                return Err(
                                    "`python -i` runs interactively, which cannot be audited"
                                        .to_owned(),
                                );
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
                script => return self.script(script).map(Run::Passed),
            }
        }
    }

    fn script(&self, script: &str) -> Result<String, String> {
        if script.starts_with('~') {
            return Err(format!(
                "{script} is expanded by the shell to a path outside the workspace",
                script = quote_capped(script)
            ));
        }
        let given = if Path::new(script).is_absolute() {
            script.to_owned()
        } else {
            self.cwd.join(script).to_string_lossy().into_owned()
        };
        let audited = super::audit_file_in(self.ws, &given, self.path)
            .map_err(|r| format!("{script} is refused: {r}", script = quote_capped(script)))?;
        Ok(format!(
            "{} passed the audit (sha256 {})",
            quote_capped_path(&audited.rel),
            &audited.sha256[..16]
        ))
    }

    /// `python -m MODULE` (see the table in the module docs). `at` is MODULE's index.
    fn module(&self, module: &str, at: usize) -> Result<Run, String> {
        let m = quote_capped(&format!("-m {module}"));
        let valid = !module.is_empty()
            && module.split('.').all(|p| {
                !p.is_empty()
                    && p.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
        if !valid {
            return Err(format!("{m} is not a module name"));
        }
        // `-m` looks in the current directory (and PYTHONPATH) before anything installed.
        let rel: PathBuf = module.split('.').collect();
        let dirs = std::iter::once(self.ws.root().join(self.cwd)).chain(self.path.iter().cloned());
        for dir in dirs {
            let file = dir.join(&rel).with_extension("py");
            let main = dir.join(&rel).join("__main__.py");
            let top = dir.join(module.split('.').next().unwrap_or_default());
            for candidate in [file, main] {
                if candidate.exists() {
                    let shown = candidate.to_string_lossy().into_owned();
                    return self
                        .script(&shown)
                        .map(|note| Run::Passed(format!("{m} is a local module: {note}")));
                }
            }
            if top.exists() || top.with_extension("py").exists() {
                return Err(format!(
                    "{m}: {} is in the workspace but holds no module file the audit can read",
                    quote_capped_path(&top)
                ));
            }
        }
        let first = module.split('.').next().unwrap_or_default();
        match first {
            "pytest" | "py" if module == "pytest" || module == "py.test" => Ok(Run::As {
                program: "pytest",
                at,
            }),
            "pip" | "pip3" if module == first => Ok(Run::As { program: "pip", at }),
            "pdb" | "code" | "idlelib" | "IPython" | "ipdb" | "pudb" | "bpython" | "ptpython"
            | "idle" | "turtledemo" => Err(format!("{m} is interactive, and there is no terminal")),
            "timeit" | "cProfile" | "profile" | "trace" | "runpy" | "doctest" | "pydoc"
            | "ensurepip" => Err(format!(
                "{m} runs code or a script it is given without the audit; run the script itself (`python script.py`)"
            )),
            _ => Ok(Run::Passed(format!(
                "{m} runs an installed or standard module, which is not audited; it asks like `python` itself"
            ))),
        }
    }
}

/// A line-level reason to refuse a line that runs Python: it hides a payload the policy does
/// not unwrap (`env -S`, `env -C`), so the script audited may not be the one run. (`cd` is
/// followed by the shell policy, and `PYTHON*` variables are judged as assignments.)
pub(crate) fn hidden_context(line: &str, commands: &[Vec<Option<&str>>]) -> Option<String> {
    if !line.contains("python") {
        return None;
    }
    for words in commands {
        let name = words.first().copied().flatten().unwrap_or_default();
        let name = name.rsplit('/').next().unwrap_or(name);
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
    None
}
