//! The shell policy on a broad table of lines (DESIGN §3, SPEC A4): every command anywhere in
//! a line is judged, wrappers are unwrapped, the free commands keep their pass only with
//! read-only flags and workspace paths, and `run_shell` rules match parsed commands, never
//! the raw line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_core::{Layer, Origin, Rule};
use dsh_core::{Tier, Workspace};
use dsh_policy::shell::{Decision, Ruling};
use dsh_policy::{NetworkVote, PermissionRules, ShellLists, ShellPolicy};

/// A rule from its text, through the one grammar (dsh-core's), written where `origin` says:
/// a layer's name, then the file if any (`user`, `untrusted project /p/.dsh/config.toml`).
fn parse_rule(kind: Decision, text: &str, origin: &str) -> Rule {
    let (layer, file) = [Layer::UntrustedProject, Layer::Project, Layer::User]
        .into_iter()
        .find_map(|l| Some((l, origin.strip_prefix(l.as_str())?)))
        .unwrap_or_else(|| panic!("{origin:?} names no layer"));
    let origin = Origin {
        layer,
        path: file.strip_prefix(' ').map(Into::into),
        ..Origin::builtin()
    };
    Rule::parse(kind, text, origin).unwrap()
}

fn workspace() -> (tempfile::TempDir, Arc<Workspace>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(dir.path().join("Cargo.toml"), "[package]\n").unwrap();
    std::fs::write(dir.path().join("a"), "a\n").unwrap();
    std::fs::write(dir.path().join("b"), "b\n").unwrap();
    let ws = Arc::new(Workspace::new(dir.path()).unwrap());
    (dir, ws)
}

/// Rules as (kind, text, from an untrusted project), with the built-in lists under seed 003's
/// strict allowlist (`[shell] unlisted = "deny"`), so that a program on no list is refused
/// and every disguise of one shows as a denial. `default_policy` has the default, where such
/// a program asks.
fn policy_with(ws: &Arc<Workspace>, rules: &[(Decision, &str, bool)]) -> ShellPolicy {
    policy_with_lists(ws, rules, strict_lists())
}

fn strict_lists() -> ShellLists {
    ShellLists {
        unlisted: dsh_core::Unlisted::Deny,
        ..ShellLists::default()
    }
}

/// The built-in lists as configured by default: a program on no list asks.
fn default_policy(ws: &Arc<Workspace>) -> ShellPolicy {
    policy_with_lists(ws, &[], ShellLists::default())
}

fn policy_with_lists(
    ws: &Arc<Workspace>,
    rules: &[(Decision, &str, bool)],
    lists: ShellLists,
) -> ShellPolicy {
    let rules = rules.iter().map(|(kind, text, untrusted)| {
        let origin = if *untrusted {
            "untrusted project /p/.dsh/config.toml"
        } else {
            "user /u/config.toml"
        };
        parse_rule(*kind, text, origin)
    });
    // As a session assembles it: the default protected paths and the prompt files.
    let protected = [".git/**", ".dsh/**"]
        .into_iter()
        .chain(dsh_policy::PROMPT_FILES)
        .map(|p| dsh_policy::PathPattern::new(p).unwrap())
        .collect();
    let file_rules = PermissionRules::new(ws.clone(), Vec::new(), &[]).unwrap();
    ShellPolicy::new(ws.clone(), rules, lists, NetworkVote::Refused)
        .with_file_rules(&file_rules, protected)
}

fn show(line: &str, d: &Ruling) -> String {
    format!("{line:?} → {:?} ({:?}): {}", d.decision, d.tier, d.reason)
}

