//! What the read-only profile lets a command read (DESIGN §4 `landlock-read-only`): the
//! workspace, the system's directories, git's global files (and the files they name), the
//! repository the workspace belongs to, and the directories on the command's `PATH` — never
//! the rest of the home directory (`~/.ssh`, `~/.aws`, dsh's own configuration and state).
//!
//! Computed once per session, from the workspace and the environment commands get.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The system's directories: programs, libraries, their data and configuration (`/etc`
/// entry by entry, less [`ETC_SECRETS`]).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt",
];

/// Entries of `/etc` that hold secrets (readable by root, whom CI and containers run as):
/// left out of the read-only profile.
const ETC_SECRETS: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "ssh",
    "sudoers",
    "sudoers.d",
    "security",
    "krb5.keytab",
    "letsencrypt",
    "credstore",
    "credstore.encrypted",
    "NetworkManager",
    "wpa_supplicant",
    "docker",
    "containers",
    "machine-id",
];

/// How deep git's `include.path` chains are followed (git itself stops at 10).
pub(super) const MAX_INCLUDE_DEPTH: usize = 10;

/// The paths the read-only profile may read, for commands run in `workspace` with `env`
/// (the environment [`crate::shell`] gives them). Paths that do not exist are left out.
pub fn readable(workspace: &Path, env: &[(OsString, OsString)]) -> Vec<PathBuf> {
    let var = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| PathBuf::from(v))
            .filter(|p| p.is_absolute())
    };
    let home = var("HOME");
    let mut out: Vec<PathBuf> = SYSTEM_DIRS
        .iter()
        .filter(|d| **d != "/etc")
        .map(PathBuf::from)
        .collect();
    out.extend(etc_entries(Path::new("/etc")));
    out.push(workspace.to_path_buf());
    out.extend(enclosing_repository(workspace, home.as_deref()));
    out.extend(git_global_files(
        home.as_deref(),
        var("XDG_CONFIG_HOME").as_deref(),
    ));
    if let Some(path) = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v) {
        out.extend(path_dirs(path, home.as_deref()));
    }
    out.retain(|p| p.exists());
    out.sort();
    out.dedup();
    out
}

/// The toolchains' own directories under the home directory, for the hardened profile to
/// read: their programs and the packages they downloaded. Never their credentials
/// (`~/.cargo/credentials.toml`, `~/.npmrc`, `~/.m2/settings.xml`,
/// `~/.gradle/gradle.properties`, `~/.cache/huggingface/token`) and nothing writable: a
/// planted registry source, Gradle init script or build cache entry would run in the
/// person's next build outside any sandbox, and with the network off nothing needs
/// downloading (point a tool's cache at `$TMPDIR` or the workspace where it must write:
/// `GOCACHE`, `npm_config_cache`). Paths that do not exist are left out.
pub fn toolchains(env: &[(OsString, OsString)]) -> Vec<PathBuf> {
    let Some(home) = env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| PathBuf::from(v))
        .filter(|p| p.is_absolute())
    else {
        return Vec::new();
    };
    [
        ".cargo/bin",
        ".cargo/registry",
        ".cargo/git",
        ".cargo/config.toml",
        ".cargo/config",
        ".rustup",
        ".pyenv",
        ".nvm",
        ".volta",
        ".bun",
        ".deno",
        ".local/bin",
        ".local/lib",
        ".local/share/pnpm",
        ".npm/_cacache",
        ".cache/pip",
        ".cache/uv",
        ".cache/go-build",
        "go/bin",
        "go/pkg/mod",
        ".m2/repository",
        ".gradle/caches",
        ".gradle/wrapper",
    ]
    .iter()
    .map(|p| home.join(p))
    .filter(|p| p.exists())
    .collect()
}

