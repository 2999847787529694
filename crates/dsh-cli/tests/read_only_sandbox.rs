//! Ordinary reading commands run free, in the read-only sandbox (issue "ordinary work runs",
//! stage a; SPEC A4, P2, P12; DESIGN §4 `sandbox`). Through the real `dsh check` and
//! `dsh batch`, with no approver: what the built-in read-only list lets run gets
//! `"sandbox":"landlock-read-only"`, and in that profile a program the repository configures
//! (a diff driver, a textconv filter, a pager) can neither write, nor read the home
//! directory, nor reach a UNIX socket. On Linux these tests fail, never skip, without
//! Landlock; `rg` must be installed (`.ci/run` installs it).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    Dirs, batch_lines as batch, check_shell as check, content, git, json_lines, kind, stderr,
};
use serde_json::{Value, json};

/// A workspace that is a git repository with a few files, and a planted secret at
/// `$HOME/.ssh/id_rsa`.
fn world() -> Dirs {
    let d = Dirs::new();
    let ws = &d.ws;
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n// main line\n").unwrap();
    std::fs::write(ws.join("README.md"), "first line\nsecond line\nalpha\n").unwrap();
    std::fs::write(ws.join("nums.txt"), "3\n1\n2\n2\n").unwrap();
    std::fs::write(ws.join("sorted1.txt"), "a 1\nb 2\n").unwrap();
    std::fs::write(ws.join("sorted2.txt"), "a x\nc y\n").unwrap();
    std::fs::write(ws.join("data.csv"), "name,age\nann,3\n").unwrap();
    std::fs::write(ws.join("data.json"), r#"{"name":"dsh"}"#).unwrap();
    git(ws, &["init", "-q", "."]);
    git(ws, &["add", "."]);
    git(ws, &["commit", "-qm", "init"]);
    std::fs::create_dir_all(d.user_home.join(".ssh")).unwrap();
    std::fs::write(d.user_home.join(".ssh/id_rsa"), "SECRET-KEY-MATERIAL\n").unwrap();
    d
}

/// Reading commands and pipelines of them, each run with `dsh batch`: coreutils, grep,
/// sed, findutils, diffutils and git, which every machine here has.
const RUN_FREE: &[&str] = &[
    "ls -la | sort",
    "sort -r nums.txt | uniq -c",
    "cut -d, -f1 data.csv",
    "tr a-z A-Z < README.md",
    "nl README.md",
    "seq 1 3",
    "rev README.md | tac",
    "comm sorted1.txt sorted2.txt",
    "paste nums.txt nums.txt",
    "fold -w 5 README.md",
    "basename src/main.rs; dirname src/main.rs",
    "realpath src && readlink -f src/main.rs",
    "which ls; command -v git; type ls",
    "uname -s; id -u",
    "du -s src",
    "printf '%s\\n' a b",
    "true && false || echo done",
    "test -f README.md && [ -d src ] && echo yes",
    "sleep 0.1",
    "md5sum README.md; sha256sum README.md | cut -c1-8; cksum README.md",
    "cmp README.md README.md",
    "od -c nums.txt | head -2",
    "sed -n 1p README.md",
    "sed -e s/first/1st/ -e 2q README.md",
    "grep -rn main src | sort",
    "find src -name '*.rs' | xargs wc -l",
    "git status --short",
    "git log --oneline -3",
    "git diff HEAD",
    "git branch -a",
    "git rev-parse --show-toplevel",
    "git ls-files | head",
    "wc -l < README.md",
    "diff README.md README.md",
    "stat -c %s README.md",
    "echo hello | tr -d l",
    "join sorted1.txt sorted2.txt",
    "base64 README.md | base64 -d",
    "git show HEAD --stat",
    "git grep -n alpha",
];

/// More that only read, judged by `dsh check` (the programs may not be installed).
const CHECK_FREE: &[&str] = &[
    "jq .name data.json",
    "xxd README.md | head",
    "rg -n main src",
    "fd -e rs",
    "column -t -s, data.csv",
    "rg --files | sort",
    "git describe --tags --always",
    "git remote -v",
    "git blame src/main.rs",
    "sed -n '/first/,/alpha/{s/line/LINE/;p}' README.md",
];

#[test]
fn reading_commands_run_free_in_the_read_only_sandbox() {
    let d = world();
    for line in RUN_FREE.iter().chain(CHECK_FREE) {
        let c = check(&d, &[], line);
        assert_eq!(c["decision"], "allow", "{line}: {c}");
    }
    let results = batch(&d, &[], RUN_FREE);
    for (line, r) in RUN_FREE.iter().zip(&results) {
        assert_eq!(kind(r), "ok", "{line}: {r}");
        assert_eq!(r["sandbox"], "landlock-read-only", "{line}: {r}");
        assert!(!content(r).contains("[warning"), "{line}: {r}");
        // `true && false || echo done` ends with 0 too; `cmp`/`diff` of equal files are 0.
        assert_eq!(r["exit_code"], 0, "{line}: {r}");
    }
    assert!(RUN_FREE.len() + CHECK_FREE.len() >= 40);
    // Nothing a free command ran left a file in the workspace.
    let status = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&d.ws)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), "");
}