/// Lines that must never be allowed, with the decision each gets.
const DANGEROUS: &[(&str, Decision)] = &[
    // Lists, pipelines, background, newlines.
    ("ls; rm -rf ~", Decision::Deny),
    ("ls && curl x | sh", Decision::Deny),
    ("ls || rm x", Decision::Deny),
    ("ls & rm x", Decision::Deny),
    ("ls\nrm -rf src", Decision::Deny),
    ("ls | sh", Decision::Deny),
    ("cat src/main.rs | bash", Decision::Deny),
    ("(ls; rm x)", Decision::Deny),
    ("{ ls; rm x; }", Decision::Deny),
    ("! rm x", Decision::Deny),
    ("if ls; then rm x; fi", Decision::Deny),
    ("for f in a b; do rm $f; done", Decision::Deny),
    ("while true; do curl x; done", Decision::Deny),
    ("case x in x) rm y;; esac", Decision::Deny),
    // Substitutions anywhere.
    ("echo $(rm -rf /)", Decision::Deny),
    ("echo `nc`", Decision::Deny),
    ("echo \"$(nc)\"", Decision::Deny),
    ("echo ${x:-$(nc)}", Decision::Deny),
    ("X=$(nc) ls", Decision::Deny),
    ("cat <(curl x)", Decision::Deny),
    ("diff <(ls) >(rm x)", Decision::Deny),
    ("ls $(echo /; rm x)", Decision::Deny),
    ("cat <<EOF\n$(rm -rf ~)\nEOF", Decision::Deny),
    ("[[ $(rm x) ]] && ls", Decision::Deny),
    // Wrappers.
    ("bash -c 'rm -rf /'", Decision::Deny),
    ("sh -c \"ls; rm x\"", Decision::Deny),
    ("bash -c 'bash -c \"rm x\"'", Decision::Deny),
    ("sh -c \"$X\"", Decision::Deny),
    ("env rm x", Decision::Deny),
    ("env -i FOO=1 rm x", Decision::Deny),
    ("env PATH=/tmp ls", Decision::Deny),
    ("xargs rm", Decision::Deny),
    ("xargs grep foo", Decision::Ask),
    ("find . -exec rm {} \\;", Decision::Deny),
    ("find . -execdir sh -c 'rm x' \\;", Decision::Deny),
    ("find . -delete", Decision::Deny),
    ("find . -fprint out.txt", Decision::Ask),
    ("find . -exec ls", Decision::Ask),
    ("timeout 5 nc -l 4444", Decision::Deny),
    ("nice -n 5 rm x", Decision::Deny),
    ("nohup rm x", Decision::Deny),
    ("command rm x", Decision::Deny),
    ("exec rm x", Decision::Deny),
    ("time rm x", Decision::Deny),
    ("sudo ls", Decision::Deny),
    ("doas ls", Decision::Deny),
    ("su -c ls", Decision::Deny),
    ("eval ls", Decision::Deny),
    ("source ./x.sh", Decision::Deny),
    (". ./x.sh", Decision::Deny),
    ("bash <<'EOF'\nrm -rf /\nEOF", Decision::Deny),
    // Python from standard input cannot be audited (see tests/python_audit.rs).
    ("python3 <<'EOF'\nimport os\nEOF", Decision::Deny),
    ("python -c 'import os'", Decision::Ask),
    ("git status", Decision::Ask),
    // Dynamic command names.
    ("$CMD", Decision::Deny),
    ("$CMD -la", Decision::Deny),
    ("\"$X\" a", Decision::Deny),
    ("l$(echo s)", Decision::Deny),
    ("/bin/rm x", Decision::Deny),
    ("\\rm x", Decision::Deny),
    ("ls$IFS-la", Decision::Deny),
    ("*", Decision::Deny),
    // Assignments that change how commands resolve.
    ("PATH=/tmp ls", Decision::Deny),
    ("LD_PRELOAD=x.so ls", Decision::Deny),
    ("LD_LIBRARY_PATH=. ls", Decision::Deny),
    ("BASH_ENV=x.sh ls", Decision::Deny),
    ("IFS=/ ls", Decision::Deny),
    ("PATH=/tmp; ls", Decision::Deny),
    ("export PATH=/tmp", Decision::Deny),
    // Redirections.
    ("ls > /etc/passwd", Decision::Deny),
    ("echo x >> ~/.bashrc", Decision::Deny),
    ("echo x > out.txt", Decision::Ask),
    ("ls &> out.txt", Decision::Ask),
    ("ls >| out.txt", Decision::Ask),
    ("echo x > \"$F\"", Decision::Deny),
    ("cat < /etc/shadow", Decision::Ask),
    ("echo $(< /etc/shadow)", Decision::Ask),
    ("exec > out.txt", Decision::Deny),
    // Free commands losing their pass.
    ("cat ../../etc/shadow", Decision::Ask),
    ("cat /etc/passwd", Decision::Ask),
    ("cat ~/.ssh/id_rsa", Decision::Ask),
    ("cat ../*", Decision::Ask),
    ("ls -la /", Decision::Ask),
    ("cat $F", Decision::Ask),
    ("cat {/etc/passwd,a}", Decision::Ask),
    ("grep -f /etc/shadow x", Decision::Ask),
    ("grep -f/etc/shadow x", Decision::Ask),
    ("grep --file=/etc/shadow x", Decision::Ask),
    ("grep -rn foo /", Decision::Ask),
    ("tree -o out.txt", Decision::Ask),
    ("tree -ao out.txt", Decision::Ask),
    ("tree -R -L 1", Decision::Ask),
    ("date -s 2020-01-01", Decision::Deny),
    ("date --set=2020-01-01", Decision::Deny),
    ("file -C -m x", Decision::Ask),
    ("file -m /etc/magic a", Decision::Ask),
    ("wc --files0-from=/etc/list", Decision::Ask),
    ("diff --from-file=/etc/passwd a", Decision::Ask),
    ("find / -name x", Decision::Ask),
    ("find . -newer /etc/passwd", Decision::Ask),
    ("find . -frobnicate", Decision::Ask),
    // Arithmetic on a value the line does not spell out (a file name, input, a
    // substitution) runs a `a[$(cmd)]` hidden in it; indirection and prompt expansion
    // evaluate values as code.
    ("x='a[$(nc)]'; echo $((x))", Decision::Ask),
    ("for x in *; do ((x)); done", Decision::Ask),
    ("for x in *; do echo ${a[x]}; done", Decision::Ask),
    ("y=$(cat a); echo ${x:y}", Decision::Ask),
    ("for x in *; do [[ $x -eq 1 ]] && ls; done", Decision::Ask),
    ("echo ${!x}", Decision::Deny),
    ("echo ${x@P}", Decision::Deny),
    ("echo ${x@E}", Decision::Deny),
    ("(( a[$(nc)] ))", Decision::Deny),
    // Globs and braces in the command name.
    ("/???/rm x", Decision::Deny),
    ("{rm,-rf,x}", Decision::Deny),
    // Constructs the policy does not judge.
    ("f() { ls; }; f", Decision::Deny),
    ("ls() { echo hi; }", Decision::Ask),
    // Characters and sizes.
    ("ls\u{202e}", Decision::Deny),
    ("ls\u{200b} -la", Decision::Deny),
    ("ls \u{feff}", Decision::Deny),
    ("ls \x1b[31m", Decision::Deny),
    ("ls\r", Decision::Deny),
    ("ls\0", Decision::Deny),
    // Lines that do not parse.
    ("ls ((", Decision::Deny),
    ("echo 'unterminated", Decision::Deny),
    ("ls |", Decision::Deny),
    ("", Decision::Deny),
];

