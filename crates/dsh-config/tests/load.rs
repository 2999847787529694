#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{World, patterns, rules};
use dsh_config::{
    Config, ErrorKind, Fsync, Layer, McpLaunch, McpServer, OnError, Provider, SandboxMode, load,
};

// ---- defaults and layering ----

#[test]
fn no_files_gives_built_in_defaults() {
    let w = World::new();
    let loaded = w.load();
    assert_eq!(loaded.config, Config::default());
    assert!(loaded.files.is_empty());
    assert!(loaded.notices.is_empty());
    assert!(!loaded.trusted);
    assert_eq!(loaded.digest, Config::default().digest());
    let c = &loaded.config;
    assert_eq!(c.model.provider, Provider::Openai);
    assert_eq!(c.model.base_url, "https://api.openai.com/v1");
    assert_eq!(c.shell.timeout_s, 120);
    assert_eq!(c.shell.unlisted, dsh_config::Unlisted::Ask);
    assert_eq!(c.shell.max_output_chars, 3000);
    assert_eq!(c.limits.max_steps, 1_000);
    // The token budget is opt-in.
    assert_eq!(c.limits.max_tokens, 0);
    assert_eq!(
        patterns(&c.guards.protected),
        [".git/**", ".dsh/**", ".claude/**", ".mcp.json"]
    );
    assert_eq!(c.journal.fsync, Fsync::Batch);
    assert_eq!(c.sandbox.mode, SandboxMode::Auto);
    assert!(!c.sandbox.allow_network);
}

#[test]
fn user_config_defaults_to_dsh_config_home() {
    let w = World::new();
    let loaded = w.load();
    assert_eq!(loaded.user_config, Some(w.user_path()));
    assert_eq!(
        dsh_config::dsh_home(&w.env).ok(),
        Some(w.dir.path().join("dsh-home"))
    );
}

#[test]
fn higher_layers_override_scalars_in_order() {
    let w = World::new();
    w.managed("[limits]\nmax_tokens = 900000\nmax_results = 10\n[shell]\ntimeout_s = 5\n");
    w.user("[shell]\ntimeout_s = 10\nmax_output_chars = 100\n[model]\nmodel = \"from-user\"\n");
    w.trust();
    w.project("[shell]\ntimeout_s = 20\n[limits]\nmax_tokens = 1000\n");
    let mut opts = w.options();
    opts.env.insert("DSH_MODEL".into(), "from-env".into());
    opts.overrides.model = Some("from-flag".into());
    let loaded = load(&opts).unwrap();
    let c = &loaded.config;
    assert_eq!(c.shell.timeout_s, 20, "project over user over managed");
    assert_eq!(c.shell.max_output_chars, 100, "user over default");
    assert_eq!(
        c.limits.max_tokens, 1000,
        "project under the managed ceiling"
    );
    assert_eq!(c.limits.max_results, 10, "managed over default");
    assert_eq!(c.model.model.as_deref(), Some("from-flag"), "flag over env");
    assert_eq!(
        loaded.files,
        [w.managed.clone(), w.user_path(), w.project_path()]
    );
}

#[test]
fn lists_accumulate_across_layers_with_origins() {
    let w = World::new();
    w.managed("[permissions]\ndeny = [\"read_file(/etc/**)\"]\n");
    w.user("# mine\n[permissions]\nallow = [\"run_shell(git status)\"]\ndeny = [\"read_file(~/.ssh/**)\"]\n");
    w.trust();
    w.project("[permissions]\n\ndeny = [\n  \"run_shell(curl *)\",\n  \"read_file(.env)\",\n]\n");
    let loaded = w.load();
    let perms = &loaded.config.permissions;
    assert_eq!(
        rules(&perms.deny),
        [
            "read_file(/etc/**)",
            "read_file(~/.ssh/**)",
            "run_shell(curl *)",
            "read_file(.env)"
        ]
    );
    assert_eq!(rules(&perms.allow), ["run_shell(git status)"]);
    let env_rule = &perms.deny[3];
    assert_eq!(env_rule.tool, "read_file");
    assert_eq!(env_rule.specifier.as_deref(), Some(".env"));
    assert_eq!(env_rule.origin.layer, Layer::Project);
    assert_eq!(
        env_rule.origin.path.as_deref(),
        Some(w.project_path().as_path())
    );
    assert_eq!(env_rule.origin.line, Some(5));
    assert_eq!(
        env_rule.origin.to_string(),
        format!("project {}:5", w.project_path().display())
    );
    assert_eq!(perms.deny[0].origin.layer, Layer::Managed);
    assert_eq!(perms.allow[0].origin.line, Some(3));
}

