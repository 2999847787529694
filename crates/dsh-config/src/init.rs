//! `dsh init`: a commented `.dsh/config.toml` for a project, from what its files say it is —
//! Cargo, npm/pnpm/yarn, Python (pytest, with uv or poetry), Go, Make. The project's own test
//! command becomes `[verify] command`; its build and test commands become narrow allow rules,
//! written commented out for the person to accept one by one. Nothing is run and no model is
//! asked: only file names and a few manifests are read.

use std::path::Path;

/// One ecosystem a project's files show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ecosystem {
    /// `Cargo`, `npm`, `Python (uv)`, …
    pub name: String,
    /// The file that shows it.
    pub marker: String,
    /// Its test command, when one is known.
    pub test: Option<String>,
    /// Allow rules for its build and test commands, in the rule grammar.
    pub allow: Vec<String>,
}

/// What a project's files show, in the order its test command is preferred.
pub fn detect(root: &Path) -> Vec<Ecosystem> {
    let mut out = Vec::new();
    let has = |name: &str| root.join(name).exists();
    let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap_or_default();
    let rules = |cmds: &[&str]| -> Vec<String> {
        cmds.iter().map(|c| format!("run_shell({c} *)")).collect()
    };

    if has("Cargo.toml") {
        out.push(Ecosystem {
            name: "Cargo".into(),
            marker: "Cargo.toml".into(),
            test: Some("cargo test".into()),
            allow: rules(&[
                "cargo build",
                "cargo check",
                "cargo test",
                "cargo clippy",
                "cargo fmt",
            ]),
        });
    }
    if has("go.mod") {
        out.push(Ecosystem {
            name: "Go".into(),
            marker: "go.mod".into(),
            test: Some("go test ./...".into()),
            allow: rules(&["go build", "go test", "go vet"]),
        });
    }
    if has("package.json") {
        let manager = if has("pnpm-lock.yaml") {
            "pnpm"
        } else if has("yarn.lock") {
            "yarn"
        } else {
            "npm"
        };
        let manifest: serde_json::Value =
            serde_json::from_str(&read("package.json")).unwrap_or_default();
        let script = |name: &str| manifest["scripts"].get(name).is_some_and(|s| s.is_string());
        let mut cmds = Vec::new();
        let test = script("test").then(|| format!("{manager} test"));
        if let Some(t) = &test {
            cmds.push(t.clone());
        }
        for name in ["build", "lint", "typecheck"] {
            if script(name) {
                cmds.push(format!("{manager} run {name}"));
            }
        }
        out.push(Ecosystem {
            name: manager.into(),
            marker: "package.json".into(),
            test,
            allow: cmds.iter().map(|c| format!("run_shell({c} *)")).collect(),
        });
    }
    let python_marker = [
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "requirements.txt",
    ]
    .into_iter()
    .find(|m| has(m));
    if let Some(marker) = python_marker {
        let pyproject = read("pyproject.toml");
        let runner = if has("uv.lock") {
            Some(("Python (uv)", "uv run pytest"))
        } else if has("poetry.lock") || pyproject.contains("[tool.poetry") {
            Some(("Python (poetry)", "poetry run pytest"))
        } else {
            None
        };
        let uses_pytest = has("pytest.ini")
            || has("conftest.py")
            || has("tests/conftest.py")
            || pyproject.contains("pytest")
            || read("requirements.txt").contains("pytest")
            || read("setup.cfg").contains("pytest")
            || has("tests");
        let (name, command) = runner.unwrap_or(("Python", "python3 -m pytest"));
        out.push(Ecosystem {
            name: name.into(),
            marker: marker.into(),
            test: uses_pytest.then(|| command.to_owned()),
            allow: if uses_pytest {
                rules(&[command])
            } else {
                Vec::new()
            },
        });
    }
    let makefile = ["Makefile", "makefile", "GNUmakefile"]
        .into_iter()
        .find(|m| has(m));
    if let Some(marker) = makefile {
        let text = read(marker);
        let target = |t: &str| text.lines().any(|l| l.starts_with(&format!("{t}:")));
        let mut cmds = Vec::new();
        for t in ["test", "check", "build"] {
            if target(t) {
                cmds.push(format!("make {t}"));
            }
        }
        let test = ["test", "check"]
            .into_iter()
            .find(|t| target(t))
            .map(|t| format!("make {t}"));
        out.push(Ecosystem {
            name: "Make".into(),
            marker: marker.into(),
            test,
            allow: cmds.iter().map(|c| format!("run_shell({c} *)")).collect(),
        });
    }
    out
}