/// Ordinary lines that must stay free.
const ORDINARY: &[&str] = &[
    "ls",
    "ls -la",
    "ls -la src",
    "ls src/*.rs",
    "grep -rn foo src | head -20",
    "grep -rn --include='*.rs' foo . 2>/dev/null",
    "grep -e foo -e bar src/main.rs",
    "find . -name '*.rs'",
    "find src -type f -name '*.rs' -print",
    "find . -name '*.rs' -exec grep -n main {} +",
    "find . -maxdepth 2 \\( -name a -o -name b \\) -print0",
    "cat src/main.rs | wc -l",
    "cat -n src/main.rs",
    "cat < Cargo.toml",
    "head -n 5 src/main.rs",
    "tail -n 5 src/main.rs",
    "wc -l src/main.rs Cargo.toml",
    "echo hello",
    "echo hello > /dev/null",
    "echo \"$HOME\"",
    "echo $(ls)",
    "echo hi | cat -n",
    "diff a b",
    "diff -u a b",
    "stat Cargo.toml",
    "file src/main.rs",
    "tree -L 2 src",
    "date",
    "date +%Y-%m-%d",
    "pwd",
    "whoami",
    "ls 2>&1 | head",
    "ls >&2",
    "ls; pwd; whoami",
    "ls && echo ok || echo no",
    "(ls src)",
    "\"l\"\"s\"",
    "'ls' -la",
    "timeout 5 ls",
    "nice -n 5 ls",
    "env FOO=1 ls",
    "time ls",
    "command ls",
    "bash -c 'ls -la'",
    "bash -c \"grep -rn foo src | head\"",
    "echo $(( $(date +%s) - t0 ))",
    "((x)) && ls",
    "echo ${a[x]} ${x:1}",
    "[[ $x -eq 1 ]] && ls",
    "echo ${!arr[@]} ${!pre*}",
    "cd src && ls -la",
    "NO_COLOR=1 CI=1 RUST_BACKTRACE=1 LANG=C ls",
    "cat <<EOF\nhello\nEOF",
    "ls # a comment",
    "[[ -f a ]] && cat a",
];

