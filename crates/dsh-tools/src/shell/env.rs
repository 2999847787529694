//! The environment a command gets: an allowlist, never the whole of dsh's.
//!
//! dsh's own environment holds the model's API key and whatever the user's shell exported;
//! a command the model wrote sees only [`BASE`], the configured `shell.pass_env` names that
//! are not [`refusal`]s, and `TMPDIR` (the session's private temporary directory). Bash would
//! run code from `BASH_ENV`, `ENV`, `SHELLOPTS`/`PS4` and exported functions
//! (`BASH_FUNC_name%%`); none of those can be passed, not even by configuration.

use std::ffi::OsString;
use std::path::Path;

/// Passed through when set: what programs need to find themselves, their user and language.
pub const BASE: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ",
];

/// Git settings every command gets, so that a bare repository or a planted
/// `core.fsmonitor` in the workspace cannot run code through an approved `git status`, and so
/// that git's automatic maintenance runs in the foreground instead of detaching with
/// `setsid` — which the sandbox forbids ("fatal: setsid failed"), and which would leave work
/// running after the command. They are given twice: as `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`, and in
/// `GIT_CONFIG_PARAMETERS` (the form `git -c` uses), which a line that sets its own
/// `GIT_CONFIG_COUNT` does not replace.
pub const GIT_SETTINGS: &[(&str, &str)] = &[
    ("safe.bareRepository", "explicit"),
    ("core.fsmonitor", "false"),
    ("gc.autoDetach", "false"),
    ("maintenance.autoDetach", "false"),
];

/// `PATH` when dsh's own environment has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Why `name` may never be passed to a command, if so. Applies to `shell.pass_env`.
pub fn refusal(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    if matches!(
        upper.as_str(),
        "BASH_ENV" | "ENV" | "SHELLOPTS" | "BASHOPTS" | "PS4" | "PROMPT_COMMAND"
    ) {
        return Some("bash runs code from it");
    }
    if upper.starts_with("BASH_FUNC_") || name.contains('%') {
        return Some("it is an exported bash function");
    }
    if upper.contains("API_KEY") {
        return Some("API keys are never passed to commands");
    }
    if upper == "TMPDIR" {
        return Some("dsh sets TMPDIR to the session's own directory");
    }
    if upper.starts_with("GIT_CONFIG") {
        return Some("dsh sets git's configuration variables itself");
    }
    if upper == "CDPATH" {
        return Some("it changes where `cd` goes, which the shell policy follows");
    }
    None
}

/// The environment of a command: from `source` (dsh's environment), the [`BASE`] names and
/// the `pass` names that are not refused, then `TMPDIR = tmpdir` and [`GIT_SETTINGS`]. Sorted
/// by name.
pub fn command_env<I>(source: I, pass: &[String], tmpdir: &Path) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let wanted =
        |name: &str| BASE.contains(&name) || pass.iter().any(|p| p == name && refusal(p).is_none());
    let mut env: Vec<(OsString, OsString)> = source
        .into_iter()
        .filter(|(k, _)| k.to_str().is_some_and(wanted))
        .collect();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    env.push(("TMPDIR".into(), tmpdir.as_os_str().to_owned()));
    env.push((
        "GIT_CONFIG_COUNT".into(),
        GIT_SETTINGS.len().to_string().into(),
    ));
    let mut parameters = Vec::new();
    for (i, (key, value)) in GIT_SETTINGS.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}").into(), (*key).into()));
        env.push((format!("GIT_CONFIG_VALUE_{i}").into(), (*value).into()));
        parameters.push(format!("'{key}={value}'"));
    }
    env.push(("GIT_CONFIG_PARAMETERS".into(), parameters.join(" ").into()));
    env.sort();
    env.dedup_by(|a, b| a.0 == b.0);
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(env: &[(OsString, OsString)]) -> Vec<String> {
        env.iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn only_allowed_names_pass() {
        let source = [
            ("PATH", "/bin"),
            ("HOME", "/h"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("BASH_ENV", "/evil"),
            ("BASH_FUNC_ls%%", "() { echo pwned; }"),
            ("CARGO_HOME", "/c"),
            ("GOPATH", "/g"),
            ("TMPDIR", "/tmp"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let pass = vec![
            "CARGO_HOME".to_owned(),
            "BASH_ENV".to_owned(),
            "OPENAI_API_KEY".to_owned(),
        ];
        let env = command_env(source, &pass, Path::new("/s/tmp"));
        assert_eq!(
            names(&env),
            [
                "CARGO_HOME",
                "GIT_CONFIG_COUNT",
                "GIT_CONFIG_KEY_0",
                "GIT_CONFIG_KEY_1",
                "GIT_CONFIG_KEY_2",
                "GIT_CONFIG_KEY_3",
                "GIT_CONFIG_PARAMETERS",
                "GIT_CONFIG_VALUE_0",
                "GIT_CONFIG_VALUE_1",
                "GIT_CONFIG_VALUE_2",
                "GIT_CONFIG_VALUE_3",
                "HOME",
                "PATH",
                "TMPDIR"
            ]
        );
        assert!(env.contains(&("TMPDIR".into(), "/s/tmp".into())));
    }

    #[test]
    fn a_missing_path_gets_a_default() {
        let env = command_env(Vec::new(), &[], Path::new("/t"));
        assert!(names(&env).contains(&"PATH".to_owned()));
    }

    #[test]
    fn dangerous_names_are_refused() {
        for name in [
            "BASH_ENV",
            "env",
            "SHELLOPTS",
            "PS4",
            "BASH_FUNC_x%%",
            "ANTHROPIC_API_KEY",
            "TMPDIR",
            "GIT_CONFIG_COUNT",
            "CDPATH",
        ] {
            assert!(refusal(name).is_some(), "{name}");
        }
        assert_eq!(refusal("CARGO_HOME"), None);
    }
}
