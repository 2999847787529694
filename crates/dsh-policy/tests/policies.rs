//! The policies through a real pipeline: what each decides, at which gate, and why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_core::journal::MemoryJournal;
use dsh_core::{
    Access, ApprovalOutcome, CancellationToken, Decision, FailureKind, FrozenResult, Gate,
    Pipeline, Registry, SpillStore, ToolCall, ToolOutput, Workspace,
};
use dsh_core::{Layer, Origin, Rule};
use dsh_policy::{Confinement, PermissionRules, ProtectedPaths, Spill};
use dsh_testkit::{FnTool, ScriptedApprover};
use serde_json::json;

/// A rule from its text, through the one grammar (dsh-core's), written where `origin` says:
/// a layer's name, then the file if any (`user`, `untrusted project /p/.dsh/config.toml`).
fn parse_rule(kind: Decision, text: &str, origin: &str) -> Rule {
    let (layer, file) = [Layer::UntrustedProject, Layer::Project, Layer::User]
        .into_iter()
        .find_map(|l| Some((l, origin.strip_prefix(l.as_str())?)))
        .unwrap_or_else(|| panic!("{origin:?} names no layer"));
    let origin = Origin {
        layer,
        path: file.strip_prefix(' ').map(Into::into),
        ..Origin::builtin()
    };
    Rule::parse(kind, text, origin).unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    ws: Arc<Workspace>,
    runs: Arc<AtomicUsize>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
    std::fs::write(dir.path().join(".env"), "KEY=1").unwrap();
    let ws = Arc::new(Workspace::new(dir.path()).unwrap());
    Fixture {
        _dir: dir,
        ws,
        runs: Arc::new(AtomicUsize::new(0)),
    }
}

/// `read{path}` declares a read, `write{path}` a write; both count their runs.
fn tools(runs: &Arc<AtomicUsize>, big: usize) -> Registry {
    let mut r = Registry::new();
    for (name, write) in [("read", false), ("write", true)] {
        let runs = runs.clone();
        let tool = FnTool::new(name, move |_, _| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(ToolOutput::new("x".repeat(big), json!({"n": 1})))
            }
        })
        .accesses(move |a| {
            let path = PathBuf::from(a["path"].as_str().unwrap_or_default());
            if write {
                vec![Access::Write { path }]
            } else {
                vec![Access::Read { path }]
            }
        })
        .spec(move |s| s.read_only(!write));
        r.register(tool).unwrap();
    }
    r
}

/// The rules, with `read` as the one read-only tool (as `tools` registers it).
fn rules(ws: &Arc<Workspace>, list: &[(Decision, &str, &str)]) -> PermissionRules {
    let rules = list.iter().map(|(k, t, o)| parse_rule(*k, t, o)).collect();
    PermissionRules::new(ws.clone(), rules, &["read".to_owned()]).unwrap()
}

fn pipeline(f: &Fixture, rules_list: &[(Decision, &str, &str)], yolo: bool) -> Arc<Pipeline> {
    let confine = Confinement::new(f.ws.clone());
    let protect =
        ProtectedPaths::new(f.ws.clone(), &dsh_config::defaults::GUARDS_PROTECTED).unwrap();
    let mut b = Pipeline::builder(tools(&f.runs, 1), Arc::new(MemoryJournal::new("t")))
        .pre_policy(confine.clone())
        .pre_policy(protect.clone())
        .pre_policy(rules(&f.ws, rules_list))
        .guard(confine)
        .guard(protect);
    if yolo {
        b = b.approver(ScriptedApprover::answering(ApprovalOutcome::AllowedOnce));
    }
    b.build()
}

async fn run(p: &Pipeline, name: &str, path: &str) -> Arc<FrozenResult> {
    let call = ToolCall::new("1", name, json!({"path": path}));
    p.run_batch(vec![call], &CancellationToken::new())
        .await
        .unwrap()
        .results
        .remove(0)
}

