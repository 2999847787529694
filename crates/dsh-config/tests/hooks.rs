//! Hooks in configuration: `[[hooks.EVENT]]` spelled as Claude Code spells its events, a
//! project's `.claude/settings.json`, the user's `~/.claude/settings.json` only with
//! `[compat] claude = true`, and the old spelling an error naming the new one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use dsh_config::{HookEvent, Layer, OnError};

#[test]
fn every_event_is_a_table_list_with_its_own_settings() {
    let w = World::new();
    let mut text = String::from("[hooks]\nmax_continuations = 5\n");
    for e in HookEvent::ALL {
        text.push_str(&format!("[[hooks.{e}]]\ncommand = \"./{e}.sh\"\n"));
    }
    text.push_str(
        "[[hooks.PreToolUse]]\nmatcher = \"Edit|Write\"\ncommand = \"./guard.sh\"\ntimeout_ms = 900\non_error = \"abstain\"\nenv = { LEVEL = \"strict\" }\n",
    );
    w.user(&text);
    let c = w.load().config;
    assert_eq!(c.hooks.max_continuations, 5);
    let mut events: Vec<&str> = c
        .hooks
        .entries
        .iter()
        .map(|h| h.value.event.as_str())
        .collect();
    events.sort_unstable();
    let mut expected: Vec<&str> = HookEvent::ALL.iter().map(|e| e.as_str()).collect();
    expected.push("PreToolUse");
    expected.sort_unstable();
    assert_eq!(events, expected);
    // Within an event, in the order written.
    let pre: Vec<&dsh_config::Hook> = c
        .hooks
        .entries
        .iter()
        .map(|h| &h.value)
        .filter(|h| h.event == HookEvent::PreToolUse)
        .collect();
    assert_eq!(pre[0].command, "./PreToolUse.sh");
    let guard = pre[1];
    assert_eq!(guard.matcher.as_deref(), Some("Edit|Write"));
    assert_eq!((guard.timeout_ms, guard.on_error), (900, OnError::Abstain));
    assert_eq!(guard.env.get("LEVEL").map(String::as_str), Some("strict"));
    let first = pre[0];
    assert_eq!((first.timeout_ms, first.on_error), (5000, OnError::Deny));
    assert_eq!(dsh_config::Config::default().hooks.max_continuations, 3);
}

#[test]
fn the_old_spelling_and_an_unknown_event_are_errors_naming_the_file_and_key() {
    let w = World::new();
    let path = w.user("[limits]\nmax_steps = 9\n\n[[hooks.pre_tool_use]]\ncommand = \"x\"\n");
    let e = w.error();
    assert!(e.contains(&format!("{}:4", path.display())), "{e}");
    assert!(e.contains("[[hooks.PreToolUse]]"), "{e}");

    w.user("[[hooks.PostToolUSE]]\ncommand = \"x\"\n");
    let e = w.error();
    assert!(e.contains("hooks.PostToolUSE"), "{e}");
    assert!(
        e.contains("PostToolUse"),
        "the expected keys are listed: {e}"
    );
}

fn claude_settings(w: &World) {
    w.write(
        &w.workspace.join(".claude/settings.json"),
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh", "timeout": 3}]}]}}"#,
    );
}

#[test]
fn a_projects_claude_settings_hooks_are_the_projects_and_only_when_trusted() {
    let w = World::new();
    claude_settings(&w);
    let loaded = w.load();
    assert!(loaded.config.hooks.entries.is_empty());
    assert!(
        loaded
            .notices
            .iter()
            .any(|n| n.contains("settings.json") && n.contains("ignored hooks (1 hook)")),
        "{:?}",
        loaded.notices
    );

    w.trust();
    let loaded = w.load();
    let h = &loaded.config.hooks.entries[0];
    assert_eq!(h.origin.layer, Layer::Project);
    assert_eq!(h.value.timeout_ms, 3000);
    assert_eq!(h.value.matcher.as_deref(), Some("Bash"));
    assert!(
        h.origin.location().contains(".claude/settings.json:1"),
        "{}",
        h.origin.location()
    );
}

#[test]
fn the_users_claude_hooks_only_with_compat_claude_from_the_user_config() {
    let mut w = World::new();
    let claude_dir = w.dir.path().join("claude-home");
    w.write(
        &claude_dir.join("settings.json"),
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}"#,
    );
    w.env
        .insert("CLAUDE_CONFIG_DIR".into(), claude_dir.display().to_string());
    w.user("");
    assert!(w.load().config.hooks.entries.is_empty(), "off by default");

    // A project cannot turn it on.
    w.trust();
    w.project("[compat]\nclaude = true\n");
    assert!(w.load().config.hooks.entries.is_empty());

    let mut user = std::fs::read_to_string(w.user_path()).unwrap();
    user.push_str("\n[compat]\nclaude = true\n");
    w.user(&user);
    let loaded = w.load();
    let h = &loaded.config.hooks.entries[0];
    assert_eq!(h.value.event, HookEvent::Stop);
    assert_eq!(h.origin.layer, Layer::User, "the user's own: no approval");
}

#[test]
fn a_skills_table_is_an_error_saying_where_skills_go() {
    let w = World::new();
    w.user("[skills.release]\npath = \"x\"\n");
    let e = w.error();
    assert!(e.contains("SKILL.md"), "{e}");
    assert!(e.contains(".dsh/skills/"), "{e}");
}

#[test]
fn a_plugins_table_is_an_error_saying_where_plugins_go() {
    let w = World::new();
    w.user("[plugins.lint]\ncommand = \"x\"\n");
    let e = w.error();
    assert!(e.contains("plugin.toml"), "{e}");
    assert!(e.contains(".dsh/plugins/"), "{e}");
}
