//! A plugin's `plugin.toml` (dsh-config's `find_plugins`, what a trusted project's or the
//! user's plugins are read with): it never panics; a refused plugin's error names its file
//! and, unless the file could not be read, the line; what it accepts declares tools with
//! valid names and object input schemas.
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

use dsh_config::{ErrorKind, PLUGIN_TOML, PROJECT_PLUGINS, find_plugins, plugin_tool_name_error};
use libfuzzer_sys::fuzz_target;

fn fixture() -> &'static (PathBuf, PathBuf, tempfile::TempDir) {
    static FIXTURE: OnceLock<(PathBuf, PathBuf, tempfile::TempDir)> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ws = std::fs::canonicalize(dir.path()).expect("a canonical path");
        let plugin = ws.join(PROJECT_PLUGINS).join("fuzzed");
        std::fs::create_dir_all(&plugin).expect("a plugin folder");
        (ws, plugin.join(PLUGIN_TOML), dir)
    })
}

fuzz_target!(|data: &[u8]| {
    let (ws, file, _) = fixture();
    std::fs::write(file, data).expect("plugin.toml written");
    let found = find_plugins(ws, true, None);
    assert_eq!(found.plugins.len() + found.refused.len(), 1, "{found:?}");
    for p in &found.plugins {
        assert!(!p.tools.is_empty());
        for t in &p.tools {
            assert_eq!(plugin_tool_name_error(&t.name), None, "{:?}", t.name);
            assert_eq!(t.input_schema["type"], "object");
            assert!(t.output_schema.is_object());
        }
    }
    for r in &found.refused {
        let e = &r.error;
        assert!(e.file().is_some(), "an error without its file: {e}");
        if e.kind() != ErrorKind::Io && e.line().is_some() {
            let lines = String::from_utf8_lossy(data).split('\n').count();
            let line = e.line().unwrap_or(0);
            assert!((1..=lines).contains(&line), "line {line} of {lines}: {e}");
        }
    }
});