#[tokio::test]
async fn paths_outside_the_workspace_are_denied_at_gate_one_even_with_yolo() {
    let f = fixture();
    let p = pipeline(&f, &[(Decision::Allow, "read", "user")], true);
    for path in ["../x", "/etc/passwd", "src/../../x"] {
        let r = run(&p, "read", path).await;
        assert_eq!(r.failure_kind(), Some(FailureKind::Denied), "{path}");
        assert_eq!(r.decided_by().gate, Gate::PrePolicy);
        assert_eq!(r.decided_by().policy.as_deref(), Some("confinement"));
        assert!(r.content().contains(path), "{}", r.content());
        let check = p
            .check(&ToolCall::new("1", "read", json!({"path": path})))
            .await;
        assert_eq!(check.decision, Decision::Deny);
    }
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn writes_to_protected_paths_are_denied_however_they_are_spelled() {
    let f = fixture();
    std::os::unix::fs::symlink(f.ws.root().join(".git"), f.ws.root().join("g")).unwrap();
    let p = pipeline(&f, &[(Decision::Allow, "write", "user")], true);
    for path in [
        ".git/hooks/pre-commit",
        "src/../.git/config",
        "g/config",
        ".dsh/config.toml",
    ] {
        let r = run(&p, "write", path).await;
        assert_eq!(r.failure_kind(), Some(FailureKind::Denied), "{path}");
        assert_eq!(
            r.decided_by().policy.as_deref(),
            Some("protected_paths"),
            "{path}"
        );
    }
    // Reading them is fine.
    assert!(run(&p, "read", ".git/config").await.ok());
    assert!(run(&p, "write", "src/new.rs").await.ok());
}

/// A workspace can sit on a case-folding, normalization-insensitive mount (macOS, Windows), where
/// all of these open the protected file: they are refused on every OS, with the pattern named.
#[tokio::test]
async fn protected_paths_are_matched_as_a_folding_file_system_resolves_them() {
    let f = fixture();
    let p = pipeline(&f, &[(Decision::Allow, "write", "user")], true);
    for (path, pattern) in [
        (".Git/hooks/x", ".git/**"),
        (".GIT/config", ".git/**"),
        (".DSH/config.toml", ".dsh/**"),
        (".git./config", ".git/**"),
        (".git /config", ".git/**"),
        (".git. . ./hooks/pre-commit", ".git/**"),
        // `\u{0074}` is `t`: the same name spelled with an escape, and with its case changed.
        (".gi\u{0074}/config", ".git/**"),
        (".gI\u{0054}/config", ".git/**"),
        ("src/../.Git/config", ".git/**"),
    ] {
        let r = run(&p, "write", path).await;
        assert_eq!(r.failure_kind(), Some(FailureKind::Denied), "{path}");
        let by = r.decided_by();
        assert_eq!(
            (by.gate, by.policy.as_deref()),
            (Gate::PrePolicy, Some("protected_paths")),
            "{path}"
        );
        assert!(
            by.reason.contains(&format!("(`{pattern}`)")),
            "{path}: {}",
            by.reason
        );
        let check = p
            .check(&ToolCall::new("1", "write", json!({"path": path})))
            .await;
        assert_eq!(check.decision, Decision::Deny, "{path}");
    }
    // Names that only look alike stay writable.
    for path in [
        "src/git.rs",
        ".github/workflows/x.yml",
        "gitignore",
        ".gitignore",
        ".gits/x",
        "x.git/config",
        "src/.dsh-notes",
    ] {
        assert!(run(&p, "write", path).await.ok(), "{path}");
    }
    assert_eq!(f.runs.load(Ordering::SeqCst), 7);
}

/// `café` spelled NFC in the pattern and NFD in the path, or the other way round, is one name.
#[tokio::test]
async fn nfc_and_nfd_spellings_of_a_protected_name_are_both_refused() {
    let f = fixture();
    let (nfc, nfd) = ("caf\u{e9}", "cafe\u{301}");
    for (pattern, path) in [
        (format!("{nfc}/**"), format!("{nfd}/x")),
        (format!("{nfd}/**"), format!("{nfc}/x")),
        (format!("{nfc}/**"), "CAF\u{c9}/x".to_owned()),
        (format!("{nfd}/**"), "CAFE\u{301}./x".to_owned()),
    ] {
        let protect = ProtectedPaths::new(f.ws.clone(), &[pattern.as_str()]).unwrap();
        let p = Pipeline::builder(tools(&f.runs, 1), Arc::new(MemoryJournal::new("t")))
            .pre_policy(protect.clone())
            .pre_policy(rules(&f.ws, &[(Decision::Allow, "write", "user")]))
            .guard(protect)
            .build();
        let r = run(&p, "write", &path).await;
        assert_eq!(r.failure_kind(), Some(FailureKind::Denied), "{path}");
        assert!(r.decided_by().reason.contains(&pattern), "{path}");
        assert!(run(&p, "write", "cafe/x").await.ok());
    }
}

/// The one comparison the shell policy also uses for redirections.
#[test]
fn protected_match_names_the_first_pattern_that_protects_a_path() {
    use dsh_policy::{PathPattern, protected_match};
    use std::path::Path;
    let patterns: Vec<PathPattern> = ["secrets", ".git/**", ".dsh/**"]
        .iter()
        .map(|p| PathPattern::new(p).unwrap())
        .collect();
    let hit = |rel: &str| protected_match(&patterns, Path::new(rel)).map(PathPattern::as_str);
    assert_eq!(hit(".Git/hooks/pre-commit"), Some(".git/**"));
    assert_eq!(hit(".dsh./config.toml"), Some(".dsh/**"));
    assert_eq!(hit("deep/SECRETS /key.pem"), Some("secrets"));
    assert_eq!(hit(".github/workflows/ci.yml"), None);
    assert_eq!(hit("src/git.rs"), None);
    // Permission rules keep comparing exactly: only protected paths fold.
    assert!(!patterns[1].matches(Path::new(".Git/hooks/pre-commit")));
}

#[tokio::test]
async fn the_guards_hold_even_if_gate_one_is_skipped() {
    // Only the guards mounted, with a listener that allows everything: still denied at gate 3.
    let f = fixture();
    let confine = Confinement::new(f.ws.clone());
    let protect =
        ProtectedPaths::new(f.ws.clone(), &dsh_config::defaults::GUARDS_PROTECTED).unwrap();
    let p = Pipeline::builder(tools(&f.runs, 1), Arc::new(MemoryJournal::new("t")))
        .pre_policy(rules(
            &f.ws,
            &[
                (Decision::Allow, "write", "user"),
                (Decision::Allow, "read", "user"),
            ],
        ))
        .guard(confine)
        .guard(protect)
        .build();
    let r = run(&p, "write", ".git/hooks/post-checkout").await;
    assert_eq!(
        (r.failure_kind(), r.decided_by().gate),
        (Some(FailureKind::Denied), Gate::Guard)
    );
    let r = run(&p, "read", "../../etc/shadow").await;
    assert_eq!(
        (r.failure_kind(), r.decided_by().gate),
        (Some(FailureKind::Denied), Gate::Guard)
    );
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn deny_beats_allow_whatever_the_layer_and_matches_resolved_paths() {
    let f = fixture();
    let p = pipeline(
        &f,
        &[
            (Decision::Allow, "read", "project .dsh/config.toml"),
            (Decision::Deny, "read(.env)", "user config"),
        ],
        true,
    );
    for path in [".env", "src/../.env", "./.env"] {
        let r = run(&p, "read", path).await;
        assert_eq!(r.failure_kind(), Some(FailureKind::Denied), "{path}");
        assert_eq!(r.decided_by().policy.as_deref(), Some("permissions"));
        assert!(
            r.decided_by()
                .reason
                .contains("deny rule `read(.env)` from user config")
        );
    }
    assert!(run(&p, "read", "src").await.ok());
}

#[tokio::test]
async fn a_rule_ask_beats_a_rule_allow_and_an_allow_lifts_the_default_ask() {
    let f = fixture();
    let p = pipeline(
        &f,
        &[
            (Decision::Allow, "write(src/**)", "user"),
            (Decision::Ask, "write(src/gen/**)", "user"),
        ],
        false,
    );
    assert!(run(&p, "write", "src/lib.rs").await.ok());
    let r = run(&p, "write", "src/gen/out.rs").await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Unavailable));
    let r = run(&p, "write", "README.md").await;
    assert_eq!(r.failure_kind(), Some(FailureKind::Unavailable));
}