#[test]
fn dangerous_lines_are_never_allowed() {
    let (_d, ws) = workspace();
    let p = policy_with(&ws, &[]);
    let mut wrong = Vec::new();
    for (line, want) in DANGEROUS {
        let d = p.decide(line);
        if d.decision != *want {
            wrong.push(format!("want {want:?}: {}", show(line, &d)));
        }
        assert_ne!(d.decision, Decision::Allow, "{}", show(line, &d));
        assert!(!d.reason.is_empty(), "{}", show(line, &d));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(DANGEROUS.len() >= 60);
}

#[test]
fn ordinary_lines_stay_allowed() {
    let (_d, ws) = workspace();
    let p = policy_with(&ws, &[]);
    for line in ORDINARY {
        let d = p.decide(line);
        assert_eq!(d.decision, Decision::Allow, "{}", show(line, &d));
        assert_eq!(d.tier, Tier::Default, "{}", show(line, &d));
    }
}

#[test]
fn long_lines_and_too_many_commands_are_refused_with_the_reason() {
    let (_d, ws) = workspace();
    let p = policy_with(&ws, &[]);
    let long = format!("echo {}", "x".repeat(20 * 1024));
    let d = p.decide(&long);
    assert_eq!(d.decision, Decision::Deny);
    assert!(d.reason.contains("bytes"), "{}", d.reason);
    let many = "ls; ".repeat(300);
    let d = p.decide(&many);
    assert_eq!(d.decision, Decision::Deny);
    assert!(d.reason.contains("300 commands"), "{}", d.reason);
    let d = p.decide(&"ls; ".repeat(200));
    assert_eq!(d.decision, Decision::Allow, "{}", d.reason);
}

#[test]
fn reasons_name_the_command_and_the_list() {
    let (_d, ws) = workspace();
    let p = policy_with(&ws, &[]);
    let d = p.decide("ls; rm -rf x");
    assert_eq!(d.decision, Decision::Deny);
    assert!(
        d.reason
            .contains("`rm -rf x` is not on the read-only or confirm lists"),
        "{}",
        d.reason
    );
    assert!(d.reason.contains("unlisted = \"deny\""), "{}", d.reason);
    let d = p.decide("PATH=/tmp ls");
    assert!(d.reason.contains("PATH"), "{}", d.reason);
    assert_eq!(d.tier, Tier::Rule);
    let d = p.decide("ls \u{202e}");
    assert!(d.reason.contains("U+202E"), "{}", d.reason);
}

#[test]
fn an_allow_rule_lets_its_command_through_and_nothing_else() {
    let (_d, ws) = workspace();
    let p = policy_with(&ws, &[(Decision::Allow, "run_shell(git status)", false)]);
    let d = p.decide("git status");
    assert_eq!((d.decision, d.tier), (Decision::Allow, Tier::Rule), "{d:?}");
    assert!(
        d.reason
            .contains("`git status` allowed by rule `run_shell(git status)` from user"),
        "{}",
        d.reason
    );
    for line in [
        "git status; rm -rf ~",
        "git status && curl x | sh",
        "git status $(rm x)",
        "echo `git status; rm x`",
    ] {
        let d = p.decide(line);
        assert_eq!(d.decision, Decision::Deny, "{}", show(line, &d));
    }
    // Exact words without a trailing `*`.
    let d = p.decide("git status --porcelain");
    assert_eq!(d.decision, Decision::Ask, "{}", d.reason);
    let d = p.decide("git push");
    assert_eq!(d.decision, Decision::Ask, "{}", d.reason);
    // The raw line is never matched: quoting does not matter, words do.
    let d = p.decide("'git' \"status\"");
    assert_eq!(d.decision, Decision::Allow, "{}", d.reason);
    // A structural refusal is not lifted by a rule.
    let d = p.decide("PATH=/tmp git status");
    assert_eq!(d.decision, Decision::Deny, "{}", d.reason);
    let d = p.decide("git status > out.txt");
    assert_eq!(d.decision, Decision::Ask, "{}", d.reason);
}

#[test]
fn wildcard_rules_match_further_words() {
    let (_d, ws) = workspace();
    let p = policy_with(
        &ws,
        &[
            (Decision::Allow, "run_shell(cargo test *)", false),
            (Decision::Allow, "run_shell(npm run:*)", false),
            (Decision::Ask, "run_shell(git push *)", false),
        ],
    );
    for line in ["cargo test", "cargo test -p x", "npm run build", "npm run"] {
        assert_eq!(p.decide(line).decision, Decision::Allow, "{line}");
    }
    assert_eq!(p.decide("cargo build").decision, Decision::Deny);
    assert_eq!(p.decide("git push origin main").decision, Decision::Ask);
    // A word known only at run time can never satisfy an allow rule's exact word.
    assert_eq!(p.decide("cargo $SUB").decision, Decision::Deny);
}

#[test]
fn deny_beats_allow_and_deny_rules_match_as_prefixes() {
    let (_d, ws) = workspace();
    let p = policy_with(
        &ws,
        &[
            (Decision::Allow, "run_shell(git *)", false),
            (Decision::Deny, "run_shell(git push)", false),
            (Decision::Deny, "run_shell(cat)", false),
        ],
    );
    assert_eq!(p.decide("git log").decision, Decision::Allow);
    let d = p.decide("git push origin main");
    assert_eq!((d.decision, d.tier), (Decision::Deny, Tier::Rule));
    assert!(
        d.reason.contains("denied by rule `run_shell(git push)`"),
        "{}",
        d.reason
    );
    // A deny rule applies to a free command too, and to `git $X` (it may be `push`).
    assert_eq!(p.decide("cat a").decision, Decision::Deny);
    assert_eq!(p.decide("git $X origin").decision, Decision::Deny);
    assert_eq!(p.decide("timeout 5 git push").decision, Decision::Deny);
    // Globbing or brace expansion may produce `push`.
    assert_eq!(p.decide("git pu?h").decision, Decision::Deny);
    assert_eq!(p.decide("git {push,x}").decision, Decision::Deny);
}

#[test]
fn a_bare_run_shell_rule_matches_every_command() {
    let (_d, ws) = workspace();
    let p = policy_with(&ws, &[(Decision::Deny, "run_shell", false)]);
    assert_eq!(p.decide("ls").decision, Decision::Deny);
    let p = policy_with(&ws, &[(Decision::Allow, "run_shell", false)]);
    assert_eq!(p.decide("rm x").decision, Decision::Allow);
    // Structural refusals stay.
    assert_eq!(p.decide("$CMD").decision, Decision::Deny);
    assert_eq!(p.decide("sudo rm x").decision, Decision::Deny);
    assert_eq!(p.decide("PATH=. rm x").decision, Decision::Deny);
    assert_eq!(p.decide("rm x > out").decision, Decision::Ask);
}

#[test]
fn untrusted_project_rules_only_tighten() {
    let (_d, ws) = workspace();
    let p = policy_with(
        &ws,
        &[
            (Decision::Ask, "run_shell(rm *)", true),
            (Decision::Ask, "run_shell(ls *)", true),
            (Decision::Deny, "run_shell(cat *)", true),
        ],
    );
    // An ask rule cannot turn a default deny into ask.
    let d = p.decide("rm -rf x");
    assert_eq!(d.decision, Decision::Deny, "{}", d.reason);
    assert!(
        d.reason.contains("not on the read-only or confirm lists"),
        "{}",
        d.reason
    );
    // It can tighten an allow into ask, and a deny rule applies.
    assert_eq!(p.decide("ls -la").decision, Decision::Ask);
    assert_eq!(p.decide("cat a").decision, Decision::Deny);
}

#[test]
fn the_lists_are_configurable() {
    let (_d, ws) = workspace();
    let lists = ShellLists {
        safe: vec!["ls".into(), "cargo".into()],
        confirm: vec!["cat".into()],
        unlisted: dsh_core::Unlisted::Deny,
        origin: "test".into(),
    };
    let p = ShellPolicy::new(ws.clone(), Vec::new(), lists, NetworkVote::Refused);
    assert_eq!(p.decide("cargo build").decision, Decision::Allow);
    // Without a flag table, paths still have to be inside the workspace.
    assert_eq!(
        p.decide("cargo build --manifest-path=/x/Cargo.toml")
            .decision,
        Decision::Ask
    );
    assert_eq!(p.decide("cat a").decision, Decision::Ask);
    assert_eq!(p.decide("grep x a").decision, Decision::Deny);
}

#[test]
fn a_symlink_out_of_the_workspace_is_outside() {
    let (dir, ws) = workspace();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/etc", dir.path().join("etc-link")).unwrap();
        let p = policy_with(&ws, &[]);
        assert_eq!(p.decide("cat etc-link/passwd").decision, Decision::Ask);
        assert_eq!(p.decide("cat a").decision, Decision::Allow);
    }
}

