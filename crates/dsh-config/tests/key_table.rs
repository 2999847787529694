//! One declaration per key (issue 23, stage a): for every scalar key of the table, the
//! built-in default, the file's errors, the untrusted project's treatment and the reference
//! all come from its entry — asserted from the table itself, so a key added there is held
//! to the same without another test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use dsh_config::keys::{Group, KEYS, Key, Kind, TextRule, Trust, reference};
use dsh_config::{Config, ErrorKind};

/// The key's value in a configuration, through its JSON form (the key's dotted name is the
/// path).
fn value_of(config: &Config, key: &Key) -> serde_json::Value {
    let json = serde_json::to_value(config).unwrap();
    let pointer = format!("/{}", key.name.replace('.', "/"));
    json.pointer(&pointer)
        .cloned()
        .unwrap_or_else(|| panic!("{} is not in the configuration", key.name))
}

/// A valid value other than the default, and one the key refuses, as TOML.
fn samples(key: &Key) -> (String, Option<String>) {
    match key.kind {
        Kind::Count { min, max, .. } => {
            let valid = if max == u64::MAX { min + 7 } else { max };
            let bad = if max == u64::MAX {
                "-1".to_owned()
            } else {
                (max + 1).to_string()
            };
            (valid.to_string(), Some(bad))
        }
        Kind::Fraction => ("0.25".to_owned(), Some("1.5".to_owned())),
        Kind::Dollars => ("3.5".to_owned(), Some("-1.0".to_owned())),
        Kind::Flag => ("true".to_owned(), Some("\"yes\"".to_owned())),
        Kind::Text(TextRule::EnvName) => ("\"MY_KEY\"".to_owned(), Some("\"MY KEY\"".to_owned())),
        Kind::Text(TextRule::Url) => (
            "\"https://example.test/v1\"".to_owned(),
            Some("\"ftp://x\"".to_owned()),
        ),
        Kind::Text(TextRule::NonEmpty) => ("\"some-text\"".to_owned(), Some("\"  \"".to_owned())),
        Kind::Choice(choices) => {
            let all = choices();
            let other = all
                .iter()
                .find(|c| key.default.map(|d| d.scalar().to_string()) != Some(format!("{c:?}")))
                .unwrap();
            (format!("{other:?}"), Some("\"no-such-choice\"".to_owned()))
        }
        Kind::Structured(_) => unreachable!("scalars only"),
    }
}

fn file_setting(key: &Key, value: &str) -> String {
    let (table, name) = key.name.rsplit_once('.').unwrap();
    format!("# line 1\n[{table}]\n{name} = {value}\n")
}

#[test]
fn defaults_come_from_the_table() {
    let config = Config::default();
    for key in KEYS.iter().filter(|k| k.is_scalar()) {
        let got = value_of(&config, key);
        match key.default {
            Some(d) => {
                let want = match d.scalar() {
                    dsh_config::keys::Scalar::Count(n) => serde_json::json!(n),
                    dsh_config::keys::Scalar::Number(x) => serde_json::json!(x),
                    dsh_config::keys::Scalar::Flag(b) => serde_json::json!(b),
                    dsh_config::keys::Scalar::Choice(c) => serde_json::json!(c),
                    dsh_config::keys::Scalar::Text(t) => serde_json::json!(t),
                };
                assert_eq!(got, want, "{}", key.name);
            }
            None => assert!(!key.unset.is_empty(), "{}", key.name),
        }
    }
}

#[test]
fn each_key_reads_its_values_and_names_file_line_and_key_for_bad_ones() {
    for key in KEYS.iter().filter(|k| k.is_scalar()) {
        let (valid, bad) = samples(key);
        let w = World::new();
        w.user(&file_setting(key, &valid));
        let loaded = w.load();
        assert_ne!(
            value_of(&loaded.config, key),
            value_of(&Config::default(), key),
            "{} = {valid} changed nothing",
            key.name
        );
        if let Some(bad) = bad {
            let w = World::new();
            let path = w.user(&file_setting(key, &bad));
            let err = w.try_load().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidValue, "{}: {err}", key.name);
            assert_eq!(err.line(), Some(3), "{}: {err}", key.name);
            assert_eq!(err.key(), Some(key.name), "{err}");
            assert!(
                err.to_string()
                    .starts_with(&format!("{}:3: {}: ", path.display(), key.name)),
                "{err}"
            );
        }
    }
}

#[test]
fn an_untrusted_project_gets_what_the_table_says() {
    for key in KEYS.iter().filter(|k| k.is_scalar()) {
        let (valid, _) = samples(key);
        let w = World::new();
        w.project(&file_setting(key, &valid));
        let loaded = w.load();
        let changed = value_of(&loaded.config, key) != value_of(&Config::default(), key);
        // A table ignored as a whole (`[verify]`) is named as one.
        let table = format!("[{}]", key.name.split('.').next().unwrap());
        let noticed = loaded
            .notices
            .iter()
            .any(|n| n.contains(key.name) || (key.group == Group::Table && n.contains(&table)));
        match key.trust {
            Trust::Applied => assert!(changed && !noticed, "{}: {loaded:?}", key.name),
            Trust::Ignored => assert!(!changed && noticed, "{}: {:?}", key.name, loaded.notices),
            // The sample is looser than (or, for a choice, other than) the default: refused
            // unless it tightens.
            Trust::Tightens | Trust::Only(_) => assert_eq!(
                changed, !noticed,
                "{}: either applied or noticed: {:?}",
                key.name, loaded.notices
            ),
        }
    }
}

#[test]
fn the_reference_holds_every_key_with_its_doc_and_default() {
    let text = reference();
    for key in KEYS {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", key.name)))
            .unwrap_or_else(|| panic!("{} has no row", key.name));
        assert!(row.contains(key.doc), "{row}");
        assert!(row.contains(&key.type_name()), "{row}");
        if let Some(d) = key.default {
            assert!(row.contains(&format!("`{}`", d.scalar())), "{row}");
        }
    }
}