#[tokio::test]
async fn oversized_output_is_spilled_and_pages_back_in_full() {
    let f = fixture();
    let spill_dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SpillStore::new(spill_dir.path().join("s")));
    let big = 50_000;
    let p = Pipeline::builder(tools(&f.runs, big), Arc::new(MemoryJournal::new("t")))
        .disposition(Spill::new(store.clone(), 2_000))
        .build();
    let r = run(&p, "read", "src").await;
    assert!(r.ok());
    assert!(
        r.content().chars().count() <= 2_000,
        "{}",
        r.content().len()
    );
    let id = r
        .content()
        .split('`')
        .nth(1)
        .expect("the locator names the id");
    assert!(r.content().contains("read_output"), "{}", r.content());
    let mut all = String::new();
    let mut offset = 0;
    loop {
        let page = store.read(id, offset, 2_000).unwrap();
        offset += page.text.chars().count();
        all.push_str(&page.text);
        if !page.has_more() {
            break;
        }
    }
    assert_eq!(all, "x".repeat(big));
    // Small outputs pass untouched.
    let f2 = fixture();
    let p = Pipeline::builder(tools(&f2.runs, 10), Arc::new(MemoryJournal::new("t")))
        .disposition(Spill::new(store, 2_000))
        .build();
    assert_eq!(run(&p, "read", "src").await.content(), "x".repeat(10));
}

