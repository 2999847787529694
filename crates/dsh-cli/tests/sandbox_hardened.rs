//! The hardened workspace-write profile (for `auto`, issue "ordinary work runs", item 4),
//! attacked through the real helper (`dsh sandbox-exec --hardened`): the workspace is
//! writable but its protected paths are read-only (bind mounts in a private mount
//! namespace), every other mount is read-only, reads are confined, and no socket opens.
//! On Linux they fail, never skip, without Landlock or a private mount namespace.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::{Dirs, stderr};

/// `dsh sandbox-exec --hardened …` running `script` with bash in the workspace.
fn hardened(d: &Dirs, tmp: &std::path::Path, script: &str) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dsh"));
    c.args(["sandbox-exec", "--landlock=required", "--hardened"]);
    for r in ["/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc"] {
        c.args(["--read", r]);
    }
    c.arg("--write").arg(&d.ws).arg("--write").arg(tmp);
    for p in [".git", ".dsh", "AGENTS.md", "CLAUDE.md"] {
        c.arg("--protect").arg(d.ws.join(p));
    }
    c.args(["--", "bash", "-c", script])
        .current_dir(&d.ws)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &d.user_home)
        .output()
        .unwrap()
}

#[test]
fn the_probe_finds_a_private_mount_namespace_here() {
    let out = Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(["sandbox-exec", "--probe"])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(line.contains(" mounts=yes "), "{line}");
}

#[test]
fn protected_paths_stay_unchanged_while_the_workspace_is_writable() {
    let d = Dirs::new();
    let tmp = d.root().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::create_dir_all(d.ws.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(d.ws.join(".dsh")).unwrap();
    std::fs::write(d.ws.join(".dsh/config.toml"), "# mine\n").unwrap();
    std::fs::write(d.ws.join("AGENTS.md"), "be careful\n").unwrap();
    std::fs::create_dir_all(d.user_home.join(".ssh")).unwrap();
    std::fs::write(d.user_home.join(".ssh/id_rsa"), "SECRET-KEY\n").unwrap();
    let socket = d.outside.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let attacks = format!(
        "perl -e 'open F, \">.git/hooks/pre-commit\" or die' 2>/dev/null && echo HOOK-PLANTED\n\
         perl -e 'open F, \">>.dsh/config.toml\" or die' 2>/dev/null && echo CONFIG-CHANGED\n\
         perl -e 'open F, \">AGENTS.md\" or die' 2>/dev/null && echo AGENTS-CHANGED\n\
         mv .git gone 2>/dev/null && echo GIT-MOVED\n\
         rm -rf .dsh 2>/dev/null; test -f .dsh/config.toml || echo DSH-REMOVED\n\
         echo x > {outside}/planted 2>/dev/null && echo OUTSIDE-WRITTEN\n\
         cat {home}/.ssh/id_rsa 2>/dev/null\n\
         python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"UNIX-CONNECTED\")' {sock} 2>/dev/null\n\
         mkdir -p target/debug && echo built > target/debug/app && chmod +x target/debug/app && echo BUILD-OK\n\
         git --version >/dev/null && echo TOOLS-OK\n",
        outside = d.outside.display(),
        home = d.user_home.display(),
        sock = socket.display()
    );
    let out = hardened(&d, &tmp, &attacks);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("BUILD-OK"), "{text}\n{}", stderr(&out));
    assert!(text.contains("TOOLS-OK"), "{text}");
    for bad in [
        "HOOK-PLANTED",
        "CONFIG-CHANGED",
        "AGENTS-CHANGED",
        "GIT-MOVED",
        "DSH-REMOVED",
        "OUTSIDE-WRITTEN",
        "SECRET-KEY",
        "UNIX-CONNECTED",
    ] {
        assert!(!text.contains(bad), "{bad}: {text}");
    }
    assert!(!d.ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(d.ws.join(".dsh/config.toml")).unwrap(),
        "# mine\n"
    );
    assert_eq!(
        std::fs::read_to_string(d.ws.join("AGENTS.md")).unwrap(),
        "be careful\n"
    );
    assert!(!d.outside.join("planted").exists());
    assert!(d.ws.join("target/debug/app").exists());
    assert!(matches!(
        listener.accept(),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    ));
}