#[test]
fn forms_that_write_or_run_programs_are_not_free() {
    let d = world();
    for line in [
        "sed -i s/a/b/ README.md",
        "sed 'w out' README.md",
        "sed s/a/b/e README.md",
        "sed -f script.sed README.md",
        "sort -o out nums.txt",
        "sort --compress-program=gzip nums.txt",
        "uniq nums.txt out",
        "xxd README.md out",
        "rg --pre cat main",
        "rg -z main",
        "fd -x rm",
        "fd --exec-batch rm",
        "tree -o out",
        "git commit -m x",
        "git branch new-feature",
        "git tag v2",
        "git stash",
        "git -c core.pager=less log",
        "git log --output=out",
        "git diff --ext-diff",
        "git grep -O foo",
        "awk '{print}' README.md",
        "find . -delete",
        "cat ~/.ssh/id_rsa",
        "grep -f /etc/hostname README.md",
    ] {
        let c = check(&d, &[], line);
        assert_ne!(c["decision"], "allow", "{line}: {c}");
    }
    // A confirm-list use of git asks as before, naming why.
    let c = check(&d, &[], "git commit -m x");
    assert_eq!(c["decision"], "ask", "{c}");
    assert!(
        c["reason"]
            .as_str()
            .unwrap()
            .contains("reading subcommands"),
        "{c}"
    );
}

/// Attack scripts a repository's configuration names: each proves it ran (`RAN-…` in its
/// output), then tries to write in the workspace and the home directory, to print the
/// planted key, and to reach a UNIX socket outside.
fn plant_drivers(d: &Dirs, socket: &Path) {
    let attack = |name: &str, tail: &str| {
        format!(
            "#!/bin/bash\necho RAN-{name}\ntouch {ws}/PWNED-{name}\necho x > {home}/PWNED-{name}\n\
             cat {home}/.ssh/id_rsa\n\
             /usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"UNIX-CONNECTED\")' {sock}\n\
             {tail}\n",
            ws = d.ws.display(),
            home = d.user_home.display(),
            sock = socket.display()
        )
    };
    // In the workspace: a free command may read and run what is there.
    let write = |name: &str, text: String| {
        let p = d.ws.join(name);
        std::fs::write(&p, text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    write("conv.sh", attack("textconv", "cat \"$1\""));
    write("ext.sh", attack("external", ""));
    write("pager.sh", attack("pager", "cat"));
    let mut config = std::fs::read_to_string(d.ws.join(".git/config")).unwrap();
    config.push_str(&format!(
        "[core]\n\tpager = {ws}/pager.sh\n[diff]\n\texternal = {ws}/ext.sh\n[diff \"conv\"]\n\ttextconv = {ws}/conv.sh\n",
        ws = d.ws.display()
    ));
    std::fs::write(d.ws.join(".git/config"), config).unwrap();
    std::fs::write(d.ws.join(".gitattributes"), "*.md diff=conv\n").unwrap();
}

#[test]
fn drivers_a_repository_plants_run_confined_in_a_free_git_command() {
    let d = world();
    let socket = d.outside.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    plant_drivers(&d, &socket);
    std::fs::write(d.ws.join("README.md"), "changed\n").unwrap();
    let lines = [
        "git diff",
        "git --no-pager log -p -1",
        "git show --textconv HEAD:README.md",
    ];
    let results = batch(&d, &[], &lines);
    let mut ran = String::new();
    for (line, r) in lines.iter().zip(&results) {
        assert_eq!(kind(r), "ok", "{line}: {r}");
        assert_eq!(r["sandbox"], "landlock-read-only", "{line}: {r}");
        let text = content(r);
        assert!(
            !text.contains("SECRET-KEY-MATERIAL"),
            "{line} leaked: {text}"
        );
        assert!(!text.contains("UNIX-CONNECTED"), "{line}: {text}");
        ran.push_str(text);
    }
    // The drivers really ran, so the denials below are the sandbox's.
    assert!(ran.contains("RAN-external"), "{ran}");
    assert!(ran.contains("RAN-textconv"), "{ran}");
    for entry in [&d.ws, &d.user_home] {
        let planted: Vec<String> = std::fs::read_dir(entry)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("PWNED"))
            .collect();
        assert!(planted.is_empty(), "{}: {planted:?}", entry.display());
    }
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "nothing connected to the socket"
    );
}

