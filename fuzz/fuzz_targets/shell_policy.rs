//! The shell policy on a `run_shell` line: it never panics, never allows a line its parser
//! (tree-sitter-bash) marks as an error, and judges a line twice the same way. Allow rules
//! for common programs are set, so that an allow is a reachable wrong answer.
#![no_main]
use std::sync::{Arc, OnceLock};

use dsh_core::{Decision, Origin, Rule, Workspace};
use dsh_policy::{NetworkVote, ShellLists, ShellPolicy};
use libfuzzer_sys::fuzz_target;

struct Fixture {
    policy: ShellPolicy,
    _ws: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let ws = dsh_fuzz::workspace();
        let workspace = Arc::new(Workspace::new(ws.path()).expect("a workspace"));
        let rule = |d, t: &str| Rule::parse(d, t, Origin::builtin()).expect("a rule");
        let rules = vec![
            rule(Decision::Allow, "run_shell(echo *)"),
            rule(Decision::Allow, "run_shell(git *)"),
            rule(Decision::Allow, "run_shell(make)"),
            rule(Decision::Allow, "run_shell(python3 *)"),
            rule(Decision::Ask, "run_shell(curl *)"),
            rule(Decision::Deny, "run_shell(rm *)"),
        ];
        let policy = ShellPolicy::new(
            workspace,
            rules,
            ShellLists::default(),
            NetworkVote::Refused,
        )
        .with_temp_dir(ws.path().join("tmp"));
        Fixture { policy, _ws: ws }
    })
}

thread_local! {
    static BASH: std::cell::RefCell<tree_sitter::Parser> = std::cell::RefCell::new({
        let mut p = tree_sitter::Parser::new();
        p.set_language(&tree_sitter_bash::LANGUAGE.into()).expect("the bash grammar");
        p
    });
}

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let f = fixture();
    let first = f.policy.decide(line);
    let second = f.policy.decide(line);
    assert_eq!(
        format!("{first:?}"),
        format!("{second:?}"),
        "the line was judged twice differently"
    );
    let broken = BASH.with(|p| {
        p.borrow_mut()
            .parse(line, None)
            .is_none_or(|t| t.root_node().has_error())
    });
    if broken {
        assert_ne!(
            first.decision,
            Decision::Allow,
            "a line that does not parse was allowed: {first:?}"
        );
    }
    let _ = f.policy.rule_for(line);
});