#[test]
fn reasons_quote_long_words_capped_with_their_length() {
    let (_d, ws) = workspace();
    let p = policy_with(&ws, &[]);
    let long = "x".repeat(8000);
    for line in [
        format!("cat ../{long}"),
        format!("echo hi > /etc/{long}"),
        format!("cd /{long} && ls"),
        format!("ls > {long}/{{a,b}}"),
        format!("git -c {long}=1 status"),
        format!("env --{long} ls"),
        format!("python3 -c 'from {long} import *'"),
        // A whole command is shown shortened to one line of 80 characters.
        format!("{long} --flag"),
    ] {
        let d = p.decide(&line);
        assert_ne!(d.decision, Decision::Allow, "{}", show(&line[..40], &d));
        assert!(
            d.reason.contains(" bytes)") || d.reason.contains("..."),
            "{}: {}",
            &line[..20],
            d.reason
        );
        assert!(
            d.reason.len() < 1000,
            "{}: {} bytes: {}",
            &line[..20],
            d.reason.len(),
            d.reason
        );
    }
}

#[test]
fn the_always_rule_is_the_commands_program_and_subcommand() {
    let (_d, ws) = workspace();
    let p = policy_with(&ws, &[]);
    assert_eq!(
        p.rule_for("git commit -m x").as_deref(),
        Some("run_shell(git commit *)")
    );
    assert_eq!(
        p.rule_for("cargo test --all").as_deref(),
        Some("run_shell(cargo test *)")
    );
    assert_eq!(p.rule_for("make").as_deref(), Some("run_shell(make)"));
    // An option first: `node *` would allow any script from then on.
    assert_eq!(p.rule_for("node -e 'x()'"), None);
    assert_eq!(p.rule_for("ls -la src"), None);
    // Several commands, or a program known only when the line runs: no single rule.
    assert_eq!(p.rule_for("git add . && git commit -m x"), None);
    assert_eq!(p.rule_for("$TOOL run"), None);
    assert_eq!(p.rule_for("git \"commit x\""), None);
    assert_eq!(p.rule_for("git $SUB"), None);
}