#[test]
fn shell_lists_move_commands_between_safe_and_confirm() {
    let w = World::new();
    w.user("[shell]\nsafe = [\"git\", \"rg\"]\nconfirm = [\"cat\", \"cargo\"]\npass_env = [\"RUST_LOG\"]\n");
    let c = w.load().config;
    assert!(c.shell.safe.contains(&"rg".to_string()));
    assert!(c.shell.safe.contains(&"git".to_string()));
    assert!(!c.shell.confirm.contains(&"git".to_string()));
    assert!(c.shell.confirm.contains(&"cat".to_string()));
    assert!(!c.shell.safe.contains(&"cat".to_string()));
    assert!(c.shell.confirm.contains(&"cargo".to_string()));
    assert_eq!(c.shell.pass_env, ["RUST_LOG"]);
}

#[test]
fn hooks_mcp_journal_and_sandbox_parse_from_the_user_file() {
    let w = World::new();
    w.user(
        r#"
[[hooks.PreToolUse]]
matcher = "run_shell"
command = "./scripts/check.sh"
timeout_ms = 2000
on_error = "abstain"

[[hooks.PreToolUse]]
command = "audit"

[mcp.servers.git]
command = "npx"
args = ["-y", "mcp-git"]
env = { GIT_DIR = ".git" }

[mcp.servers.remote]
url = "https://mcp.example.invalid/mcp"

[journal]
fsync = "record"

[sandbox]
mode = "required"
allow_network = true
"#,
    );
    let c = w.load().config;
    let hooks = &c.hooks.entries;
    assert_eq!(hooks.len(), 2);
    assert_eq!(hooks[0].value.matcher.as_deref(), Some("run_shell"));
    assert_eq!(hooks[0].value.timeout_ms, 2000);
    assert_eq!(hooks[0].value.on_error, OnError::Abstain);
    assert_eq!(hooks[1].value.matcher, None);
    assert_eq!(hooks[1].value.timeout_ms, 5000);
    assert_eq!(hooks[1].value.on_error, OnError::Deny);
    assert_eq!(hooks[1].origin.line, Some(8));
    match &c.mcp.servers["git"].value.launch {
        McpLaunch::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            assert_eq!(command, "npx");
            assert_eq!(args, &["-y", "mcp-git"]);
            assert_eq!(env["GIT_DIR"], ".git");
            assert_eq!(cwd, &None);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        c.mcp.servers["remote"].value,
        McpServer {
            launch: McpLaunch::Http {
                url: "https://mcp.example.invalid/mcp".into(),
                headers_env: Default::default(),
                headers: Default::default(),
            },
            startup_timeout_s: 30,
            timeout_s: 120,
        }
    );
    assert_eq!(c.journal.fsync, Fsync::Record);
    assert_eq!(c.sandbox.mode, SandboxMode::Required);
    assert!(c.sandbox.allow_network);
}

#[test]
fn digest_changes_with_the_effective_config() {
    let w = World::new();
    let before = w.load().digest;
    w.user("[limits]\nmax_steps = 7\n");
    let after = w.load().digest;
    assert_ne!(before, after);
    assert_eq!(after.len(), 64);
    assert!(after.chars().all(|c| c.is_ascii_hexdigit()));
}

// ---- environment and flags ----

