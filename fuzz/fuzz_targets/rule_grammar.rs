//! The permission rule grammar (`tool` / `tool(specifier)`, dsh-core's `Rule::parse`) and what
//! the policies compile from a rule: a parsed rule reads back as itself from its `Display`;
//! compiling and matching it never panics; a deny rule added to the shell policy never turns
//! a line's decision into a looser one.
//!
//! The first byte picks the list (allow, ask, deny), the rest is the rule's text.
#![no_main]
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use dsh_core::{Access, Decision, Origin, Rule, ToolCall, Workspace};
use dsh_policy::{NetworkVote, PermissionRules, ShellLists, ShellPolicy};
use libfuzzer_sys::fuzz_target;

const LINES: &[&str] = &[
    "echo hi",
    "git status",
    "cat README.md | grep hello",
    "ls -la src && wc -l src/main.rs",
    "rm -rf docs",
    "python3 -c 'print(1)'",
    "make",
];

fn workspace() -> &'static (Arc<Workspace>, tempfile::TempDir) {
    static WS: OnceLock<(Arc<Workspace>, tempfile::TempDir)> = OnceLock::new();
    WS.get_or_init(|| {
        let dir = dsh_fuzz::workspace();
        (
            Arc::new(Workspace::new(dir.path()).expect("a workspace")),
            dir,
        )
    })
}

fn base_rules() -> Vec<Rule> {
    let rule = |d, t: &str| Rule::parse(d, t, Origin::builtin()).expect("a rule");
    vec![
        rule(Decision::Allow, "run_shell(echo *)"),
        rule(Decision::Allow, "run_shell(git *)"),
        rule(Decision::Allow, "run_shell(make)"),
        rule(Decision::Allow, "run_shell(rm *)"),
    ]
}

fn shell(rules: Vec<Rule>) -> ShellPolicy {
    ShellPolicy::new(
        workspace().0.clone(),
        rules,
        ShellLists::default(),
        NetworkVote::Refused,
    )
}

fuzz_target!(|data: &[u8]| {
    let Some((&list, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let decision = match list % 3 {
        0 => Decision::Allow,
        1 => Decision::Ask,
        _ => Decision::Deny,
    };
    let Ok(rule) = Rule::parse(decision, text, Origin::builtin()) else {
        return;
    };
    assert_eq!(
        Rule::parse(decision, &rule.to_string(), Origin::builtin()),
        Ok(rule.clone()),
        "a rule does not read back from its Display"
    );
    let ws = &workspace().0;
    let readers = vec!["read_file".to_owned(), "grep".to_owned()];
    if let Ok(rules) = PermissionRules::new(ws.clone(), vec![rule.clone()], &readers) {
        let call = ToolCall::new("c", rule.tool.as_str(), serde_json::json!({}));
        for path in ["src/main.rs", ".env", "docs/a.md", "a/../b", "."] {
            let path = PathBuf::from(path);
            let _ = rules.allow(&call, &[Access::Read { path: path.clone() }]);
            let _ = rules.allow(&call, &[Access::Write { path }]);
        }
        let _ = shell(Vec::new())
            .with_file_rules(&rules, Vec::new())
            .decide("cat .env");
    }
    if rule.tool == "run_shell" && decision == Decision::Deny {
        let before = shell(base_rules());
        let mut rules = base_rules();
        rules.push(rule);
        let after = shell(rules);
        for line in LINES {
            let (b, a) = (before.decide(line).decision, after.decide(line).decision);
            assert!(
                a >= b,
                "adding a deny rule turned `{line}` from {b:?} into {a:?}"
            );
        }
    }
});