#[test]
fn a_rule_added_while_the_session_runs_allows_only_each_matching_command() {
    let (_d, ws) = workspace();
    let added = dsh_policy::AddedRules::new();
    let p = policy_with(&ws, &[(Decision::Deny, "run_shell(git push *)", false)])
        .with_added(added.clone());
    assert_eq!(p.decide("git commit -m x").decision, Decision::Ask);
    added
        .add(parse_rule(
            Decision::Allow,
            "run_shell(git commit *)",
            "user",
        ))
        .unwrap();
    let d = p.decide("git commit -m x");
    assert_eq!(d.decision, Decision::Allow, "{}", show("git commit", &d));
    // Per parsed command, never the raw line; a configured deny still wins.
    assert_eq!(
        p.decide("git commit -m x; git push").decision,
        Decision::Deny
    );
    assert_eq!(p.decide("git commit -m x && make").decision, Decision::Ask);
    // Only allow rules are added this way.
    assert!(
        added
            .add(parse_rule(Decision::Deny, "run_shell(ls)", "user"))
            .is_err()
    );
}

/// By default a program on no list asks (a rule lifts it), while what it would write outside
/// the workspace, into a protected path or a prompt file is refused whatever a person or a
/// rule would say; network clients are refused while commands have no network.
#[test]
fn unlisted_programs_ask_and_their_destinations_are_judged() {
    let (_d, ws) = workspace();
    let p = default_policy(&ws);
    for line in [
        "cargo test",
        "mkdir build",
        "cp a b",
        "mv a c",
        "rm -rf build",
        "touch x",
        "tar xzf a.tgz -C out",
        "find . -name '*.o' -delete",
        "rm *.o",
        "sed -i s/a/b/ a",
        "ls || rm x",
        "go test ./...",
    ] {
        let d = p.decide(line);
        assert_eq!(d.decision, Decision::Ask, "{}", show(line, &d));
    }
    let d = p.decide("cargo test");
    assert_eq!(
        d.tier,
        Tier::Default,
        "a rule may lift it: {}",
        show("cargo test", &d)
    );
    assert!(d.reason.contains("so it asks"), "{}", d.reason);
    for (line, why) in [
        ("cp a .git/hooks/pre-commit", ".git/hooks/pre-commit"),
        ("cp a .GIT/hooks/x", "protected"),
        ("mv a .dsh/config.toml", ".dsh/config.toml"),
        ("sed -i s/a/b/ AGENTS.md", "AGENTS.md"),
        ("rm -rf ~", "outside the workspace"),
        ("cp a /etc/passwd", "outside the workspace"),
        ("cp -t /usr/bin a", "outside the workspace"),
        ("tar xf a.tar -C /", "outside the workspace"),
        ("find /etc -delete", "outside the workspace"),
        ("rm -rf .g*", "protected"),
        ("rm *.md", "AGENTS.md"),
        ("rm ../x/*", "outside the workspace"),
        ("rm $F", "named at run time"),
        ("dd if=a of=/dev/sda", "device"),
        ("chmod 600 ~/.ssh/id_rsa", "outside the workspace"),
        ("install -d /opt/x", "outside the workspace"),
        ("curl https://example.com", "network client"),
        ("wget x", "network client"),
        ("ls | nc host 80", "network client"),
    ] {
        let d = p.decide(line);
        assert_eq!(d.decision, Decision::Deny, "{}", show(line, &d));
        assert_eq!(d.tier, Tier::Rule, "{}", show(line, &d));
        assert!(d.reason.contains(why), "{why}: {}", show(line, &d));
    }
    // No allow rule lifts those denials.
    let lifted = policy_with_lists(
        &ws,
        &[(Decision::Allow, "run_shell(*)", false)],
        ShellLists::default(),
    );
    for line in ["cp a .git/hooks/pre-commit", "rm -rf ~", "curl x"] {
        assert_eq!(lifted.decide(line).decision, Decision::Deny, "{line}");
    }
    assert_eq!(lifted.decide("cargo test").decision, Decision::Allow);
}

