//! The configuration loader on a user or project `config.toml`: it never panics, and every
//! error names its file; every error but an unreadable file its line (a line of that file);
//! every unknown key, invalid value and misplaced trust its key.
//!
//! The first byte picks where the text goes: the user file (0), the project file of an
//! untrusted workspace (1), or of a trusted one (2).
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

use dsh_config::{ErrorKind, LoadOptions, load};
use libfuzzer_sys::fuzz_target;

struct Fixture {
    workspace: PathBuf,
    user: PathBuf,
    project: PathBuf,
    managed: PathBuf,
    _dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(workspace.join(".dsh")).expect("a workspace");
        let workspace = std::fs::canonicalize(&workspace).expect("a canonical path");
        let user = dir.path().join("user").join("config.toml");
        std::fs::create_dir_all(user.parent().expect("a parent")).expect("a user directory");
        Fixture {
            project: workspace.join(".dsh").join("config.toml"),
            managed: dir.path().join("managed.toml"),
            workspace,
            user,
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, text)) = data.split_first() else {
        return;
    };
    let f = fixture();
    let mode = mode % 3;
    let trust = format!(
        "[trust]\nworkspaces = [{:?}]\n",
        f.workspace.display().to_string()
    );
    let (written, other) = match mode {
        0 => (&f.user, None),
        1 => (&f.project, Some("")),
        _ => (&f.project, Some(trust.as_str())),
    };
    std::fs::write(written, text).expect("the file written");
    match other {
        Some(user) => std::fs::write(&f.user, user).expect("the user file written"),
        None => {
            let _ = std::fs::remove_file(&f.project);
        }
    }
    let mut opts = LoadOptions::new(&f.workspace);
    opts.user_config = Some(f.user.clone());
    opts.managed = Some(f.managed.clone());
    let Err(e) = load(&opts) else {
        return;
    };
    let Some(file) = e.file() else {
        panic!("an error without its file: {e}");
    };
    if e.kind() == ErrorKind::Io {
        return;
    }
    let Some(line) = e.line() else {
        panic!("an error without its line: {e} ({:?})", e.kind());
    };
    if file == written.as_path() {
        let lines = String::from_utf8_lossy(text).split('\n').count();
        assert!(
            (1..=lines).contains(&line),
            "line {line} of a {lines}-line file: {e}"
        );
    }
    if matches!(
        e.kind(),
        ErrorKind::UnknownKey | ErrorKind::InvalidValue | ErrorKind::Trust
    ) {
        assert!(e.key().is_some(), "an error without its key: {e}");
    }
});