#[test]
fn environment_overrides_the_model_settings() {
    let w = World::new();
    w.user("[model]\nprovider = \"openai\"\nbase_url = \"https://proxy.invalid/v1\"\nmodel = \"gpt\"\n");
    let mut opts = w.options();
    opts.env
        .insert("OPENAI_BASE_URL".into(), "http://127.0.0.1:9/v1".into());
    opts.env.insert("DSH_MODEL".into(), "env-model".into());
    let c = load(&opts).unwrap().config;
    assert_eq!(c.model.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(c.model.model.as_deref(), Some("env-model"));
    assert_eq!(c.model.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
}

#[test]
fn environment_provider_switch_uses_that_providers_defaults_and_url_variable() {
    let w = World::new();
    w.user("[model]\nbase_url = \"https://proxy.invalid/v1\"\nmodel = \"gpt\"\n");
    let mut opts = w.options();
    opts.env.insert("DSH_PROVIDER".into(), "anthropic".into());
    opts.env
        .insert("OPENAI_BASE_URL".into(), "http://wrong.invalid".into());
    opts.env
        .insert("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:8/".into());
    let c = load(&opts).unwrap().config;
    assert_eq!(c.model.provider, Provider::Anthropic);
    assert_eq!(c.model.base_url, "http://127.0.0.1:8/");
    assert_eq!(c.model.model, None);
    assert_eq!(c.model.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
}

#[test]
fn bad_environment_value_is_an_error_naming_the_variable() {
    let w = World::new();
    let mut opts = w.options();
    opts.env.insert("DSH_PROVIDER".into(), "gemini".into());
    let err = load(&opts).unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment variable DSH_PROVIDER: \"gemini\" is not one of: openai, anthropic, deepseek, ollama"
    );
}

#[test]
fn flags_override_everything_below() {
    let w = World::new();
    w.user(
        "[model]\nprovider = \"anthropic\"\n[limits]\nmax_steps = 9\n[sandbox]\nmode = \"auto\"\n",
    );
    let mut opts = w.options();
    opts.env.insert("DSH_PROVIDER".into(), "deepseek".into());
    opts.overrides.provider = Some(Provider::Ollama);
    opts.overrides.base_url = Some("http://127.0.0.1:11434/v1".into());
    opts.overrides.max_steps = Some(3);
    opts.overrides.sandbox = Some(SandboxMode::Off);
    let c = load(&opts).unwrap().config;
    assert_eq!(c.model.provider, Provider::Ollama);
    assert_eq!(c.model.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(c.model.api_key_env, None);
    assert_eq!(c.limits.max_steps, 3);
    assert_eq!(c.sandbox.mode, SandboxMode::Off);
}

#[test]
fn zero_max_steps_flag_is_an_error_naming_the_flag() {
    let w = World::new();
    let mut opts = w.options();
    opts.overrides.max_steps = Some(0);
    assert_eq!(
        load(&opts).unwrap_err().to_string(),
        "--max-steps: must be a positive integer, not 0"
    );
}

// ---- errors name file:line:key ----

#[test]
fn unknown_key_is_an_error_with_file_line_and_key() {
    let w = World::new();
    let path = w.user("# comment\n[shell]\nsafe_list = [\"ls\"]\n");
    let err = w.try_load().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnknownKey);
    assert_eq!(err.line(), Some(3));
    assert_eq!(err.key(), Some("shell.safe_list"));
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3: shell.safe_list: unknown key (expected one of: safe, confirm, unlisted, timeout_s, max_output_chars, pass_env)",
            path.display()
        )
    );
}

#[test]
fn unknown_table_is_an_error_with_line() {
    let w = World::new();
    let path = w.user("[limits]\nmax_steps = 3\n\n[widgets]\nx = 1\n");
    let msg = w.error();
    assert!(
        msg.starts_with(&format!(
            "{}:4: widgets: unknown key (expected one of: model, ",
            path.display()
        )),
        "{msg}"
    );
}

#[test]
fn unknown_key_inside_an_array_of_tables_names_the_index() {
    let w = World::new();
    let path = w.user("[[hooks.PreToolUse]]\ncommand = \"a\"\n\n[[hooks.PreToolUse]]\ncommand = \"b\"\nwhen = \"x\"\n");
    let msg = w.error();
    assert!(
        msg.starts_with(&format!(
            "{}:6: hooks.PreToolUse[1].when: unknown key",
            path.display()
        )),
        "{msg}"
    );
}

#[test]
fn malformed_permission_rule_is_an_error_with_line_and_index() {
    let w = World::new();
    let path = w.user(
        "[model]\nprovider = \"openai\"\n\n[permissions]\n\nallow = [\n  \"read_file(src/**)\",\n  \"read_file(src/**\",\n]\n",
    );
    let err = w.try_load().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidValue);
    assert_eq!(
        err.to_string(),
        format!(
            "{}:8: permissions.allow[1]: \"read_file(src/**\" is not a rule: missing \")\"",
            path.display()
        )
    );
}

#[test]
fn rule_with_a_bad_tool_name_is_an_error() {
    let w = World::new();
    w.project("[permissions]\ndeny = [\"read file(x)\"]\n");
    let msg = w.error();
    assert!(
        msg.contains(":2: permissions.deny[0]: \"read file(x)\" is not a rule: tool name"),
        "{msg}"
    );
}

