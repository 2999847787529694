//! Per-workspace rules in the user file, and `record_rule` (the approval prompt's
//! "always allow").
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::{World, rules};
use dsh_config::{ErrorKind, Layer, RuleScope, record_rule};
use dsh_core::Decision;

fn canonical(w: &World) -> PathBuf {
    std::fs::canonicalize(&w.workspace).unwrap()
}

fn quoted(p: &std::path::Path) -> String {
    format!("{:?}", p.display().to_string())
}

// ---- reading [workspaces."<path>".permissions] ----

#[test]
fn workspace_section_applies_after_the_users_own_rules() {
    let w = World::new();
    let ws = canonical(&w);
    let user = w.user(&format!(
        "[permissions]\nallow = [\"read_file\"]\n\n[workspaces.{}.permissions]\nallow = [\"run_shell(cargo test *)\"]\ndeny = [\"read_file(.env)\"]\n",
        quoted(&ws)
    ));
    let loaded = w.load();
    assert!(!loaded.trusted);
    let perms = &loaded.config.permissions;
    assert_eq!(
        rules(&perms.allow),
        ["read_file", "run_shell(cargo test *)"]
    );
    assert_eq!(rules(&perms.deny), ["read_file(.env)"]);
    let o = &perms.allow[1].origin;
    assert_eq!(o.layer, Layer::User);
    assert_eq!(o.path.as_deref(), Some(user.as_path()));
    assert_eq!(o.line, Some(5));
    assert_eq!(
        o.key.as_deref(),
        Some(format!("workspaces.{}.permissions.allow[0]", quoted(&ws)).as_str())
    );
}

#[test]
fn workspace_section_for_another_directory_does_not_apply() {
    let w = World::new();
    let parent = std::fs::canonicalize(w.dir.path()).unwrap();
    w.user(&format!(
        "[workspaces.{}.permissions]\nallow = [\"run_shell\"]\n[workspaces.\"/elsewhere\".permissions]\nallow = [\"write_file\"]\n",
        quoted(&parent)
    ));
    assert!(w.load().config.permissions.allow.is_empty());
}

#[test]
fn bad_rule_in_a_workspace_section_names_file_line_and_key() {
    let w = World::new();
    let user = w.user("[workspaces.\"/repo\".permissions]\nask = [\"ok\", \"bad(\"]\n");
    let err = w.try_load().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidValue);
    assert_eq!(err.file(), Some(user.as_path()));
    assert_eq!(err.line(), Some(2));
    assert_eq!(err.key(), Some("workspaces.\"/repo\".permissions.ask[1]"));
}

#[test]
fn unknown_key_in_a_workspace_section_is_an_error() {
    let w = World::new();
    w.user("[workspaces.\"/repo\"]\nmodel = \"x\"\n");
    let err = w.try_load().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnknownKey);
    assert_eq!(err.line(), Some(2));
}

#[test]
fn relative_workspace_key_is_an_error() {
    let w = World::new();
    w.user("[workspaces.ws.permissions]\nallow = [\"run_shell\"]\n");
    let err = w.try_load().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trust);
    assert_eq!(err.key(), Some("workspaces.ws"));
}

#[test]
fn project_file_cannot_hold_workspace_sections() {
    let w = World::new();
    let ws = canonical(&w);
    let path = w.project(&format!(
        "[permissions]\ndeny = [\"run_shell\"]\n\n[workspaces.{}.permissions]\nallow = [\"run_shell\"]\n",
        quoted(&ws)
    ));
    let err = w.try_load().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trust);
    assert_eq!(err.file(), Some(path.as_path()));
    assert_eq!(err.line(), Some(4));
    assert_eq!(err.key(), Some("workspaces"));
    // Trusting the workspace changes nothing: a repository never writes user-level rules.
    w.trust();
    assert_eq!(w.try_load().unwrap_err().kind(), ErrorKind::Trust);
}

#[test]
fn managed_denials_still_overrule_workspace_allows() {
    let w = World::new();
    let ws = canonical(&w);
    w.managed("[permissions]\ndeny = [\"run_shell(curl *)\"]\n");
    w.user(&format!(
        "[workspaces.{}.permissions]\nallow = [\"run_shell(curl *)\"]\n",
        quoted(&ws)
    ));
    let perms = w.load().config.permissions;
    assert_eq!(perms.deny[0].origin.layer, Layer::Managed);
    assert_eq!(perms.allow[0].origin.layer, Layer::User);
}

