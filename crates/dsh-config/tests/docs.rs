//! The configuration reference in the repository (`docs/configuration.md`) is the key table's
//! own: its table is `dsh_config::keys::reference()` byte for byte, and every setting the
//! configuration types hold is a key of the table — so a key added without its doc, or a
//! setting added without a key, fails here. `DSH_UPDATE_DOCS=1 cargo test -p dsh-config
//! --test docs` writes the table into the file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use dsh_config::Config;
use dsh_config::keys::{KEYS, reference};
use serde_json::Value;

const BEGIN: &str = "<!-- BEGIN KEYS: generated from crates/dsh-config/src/keys/table.rs; DSH_UPDATE_DOCS=1 cargo test -p dsh-config --test docs rewrites it -->\n";
const END: &str = "<!-- END KEYS -->";

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md")
}

#[test]
fn the_configuration_reference_is_the_key_table() {
    let path = doc_path();
    let text = std::fs::read_to_string(&path).unwrap();
    let (start, end) = match (text.find(BEGIN), text.find(END)) {
        (Some(s), Some(e)) if s < e => (s + BEGIN.len(), e),
        _ => panic!("{} lacks the generated section's markers", path.display()),
    };
    let table = reference();
    if std::env::var_os("DSH_UPDATE_DOCS").is_some() {
        let updated = format!("{}{table}{}", &text[..start], &text[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        text[start..end] == table,
        "{} is not the key table's reference: run DSH_UPDATE_DOCS=1 cargo test -p dsh-config --test docs",
        path.display()
    );
    for key in KEYS {
        assert!(!key.doc.trim().is_empty(), "{} has no doc", key.name);
    }
}

/// Settings of the types that the file spells with other keys: the hooks of every event
/// are one list (`[[hooks.PreToolUse]]`, … each a key of the table).
const SPELLED_OTHERWISE: &[(&str, &str)] = &[("hooks.entries", "hooks.PreToolUse")];

/// Every leaf of the configuration's JSON form (the types' settings) is a key, or lies
/// under a structured key.
#[test]
fn every_setting_of_the_configuration_types_is_a_key() {
    fn walk(path: &str, v: &Value, missing: &mut Vec<String>) {
        if KEYS.iter().any(|k| k.name == path) {
            return;
        }
        if let Some((_, key)) = SPELLED_OTHERWISE.iter().find(|(p, _)| *p == path) {
            assert!(
                KEYS.iter().any(|k| k.name == *key),
                "{path} is spelled {key}, which is not a key"
            );
            return;
        }
        match v {
            Value::Object(map) if !map.is_empty() => {
                for (k, child) in map {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(&p, child, missing);
                }
            }
            _ => missing.push(path.to_owned()),
        }
    }
    let json = serde_json::to_value(Config::default()).unwrap();
    let mut missing = Vec::new();
    walk("", &json, &mut missing);
    assert!(
        missing.is_empty(),
        "settings without a key in the table (so without docs): {missing:?}"
    );
}
