//! The `hooks` section of a `.claude/settings.json` — Claude Code's settings file — read so
//! the hooks a team already wrote run under dsh unchanged: `{"hooks": {EVENT: [{"matcher":
//! "Bash|Edit", "hooks": [{"type": "command", "command": "…", "timeout": 30}]}]}}` (`timeout`
//! in seconds). Nothing else in the file is read. A project's file is read beside its
//! `.dsh/config.toml` (its hooks run only once a person approved each command line:
//! [`crate::hook_approval_digest`]; from an untrusted workspace they are ignored with the
//! notice); the user's `~/.claude/settings.json` only with `[compat] claude = true`. A hook
//! dsh cannot run (an event it does not know, a type other than `command`) is left out with
//! a notice; a file that is not such JSON is an error naming it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::{Hook, HookEvent, Layer, OnError, Origin, Sourced};
use crate::error::ConfigError;
use crate::merge::Part;

/// The file, under a workspace or a home directory.
pub const CLAUDE_SETTINGS: &str = ".claude/settings.json";

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    hooks: BTreeMap<String, Vec<Group>>,
}

#[derive(Deserialize)]
struct Group {
    matcher: Option<String>,
    #[serde(default)]
    hooks: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    /// Seconds.
    timeout: Option<f64>,
}

/// The hooks of `workspace`'s `.claude/settings.json` as a part of `layer`, with a notice for
/// each hook left out; `None` when there is no such file.
pub(crate) fn read(
    workspace: &Path,
    layer: Layer,
    files: &mut Vec<PathBuf>,
    notices: &mut Vec<String>,
) -> Result<Option<Part>, ConfigError> {
    read_in(&workspace.join(".claude"), layer, files, notices)
}

