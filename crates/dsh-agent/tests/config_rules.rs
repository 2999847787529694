//! A rule the one grammar accepts but whose path pattern cannot compile fails the assembly,
//! naming the file, line and key it came from.
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