/// The entries of `etc` but its secrets. The certificate stores (`ssl`, `pki` and its
/// `tls`) are opened entry by entry less their `private` directories: TLS libraries read
/// `openssl.cnf` and the certificates (Node and npm stop without them).
fn etc_entries(etc: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(etc) else {
        return out;
    };
    for e in dir.filter_map(Result::ok) {
        let name = e.file_name();
        if ETC_SECRETS.iter().any(|s| name == *s) {
            continue;
        }
        if CERTIFICATE_STORES.iter().any(|s| name == *s) {
            out.extend(less_private(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

/// Directories of `/etc` whose `private` part holds keys.
const CERTIFICATE_STORES: &[&str] = &["ssl", "pki"];

/// The entries of `dir` but `private`, going into `tls` the same way.
fn less_private(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name();
        if name == "private" {
            continue;
        }
        if name == "tls" && e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(less_private(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

/// The directories of `PATH` that may be read: absolute ones that are neither the root, the
/// home directory nor one of its ancestors (`PATH=/home/me:…` must not open the home).
fn path_dirs(path: &OsString, home: Option<&Path>) -> Vec<PathBuf> {
    std::env::split_paths(path)
        .filter(|d| d.is_absolute() && d.parent().is_some())
        .filter(|d| home.is_none_or(|h| !h.starts_with(d)))
        .collect()
}

/// The work tree of the repository around a workspace that is a subdirectory of one (what
/// [`readable`] opens for git's sake): the hardened profile leaves it out, so that an
/// `auto` command reads no file of it outside the workspace (git's reading subcommands run
/// in the read-only profile anyway).
pub fn enclosing_work_tree(workspace: &Path, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    let home = env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| PathBuf::from(v));
    enclosing_repository(workspace, home.as_deref())
        .into_iter()
        .find(|p| workspace.starts_with(p) && p != workspace)
}

/// The repository around a workspace that is a subdirectory of one (its work tree and git
/// directories), or the git directories of a workspace that is a linked worktree or uses a
/// `.git` file. Empty when the workspace holds its own `.git` directory (it is readable as
/// part of the workspace), belongs to no repository, or to one whose work tree is the home
/// directory or holds it (a dotfiles repository must not open the home).
fn enclosing_repository(workspace: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    for dir in workspace.ancestors() {
        if dir != workspace && home.is_some_and(|h| h.starts_with(dir)) {
            return Vec::new();
        }
        let dot_git = dir.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
            continue;
        };
        let mut out = Vec::new();
        if dir != workspace {
            out.push(dir.to_path_buf());
        }
        if meta.is_file() {
            // `gitdir: PATH` (a linked worktree, a submodule): that directory, and the
            // common directory it names — each only if it is a real git directory that
            // opens nothing wider (a planted `gitdir: /` must not open the file system).
            if let Some(git_dir) = std::fs::read_to_string(&dot_git)
                .ok()
                .and_then(|t| t.lines().next().map(str::to_owned))
                .and_then(|l| l.strip_prefix("gitdir:").map(|p| dir.join(p.trim())))
                .and_then(|g| git_dir_to_read(&g, workspace, home))
            {
                if let Some(common) = std::fs::read_to_string(git_dir.join("commondir"))
                    .ok()
                    .and_then(|c| git_dir_to_read(&git_dir.join(c.trim()), workspace, home))
                {
                    out.push(common);
                }
                out.push(git_dir);
            }
        }
        return out;
    }
    Vec::new()
}

/// `path` resolved, when it is a git directory (it holds `HEAD` and `objects` or a
/// `commondir`) that is neither the root, nor the home directory or one of its ancestors,
/// nor an ancestor of the workspace.
fn git_dir_to_read(path: &Path, workspace: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let real = path.canonicalize().ok()?;
    let is_git_dir = real.join("HEAD").is_file()
        && (real.join("objects").is_dir() || real.join("commondir").is_file());
    let too_wide = real.parent().is_none()
        || workspace.starts_with(&real)
        || home.is_some_and(|h| h.starts_with(&real));
    (is_git_dir && !too_wide).then_some(real)
}

/// Git's global configuration, ignore and attributes files, and every file they name:
/// `include.path` and `includeIf.*.path` (followed), `core.excludesFile`,
/// `core.attributesFile`.
fn git_global_files(home: Option<&Path>, xdg: Option<&Path>) -> Vec<PathBuf> {
    let xdg_git = xdg
        .map(|x| x.join("git"))
        .or_else(|| home.map(|h| h.join(".config/git")));
    let mut configs: Vec<(PathBuf, usize)> = Vec::new();
    let mut out = Vec::new();
    if let Some(dir) = &xdg_git {
        configs.push((dir.join("config"), 0));
        out.push(dir.join("ignore"));
        out.push(dir.join("attributes"));
    }
    if let Some(h) = home {
        configs.push((h.join(".gitconfig"), 0));
    }
    while let Some((file, depth)) = configs.pop() {
        if out.contains(&file) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        out.push(file.clone());
        let base = file.parent().unwrap_or(Path::new("/"));
        for (key, value) in named_files(&text) {
            let Some(path) = expand(&value, home, base) else {
                continue;
            };
            if key == "path" {
                if depth < MAX_INCLUDE_DEPTH {
                    configs.push((path, depth + 1));
                }
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// `~/x` against the home directory, a relative path against the including file's
/// directory.
pub(super) fn expand(value: &str, home: Option<&Path>, base: &Path) -> Option<PathBuf> {
    if let Some(rest) = value.strip_prefix("~/") {
        return home.map(|h| h.join(rest));
    }
    if value.starts_with('~') {
        // `~user/…`: another user's home; not followed.
        return None;
    }
    Some(base.join(value))
}

/// The `(key, value)` pairs of a git configuration text that name files: `path` in an
/// `[include]` or `[includeIf "…"]` section, `excludesfile` and `attributesfile` in `[core]`
/// (keys lower-cased, values unquoted).
fn named_files(text: &str) -> Vec<(String, String)> {
    super::gitconfig::entries(text)
        .into_iter()
        .filter(|e| match e.section.as_str() {
            "include" | "includeif" => e.key == "path",
            "core" => e.key == "excludesfile" || e.key == "attributesfile",
            _ => false,
        })
        .map(|e| (e.key, e.value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_files_reads_includes_and_core_files() {
        let text = "[core]\n\texcludesFile = ~/.gitignore_global\n  attributesfile=\"a b\"\n\
                    [include]\n\tpath = extra.inc # comment\n\
                    [includeIf \"gitdir:~/work/\"]\n\tpath = ~/work.inc\n\
                    [user]\n\tpath = not-this\n";
        assert_eq!(
            named_files(text),
            vec![
                ("excludesfile".into(), "~/.gitignore_global".into()),
                ("attributesfile".into(), "a b".into()),
                ("path".into(), "extra.inc".into()),
                ("path".into(), "~/work.inc".into()),
            ]
        );
    }

    #[test]
    fn etc_secrets_are_left_out() {
        let etc = tempfile::tempdir().unwrap();
        for name in ["shadow", "passwd", "ssh", "gitconfig"] {
            std::fs::write(etc.path().join(name), "x").unwrap();
        }
        let mut got: Vec<String> = etc_entries(etc.path())
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        got.sort();
        assert_eq!(got, ["gitconfig", "passwd"]);
    }

    #[test]
    fn certificate_stores_open_less_their_private_keys() {
        let etc = tempfile::tempdir().unwrap();
        let e = etc.path();
        for dir in [
            "ssl/private",
            "ssl/certs",
            "pki/tls/private",
            "pki/tls/certs",
        ] {
            std::fs::create_dir_all(e.join(dir)).unwrap();
        }
        std::fs::write(e.join("ssl/openssl.cnf"), "x").unwrap();
        let mut got: Vec<PathBuf> = etc_entries(e)
            .into_iter()
            .map(|p| p.strip_prefix(e).unwrap().to_path_buf())
            .collect();
        got.sort();
        assert_eq!(
            got,
            ["pki/tls/certs", "ssl/certs", "ssl/openssl.cnf"].map(PathBuf::from)
        );
    }

    #[test]
    fn path_entries_never_open_the_home_directory() {
        let home = Path::new("/home/me");
        let path = OsString::from("/home/me:/home:/:/home/me/.cargo/bin:rel:/usr/bin");
        assert_eq!(
            path_dirs(&path, Some(home)),
            vec![
                PathBuf::from("/home/me/.cargo/bin"),
                PathBuf::from("/usr/bin")
            ]
        );
    }

    #[test]
    fn includes_are_followed_and_missing_files_left_out() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        std::fs::write(
            h.join(".gitconfig"),
            "[include]\npath = one.inc\n[core]\nexcludesfile = ~/ignore-me\n",
        )
        .unwrap();
        std::fs::write(h.join("one.inc"), "[include]\npath = ~/two.inc\n").unwrap();
        std::fs::write(h.join("two.inc"), "[include]\npath = one.inc\n").unwrap();
        let env = vec![
            (OsString::from("HOME"), h.as_os_str().to_owned()),
            (OsString::from("PATH"), OsString::from("/usr/bin")),
        ];
        let ws = h.join("ws");
        std::fs::create_dir(&ws).unwrap();
        let got = readable(&ws, &env);
        for f in [".gitconfig", "one.inc", "two.inc"] {
            assert!(got.contains(&h.join(f)), "{f} in {got:?}");
        }
        assert!(
            !got.contains(&h.join("ignore-me")),
            "missing files are left out"
        );
        assert!(!got.contains(&h.to_path_buf()), "never the home directory");
        assert!(got.contains(&ws));
    }

    #[test]
    fn a_subdirectory_of_a_repository_reads_the_repository() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("sub/ws")).unwrap();
        assert_eq!(
            enclosing_repository(&repo.join("sub/ws"), None),
            vec![repo.clone()]
        );
        assert!(enclosing_repository(&repo, None).is_empty());
        // A repository whose work tree holds the home directory is not opened.
        assert!(enclosing_repository(&repo.join("sub/ws"), Some(&repo.join("sub"))).is_empty());
        // A linked worktree: its git directory and the common one.
        let wt = root.path().join("wt");
        std::fs::create_dir_all(repo.join(".git/worktrees/wt")).unwrap();
        std::fs::create_dir_all(repo.join(".git/objects")).unwrap();
        std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(repo.join(".git/worktrees/wt/HEAD"), "ref: refs/heads/wt\n").unwrap();
        std::fs::write(repo.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", repo.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        let got = enclosing_repository(&wt, None);
        let real = |p: PathBuf| p.canonicalize().unwrap();
        assert!(
            got.contains(&real(repo.join(".git/worktrees/wt"))),
            "{got:?}"
        );
        assert!(got.contains(&real(repo.join(".git"))), "{got:?}");
        // A planted `gitdir: /` (or any directory that is no git directory) opens nothing.
        for planted in ["/", "/etc", root.path().to_str().unwrap()] {
            std::fs::write(wt.join(".git"), format!("gitdir: {planted}\n")).unwrap();
            assert!(enclosing_repository(&wt, None).is_empty(), "{planted}");
        }
    }
}
