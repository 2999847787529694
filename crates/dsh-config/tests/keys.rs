//! The keys DESIGN §5 lists beyond those the session uses today: each parses, the trust rules
//! hold for them, and the built-in agent profiles cannot be redefined.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use dsh_config::{Config, Price, ToolsMode};

const EVERY_NEW_KEY: &str = r#"
[model]
context_window = 128000
price = { input = 0.27, cached_input = 0.07, output = 1.10 }
idle_timeout_s = 30
max_retries = 5

[context]
keep_turns = 12
max_fraction = 0.5

[tools]
mode = "both"

[verify]
command = "cargo test -q"
max_rounds = 2

[agents.reviewer]
description = "reads and comments"
tools = ["read_file", "grep"]
system = "You review."
model = "small"
max_steps = 40

[[hooks.PreToolUse]]
matcher = "run_shell"
command = "./scripts/check.sh"
timeout_ms = 5000

[mcp.servers.git]
command = "npx"
args = ["git-mcp"]

[limits]
max_steps = 2000
max_cost_usd = 2.5
"#;

#[test]
fn every_new_key_parses_in_the_user_file() {
    let w = World::new();
    w.user(EVERY_NEW_KEY);
    let loaded = w.load();
    let c = &loaded.config;
    assert_eq!(c.model.context_window, Some(128_000));
    assert_eq!((c.model.idle_timeout_s, c.model.max_retries), (30, 5));
    assert_eq!(
        c.model.price,
        Some(Price {
            input: 0.27,
            cached_input: Some(0.07),
            output: 1.10
        })
    );
    assert_eq!((c.context.keep_turns, c.context.max_fraction), (12, 0.5));
    assert_eq!(c.tools.mode, ToolsMode::Both);
    assert_eq!(c.verify.command.as_deref(), Some("cargo test -q"));
    assert_eq!(c.verify.max_rounds, 2);
    let reviewer = &c.agents["reviewer"].value;
    let tools = reviewer.tools.as_deref().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.value.as_str()).collect();
    assert_eq!(names, ["read_file", "grep"]);
    // Each name says where it is written, for the error a missing tool gets.
    assert_eq!(tools[1].origin.line, Some(21));
    assert_eq!(
        tools[1].origin.key.as_deref(),
        Some("agents.reviewer.tools[1]")
    );
    assert_eq!(reviewer.max_steps, Some(40));
    assert_eq!(c.agents["reviewer"].origin.line, Some(19));
    assert_eq!(c.hooks.entries.len(), 1);
    assert!(c.mcp.servers.contains_key("git"));
    assert_eq!(c.limits.max_steps, 2000);
    assert_eq!(c.limits.max_cost_usd, 2.5);
    assert!(loaded.notices.is_empty(), "{:?}", loaded.notices);
}

#[test]
fn an_untrusted_project_loses_agents_hooks_mcp_verify_and_model() {
    let w = World::new();
    let path = w.project(EVERY_NEW_KEY);
    let loaded = w.load();
    let c = &loaded.config;
    let d = Config::default();
    assert!(c.agents.is_empty());
    assert!(c.hooks.entries.is_empty());
    assert!(c.mcp.servers.is_empty());
    assert_eq!(c.verify, d.verify);
    assert_eq!(c.tools, d.tools);
    assert_eq!(c.model, d.model);
    // Raising limits is ignored; keep_turns and a lower fraction apply.
    assert_eq!(c.limits.max_steps, d.limits.max_steps);
    // A budget where there was none tightens, so it applies.
    assert_eq!(c.limits.max_cost_usd, 2.5);
    assert_eq!((c.context.keep_turns, c.context.max_fraction), (12, 0.5));
    let all = loaded.notices.join("\n");
    for what in [
        "agents (reviewer)",
        "hooks (1 hook)",
        "mcp.servers (git)",
        "[verify]",
        "tools.mode",
        "model.context_window",
        "model.price",
        "model.idle_timeout_s",
        "model.max_retries",
        "limits.max_steps",
    ] {
        assert!(all.contains(what), "no notice about {what}: {all}");
    }
    for notice in &loaded.notices {
        assert!(notice.contains(&path.display().to_string()), "{notice}");
        assert!(notice.contains("dsh trust"), "{notice}");
    }
}

#[test]
fn a_trusted_project_keeps_its_agents() {
    let w = World::new();
    w.trust();
    w.project("[agents.reviewer]\ntools = [\"read_file\"]\n");
    assert!(w.load().config.agents.contains_key("reviewer"));
}

#[test]
fn an_untrusted_cost_limit_applies_only_when_lower() {
    let w = World::new();
    w.user("[limits]\nmax_cost_usd = 5\n");
    w.project("[limits]\nmax_cost_usd = 1\n");
    assert_eq!(w.load().config.limits.max_cost_usd, 1.0);
    w.project("[limits]\nmax_cost_usd = 0\n");
    assert_eq!(w.load().config.limits.max_cost_usd, 5.0);
}

#[test]
fn redefining_a_built_in_agent_profile_is_an_error_naming_file_line_and_key() {
    let w = World::new();
    let path = w.user("[limits]\nmax_steps = 3\n\n[agents.code]\ntools = [\"read_file\"]\n");
    let msg = w.error();
    assert!(
        msg.starts_with(&format!("{}:4: agents.code: ", path.display())),
        "{msg}"
    );
    assert!(msg.contains("built-in agent profile"), "{msg}");
    // From any layer, trusted or not.
    let w = World::new();
    let path = w.project("[agents.search]\nsystem = \"x\"\n");
    let msg = w.error();
    assert!(
        msg.starts_with(&format!("{}:1: agents.search: ", path.display())),
        "{msg}"
    );
}

#[test]
fn bad_values_of_new_keys_name_their_key() {
    for (text, key) in [
        ("[context]\nmax_fraction = 1.5\n", "context.max_fraction"),
        (
            "[model]\nprice = { input = -1, output = 1 }\n",
            "model.price.input",
        ),
        ("[tools]\nmode = \"magic\"\n", "tools.mode"),
        ("[verify]\nmax_rounds = 0\n", "verify.max_rounds"),
        ("[agents.x]\nmax_step = 3\n", "agents.x.max_step"),
        ("[limits]\nmax_cost_usd = -2\n", "limits.max_cost_usd"),
        ("[model]\nidle_timeout_s = 0\n", "model.idle_timeout_s"),
        ("[model]\nmax_retries = 1000\n", "model.max_retries"),
    ] {
        let w = World::new();
        let path = w.user(text);
        let msg = w.error();
        assert!(
            msg.starts_with(&format!("{}:", path.display())) && msg.contains(&format!(": {key}: ")),
            "{text}: {msg}"
        );
    }
}