/// The commented configuration for a project named `project` whose files show `found`.
pub fn template(project: &str, found: &[Ecosystem]) -> String {
    let mut out = format!(
        "# dsh's configuration for {project}, written by `dsh init`.\n\
         #\n\
         # A project's configuration applies in full only in a workspace you trust\n\
         # (`dsh trust`); until then dsh takes from it only what makes it stricter.\n\
         # Every key is described in docs/configuration.md of dsh's repository;\n\
         # `dsh check TOOL ARGS` shows what a call would meet, `dsh doctor` what works here.\n"
    );
    if found.is_empty() {
        out.push_str("#\n# No build system was recognised here (Cargo, npm, pnpm, yarn, Python, Go, Make).\n");
    } else {
        let seen: Vec<String> = found
            .iter()
            .map(|e| format!("{} ({})", e.name, e.marker))
            .collect();
        out.push_str(&format!("#\n# Found: {}.\n", seen.join(", ")));
    }

    out.push_str("\n[verify]\n");
    out.push_str(
        "# Run after each turn that changed files (`dsh exec --verify`, `/verify on`); its\n\
         # failure goes back to the model, at most max_rounds times. It is judged like any\n\
         # command: allow it below, or it asks.\n",
    );
    let tests: Vec<(&Ecosystem, &String)> = found
        .iter()
        .filter_map(|e| e.test.as_ref().map(|t| (e, t)))
        .collect();
    match tests.split_first() {
        Some(((_, first), rest)) => {
            out.push_str(&format!("command = {}\n", quoted(first)));
            for (e, t) in rest {
                out.push_str(&format!("# command = {}   # {}\n", quoted(t), e.name));
            }
        }
        None => out.push_str("# command = \"make test\"\n"),
    }
    out.push_str("# max_rounds = 3\n");

    out.push_str("\n[permissions]\n");
    out.push_str(
        "# ask (the default), read-only, or auto (builds and workspace writes run without\n\
         # asking, in a hardened sandbox).\n\
         # mode = \"ask\"\n\
         #\n\
         # This project's own build and test commands. Uncomment those you accept: they then\n\
         # run without asking (in the sandbox; `cargo test --release` matches\n\
         # `cargo test *`, `cargo test; rm -rf ~` does not — every command of a line is\n\
         # judged on its own).\n",
    );
    let rules: Vec<&String> = found.iter().flat_map(|e| &e.allow).collect();
    if rules.is_empty() {
        out.push_str("allow = [\n#   \"run_shell(make test *)\",\n]\n");
    } else {
        out.push_str("allow = [\n");
        for r in rules {
            out.push_str(&format!("#   {},\n", quoted(r)));
        }
        out.push_str("]\n");
    }
    out.push_str(
        "# Paths no tool may read, e.g.:\n\
         deny = [\n\
         #   \"read_file(secrets/**)\",\n\
         ]\n",
    );
    out
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_parses_and_sets_only_verify() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\n").unwrap();
        std::fs::write(dir.path().join("Makefile"), "test:\n\tcargo test\n").unwrap();
        let found = detect(dir.path());
        let names: Vec<&str> = found.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["Cargo", "Make"]);
        let text = template("demo", &found);
        let parsed: toml::Table = text.parse().unwrap();
        assert_eq!(parsed["verify"]["command"].as_str(), Some("cargo test"));
        assert_eq!(parsed["permissions"]["allow"].as_array().unwrap().len(), 0);
        assert!(text.contains("#   \"run_shell(cargo test *)\","), "{text}");
        assert!(
            text.contains("# command = \"make test\"   # Make"),
            "{text}"
        );
    }
}
