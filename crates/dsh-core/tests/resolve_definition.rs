//! `Workspace::resolve` against its definition: `canonicalize` of the deepest ancestor that
//! exists in any form, with the names below it appended as given (the implementation before
//! it walked component by component, quadratic in the depth). The walk must agree with it on
//! every path: the same canonical result, or the same refusal.
#![cfg(unix)]
#![allow(clippy::unwrap_used)]

use std::io;
use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};

use dsh_core::{PathError, Workspace};

/// `root.join(path)` with `.` and `..` applied lexically, as `resolve` does first.
fn lexical(root: &Path, path: &Path) -> PathBuf {
    let mut out = if path.is_absolute() {
        PathBuf::new()
    } else {
        root.to_path_buf()
    };
    for c in path.components() {
        match c {
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => out.push(c),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
        }
    }
    out
}

/// The definition, as an outcome: `Ok(abs)` or the refusal's name (and where it resolved).
fn definition(root: &Path, given: &str) -> Result<PathBuf, String> {
    let lexical = lexical(root, Path::new(given));
    if !lexical.starts_with(root) {
        return Err(format!("outside {}", lexical.display()));
    }
    let mut existing = lexical.as_path();
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(existing).is_err() {
        rest.push(existing.file_name().unwrap().to_owned());
        existing = existing.parent().unwrap();
    }
    let mut abs = std::fs::canonicalize(existing).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => "unresolvable".to_owned(),
        _ if e.raw_os_error() == Some(libc_eloop()) => "unresolvable".to_owned(),
        _ => "io".to_owned(),
    })?;
    abs.extend(rest.iter().rev());
    if !abs.starts_with(root) {
        return Err(format!("outside {}", abs.display()));
    }
    Ok(abs)
}

fn libc_eloop() -> i32 {
    if cfg!(target_os = "linux") { 40 } else { 62 }
}

fn resolved(w: &Workspace, given: &str) -> Result<PathBuf, String> {
    match w.resolve(given) {
        Ok(r) => Ok(r.abs),
        Err(PathError::Outside { resolved, .. }) => {
            Err(format!("outside {}", resolved.unwrap().display()))
        }
        Err(PathError::Unresolvable { .. }) => Err("unresolvable".to_owned()),
        Err(PathError::Io { .. }) => Err("io".to_owned()),
        Err(e) => Err(format!("unexpected: {e}")),
    }
}

#[test]
fn resolve_agrees_with_canonicalize_of_the_deepest_existing_ancestor() {
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().join("ws");
    let out = base.path().join("out");
    std::fs::create_dir_all(ws.join("src/deep/er")).unwrap();
    std::fs::create_dir_all(out.join("sub")).unwrap();
    std::fs::write(ws.join("src/lib.rs"), "x").unwrap();
    std::fs::write(out.join("secret"), "x").unwrap();
    let link = |target: &str, at: &str| symlink(target, ws.join(at)).unwrap();
    link("src", "alias");
    link("src/deep/..", "up");
    link("../out", "outl");
    link("../out/../ws/src", "round");
    link("missing", "dangling");
    link("src/lib.rs", "flink");
    link("src/lib.rs/x", "thru");
    link("la", "lb");
    link("lb", "la");
    link(".", "self");
    link("..", "parent");
    link(&ws.join("src").display().to_string(), "absin");
    link("/etc", "etc");
    link("../../..", "src/deep/er/top");
    link("er/top/ws/src", "src/deep/back");
    link("alias/deep", "chain");
    link("dangling/x", "src/dd");
    let w = Workspace::new(&ws).unwrap();
    let root = w.root().to_path_buf();
    let names = [
        "src", "lib.rs", "deep", "er", "alias", "up", "outl", "round", "dangling", "flink", "thru",
        "la", "self", "parent", "absin", "etc", "top", "back", "chain", "dd", "..", ".", "missing",
        "x", "secret", "sub", "ws",
    ];
    // xorshift: the same 20,000 paths on every run.
    let mut seed: u64 = 12345;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20_000 {
        let len = 1 + next() % 6;
        let mut given = (0..len)
            .map(|_| names[(next() % names.len() as u64) as usize])
            .collect::<Vec<_>>()
            .join("/");
        if next() % 10 == 0 {
            given = format!("{}/{given}", root.display());
        }
        if next() % 10 == 0 {
            given.push('/');
        }
        assert_eq!(resolved(&w, &given), definition(&root, &given), "{given}");
    }
}
