//! Properties of path resolution over generated spellings (issue 30; SPEC P3, DESIGN §3):
//! every spelling of one path — `./` anywhere, doubled slashes, a detour `dir/..`, the
//! absolute form, a symlink inside the workspace to a directory inside it — resolves to the
//! same file; a spelling that leaves the workspace, lexically or through a symlink, is refused
//! as outside whatever else it contains.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;

use dsh_core::{PathError, Workspace};
use proptest::prelude::*;

/// Real directories (`a`, `a/b`, `c`), files in them, a symlink `link -> a/b` inside, and
/// `out -> ..` (the directory holding the workspace) and `up -> a/../..` leading out.
struct World {
    _dir: tempfile::TempDir,
    ws: Workspace,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join("c")).unwrap();
        for f in ["a/f", "a/b/g", "c/h", "top"] {
            std::fs::write(root.join(f), f).unwrap();
        }
        std::fs::write(dir.path().join("secret"), "outside").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("a/b", root.join("link")).unwrap();
            std::os::unix::fs::symlink("..", root.join("out")).unwrap();
            std::os::unix::fs::symlink("a/../..", root.join("up")).unwrap();
        }
        let ws = Workspace::new(&root).unwrap();
        World { _dir: dir, ws }
    })
}

/// Paths below the root, as component lists (existing or not).
const TARGETS: &[&[&str]] = &[
    &["top"],
    &["a"],
    &["a", "f"],
    &["a", "b"],
    &["a", "b", "g"],
    &["c", "h"],
    &["a", "b", "new.txt"],
    &["c", "new", "deeper.rs"],
];

/// One way of respelling a component list that names the same path.
#[derive(Clone, Debug)]
enum Respell {
    /// `./` before component `i`.
    Dot(usize),
    /// A doubled slash before component `i`.
    Slash(usize),
    /// `d/..` before component `i`, for a real directory `d` at that point.
    Detour(usize, &'static str),
    /// The absolute path.
    Absolute,
    /// A trailing `/.` (directories only make sense, but resolution is lexical first).
    TrailingDot,
}

fn respell(parts: &[&str], edits: &[Respell], root: &str) -> String {
    let mut pieces: Vec<String> = parts.iter().map(|s| (*s).to_owned()).collect();
    let mut absolute = false;
    let mut trailing = false;
    // Apply from the back so indices stay meaningful.
    let mut edits = edits.to_vec();
    edits.sort_by_key(|e| match e {
        Respell::Dot(i) | Respell::Slash(i) | Respell::Detour(i, _) => std::cmp::Reverse(*i),
        _ => std::cmp::Reverse(usize::MAX),
    });
    for e in edits {
        match e {
            Respell::Dot(i) => pieces.insert(i.min(pieces.len()), ".".to_owned()),
            Respell::Slash(i) => pieces.insert(i.min(pieces.len()), String::new()),
            Respell::Detour(i, d) => {
                let i = i.min(pieces.len());
                pieces.insert(i, "..".to_owned());
                pieces.insert(i, d.to_owned());
            }
            Respell::Absolute => absolute = true,
            Respell::TrailingDot => trailing = true,
        }
    }
    // An empty first piece would make the path absolute ("/x"): keep leading slashes out.
    while pieces.first().is_some_and(String::is_empty) {
        pieces.remove(0);
    }
    let mut s = pieces.join("/");
    if trailing {
        s.push_str("/.");
    }
    if absolute { format!("{root}/{s}") } else { s }
}

fn edits() -> impl Strategy<Value = Vec<Respell>> {
    let one = prop_oneof![
        (0usize..4).prop_map(Respell::Dot),
        (0usize..4).prop_map(Respell::Slash),
        (
            0usize..4,
            prop::sample::select(&["a", "c", "link", "zz"][..])
        )
            .prop_map(|(i, d)| Respell::Detour(i, d)),
        Just(Respell::Absolute),
        Just(Respell::TrailingDot),
    ];
    prop::collection::vec(one, 0..5)
}

/// Paths that leave the workspace: past the root by `..`, or through a link that points out.
const WAYS_OUT: &[&[&str]] = &[
    &["..", "secret"],
    &["out", "secret"],
    &["up", "secret"],
    &["a", "..", "..", "secret"],
    &["link", "..", "..", "..", "secret"],
    &["out", "ws", "..", "secret"],
];

fn plain(parts: &[&str]) -> String {
    parts.join("/")
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: dsh_testkit::proptest_cases(500),
        // A failure prints its minimal input; nothing is written beside the sources.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every respelling resolves to what the plain spelling resolves to.
    #[test]
    fn every_spelling_of_a_path_resolves_alike(
        target in prop::sample::select(TARGETS),
        edits in edits(),
    ) {
        let w = world();
        let root = w.ws.root().to_string_lossy().into_owned();
        let given = respell(target, &edits, &root);
        let want = w.ws.resolve(&plain(target)).unwrap();
        // A detour through a missing directory (`zz/..`) is lexical: the same path too.
        let got = w.ws.resolve(&given);
        prop_assert!(got.is_ok(), "{given:?}: {got:?}");
        let got = got.unwrap();
        prop_assert_eq!(&got.abs, &want.abs, "{}", given);
        prop_assert_eq!(&got.rel, &want.rel, "{}", given);
    }

    /// A path through the symlink `link` (to `a/b`) is the path under `a/b`.
    #[test]
    fn a_symlink_inside_resolves_to_its_target(
        rest in prop::sample::select(&["g", "new.txt", ""][..]),
        edits in edits(),
    ) {
        let w = world();
        let root = w.ws.root().to_string_lossy().into_owned();
        let mut via: Vec<&str> = vec!["link"];
        let mut direct: Vec<&str> = vec!["a", "b"];
        if !rest.is_empty() {
            via.push(rest);
            direct.push(rest);
        }
        let given = respell(&via, &edits, &root);
        let want = w.ws.resolve(&plain(&direct)).unwrap();
        let got = w.ws.resolve(&given);
        prop_assert!(got.is_ok(), "{given:?}: {got:?}");
        prop_assert_eq!(got.unwrap().abs, want.abs, "{}", given);
    }

    /// Leaving the workspace — by `..` past the root, or through `out`/`up` — is refused as
    /// outside, however the rest of the path is spelled.
    #[test]
    fn a_way_out_is_always_outside(
        way in prop::sample::select(WAYS_OUT),
        edits in edits(),
    ) {
        let w = world();
        let root = w.ws.root().to_string_lossy().into_owned();
        let given = respell(way, &edits, &root);
        let got = w.ws.resolve(&given);
        prop_assert!(matches!(got, Err(PathError::Outside { .. })), "{given:?}: {got:?}");
    }
}

#[test]
fn the_respelling_helper_makes_what_it_says() {
    let parts = ["a", "b", "g"];
    assert_eq!(respell(&parts, &[], "/r"), "a/b/g");
    assert_eq!(respell(&parts, &[Respell::Dot(1)], "/r"), "a/./b/g");
    assert_eq!(respell(&parts, &[Respell::Slash(2)], "/r"), "a/b//g");
    assert_eq!(
        respell(&parts, &[Respell::Detour(0, "c"), Respell::Absolute], "/r"),
        "/r/c/../a/b/g"
    );
    assert_eq!(respell(&parts, &[Respell::Slash(0)], "/r"), "a/b/g");
}