#[test]
fn zero_is_not_a_valid_limit() {
    let w = World::new();
    let path = w.user("[limits]\nmax_steps = 10\nmax_parallel = 0\n");
    assert_eq!(
        w.error(),
        format!(
            "{}:3: limits.max_parallel: must be a positive integer, not 0",
            path.display()
        )
    );
}

#[test]
fn negative_number_is_an_error_with_line() {
    let w = World::new();
    let path = w.user("[shell]\n\ntimeout_s = -5\n");
    assert_eq!(
        w.error(),
        format!(
            "{}:3: shell.timeout_s: -5 is not a positive integer",
            path.display()
        )
    );
}

#[test]
fn unknown_provider_is_an_error_listing_the_four() {
    let w = World::new();
    let path = w.user("[model]\nprovider = \"gemini\"\n");
    assert_eq!(
        w.error(),
        format!(
            "{}:2: model.provider: \"gemini\" is not one of: openai, anthropic, deepseek, ollama",
            path.display()
        )
    );
}

#[test]
fn wrong_type_is_an_error_with_line_and_key() {
    let w = World::new();
    let path = w.user("[sandbox]\nmode = \"auto\"\nallow_network = \"yes\"\n");
    let err = w.try_load().unwrap_err();
    assert_eq!(err.line(), Some(3));
    assert_eq!(err.key(), Some("sandbox.allow_network"));
    assert!(err.to_string().starts_with(&format!(
        "{}:3: sandbox.allow_network: invalid type",
        path.display()
    )));

    let w = World::new();
    w.user("[permissions]\nallow = \"read_file\"\n");
    let err = w.try_load().unwrap_err();
    assert_eq!(err.key(), Some("permissions.allow"));
    assert!(err.message().contains("expected an array"), "{err}");
}

#[test]
fn bad_url_and_env_name_are_errors() {
    let w = World::new();
    w.user("[model]\nbase_url = \"ftp://x\"\n");
    assert!(
        w.error()
            .contains(":2: model.base_url: \"ftp://x\" is not an http:// or https:// URL")
    );
    let w = World::new();
    w.user("[model]\napi_key_env = \"MY KEY\"\n");
    assert!(
        w.error()
            .contains(":2: model.api_key_env: \"MY KEY\" is not an environment variable name")
    );
}

#[test]
fn hook_without_command_is_an_error() {
    let w = World::new();
    w.user("[[hooks.PreToolUse]]\nmatcher = \"x\"\n");
    let err = w.try_load().unwrap_err();
    assert_eq!(err.key(), Some("hooks.PreToolUse[0]"));
    assert!(
        err.message().contains("missing required key \"command\""),
        "{err}"
    );
}

#[test]
fn mcp_server_needs_exactly_one_of_command_and_url() {
    let w = World::new();
    w.user("[mcp.servers.both]\ncommand = \"x\"\nurl = \"http://a\"\n");
    assert!(
        w.error()
            .contains("mcp.servers.both: set either command or url, not both")
    );
    let w = World::new();
    w.user("[mcp.servers.none]\nargs = []\n");
    assert!(
        w.error()
            .contains("mcp.servers.none: needs a command or a url")
    );
}

#[test]
fn broken_toml_syntax_is_an_error_with_line() {
    let w = World::new();
    let path = w.user("[shell]\ntimeout_s = 3\n[limits\nmax_steps = 2\n");
    let err = w.try_load().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Syntax);
    assert_eq!(err.line(), Some(3));
    assert!(
        err.to_string()
            .starts_with(&format!("{}:3: invalid TOML", path.display())),
        "{err}"
    );
}

#[test]
fn duplicate_key_is_a_syntax_error_with_line() {
    let w = World::new();
    let path = w.project("[shell]\ntimeout_s = 3\ntimeout_s = 4\n");
    let err = w.try_load().unwrap_err();
    assert_eq!(err.file(), Some(path.as_path()));
    assert_eq!(err.line(), Some(3));
}

#[test]
fn managed_file_errors_name_the_managed_file() {
    let w = World::new();
    w.managed("[guards]\nprotected = [\"\"]\n");
    let err = w.try_load().unwrap_err();
    assert_eq!(err.file(), Some(w.managed.as_path()));
    assert_eq!(err.key(), Some("guards.protected[0]"));
}

