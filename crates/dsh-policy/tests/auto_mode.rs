//! What `auto` may not lift (DESIGN §5 "Permission modes"): what it lifts runs without a
//! person in the hardened sandbox, so programs made to act outside it, git beyond its
//! reading subcommands (the sandbox keeps `.git` read-only), writes to protected paths and
//! prompt files — named or through a symlink — and writes the file tools' rules keep all
//! stay with a person or are refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_core::PermissionMode;
use dsh_core::{Access, PolicyContext, PrePolicy, Tier, ToolCall, ToolSpec, Vote, Workspace};
use dsh_core::{Layer, Origin, Rule};
use dsh_policy::shell::Decision;
use dsh_policy::{
    ModePolicy, ModeSwitch, NetworkVote, PermissionRules, SandboxCheck, ShellLists, ShellPolicy,
};

/// A rule from its text, through the one grammar (dsh-core's), written in `/u/config.toml`.
fn parse_rule(kind: Decision, text: &str) -> Rule {
    let origin = Origin {
        layer: Layer::User,
        path: Some("/u/config.toml".into()),
        ..Origin::builtin()
    };
    Rule::parse(kind, text, origin).unwrap()
}

/// A workspace holding `a`, `x`, `src/`, `migrations/001.sql` and an empty `.git/`.
fn workspace() -> (tempfile::TempDir, Arc<Workspace>) {
    let dir = tempfile::tempdir().unwrap();
    for d in ["src", "migrations", ".git"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    for f in ["a", "x", "migrations/001.sql"] {
        std::fs::write(dir.path().join(f), "a\n").unwrap();
    }
    let ws = Arc::new(Workspace::new(dir.path()).unwrap());
    (dir, ws)
}

/// A session's shell and `mode` listeners under `mode`, where both sandboxes are enforced,
/// with the file-tool `rules` (`read_file` the one reader) and the protected paths a session
/// gives the shell policy (the defaults and the prompt files).
struct Session {
    switch: ModeSwitch,
    shell: ShellPolicy,
    mode: ModePolicy,
}

fn session(ws: &Arc<Workspace>, lists: ShellLists, rules: &[(Decision, &str)]) -> Session {
    let enforced = SandboxCheck(Arc::new(|| Ok(())));
    let switch = ModeSwitch::new(PermissionMode::Auto);
    let protected = [".git/**", ".dsh/**"]
        .into_iter()
        .chain(dsh_policy::PROMPT_FILES)
        .map(|p| dsh_policy::PathPattern::new(p).unwrap())
        .collect();
    let all: Vec<Rule> = rules.iter().map(|(k, t)| parse_rule(*k, t)).collect();
    let file_rules =
        PermissionRules::new(ws.clone(), all.clone(), &["read_file".to_owned()]).unwrap();
    let shell = ShellPolicy::new(ws.clone(), all, lists, NetworkVote::Refused)
        .with_file_rules(&file_rules, protected)
        .with_read_only_sandbox(enforced.clone())
        .with_mode(switch.clone(), enforced);
    let mode = ModePolicy::new(switch.clone(), shell.clone());
    Session {
        switch,
        shell,
        mode,
    }
}

impl Session {
    /// The `mode` and `shell` votes on a `run_shell` call of `line`.
    async fn votes(&self, line: &str) -> (Vote, Vote) {
        let spec = ToolSpec::new("run_shell", "runs a command line");
        let accesses = [Access::Execute {
            command: line.to_owned(),
        }];
        let cx = PolicyContext {
            spec: &spec,
            accesses: &accesses,
        };
        let call = ToolCall::new("1", "run_shell", serde_json::json!({ "command": line }));
        (
            self.mode.vote(&call, &cx).await,
            self.shell.vote(&call, &cx).await,
        )
    }

    /// Asserts that `auto` lifts `line`: `mode` allows it, the shell policy leaves it to it.
    async fn lifted(&self, line: &str) {
        let (mode, shell) = self.votes(line).await;
        assert_eq!(
            (mode.decision, shell.decision),
            (Some(dsh_core::Decision::Allow), None),
            "{line:?}: mode {:?} ({}), shell {:?} ({})",
            mode.decision,
            mode.reason,
            shell.decision,
            shell.reason
        );
    }

    /// Asserts that `auto` leaves `line` alone and the shell policy gives `decision` at
    /// `tier`; the reason.
    async fn kept(&self, line: &str, decision: Option<dsh_core::Decision>, tier: Tier) -> String {
        let (mode, shell) = self.votes(line).await;
        assert_eq!(
            (mode.decision, shell.decision, shell.tier),
            (None, decision, tier),
            "{line:?}: mode {:?} ({}), shell {:?} {:?} ({})",
            mode.decision,
            mode.reason,
            shell.decision,
            shell.tier,
            shell.reason
        );
        shell.reason
    }
}

#[tokio::test]
async fn programs_that_act_outside_the_sandbox_are_never_lifted() {
    let (_dir, ws) = workspace();
    let s = session(&ws, ShellLists::default(), &[]);
    // An ordinary program on no list is lifted: the sandbox bounds it.
    s.lifted("cargo build").await;
    for name in [
        "docker-compose",
        "gh",
        "glab",
        "oc",
        "ansible",
        "ansible-playbook",
        "sshpass",
        "mosh",
        "nsenter",
        "ssh-add",
        "ssh-agent",
        "gpg",
        "gpg2",
        "unshare",
        "machinectl",
        "lxc",
        "virsh",
        "flyctl",
        "heroku",
        "vercel",
        "netlify",
        "wrangler",
        "firebase",
        "doctl",
        "pulumi",
        "eksctl",
        "minikube",
        "kind",
        "k9s",
        "skopeo",
        "buildah",
        "crictl",
        "ctr",
        "runc",
        "chroot",
        "setpriv",
        "capsh",
        "runuser",
        "vault",
        "crontab",
    ] {
        s.kept(
            &format!("{name} x"),
            Some(dsh_core::Decision::Ask),
            Tier::Default,
        )
        .await;
        s.kept(
            &format!("/usr/bin/{name} x"),
            Some(dsh_core::Decision::Ask),
            Tier::Default,
        )
        .await;
        s.kept(
            &format!("timeout 5 {name} x"),
            Some(dsh_core::Decision::Ask),
            Tier::Default,
        )
        .await;
    }
    // On the confirm list too.
    let confirm = ShellLists {
        confirm: vec!["gh".to_owned(), "make".to_owned()],
        ..ShellLists::default()
    };
    let s = session(&ws, confirm, &[]);
    s.lifted("make").await;
    s.kept("gh pr create", Some(dsh_core::Decision::Ask), Tier::Default)
        .await;
}

#[tokio::test]
async fn git_beyond_its_reading_subcommands_keeps_asking_in_auto() {
    let (_dir, ws) = workspace();
    let s = session(&ws, ShellLists::default(), &[]);
    let status = s.shell.decide("git status");
    assert!(status.reads_only(), "{}", status.reason);
    for line in [
        "git add .",
        "git commit -m x",
        "git checkout -b topic",
        "git reset --hard",
        "git stash",
        "git fetch",
        "/usr/bin/git commit -m x",
        "env git add a",
    ] {
        let why = s
            .kept(line, Some(dsh_core::Decision::Ask), Tier::Default)
            .await;
        assert!(
            why.contains("auto mode never writes `.git`"),
            "{line}: {why}"
        );
        assert!(!s.shell.decide(line).auto_liftable(), "{line}");
    }
    // Moved to the confirm list by a configuration, git still keeps asking.
    let lists = ShellLists {
        safe: ShellLists::default()
            .safe
            .into_iter()
            .filter(|p| p != "git")
            .collect(),
        confirm: vec!["git".to_owned()],
        ..ShellLists::default()
    };
    let s = session(&ws, lists, &[]);
    let why = s
        .kept("git status", Some(dsh_core::Decision::Ask), Tier::Default)
        .await;
    assert!(why.contains("auto mode never writes `.git`"), "{why}");
}

#[tokio::test]
async fn writes_into_protected_paths_are_refused_in_auto() {
    let (_dir, ws) = workspace();
    let s = session(&ws, ShellLists::default(), &[]);
    s.lifted("cp x src/y").await;
    s.lifted("echo x > src/y").await;
    for line in [
        "cp x .git/config",
        "mv a .git/hooks/pre-commit",
        "touch .dsh/config.toml",
        "sed -i s/a/b/ AGENTS.md",
        "echo x > .git/config",
        "echo x | tee .git/description",
        "cd .git && touch x",
        "rm -rf .",
        "rm .g*",
    ] {
        let why = s
            .kept(line, Some(dsh_core::Decision::Deny), Tier::Rule)
            .await;
        assert!(why.contains("protected"), "{line}: {why}");
    }
}

/// The lines of the security review, each writing under `migrations/`.
const INTO_MIGRATIONS: &[&str] = &[
    "cp x migrations/001.sql",
    "mv a migrations/b",
    "touch migrations/x",
    "sed -i s/a/b/ migrations/001.sql",
    "echo x > migrations/y",
    "cd migrations && touch y",
];

#[tokio::test]
async fn a_file_tools_deny_rule_refuses_shell_writes_to_its_paths() {
    let (_dir, ws) = workspace();
    let rule = (Decision::Deny, "write_file(migrations/**)");
    let s = session(&ws, ShellLists::default(), &[rule]);
    s.lifted("cp x src/y").await;
    for mode in [PermissionMode::Auto, PermissionMode::Ask] {
        s.switch.set(mode);
        for line in INTO_MIGRATIONS.iter().chain(&["rm -r migrations"]) {
            let why = s
                .kept(line, Some(dsh_core::Decision::Deny), Tier::Rule)
                .await;
            assert!(
                why.contains("deny rule `write_file(migrations/**)` from user /u/config.toml"),
                "{line}: {why}"
            );
        }
    }
    // A reading tool's rule does not stop writes, nor a write tool's rule reads.
    s.switch.set(PermissionMode::Auto);
    s.lifted("grep -r x migrations > src/found").await;
    let read = s.shell.decide("cat migrations/001.sql");
    assert_eq!(read.decision, Decision::Allow, "{}", read.reason);
}

#[tokio::test]
async fn a_file_tools_ask_rule_asks_for_shell_writes_to_its_paths_in_every_mode() {
    let (_dir, ws) = workspace();
    let rules = [
        (Decision::Ask, "edit_file(migrations/**)"),
        // An allow rule on the commands lifts the program's ask, not the rule's.
        (Decision::Allow, "run_shell(cp *)"),
        (Decision::Allow, "run_shell(touch *)"),
        (Decision::Allow, "run_shell(mv *)"),
    ];
    let s = session(&ws, ShellLists::default(), &rules);
    for mode in [PermissionMode::Auto, PermissionMode::Ask] {
        s.switch.set(mode);
        for line in INTO_MIGRATIONS {
            let why = s
                .kept(line, Some(dsh_core::Decision::Ask), Tier::Rule)
                .await;
            assert!(
                why.contains("ask rule `edit_file(migrations/**)`"),
                "{line}: {why}"
            );
        }
        // A pattern that may name such a path asks too.
        let why = s
            .kept(
                "rm migrations/*.sql",
                Some(dsh_core::Decision::Ask),
                Tier::Rule,
            )
            .await;
        assert!(why.contains("edit_file(migrations/**)"), "{why}");
    }
    s.switch.set(PermissionMode::Ask);
    let (_, shell) = s.votes("cp x src/y").await;
    assert_eq!(
        shell.decision,
        Some(dsh_core::Decision::Allow),
        "{}",
        shell.reason
    );
}

#[tokio::test]
async fn a_prompt_file_is_protected_where_its_symlink_leads() {
    let (dir, ws) = workspace();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/guide.md"), "be kind\n").unwrap();
    std::os::unix::fs::symlink("docs/guide.md", dir.path().join("AGENTS.md")).unwrap();
    // A protected directory reached through a symlink too.
    std::fs::create_dir(dir.path().join("dotdsh")).unwrap();
    std::os::unix::fs::symlink("dotdsh", dir.path().join(".dsh")).unwrap();
    let s = session(&ws, ShellLists::default(), &[]);
    s.lifted("echo x > docs/other.md").await;
    s.lifted("cp a docs/other.md").await;
    for line in [
        "echo x > docs/guide.md",
        "echo x >> AGENTS.md",
        "cp a docs/guide.md",
        "mv a docs/guide.md",
        "sed -i s/a/b/ docs/guide.md",
        "cd docs && touch guide.md",
        "rm -r docs",
        "rm docs/*.md",
    ] {
        let why = s
            .kept(line, Some(dsh_core::Decision::Deny), Tier::Rule)
            .await;
        assert!(why.contains("AGENTS.md"), "{line}: {why}");
    }
    for line in ["touch dotdsh/config.toml", "cd dotdsh && ls"] {
        let why = s
            .kept(line, Some(dsh_core::Decision::Deny), Tier::Rule)
            .await;
        assert!(why.contains(".dsh"), "{line}: {why}");
    }
}