/// The hooks of `settings.json` in Claude Code's directory `claude_dir`.
pub(crate) fn read_in(
    claude_dir: &Path,
    layer: Layer,
    files: &mut Vec<PathBuf>,
    notices: &mut Vec<String>,
) -> Result<Option<Part>, ConfigError> {
    let path = claude_dir.join("settings.json");
    let shape = r#"Claude Code settings ({"hooks": {EVENT: [{"matcher", "hooks": [...]}]}})"#;
    let Some((file, text)) = crate::read::read_json::<File>(&path, shape, files)? else {
        return Ok(None);
    };
    let mut part = Part::new(layer, path.display().to_string());
    for (event_name, groups) in file.hooks {
        let line = text
            .find(&format!("\"{event_name}\""))
            .map(|at| crate::error::line_of(&text, at));
        let origin = |key: String| Origin {
            layer,
            path: Some(path.clone()),
            line,
            key: Some(key),
        };
        let Ok(event) = event_name.parse::<HookEvent>() else {
            notices.push(format!(
                "{}: {} left out: dsh does not run {event_name} hooks (it runs {})",
                origin(format!("hooks.{event_name}")).location(),
                count(groups.iter().map(|g| g.hooks.len()).sum()),
                HookEvent::ALL
                    .iter()
                    .map(|e| e.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        };
        for (g, group) in groups.into_iter().enumerate() {
            // Claude Code's "match everything" spellings.
            let matcher = group
                .matcher
                .filter(|m| !m.trim().is_empty() && m.trim() != "*");
            for (h, entry) in group.hooks.into_iter().enumerate() {
                let origin = origin(format!("hooks.{event_name}[{g}].hooks[{h}]"));
                let command = match (entry.kind.as_deref(), entry.command) {
                    (None | Some("command"), Some(c)) if !c.trim().is_empty() => c,
                    (None | Some("command"), _) => {
                        notices.push(format!(
                            "{}: hook left out: it has no command",
                            origin.location()
                        ));
                        continue;
                    }
                    (Some(kind), _) => {
                        notices.push(format!(
                            "{}: hook left out: dsh runs only \"command\" hooks, not {kind:?}",
                            origin.location()
                        ));
                        continue;
                    }
                };
                let timeout_ms = match entry.timeout {
                    Some(s) if s.is_finite() && s > 0.0 => (s * 1000.0).ceil() as u64,
                    Some(_) => {
                        notices.push(format!(
                            "{}: hook left out: its timeout is not a positive number of seconds",
                            origin.location()
                        ));
                        continue;
                    }
                    None => crate::defaults::CLAUDE_HOOK_TIMEOUT_S * 1000,
                };
                part.hooks.push(Sourced {
                    value: Hook {
                        event,
                        matcher: matcher.clone(),
                        command,
                        timeout_ms,
                        on_error: OnError::Deny,
                        env: BTreeMap::new(),
                    },
                    origin,
                });
            }
        }
    }
    Ok(Some(part))
}

fn count(n: usize) -> String {
    if n == 1 {
        "1 hook".to_owned()
    } else {
        format!("{n} hooks")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> (Vec<Sourced<Hook>>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".claude")).unwrap();
        std::fs::write(dir.path().join(CLAUDE_SETTINGS), text).unwrap();
        let mut notices = Vec::new();
        let part = read(dir.path(), Layer::Project, &mut Vec::new(), &mut notices)
            .unwrap()
            .unwrap();
        (part.hooks, notices)
    }

    #[test]
    fn claude_codes_nested_shape_becomes_one_hook_per_command() {
        let (hooks, notices) = read_text(
            r#"{"permissions": {"allow": ["Bash(ls)"]},
              "hooks": {"PreToolUse": [{"matcher": "Edit|Write", "hooks": [
                 {"type": "command", "command": "a.sh", "timeout": 2},
                 {"type": "command", "command": "b.sh"}]}],
               "Stop": [{"hooks": [{"type": "command", "command": "c.sh"}]}]}}"#,
        );
        assert!(notices.is_empty(), "{notices:?}");
        let got: Vec<_> = hooks
            .iter()
            .map(|h| {
                (
                    h.value.event,
                    h.value.matcher.clone(),
                    h.value.command.clone(),
                    h.value.timeout_ms,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    HookEvent::PreToolUse,
                    Some("Edit|Write".to_owned()),
                    "a.sh".to_owned(),
                    2000
                ),
                (
                    HookEvent::PreToolUse,
                    Some("Edit|Write".to_owned()),
                    "b.sh".to_owned(),
                    60_000
                ),
                (HookEvent::Stop, None, "c.sh".to_owned(), 60_000),
            ]
        );
        assert_eq!(
            hooks[0].origin.key.as_deref(),
            Some("hooks.PreToolUse[0].hooks[0]")
        );
        assert_eq!(hooks[0].origin.line, Some(2));
    }

    #[test]
    fn what_dsh_cannot_run_is_left_out_with_a_notice() {
        let (hooks, notices) = read_text(
            r#"{"hooks": {"SessionEnd": [{"hooks": [{"type": "command", "command": "x"}]}],
               "PreToolUse": [{"matcher": "*", "hooks": [{"type": "prompt", "prompt": "?"},
                   {"type": "command", "command": "ok.sh"}]}]}}"#,
        );
        assert_eq!(hooks.len(), 1);
        assert_eq!(hooks[0].value.matcher, None, "`*` matches every tool");
        assert_eq!(notices.len(), 2, "{notices:?}");
        assert!(
            notices
                .iter()
                .any(|n| n.contains("does not run SessionEnd hooks")),
            "{notices:?}"
        );
        assert!(
            notices.iter().any(|n| n.contains("only \"command\" hooks")),
            "{notices:?}"
        );
    }

    #[test]
    fn a_file_that_is_not_settings_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".claude")).unwrap();
        std::fs::write(dir.path().join(CLAUDE_SETTINGS), "{\"hooks\": [1]}").unwrap();
        let e = read(dir.path(), Layer::Project, &mut Vec::new(), &mut Vec::new())
            .err()
            .unwrap();
        assert!(e.to_string().contains("settings.json"), "{e}");
    }
}
