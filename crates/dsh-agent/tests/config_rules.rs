//! A rule from a configuration file reaches the policies as it was parsed, with where it was
//! written: a decision names the layer, file and line of the rule that made it, and a rule
//! the one grammar accepts but whose path pattern cannot compile fails the assembly, naming
//! the file, line and key it came from.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_agent::{Session, SessionSettings};

#[test]
fn a_bad_rule_pattern_names_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let user = dir.path().join("config.toml");
    std::fs::write(
        &user,
        "[permissions]\ndeny = [\"read_file(.env)\"]\nallow = [\"read_file(src/**)\", \"read_file(../x)\"]\n",
    )
    .unwrap();
    let mut opts = dsh_config::LoadOptions::new(&ws);
    opts.user_config = Some(user.clone());
    opts.managed = Some(dir.path().join("no-managed.toml"));
    let loaded = dsh_config::load(&opts).unwrap();
    let env = [(
        "DSH_HOME".to_string(),
        dir.path().join("home").display().to_string(),
    )]
    .into();
    let settings = SessionSettings::from_loaded(&loaded, &env, false)
        .unwrap()
        .settings;
    let e = Session::assemble_dry(&settings).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}:3: permissions.allow[1]: ", user.display())),
        "{e}"
    );
    assert!(e.contains("read_file(../x)"), "{e}");
}

/// The explanation of a decision names the rule and where it was written, for a file tool's
/// rule from an untrusted project and for a `run_shell` rule from the user file alike.
#[tokio::test]
async fn a_configured_rule_explains_a_decision_with_its_layer_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".dsh")).unwrap();
    std::fs::write(ws.join(".env"), "SECRET=1\n").unwrap();
    std::fs::write(
        ws.join(".dsh/config.toml"),
        "[permissions]\n# from the repository\ndeny = [\"read_file(.env)\"]\n",
    )
    .unwrap();
    let user = dir.path().join("config.toml");
    std::fs::write(&user, "[permissions]\nallow = [\"run_shell(make)\"]\n").unwrap();
    let mut opts = dsh_config::LoadOptions::new(&ws);
    opts.user_config = Some(user.clone());
    opts.managed = Some(dir.path().join("no-managed.toml"));
    let loaded = dsh_config::load(&opts).unwrap();
    let env = [(
        "DSH_HOME".to_string(),
        dir.path().join("home").display().to_string(),
    )]
    .into();
    let settings = SessionSettings::from_loaded(&loaded, &env, false)
        .unwrap()
        .settings;
    let session = Session::assemble_dry(&settings).unwrap();

    let read = dsh_core::ToolCall::new("r", "read_file", serde_json::json!({"path": ".env"}));
    let r = session.pipeline.check(&read).await;
    assert_eq!(r.decision, dsh_core::Decision::Deny, "{r:?}");
    let project = loaded.workspace.join(".dsh").join("config.toml");
    assert!(
        r.reason.contains(&format!(
            "deny rule `read_file(.env)` from untrusted project {}:3",
            project.display()
        )),
        "{}",
        r.reason
    );

    let make = dsh_core::ToolCall::new("m", "run_shell", serde_json::json!({"command": "make"}));
    let r = session.pipeline.check(&make).await;
    assert_eq!(r.decision, dsh_core::Decision::Allow, "{r:?}");
    assert!(
        r.reason.contains(&format!(
            "allowed by rule `run_shell(make)` from user {}:2",
            user.display()
        )),
        "{}",
        r.reason
    );
}