#[test]
fn managed_file_may_hold_workspace_sections() {
    let w = World::new();
    let ws = canonical(&w);
    w.managed(&format!(
        "[workspaces.{}.permissions]\ndeny = [\"write_file\"]\n",
        quoted(&ws)
    ));
    let perms = w.load().config.permissions;
    assert_eq!(rules(&perms.deny), ["write_file"]);
    assert_eq!(perms.deny[0].origin.layer, Layer::Managed);
}

// ---- record_rule ----

#[test]
fn recorded_rule_applies_to_its_workspace_only() {
    let w = World::new();
    w.project("[permissions]\nallow = [\"write_file\"]\n");
    let recorded = record_rule(
        &w.user_path(),
        RuleScope::Workspace(w.workspace.clone()),
        Decision::Allow,
        "run_shell(cargo test *)",
    )
    .unwrap();
    assert!(recorded.added);
    assert_eq!(recorded.file, w.user_path());

    let loaded = w.load();
    assert!(
        !loaded.trusted,
        "recording a rule must not trust the workspace"
    );
    // The untrusted project's allow stays ignored; the user-level rule applies.
    let allow = &loaded.config.permissions.allow;
    assert_eq!(rules(allow), ["run_shell(cargo test *)"]);
    assert_eq!(allow[0].origin.layer, Layer::User);
    assert_eq!(
        allow[0].origin.path.as_deref(),
        Some(w.user_path().as_path())
    );
    assert_eq!(allow[0].origin.key.as_deref(), Some(recorded.key.as_str()));
    assert_eq!(
        recorded.key,
        format!("workspaces.{}.permissions.allow[0]", quoted(&canonical(&w)))
    );

    // Not a subdirectory of it...
    let sub = w.workspace.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let mut opts = w.options();
    opts.workspace = sub;
    assert!(
        dsh_config::load(&opts)
            .unwrap()
            .config
            .permissions
            .allow
            .is_empty()
    );
    // ...nor another workspace.
    let other = w.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    opts.workspace = other;
    assert!(
        dsh_config::load(&opts)
            .unwrap()
            .config
            .permissions
            .allow
            .is_empty()
    );
}

#[test]
fn recording_keeps_comments_and_is_idempotent() {
    let w = World::new();
    let original = "# my dsh settings\n\n[shell]\n# keep it short\ntimeout_s = 10   # seconds\n\n[permissions]\n# mine\nallow = [\"read_file\"]  # reads are fine\n";
    w.user(original);
    let scope = RuleScope::Workspace(w.workspace.clone());
    let first = record_rule(&w.user_path(), scope.clone(), Decision::Ask, "read_output").unwrap();
    assert!(first.added);
    let once = std::fs::read_to_string(w.user_path()).unwrap();
    assert!(once.starts_with(original), "{once}");
    assert_eq!(
        &once[original.len()..],
        format!(
            "\n[workspaces.{}.permissions]\nask = [\"read_output\"]\n",
            quoted(&canonical(&w))
        )
    );

    let again = record_rule(&w.user_path(), scope, Decision::Ask, "read_output").unwrap();
    assert!(!again.added);
    assert_eq!(again.key, first.key);
    assert_eq!(std::fs::read_to_string(w.user_path()).unwrap(), once);
    let loaded = w.load();
    assert_eq!(rules(&loaded.config.permissions.ask), ["read_output"]);
    assert_eq!(loaded.config.shell.timeout_s, 10);
}