/// The memory file is let out of the built-in `.dsh/**` where a person answers asks, and for
/// a call a person typed (`/memory add`) in any session; never for the model's own call in a
/// session nobody answers, and never out of a pattern the configuration adds.
#[tokio::test]
async fn the_memory_file_is_writable_only_by_a_person_or_where_one_answers() {
    use dsh_core::CallSource;
    let f = fixture();
    for (exempt, source, extra, written) in [
        (false, CallSource::Model, None, false),
        (false, CallSource::Batch, None, false),
        (false, CallSource::User, None, true),
        (true, CallSource::Model, None, true),
        (false, CallSource::User, Some(".dsh/memory.md"), false),
    ] {
        let mut patterns = dsh_config::defaults::GUARDS_PROTECTED.to_vec();
        patterns.extend(extra);
        let protect = ProtectedPaths::new(f.ws.clone(), &patterns)
            .unwrap()
            .with_memory_exemption(exempt);
        let p = Pipeline::builder(tools(&f.runs, 1), Arc::new(MemoryJournal::new("t")))
            .pre_policy(protect.clone())
            .pre_policy(rules(&f.ws, &[(Decision::Allow, "write", "user")]))
            .guard(protect)
            .build();
        let call =
            ToolCall::new("1", "write", json!({"path": ".dsh/memory.md"})).with_source(source);
        let r = p
            .run_batch(vec![call], &CancellationToken::new())
            .await
            .unwrap()
            .results
            .remove(0);
        assert_eq!(r.ok(), written, "{exempt} {source:?} {extra:?}: {r:?}");
        let other =
            ToolCall::new("2", "write", json!({"path": ".dsh/config.toml"})).with_source(source);
        let r = p
            .run_batch(vec![other], &CancellationToken::new())
            .await
            .unwrap()
            .results
            .remove(0);
        assert_eq!(
            r.failure_kind(),
            Some(FailureKind::Denied),
            "the rest of .dsh/"
        );
    }
}