#[test]
fn a_free_command_cannot_read_the_home_directory() {
    let d = world();
    let key = d.user_home.join(".ssh/id_rsa");
    let lines = [
        format!("git diff --no-index {} README.md", key.display()),
        format!("echo {} | xargs cat", key.display()),
        format!("echo {} | xargs grep -c .", d.cfg.display()),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    for line in &lines {
        assert_eq!(check(&d, &[], line)["decision"], "allow", "{line}");
    }
    for (line, r) in lines.iter().zip(batch(&d, &[], &lines)) {
        assert_eq!(r["sandbox"], "landlock-read-only", "{line}: {r}");
        assert!(!content(&r).contains("SECRET"), "{line}: {r}");
        assert_ne!(r["exit_code"], 0, "{line}: {r}");
    }
}

#[test]
fn git_and_rg_work_free_in_a_subdirectory_of_a_repository_with_home_config() {
    let d = world();
    // A global config with an include, an excludes file, and rg installed under HOME.
    let home = &d.user_home;
    std::fs::create_dir_all(home.join(".config/git")).unwrap();
    std::fs::write(
        home.join(".config/git/config"),
        "[include]\n\tpath = ~/.git-identity\n[core]\n\texcludesFile = ~/.gitignore-global\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".git-identity"),
        "[user]\n\tname = Included Name\n",
    )
    .unwrap();
    std::fs::write(home.join(".gitignore-global"), "*.ignored\n").unwrap();
    let rg = which("rg").expect("ripgrep must be installed (.ci/run installs it)");
    let cargo_bin = home.join(".cargo/bin");
    std::fs::create_dir_all(&cargo_bin).unwrap();
    std::fs::copy(&rg, cargo_bin.join("rg")).unwrap();
    // The workspace is a subdirectory of the repository.
    let sub = d.ws.join("src");
    std::fs::write(sub.join("new.rs"), "needle\n").unwrap();
    std::fs::write(sub.join("x.ignored"), "needle\n").unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", cargo_bin.display());
    let calls: Vec<Value> = [
        "git status --short",
        "git config --get user.name",
        "rg -n needle",
        "command -v rg",
    ]
    .iter()
    .map(|l| json!({"name": "run_shell", "args": {"command": l}}))
    .collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsh"));
    cmd.args(["--workspace"])
        .arg(&sub)
        .args(["batch", "-"])
        .env("DSH_HOME", &d.home)
        .env("DSH_CONFIG_HOME", &d.cfg)
        .env("HOME", home)
        .env("PATH", &path);
    let out = common::run_with_calls(cmd, &calls);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = json_lines(&out);
    for x in &r {
        assert_eq!(kind(x), "ok", "{x}");
        assert_eq!(x["sandbox"], "landlock-read-only", "{x}");
        assert_eq!(x["exit_code"], 0, "{x}");
    }
    assert!(content(&r[0]).contains("new.rs"), "{}", r[0]);
    assert!(!content(&r[0]).contains("x.ignored"), "{}", r[0]);
    assert!(content(&r[1]).contains("Included Name"), "{}", r[1]);
    assert!(content(&r[2]).contains("new.rs:1:needle"), "{}", r[2]);
    assert!(content(&r[3]).contains(".cargo/bin/rg"), "{}", r[3]);
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

#[test]
fn without_the_read_only_sandbox_git_asks_and_says_why() {
    let d = world();
    let c = check(&d, &["--sandbox", "off"], "git status");
    assert_eq!(c["decision"], "ask", "{c}");
    assert!(
        c["reason"].as_str().unwrap().contains("read-only sandbox"),
        "{c}"
    );
    let c = check(&d, &["--sandbox", "off"], "find . -name x | xargs cat");
    assert_eq!(c["decision"], "ask", "{c}");
    // Programs that read no repository configuration still run free, and say they are
    // not confined.
    let r = batch(&d, &["--sandbox", "off"], &["ls"]).remove(0);
    assert_eq!(kind(&r), "ok", "{r}");
    assert_eq!(r["sandbox"], "none", "{r}");
}

#[test]
fn an_approved_command_gets_the_workspace_write_profile() {
    let d = world();
    let r = batch(&d, &["--yolo"], &["git commit --allow-empty -qm x"]).remove(0);
    assert_eq!(kind(&r), "ok", "{r}");
    assert_eq!(r["sandbox"], "landlock", "{r}");
    // And an allow rule on a command the lists know only reads keeps it read-only, while
    // one on anything else clears writing.
    d.write_user_config(
        "[permissions]\nallow = [\"run_shell(git status)\", \"run_shell(touch *)\"]\n",
    );
    let r = batch(&d, &[], &["git status", "touch made-by-rule"]);
    assert_eq!(r[0]["sandbox"], "landlock-read-only", "{}", r[0]);
    assert_eq!(r[1]["sandbox"], "landlock", "{}", r[1]);
    assert!(d.ws.join("made-by-rule").exists());
}
