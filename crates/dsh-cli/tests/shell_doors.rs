//! The shell policy, round two (issue 8), through the binary: `dsh check` on a table per
//! item — the dangerous form denied with the setting, flag or path that made it so in the
//! reason, and the ordinary forms beside it keeping their verdict — and `dsh batch` running
//! what is allowed (`cd src && ls -la`, a write into `$TMPDIR`) and keeping a planted
//! `core.fsmonitor` or a bare repository from running code under an approved `git status`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Dirs, json_lines, kind, stderr};
use serde_json::{Value, json};

struct Env {
    dirs: Dirs,
}

impl std::ops::Deref for Env {
    type Target = Dirs;
    fn deref(&self) -> &Dirs {
        &self.dirs
    }
}

impl Env {
    fn new() -> Env {
        let dirs = Dirs::new();
        for d in ["src", "tests", "lib", "secrets", ".git/hooks", "pkg"] {
            std::fs::create_dir_all(dirs.ws.join(d)).unwrap();
        }
        for (f, text) in [
            ("src/main.rs", "fn main() {}\n"),
            ("Cargo.toml", "[package]\n"),
            ("tests/t.py", "print(1)\n"),
            ("t.py", "import helper\nprint(helper.x)\n"),
            ("lib/helper.py", "import os\nos.system('id')\nx = 1\n"),
            ("localmod.py", "import os\nos.system('id')\n"),
            ("pkg/__main__.py", "print('pkg')\n"),
            ("pkg/__init__.py", ""),
            ("secrets/k", "key\n"),
        ] {
            std::fs::write(dirs.ws.join(f), text).unwrap();
        }
        let e = Env { dirs };
        e.user_config("[permissions]\ndeny = [\"read_file(secrets/**)\"]\n[shell]\npass_env = [\"GITHUB_TOKEN\"]\n");
        e
    }

    fn user_config(&self, text: &str) {
        self.write_user_config(text);
    }

