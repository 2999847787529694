//! `dsh init` on sample projects (the configuration it writes, as snapshots), and its one
//! rule about existing files: never replaced unasked — with no terminal to ask, it refuses
//! and exits 2, leaving the file as it was.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{Dirs, stderr, stdout};

/// A project named `name` under the world's root with `files` (path, content).
fn project(d: &Dirs, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = d.root().join(name);
    for (path, content) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    std::fs::create_dir_all(&root).unwrap();
    root
}

fn init(d: &Dirs, root: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["init"];
    all.extend_from_slice(args);
    let mut cmd = d.dsh_in(root, &all);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd.output().unwrap()
}

fn written(d: &Dirs, root: &Path) -> String {
    let out = init(d, root, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(root.join(".dsh/config.toml")).unwrap();
    // The file is valid configuration: `dsh check` loads it.
    let check = d
        .dsh_in(root, &["check", "read_file", r#"{"path":"x"}"#])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    text
}

#[test]
fn a_rust_project() {
    let d = Dirs::new();
    let root = project(
        &d,
        "demo-rust",
        &[
            ("Cargo.toml", "[package]\nname = \"demo\"\n"),
            ("src/main.rs", "fn main() {}\n"),
        ],
    );
    insta::assert_snapshot!(written(&d, &root));
}

#[test]
fn a_python_project_with_uv_and_pytest() {
    let d = Dirs::new();
    let root = project(
        &d,
        "demo-python",
        &[
            (
                "pyproject.toml",
                "[project]\nname = \"demo\"\n[tool.pytest.ini_options]\n",
            ),
            ("uv.lock", ""),
            ("tests/test_demo.py", "def test_x():\n    assert True\n"),
        ],
    );
    insta::assert_snapshot!(written(&d, &root));
}

#[test]
fn a_node_project_with_pnpm() {
    let d = Dirs::new();
    let root = project(
        &d,
        "demo-node",
        &[
            (
                "package.json",
                r#"{"name": "demo", "scripts": {"test": "vitest", "build": "tsc", "lint": "eslint ."}}"#,
            ),
            ("pnpm-lock.yaml", ""),
        ],
    );
    insta::assert_snapshot!(written(&d, &root));
}

#[test]
fn a_project_nothing_is_recognised_in_still_gets_a_commented_file() {
    let d = Dirs::new();
    let root = project(&d, "demo-empty", &[("notes.txt", "hi\n")]);
    let text = written(&d, &root);
    assert!(text.contains("No build system was recognised"), "{text}");
    assert!(text.contains("# command = \"make test\""), "{text}");
}

#[test]
fn an_existing_file_is_never_replaced_without_a_terminal_to_ask() {
    let d = Dirs::new();
    let root = project(
        &d,
        "demo-kept",
        &[
            ("Cargo.toml", "[package]\n"),
            (".dsh/config.toml", "# mine\n[limits]\nmax_steps = 7\n"),
        ],
    );
    let out = init(&d, &root, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no terminal to ask"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".dsh/config.toml")).unwrap(),
        "# mine\n[limits]\nmax_steps = 7\n"
    );
    // --print shows what would be written, and writes nothing.
    let out = init(&d, &root, &["--print"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("command = \"cargo test\""));
    assert_eq!(
        std::fs::read_to_string(root.join(".dsh/config.toml")).unwrap(),
        "# mine\n[limits]\nmax_steps = 7\n"
    );
}
