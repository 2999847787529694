//! [`ConfigError`]: every configuration failure names where it came from.

use std::fmt;
use std::path::{Path, PathBuf};

/// What kind of configuration failure this is (for callers that branch on it; the
/// [`Display`](fmt::Display) form is what a person reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A file exists but cannot be read (permissions, not UTF-8, is a directory…), or a
    /// file could not be written by [`record_trust`](crate::record_trust) or
    /// [`record_rule`](crate::record_rule).
    Io,
    /// The file is not valid TOML.
    Syntax,
    /// A key the schema does not know.
    UnknownKey,
    /// A known key with a value of the wrong type or out of range.
    InvalidValue,
    /// A `[trust]` or `[workspaces]` table in a file that may not hold it, or an unusable
    /// workspace path.
    Trust,
}

/// A configuration error. Its `Display` is one line:
/// `FILE:LINE: KEY: MESSAGE` for file problems (line 1-based, key dotted, e.g.
/// `permissions.allow[1]`), `FILE: MESSAGE` when there is no line, and
/// `KEY: MESSAGE` for environment variables and flags (the key then reads
/// `environment variable DSH_PROVIDER` or `--base-url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    kind: ErrorKind,
    file: Option<PathBuf>,
    line: Option<usize>,
    key: Option<String>,
    message: String,
}

impl ConfigError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ConfigError {
            kind,
            file: None,
            line: None,
            key: None,
            message: message.into(),
        }
    }

    pub(crate) fn in_file(mut self, file: &Path) -> Self {
        self.file = Some(file.to_path_buf());
        self
    }

    pub(crate) fn at_line(mut self, line: Option<usize>) -> Self {
        self.line = line;
        self
    }

    pub(crate) fn with_key(mut self, key: impl Into<String>) -> Self {
        let key = key.into();
        self.key = if key.is_empty() { None } else { Some(key) };
        self
    }

    pub(crate) fn io(file: &Path, what: &str, err: &std::io::Error) -> Self {
        ConfigError::new(ErrorKind::Io, format!("{what}: {err}")).in_file(file)
    }

    /// What kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The file at fault, if the error comes from a file.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The 1-based line in [`file`](Self::file), when known.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The dotted key (`shell.safe_list`, `permissions.allow[1]`), or the environment
    /// variable / flag at fault.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The message without location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}", file.display())?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
            f.write_str(": ")?;
        }
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// 1-based line of a byte offset in `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Rewrites serde's messages into the crate's wording:
/// "unknown field `x`, expected `a` or `b`" → "unknown key (expected one of: a, b)",
/// "unknown variant `x`, expected …" → "\"x\" is not one of: …",
/// "invalid value: integer `-3`, expected u64" → "-3 is not a positive integer".
pub(crate) fn tidy_serde_message(msg: &str) -> (ErrorKind, String) {
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let expected = rest
            .split_once(", expected ")
            .map(|(_, e)| backticked(e))
            .unwrap_or_default();
        let text = if expected.is_empty() {
            "unknown key (this table takes no keys)".to_string()
        } else {
            format!("unknown key (expected one of: {})", expected.join(", "))
        };
        return (ErrorKind::UnknownKey, text);
    }
    if let Some(rest) = msg.strip_prefix("missing field `") {
        let name = rest.split('`').next().unwrap_or(rest);
        return (
            ErrorKind::InvalidValue,
            format!("missing required key \"{name}\""),
        );
    }
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let (name, tail) = rest.split_once('`').unwrap_or((rest, ""));
        let expected = tail
            .split_once("expected ")
            .map(|(_, e)| backticked(e))
            .unwrap_or_default();
        return (
            ErrorKind::InvalidValue,
            format!("\"{name}\" is not one of: {}", expected.join(", ")),
        );
    }
    if let Some(rest) = msg.strip_prefix("invalid value: integer `")
        && let Some((number, tail)) = rest.split_once('`')
        && tail.contains("expected u64")
    {
        return (
            ErrorKind::InvalidValue,
            format!("{number} is not a positive integer"),
        );
    }
    let text = msg
        .replace("expected u64", "expected a positive integer")
        .replace("expected a sequence", "expected an array")
        .replace("expected a boolean", "expected true or false")
        .replace("expected a map", "expected a table");
    (ErrorKind::InvalidValue, text)
}

fn backticked(s: &str) -> Vec<String> {
    s.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_file_line_key_message() {
        let e = ConfigError::new(ErrorKind::InvalidValue, "bad")
            .in_file(Path::new("/x/config.toml"))
            .at_line(Some(7))
            .with_key("permissions.allow[1]");
        assert_eq!(e.to_string(), "/x/config.toml:7: permissions.allow[1]: bad");
    }

    #[test]
    fn display_without_file_names_the_key() {
        let e = ConfigError::new(ErrorKind::InvalidValue, "bad").with_key("--max-steps");
        assert_eq!(e.to_string(), "--max-steps: bad");
    }

    #[test]
    fn line_of_counts_newlines_before_offset() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 4), 3);
        assert_eq!(line_of("a\nb\nc", 400), 3);
    }

    #[test]
    fn unknown_field_message_lists_expected_keys() {
        let (kind, msg) =
            tidy_serde_message("unknown field `safe_list`, expected `safe` or `confirm`");
        assert_eq!(kind, ErrorKind::UnknownKey);
        assert_eq!(msg, "unknown key (expected one of: safe, confirm)");
    }

    #[test]
    fn unknown_variant_message_lists_expected_values() {
        let (_, msg) = tidy_serde_message("unknown variant `boom`, expected `deny` or `abstain`");
        assert_eq!(msg, "\"boom\" is not one of: deny, abstain");
    }

    #[test]
    fn negative_integer_message_says_positive() {
        let (_, msg) = tidy_serde_message("invalid value: integer `-3`, expected u64");
        assert_eq!(msg, "-3 is not a positive integer");
    }
}
