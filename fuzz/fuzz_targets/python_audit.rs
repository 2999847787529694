//! The Python audit (`python -c CODE`, `python script.py`): it never panics, gives one answer
//! for one source, and a refusal's line is a line of the source (as Python counts lines).
#![no_main]
use std::sync::{Arc, OnceLock};

use dsh_core::Workspace;
use dsh_policy::python::{audit_code, audit_source};
use libfuzzer_sys::fuzz_target;

fn workspace() -> &'static (Arc<Workspace>, tempfile::TempDir) {
    static WS: OnceLock<(Arc<Workspace>, tempfile::TempDir)> = OnceLock::new();
    WS.get_or_init(|| {
        let dir = dsh_fuzz::workspace();
        (
            Arc::new(Workspace::new(dir.path()).expect("a workspace")),
            dir,
        )
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let alone = audit_source(src);
    assert_eq!(alone, audit_source(src), "one source, two answers");
    if let Err(refusal) = &alone
        && let Some(line) = refusal.line
    {
        // Python's lines: `\r\n`, a lone `\r` and `\n` each end one.
        let lines = src.replace("\r\n", "\n").split(['\r', '\n']).count();
        assert!(
            (1..=lines).contains(&line),
            "refused at line {line} of a {lines}-line source: {refusal}"
        );
    }
    let in_ws = audit_code(&workspace().0, src);
    // Local modules are looked for only in the workspace: what is refused alone stays
    // refused there.
    if alone.is_err() {
        assert!(
            in_ws.is_err(),
            "refused alone, passed in the workspace: {alone:?}"
        );
    }
});
