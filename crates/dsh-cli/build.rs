//! `dsh --version` names the commit it was built from: `DSH_COMMIT` is the checkout's short
//! commit hash (with `-modified` when tracked files differ from it), or `unknown commit`
//! outside a git checkout (a crates.io package, a tarball).

use std::path::Path;
use std::process::Command;

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(hash) if !hash.is_empty() => {
            let modified = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if modified {
                format!("{hash}-modified")
            } else {
                hash
            }
        }
        _ => "unknown commit".to_owned(),
    };
    println!("cargo:rustc-env=DSH_COMMIT={commit}");
    // Built again when the checkout moves to another commit or its index changes.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = Path::new(&dir);
        println!("cargo:rerun-if-changed={}", dir.join("HEAD").display());
        println!("cargo:rerun-if-changed={}", dir.join("index").display());
        if let Ok(head) = std::fs::read_to_string(dir.join("HEAD"))
            && let Some(r) = head.trim().strip_prefix("ref: ")
        {
            println!("cargo:rerun-if-changed={}", dir.join(r).display());
        }
    }
}