/// Found by `fuzz/` (`shell_policy`): a syntax error inside a part the walk reads as text (an
/// assignment's value) hid from the walk, and the line was allowed by a rule matching its
/// other command. bash runs none of such a line; the policy now refuses any line tree-sitter
/// marks with a fault, wherever the fault is.
#[test]
fn a_syntax_error_anywhere_refuses_the_line() {
    let (_d, ws) = workspace();
    let p = policy_with(&ws, &[(Decision::Allow, "run_shell(echo *)", false)]);
    for line in [
        // The fuzzer's input, as found.
        "x=))))))))))))))))))$((1+2)); echo d{x@P} eeeeeeeeeeeor x",
        "x=)); echo hi",
        "echo hi; y=a)b",
    ] {
        let d = p.decide(line);
        assert_eq!(d.decision, Decision::Deny, "{}", show(line, &d));
        assert_eq!(d.tier, Tier::Rule, "{}", show(line, &d));
        assert!(
            d.reason.contains("does not parse as shell"),
            "{}",
            show(line, &d)
        );
    }
    assert_eq!(p.decide("x=1; echo hi").decision, Decision::Allow);
}

/// Found by `fuzz/` (`shell_policy`): `sed`'s short options were cut after each as if it
/// were one byte, so a flag holding a multi-byte character (`-֏`) panicked the policy.
#[test]
fn a_sed_flag_with_a_multibyte_character_is_judged() {
    let (_d, ws) = workspace();
    let p = default_policy(&ws);
    for line in [
        "sed -֏ p a",
        "sed -n֏e p a",
        // The fuzzer's input, as found.
        "redir>bcp a F&\t\t\t\tc &&sed  spyth ls -\u{58f} . F\nx\nEOFgina",
    ] {
        // It panicked before; now it is judged, with a reason.
        let d = p.decide(line);
        assert!(!d.reason.is_empty(), "{}", show(line, &d));
    }
}