#[test]
fn explicit_config_file_must_exist_and_replaces_the_default_user_file() {
    let w = World::new();
    w.user("[limits]\nmax_steps = 11\n");
    let other = w.write(
        &w.dir.path().join("other.toml"),
        "[limits]\nmax_steps = 12\n",
    );
    let mut opts = w.options();
    opts.user_config = Some(other.clone());
    let loaded = load(&opts).unwrap();
    assert_eq!(loaded.config.limits.max_steps, 12);
    assert_eq!(loaded.user_config, Some(other));

    opts.user_config = Some(w.dir.path().join("missing.toml"));
    let err = load(&opts).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io);
    assert!(err.to_string().contains("missing.toml: no such file"));
}

#[test]
fn a_directory_where_a_config_file_should_be_is_an_error() {
    let w = World::new();
    std::fs::create_dir_all(w.project_path()).unwrap();
    let err = w.try_load().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io);
    assert_eq!(err.file(), Some(w.project_path().as_path()));
}

#[test]
fn missing_workspace_is_an_error() {
    let w = World::new();
    let mut opts = w.options();
    opts.workspace = w.dir.path().join("nope");
    assert!(load(&opts).unwrap_err().to_string().contains("nope"));
}

// ---- the managed file cannot be loosened ----

#[test]
fn managed_denials_and_protected_paths_survive_every_layer() {
    let w = World::new();
    w.managed(
        "[permissions]\ndeny = [\"run_shell(curl *)\"]\n[guards]\nprotected = [\"secrets/**\"]\n",
    );
    w.user("[permissions]\nallow = [\"run_shell(curl *)\"]\n");
    w.trust();
    w.project("[permissions]\nallow = [\"run_shell\"]\n[guards]\nprotected = []\n");
    let c = w.load().config;
    assert_eq!(rules(&c.permissions.deny), ["run_shell(curl *)"]);
    assert_eq!(c.permissions.deny[0].origin.layer, Layer::Managed);
    assert!(patterns(&c.guards.protected).contains(&"secrets/**".to_string()));
    assert!(patterns(&c.guards.protected).contains(&".git/**".to_string()));
}

#[test]
fn managed_required_sandbox_cannot_be_turned_off() {
    let w = World::new();
    w.managed("[sandbox]\nmode = \"required\"\nallow_network = false\n");
    w.user("[sandbox]\nmode = \"off\"\nallow_network = true\n");
    let mut opts = w.options();
    opts.overrides.sandbox = Some(SandboxMode::Auto);
    let loaded = load(&opts).unwrap();
    assert_eq!(loaded.config.sandbox.mode, SandboxMode::Required);
    assert!(!loaded.config.sandbox.allow_network);
    let text = loaded.notices.join("\n");
    assert!(
        text.contains(&format!(
            "{}:2: sandbox.mode = \"off\" ignored: the managed config requires the sandbox",
            w.user_path().display()
        )),
        "{text}"
    );
    assert!(text.contains("--sandbox = \"auto\" ignored"), "{text}");
    assert!(
        text.contains(
            "sandbox.allow_network = true ignored: the managed config forbids the network"
        ),
        "{text}"
    );
}

#[test]
fn managed_limits_are_ceilings() {
    let w = World::new();
    w.managed("[limits]\nmax_steps = 20\nmax_parallel = 4\n");
    w.user("[limits]\nmax_steps = 100\nmax_parallel = 2\n");
    let mut opts = w.options();
    opts.overrides.max_steps = Some(500);
    let loaded = load(&opts).unwrap();
    assert_eq!(loaded.config.limits.max_steps, 20);
    assert_eq!(
        loaded.config.limits.max_parallel, 2,
        "lower than the ceiling is fine"
    );
    assert!(
        loaded
            .notices
            .iter()
            .any(|n| n.contains("limits.max_steps = 100 exceeds the managed ceiling 20")),
        "{:?}",
        loaded.notices
    );
    assert!(
        loaded
            .notices
            .iter()
            .any(|n| n.starts_with("--max-steps = 500 exceeds the managed ceiling 20")),
        "{:?}",
        loaded.notices
    );
}

#[test]
fn trust_table_in_the_managed_file_is_an_error() {
    let w = World::new();
    w.managed(&format!(
        "[trust]\nworkspaces = [{:?}]\n",
        w.workspace.display().to_string()
    ));
    let err = w.try_load().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trust);
    assert_eq!(err.key(), Some("trust"));
}