#[test]
fn recording_into_the_projects_permissions_appends_to_the_list() {
    let w = World::new();
    w.trust();
    let original = "[permissions]\nallow = [\"read_file\"]  # reads\ndeny = [\"run_shell(curl *)\"]\n\n[shell]\ntimeout_s = 5\n";
    let path = w.project(original);
    let recorded = record_rule(
        &path,
        RuleScope::Permissions,
        Decision::Allow,
        "write_file(src/main.rs)",
    )
    .unwrap();
    assert_eq!(recorded.key, "permissions.allow[1]");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text,
        original.replace(
            "[\"read_file\"]",
            "[\"read_file\", \"write_file(src/main.rs)\"]"
        )
    );
    let loaded = w.load();
    let allow = &loaded.config.permissions.allow;
    assert_eq!(rules(allow), ["read_file", "write_file(src/main.rs)"]);
    assert_eq!(allow[1].origin.key.as_deref(), Some("permissions.allow[1]"));
    assert_eq!(allow[1].origin.line, Some(2));
    assert_eq!(
        recorded.line, allow[1].origin.line,
        "the line the next load names"
    );
    // Writing it again is a no-op.
    let again = record_rule(
        &path,
        RuleScope::Permissions,
        Decision::Allow,
        "write_file(src/main.rs)",
    )
    .unwrap();
    assert!(!again.added);
    assert_eq!(again.line, Some(2));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn recording_creates_the_file_and_parent_directories() {
    let w = World::new();
    let path = w.dir.path().join("a/b/config.toml");
    let scope = RuleScope::Workspace(w.workspace.clone());
    record_rule(&path, scope, Decision::Deny, "run_shell(rm *)").unwrap();
    let doc: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let ws = canonical(&w);
    assert_eq!(
        doc["workspaces"][ws.to_str().unwrap()]["permissions"]["deny"][0].as_str(),
        Some("run_shell(rm *)")
    );
    let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["config.toml"]);
}

#[test]
fn malformed_rule_is_refused_before_writing() {
    let w = World::new();
    let scope = RuleScope::Workspace(w.workspace.clone());
    let err = record_rule(&w.user_path(), scope, Decision::Allow, "run shell(x)").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidValue);
    assert_eq!(err.file(), Some(w.user_path().as_path()));
    assert!(err.message().contains("is not a rule"), "{err}");
    assert!(!w.user_path().exists());
}

#[test]
fn wrong_typed_existing_key_is_a_clear_error() {
    let w = World::new();
    let ws = canonical(&w);
    let original = format!(
        "# keep\n[workspaces.{}]\npermissions = \"all\"\n",
        quoted(&ws)
    );
    w.user(&original);
    let scope = RuleScope::Workspace(w.workspace.clone());
    let err = record_rule(&w.user_path(), scope, Decision::Allow, "read_output").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidValue);
    assert_eq!(err.line(), Some(3));
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3: workspaces.{}.permissions: expected a table, found string: cannot record \"read_output\" here",
            w.user_path().display(),
            quoted(&ws)
        )
    );
    assert_eq!(std::fs::read_to_string(w.user_path()).unwrap(), original);

    let path = w.project("[permissions]\nallow = \"read_file\"\n");
    let err = record_rule(
        &path,
        RuleScope::Permissions,
        Decision::Allow,
        "read_output",
    )
    .unwrap_err();
    assert_eq!(err.key(), Some("permissions.allow"));
    assert_eq!(err.line(), Some(2));
}

#[test]
fn recording_into_inline_and_dotted_tables_stays_valid() {
    let w = World::new();
    let path = w.project("permissions = { deny = [\"run_shell\"] }\n");
    record_rule(&path, RuleScope::Permissions, Decision::Ask, "read_output").unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "permissions = { deny = [\"run_shell\"], ask = [\"read_output\"] }\n"
    );
    let ws = canonical(&w);
    w.user(&format!(
        "workspaces.{}.permissions.deny = [\"run_shell\"]\n",
        quoted(&ws)
    ));
    let scope = RuleScope::Workspace(w.workspace.clone());
    let r = record_rule(&w.user_path(), scope, Decision::Deny, "write_file").unwrap();
    assert!(r.key.ends_with("permissions.deny[1]"), "{}", r.key);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        rules(&w.load().config.permissions.deny),
        ["run_shell", "write_file"]
    );
}

#[test]
fn rule_target_is_the_user_file_until_the_workspace_is_trusted() {
    let w = World::new();
    let (file, scope) = w.load().rule_target().unwrap();
    assert_eq!(file, w.user_path());
    assert_eq!(scope, RuleScope::Workspace(canonical(&w)));
    w.trust();
    let (file, scope) = w.load().rule_target().unwrap();
    assert_eq!(file, canonical(&w).join(".dsh/config.toml"));
    assert_eq!(scope, RuleScope::Permissions);
}