    fn check(&self, command: &str) -> Value {
        let args = json!({ "command": command }).to_string();
        let out = self.dsh(&["check", "run_shell", &args]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Checks every `(line, decision, words the reason must hold)`; all mismatches at once.
    /// A denial is at tier `Rule` unless the words start with `!` (the lists' own verdict on
    /// the program a command acts as, which a rule may lift).
    fn table(&self, rows: &[(&str, &str, &str)]) {
        let mut wrong = Vec::new();
        for (line, want, must) in rows {
            let c = self.check(line);
            let reason = c["reason"].as_str().unwrap_or_default();
            let by_lists = must.starts_with('!');
            let must = must.trim_start_matches('!');
            if c["decision"] != *want || !reason.contains(must) {
                wrong.push(format!("{line:?}: want {want} with {must:?}, got {c}"));
            }
            if *want == "deny" && shell_tier(&c) != Some("rule") && !by_lists {
                wrong.push(format!("{line:?}: denied but not at tier rule: {c}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        assert!(rows.len() >= 10, "at least ten cases per item");
    }

    fn batch(&self, calls: &[Value], extra: &[&str]) -> Vec<Value> {
        let out = self.batch_output(calls, extra, &[("GITHUB_TOKEN", "t")]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        json_lines(&out)
    }

    fn shell(&self, command: &str, extra: &[&str]) -> Value {
        let call = json!({"name": "run_shell", "args": {"command": command}});
        self.batch(&[call], extra).remove(0)
    }
}

/// The tier of the shell policy's vote.
fn shell_tier(c: &Value) -> Option<&str> {
    c["votes"]
        .as_array()?
        .iter()
        .find(|v| v["policy"] == "shell")?["tier"]
        .as_str()
}

#[test]
fn item1_git_doors_are_denied_naming_the_key_and_ordinary_git_asks() {
    Env::new().table(&[
        ("git -c core.pager='rm -rf ~' status", "deny", "core.pager"),
        ("git -c CORE.PAGER=less log", "deny", "CORE.PAGER"),
        ("git -c pager.log=evil log", "deny", "pager.log"),
        ("git -c Core.SshCommand=x fetch", "deny", "Core.SshCommand"),
        (
            "git -c diff.x.textconv=evil diff",
            "deny",
            "diff.x.textconv",
        ),
        (
            "git -c filter.lfs.smudge=x checkout .",
            "deny",
            "filter.lfs.smudge",
        ),
        ("git -c alias.st='!rm -rf ~' st", "deny", "alias.st"),
        ("git -c include.path=/tmp/c log", "deny", "include.path"),
        (
            "git -c includeIf.gitdir:/.path=x log",
            "deny",
            "includeIf.gitdir:/.path",
        ),
        (
            "git -c protocol.ext.allow=always fetch",
            "deny",
            "protocol.ext.allow",
        ),
        (
            "git -c core.hooksPath=h commit -m x",
            "deny",
            "core.hooksPath",
        ),
        (
            "git -c credential.helper='!x' push",
            "deny",
            "credential.helper",
        ),
        ("git -c core.worktree=/ status", "deny", "core.worktree"),
        (
            "git --config-env=core.editor=ED commit",
            "deny",
            "core.editor",
        ),
        (
            "git config core.fsmonitor 'rm -rf ~'",
            "deny",
            "core.fsmonitor",
        ),
        (
            "git config --local sequence.editor x",
            "deny",
            "sequence.editor",
        ),
        (
            "git config set --file .git/config diff.external x",
            "deny",
            "diff.external",
        ),
        ("git config --global user.name x", "deny", "--global"),
        ("git config --edit", "deny", "editor"),
        (
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=x git log",
            "deny",
            "core.pager",
        ),
        ("GIT_PAGER='rm -rf ~' git log", "deny", "GIT_PAGER"),
        (
            "GIT_SSH_COMMAND='bash -c x' git fetch",
            "deny",
            "GIT_SSH_COMMAND",
        ),
        (
            "GIT_EXTERNAL_DIFF=./x git diff",
            "deny",
            "GIT_EXTERNAL_DIFF",
        ),
        ("GIT_ASKPASS=./x git push", "deny", "GIT_ASKPASS"),
        ("git --exec-path=/tmp log", "deny", "--exec-path"),
        (
            "git fetch --upload-pack='rm x' origin",
            "deny",
            "--upload-pack",
        ),
        ("git push --receive-pack=x origin", "deny", "--receive-pack"),
        ("git rebase --exec 'make' main", "deny", "--exec"),
        ("git rebase -x 'rm x' main", "deny", "-x"),
        ("git bisect run ./t.sh", "deny", "bisect run"),
        ("git difftool --extcmd=x", "deny", "--extcmd"),
        ("git grep -O foo", "deny", "-O"),
        ("git submodule foreach 'rm x'", "deny", "foreach"),
        ("git filter-branch --tree-filter x", "deny", "filter-branch"),
        ("git clone 'ext::sh -c x' d", "deny", "ext::"),
        ("git -C /etc status", "deny", "-C /etc"),
        ("git --work-tree=/ status", "deny", "--work-tree"),
        ("GIT_DIR=/tmp/x git log", "deny", "GIT_DIR"),
        ("env -i git status", "deny", "env -i"),
        (
            "unset GIT_CONFIG_COUNT; git status",
            "deny",
            "GIT_CONFIG_COUNT",
        ),
        // Ordinary git keeps git's verdict: its reading subcommands run free (in the
        // read-only sandbox), the rest ask.
        ("git status", "allow", "only reads"),
        ("git diff", "allow", "only reads"),
        ("git log -5", "allow", "only reads"),
        ("git -C src status", "allow", "only reads"),
        ("git commit -m x", "ask", "reading subcommands"),
        // A harmless `-c` key keeps a reading subcommand free.
        ("git -c color.ui=always log", "allow", "only reads"),
        (
            "git -c user.name=x -c commit.gpgSign=false commit -m y",
            "ask",
            "reading subcommands",
        ),
        ("git cherry-pick -x abc", "ask", "reading subcommands"),
        ("git clean -fdx", "ask", "reading subcommands"),
        ("git config user.name x", "ask", "--get"),
        ("PAGER=cat git log", "allow", "only reads"),
        ("GIT_PAGER=cat git log", "allow", "only reads"),
        ("GIT_EDITOR=true git commit", "ask", "reading subcommands"),
    ]);
}

#[test]
fn item1_an_unknown_git_key_asks_at_tier_rule_even_under_an_allow_rule() {
    let e = Env::new();
    e.user_config("[permissions]\nallow = [\"run_shell(git *)\"]\n");
    let c = e.check("git status");
    assert_eq!(c["decision"], "allow", "{c}");
    let c = e.check("git -c foo.bar=1 status");
    assert_eq!(c["decision"], "ask", "{c}");
    assert_eq!(shell_tier(&c), Some("rule"), "{c}");
    assert!(c["reason"].as_str().unwrap().contains("foo.bar"), "{c}");
    // A door stays shut under the rule too.
    let c = e.check("git -c core.pager=x status");
    assert_eq!(c["decision"], "deny", "{c}");
    // Headless, the ask is unavailable: nothing runs.
    let r = e.shell("git -c foo.bar=1 status", &[]);
    assert_eq!(kind(&r), "unavailable", "{r}");
}

#[test]
fn item1_make_npm_and_node_doors() {
    Env::new().table(&[
        ("make SHELL=/tmp/x", "deny", "SHELL"),
        ("make .SHELLFLAGS='-c id;'", "deny", ".SHELLFLAGS"),
        ("make --eval='x:'", "deny", "--eval"),
        ("make -E 'x:' all", "deny", "-E"),
        ("make CC='$(shell id)' all", "deny", "$(shell"),
        ("MAKEFLAGS='SHELL=/x' make", "deny", "MAKEFLAGS"),
        ("npm exec foo", "deny", "npm exec"),
        ("npm x foo", "deny", "npm x"),
        ("npx cowsay hi", "deny", "npx"),
        ("npm init react-app", "deny", "create-react-app"),
        ("npm --script-shell=/tmp/x test", "deny", "--script-shell"),
        ("npm config set script-shell /tmp/x", "deny", "script-shell"),
        (
            "npm_config_script_shell=/tmp/x npm test",
            "deny",
            "script_shell",
        ),
        (
            "NODE_OPTIONS='--require /tmp/x.js' node a.js",
            "deny",
            "--require",
        ),
        ("NODE_OPTIONS=--import=./x.mjs npm test", "deny", "--import"),
        (
            "NODE_OPTIONS=--experimental-loader=x node a.js",
            "deny",
            "--experimental-loader",
        ),
        // Ordinary uses keep their program's verdict.
        ("make -f Makefile.ci test", "ask", "confirm list"),
        ("make -j4 CC=clang all", "ask", "confirm list"),
        ("node -r ts-node/register t.ts", "ask", "confirm list"),
        ("node --import tsx app.ts", "ask", "confirm list"),
        ("npm test -- -c jest.config.js", "ask", "confirm list"),
        (
            "NODE_OPTIONS=--max-old-space-size=4096 npm run build",
            "ask",
            "confirm list",
        ),
        ("npm install", "ask", "confirm list"),
        ("npm init", "ask", "confirm list"),
    ]);
}

#[test]
fn item2_loader_assignments_are_denied_whatever_the_command() {
    Env::new().table(&[
        ("LD_PRELOAD=/tmp/x.so ls", "deny", "LD_PRELOAD"),
        ("LD_LIBRARY_PATH=/tmp ls", "deny", "LD_LIBRARY_PATH"),
        (
            "DYLD_INSERT_LIBRARIES=x ls",
            "deny",
            "DYLD_INSERT_LIBRARIES",
        ),
        ("PATH=/tmp:$PATH ls", "deny", "PATH"),
        ("IFS=x ls", "deny", "IFS"),
        ("PS4='$(id)' ls", "deny", "PS4"),
        ("PROMPT_COMMAND=id ls", "deny", "PROMPT_COMMAND"),
        ("BASH_ENV=x ls", "deny", "BASH_ENV"),
        ("ENV=x ls", "deny", "ENV"),
        ("SHELLOPTS=xtrace ls", "deny", "SHELLOPTS"),
        ("BASHOPTS=x ls", "deny", "BASHOPTS"),
        (
            "PYTHONSTARTUP=x python3 tests/t.py",
            "deny",
            "PYTHONSTARTUP",
        ),
        ("PYTHONHOME=x python3 tests/t.py", "deny", "PYTHONHOME"),
        (
            "PYTHONINSPECT=1 python3 tests/t.py",
            "deny",
            "PYTHONINSPECT",
        ),
        ("PERL5OPT=-d ls", "deny", "PERL5OPT"),
        ("PERL5LIB=/tmp ls", "deny", "PERL5LIB"),
        ("RUBYOPT=x ls", "deny", "RUBYOPT"),
        ("RUBYLIB=x ls", "deny", "RUBYLIB"),
        (
            "JAVA_TOOL_OPTIONS=-javaagent:x ls",
            "deny",
            "JAVA_TOOL_OPTIONS",
        ),
        ("PAGER=less git log", "deny", "PAGER"),
        ("EDITOR=vim git commit", "deny", "EDITOR"),
        ("VISUAL='rm x' git commit", "deny", "VISUAL"),
        ("env PYTHONHOME=x python3 tests/t.py", "deny", "PYTHONHOME"),
        ("export LD_PRELOAD=x; ls", "deny", "LD_PRELOAD"),
        ("for PATH in /tmp; do ls; done", "deny", "PATH"),
        ("PYTHONPATH=/tmp python3 tests/t.py", "deny", "PYTHONPATH"),
        ("NODE_PATH=/usr/lib/evil node a.js", "deny", "NODE_PATH"),
        // The ordinary ones keep the command's verdict.
        (
            "PYTHONUNBUFFERED=1 python3 tests/t.py",
            "ask",
            "confirm list",
        ),
        (
            "PYTHONDONTWRITEBYTECODE=1 python3 tests/t.py",
            "ask",
            "confirm list",
        ),
        ("PYTHONHASHSEED=0 python3 tests/t.py", "ask", "confirm list"),
        ("NO_COLOR=1 ls", "allow", "safe list"),
        ("CI=1 ls", "allow", "safe list"),
        ("RUST_BACKTRACE=1 ls", "allow", "safe list"),
        ("LANG=C ls", "allow", "safe list"),
        ("PYTHONPATH=src python3 tests/t.py", "ask", "confirm list"),
        ("NODE_PATH=lib node a.js", "ask", "confirm list"),
    ]);
}

#[test]
fn item2_pythonpath_directories_are_audited_as_local_modules() {
    let e = Env::new();
    // `helper` is found only through PYTHONPATH=lib, and its os.system is then refused.
    let c = e.check("python3 t.py");
    assert_ne!(c["decision"], "deny", "{c}");
    let c = e.check("PYTHONPATH=lib python3 t.py");
    assert_eq!(c["decision"], "deny", "{c}");
    assert!(c["reason"].as_str().unwrap().contains("os.system"), "{c}");
}

#[test]
fn item3_writes_no_approval_could_make_succeed_are_denied() {
    Env::new().table(&[
        ("echo x > /etc/passwd", "deny", "/etc/passwd"),
        ("echo x >> ~/.bashrc", "deny", "~/.bashrc"),
        ("echo x >| /etc/x", "deny", "/etc/x"),
        ("ls &> /tmp/x", "deny", "/tmp/x"),
        ("ls &>> /tmp/x", "deny", "/tmp/x"),
        ("ls 2> /var/log/x", "deny", "/var/log/x"),
        ("cat <<EOF > /etc/x\nhi\nEOF", "deny", "/etc/x"),
        ("echo x > \"$HOME/o\"", "deny", "$HOME/o"),
        ("echo x > $(echo f)", "deny", "run time"),
        ("echo x > /dev/sda", "deny", "/dev/sda"),
        ("echo x > /dev/tcp/10.0.0.1/80", "deny", "/dev/tcp"),
        ("find . -fprint /tmp/x", "deny", "/tmp/x"),
        ("tree -o /tmp/x", "deny", "/tmp/x"),
        ("git diff --output=/etc/x", "deny", "/etc/x"),
        ("git format-patch -o /tmp/p HEAD~1", "deny", "/tmp/p"),
        ("git archive -o /tmp/a.tar HEAD", "deny", "/tmp/a.tar"),
        ("echo x > .Git/config", "deny", "protected"),
        ("echo x > .DSH/config.toml", "deny", "protected"),
        ("echo x > .git./config", "deny", "protected"),
        ("cat > .GIT/hooks/pre-commit", "deny", "protected"),
        // Writes inside ask; descriptors and /dev/null are no file writes.
        ("echo x > out.txt", "ask", "writes a file"),
        ("echo x > \"$TMPDIR/o\"", "ask", "writes a file"),
        ("echo x > ${TMPDIR}/o", "ask", "writes a file"),
        ("git diff --output=d.patch", "ask", "writes a file"),
        ("tree -o t.txt", "ask", "writes a file"),
        ("ls 2>&1", "allow", "safe list"),
        ("ls >&2", "allow", "safe list"),
        ("ls 2>/dev/null", "allow", "safe list"),
        ("echo x > /dev/stderr", "allow", "safe list"),
    ]);
}

#[test]
fn item3_a_write_into_tmpdir_runs_once_approved_and_one_outside_never_does() {
    let e = Env::new();
    let r = e.shell("echo hi > \"$TMPDIR/o\" && cat \"$TMPDIR/o\"", &["--yolo"]);
    assert_eq!(kind(&r), "ok", "{r}");
    assert!(r["content"].as_str().unwrap().contains("hi"), "{r}");
    let target = e.outside.join("pwned");
    let r = e.shell(&format!("echo x > {}", target.display()), &["--yolo"]);
    assert_eq!(kind(&r), "denied", "{r}");
    assert!(!target.exists());
}

#[test]
fn item4_destructive_modes_of_listed_programs_are_denied() {
    Env::new().table(&[
        // Judged as the program each acts as, one on no list: it asks (and where it
        // would act outside the workspace, it is refused).
        // From a directory holding `.git`: it would delete it.
        ("find . -delete", "deny", "protected"),
        ("find src -name '*.o' -delete", "ask", "-delete"),
        ("find /etc -delete", "deny", "outside the workspace"),
        ("date -s 2020-01-01", "ask", "-s"),
        ("date --set=2020-01-01", "ask", "--set"),
        ("date -us 2020-01-01", "ask", "-us"),
        ("find . -fprint o", "ask", "writes a file"),
        ("tree -o o.txt", "ask", "writes a file"),
        ("find . -name x", "allow", "safe list"),
        ("find . -fprint /tmp/o", "deny", "outside the workspace"),
        ("find . -type f -print", "allow", "safe list"),
        ("date", "allow", "safe list"),
        ("date +%s", "allow", "safe list"),
        ("date -u", "allow", "safe list"),
        ("date -d yesterday", "allow", "safe list"),
    ]);
}

#[test]
fn item5_expansions_that_evaluate_are_denied() {
    Env::new().table(&[
        ("echo ${x@P}", "deny", "@P"),
        ("echo ${x@E}", "deny", "@E"),
        ("echo ${!x}", "deny", "indirection"),
        ("echo \"${!name}\"", "deny", "indirection"),
        ("for f in *; do echo $((f)); done", "ask", "`f`"),
        ("read -r n < a; echo $((n+1))", "ask", "arithmetic"),
        ("echo $GITHUB_TOKEN", "ask", "credential"),
        ("echo \"token=${GITHUB_TOKEN}\"", "ask", "credential"),
        ("echo ${!arr[@]}", "allow", "safe list"),
        ("echo ${!pre*} ${!pre@}", "allow", "safe list"),
        ("echo $(( $(date +%s) - t0 ))", "allow", "safe list"),
        ("echo ${#x} ${x:-d} $((1+2))", "allow", "safe list"),
        ("echo $HOME", "allow", "safe list"),
    ]);
}

#[test]
fn item6_shells_other_than_bash_are_refused() {
    Env::new().table(&[
        ("sh -c ls", "deny", "!grammar is not bash"),
        ("/bin/sh -c 'ls -la'", "deny", "!grammar is not bash"),
        ("dash -c ls", "deny", "!grammar is not bash"),
        ("zsh -c ls", "deny", "!grammar is not bash"),
        ("ksh -c ls", "deny", "!grammar is not bash"),
        ("fish -c ls", "deny", "!grammar is not bash"),
        ("busybox sh -c ls", "deny", "!grammar is not bash"),
        ("ash -c ls", "deny", "!grammar is not bash"),
        ("ls | sh", "deny", "!grammar is not bash"),
        ("bash -c 'ls -la'", "allow", "safe list"),
        ("bash -c \"grep -rn foo src | head\"", "allow", "safe list"),
    ]);
}

#[test]
fn item7_cd_inside_the_workspace_is_followed() {
    Env::new().table(&[
        ("cd src && ls -la", "allow", "safe list"),
        ("cd src && cat main.rs", "allow", "safe list"),
        ("cd src && cat ../Cargo.toml", "allow", "safe list"),
        ("cd tests && python3 -m pytest", "ask", "confirm list"),
        ("cd .. && ls", "deny", "leaves the workspace"),
        ("cd /tmp && ls", "deny", "leaves the workspace"),
        ("cd .git/hooks && cat > pre-commit", "deny", "protected"),
        ("cd .GIT && ls", "deny", "protected"),
        ("cd secrets && cat k", "deny", "read_file(secrets/**)"),
        (
            "cd src && cat ../secrets/k",
            "deny",
            "read_file(secrets/**)",
        ),
        (
            "cd src && echo x > ../.git/config",
            "deny",
            "../.git/config",
        ),
        (
            "ls || cd src; cat ../secrets/k",
            "deny",
            "read_file(secrets/**)",
        ),
        ("cd nowhere; cat secrets/k", "deny", "read_file(secrets/**)"),
        ("cd src && cd .. && cd ..", "deny", "leaves the workspace"),
        ("cd -", "deny", "cd -"),
        ("cd", "deny", "home directory"),
        ("pushd src", "deny", "pushd"),
        ("popd", "deny", "popd"),
        ("for d in a b; do cd $d; done", "deny", "loop"),
        ("env cd src", "deny", "wrapper"),
    ]);
}

#[test]
fn item7_cd_then_a_command_runs_in_that_directory() {
    let e = Env::new();
    let r = e.shell("cd src && ls -la", &[]);
    assert_eq!(kind(&r), "ok", "{r}");
    assert!(r["content"].as_str().unwrap().contains("main.rs"), "{r}");
    // The Python audit follows `cd` at gate 1 and again just before the run.
    std::fs::write(e.ws.join("tests/bad.py"), "import os\nos.system('id')\n").unwrap();
    let r = e.shell("cd tests && python3 bad.py", &["--yolo"]);
    assert_eq!(kind(&r), "denied", "{r}");
    assert!(r["content"].as_str().unwrap().contains("os.system"), "{r}");
}

#[test]
fn item8_python_dash_m_is_judged_by_module() {
    Env::new().table(&[
        ("python3 -m pytest -q", "ask", "pytest"),
        ("python3 -m pip install x", "ask", "pip"),
        ("python3 -m unittest", "ask", "confirm list"),
        ("python3 -m venv .venv", "ask", "confirm list"),
        ("python3 -m json.tool Cargo.toml", "ask", "confirm list"),
        ("python3 -m py_compile t.py", "ask", "confirm list"),
        ("python3 -m mypy src", "ask", "confirm list"),
        ("python3 -m pkg", "ask", "confirm list"),
        ("python3 -m pdb t.py", "deny", "interactive"),
        ("python3 -m code", "deny", "interactive"),
        ("python3 -m idlelib", "deny", "interactive"),
        ("python3 -m IPython", "deny", "interactive"),
        ("python3 -m timeit 'import os'", "deny", "without the audit"),
        ("python3 -m localmod", "deny", "os.system"),
    ]);
}

#[test]
fn item8_python_dash_m_pytest_is_judged_as_pytest() {
    let e = Env::new();
    e.user_config("[permissions]\nallow = [\"run_shell(pytest *)\"]\n");
    let c = e.check("python3 -m pytest -q");
    assert_eq!(c["decision"], "allow", "{c}");
    assert!(
        c["reason"]
            .as_str()
            .unwrap()
            .contains("run_shell(pytest *)"),
        "{c}"
    );
}

fn git(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap()
}

#[test]
fn a_planted_fsmonitor_or_bare_repository_runs_nothing_under_an_approved_git_status() {
    let e = Env::new();
    std::fs::remove_dir_all(e.ws.join(".git")).unwrap();
    assert!(git(&e.ws, &["init", "-q"]).status.success());
    let marker = e.ws.join("fsmonitor-ran");
    std::fs::write(
        e.ws.join("hook.sh"),
        format!("#!/bin/sh\ntouch {}\n", marker.display()),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(e.ws.join("hook.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    let hook = e.ws.join("hook.sh");
    assert!(
        git(&e.ws, &["config", "core.fsmonitor", hook.to_str().unwrap()])
            .status
            .success()
    );
    // Without dsh's settings, git runs the planted program: the test can fail.
    git(&e.ws, &["status"]);
    assert!(marker.exists(), "git itself runs core.fsmonitor here");
    std::fs::remove_file(&marker).unwrap();
    let r = e.shell("git status", &["--yolo"]);
    assert_eq!(kind(&r), "ok", "{r}");
    assert!(!marker.exists(), "core.fsmonitor ran under dsh: {r}");

    // A bare repository in the workspace is not used implicitly.
    std::fs::create_dir_all(e.ws.join("src/bare")).unwrap();
    assert!(
        git(&e.ws.join("src/bare"), &["init", "-q", "--bare"])
            .status
            .success()
    );
    let r = e.shell("cd src/bare && git log", &["--yolo"]);
    let content = r["content"].as_str().unwrap();
    assert!(content.contains("bare repository"), "{r}");
    assert_ne!(r["exit_code"], 0, "{r}");
}
