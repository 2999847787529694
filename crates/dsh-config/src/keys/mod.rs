//! Every configuration key, declared once ([`KEYS`]): its name, type, bounds, default, what
//! an untrusted project (and the managed file) may do with it, and its one-line doc.
//!
//! From a key's entry follow: reading and checking a file's value (with the file, line and
//! key in every error), layering it, its built-in default
//! ([`Config::default`](crate::Config)) and the reference ([`reference()`]). Adding a key is
//! one entry here and the code that uses the value; nothing else.
//!
//! Scalar keys are merged by the table's rules. Lists and tables (`permissions.allow`,
//! `[[hooks.PreToolUse]]`, `[mcp.servers.NAME]`, …) are declared here too — for the
//! reference and the unknown-key errors — and parsed by their own code in `file.rs`.

use std::fmt;

use crate::config::{Config, Layer};

mod table;

pub use table::KEYS;

/// A scalar value, as read from a file, the environment or a flag.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Count(u64),
    Number(f64),
    Flag(bool),
    Text(String),
    /// One of a [`Kind::Choice`]'s spellings.
    Choice(&'static str),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Count(n) => write!(f, "{n}"),
            Scalar::Number(x) => write!(f, "{x}"),
            Scalar::Flag(b) => write!(f, "{b}"),
            Scalar::Text(s) => write!(f, "{s:?}"),
            Scalar::Choice(s) => write!(f, "{s:?}"),
        }
    }
}

/// A built-in value (no key's default is a text: each such key says what its absence means).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fixed {
    Count(u64),
    Number(f64),
    Flag(bool),
    Choice(&'static str),
}

impl Fixed {
    /// As a [`Scalar`].
    pub fn scalar(self) -> Scalar {
        match self {
            Fixed::Count(n) => Scalar::Count(n),
            Fixed::Number(x) => Scalar::Number(x),
            Fixed::Flag(b) => Scalar::Flag(b),
            Fixed::Choice(c) => Scalar::Choice(c),
        }
    }
}

/// What checks a text value gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRule {
    /// Not empty (nor only spaces).
    NonEmpty,
    /// An `http://` or `https://` URL.
    Url,
    /// An environment variable's name.
    EnvName,
}

/// A key's type.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// An integer in `min..=max`; with `off_at_zero`, 0 is also accepted and means "no limit"
    /// (the loosest value).
    Count {
        min: u64,
        max: u64,
        off_at_zero: bool,
    },
    /// A fraction in (0, 1].
    Fraction,
    /// An amount of US dollars, 0 or more; 0 means "no budget" (the loosest value).
    Dollars,
    Flag,
    Text(TextRule),
    /// One of the spellings `choices()` gives, tightest first when the key's
    /// [`Trust`] compares values.
    Choice(fn() -> Vec<&'static str>),
    /// A list or table parsed by its own code in `file.rs`; the text says of what.
    Structured(&'static str),
}

/// What an untrusted project's value of a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Ignored, with a notice.
    Ignored,
    /// Applied.
    Applied,
    /// Applied when it is not looser than the value so far; ignored (with a notice) otherwise.
    Tightens,
    /// Only this value applies (the tightest); any other is ignored with a notice.
    Only(&'static str),
}

/// What the managed file's value of a key does to the layers above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Managed {
    /// An ordinary lowest-layer default.
    Plain,
    /// A ceiling: a looser value above is clamped to it, with a notice.
    Ceiling,
    /// When the managed file sets the tightest value, a looser value above is ignored with a
    /// notice saying why (`the managed config requires the sandbox`).
    LockAtTightest(&'static str),
}

/// How an untrusted project's ignored value of a key is named in the one notice per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// `key = value`, on its own.
    Alone,
    /// With the other `[model]` keys: a repository cannot choose the endpoint.
    Model,
    /// Among the "limit increases".
    Raise,
    /// As the whole table (`[verify]`).
    Table,
}

/// One configuration key.
pub struct Key {
    /// Dotted: `limits.max_steps`.
    pub name: &'static str,
    pub kind: Kind,
    /// The built-in value; `None` for "not set" (the text in [`Key::unset`] says what that
    /// means) and for structured keys.
    pub default: Option<Fixed>,
    /// For a key without a default: what its absence means (for the reference).
    pub unset: &'static str,
    pub trust: Trust,
    pub managed: Managed,
    /// Layers that may not set the loosest value (`yolo`, `allow_network = true`), and why.
    pub loosest_not_from: (&'static [Layer], &'static str),
    pub group: Group,
    /// One line for the reference.
    pub doc: &'static str,
    /// What the error for a count above its maximum adds after "N is more than MAX".
    pub above_max: &'static str,
    /// Stores a value (`None`: the key's absence) into the configuration.
    set: fn(&mut Config, Option<&Scalar>),
}

impl Key {
    /// Reads and checks a file's value of this scalar key: the message on `Err` is the
    /// error's text (the caller adds file, line and key).
    pub(crate) fn read(&self, value: &toml::Value) -> Result<Scalar, String> {
        let wrong = |want: &str| format!("invalid type: {}, expected {want}", describe(value));
        let scalar = match (self.kind, value) {
            (Kind::Count { .. }, toml::Value::Integer(n)) => match u64::try_from(*n) {
                Ok(n) => Scalar::Count(n),
                Err(_) => return Err(format!("{n} is not a positive integer")),
            },
            (Kind::Count { .. }, _) => return Err(wrong("a positive integer")),
            (Kind::Fraction | Kind::Dollars, toml::Value::Float(x)) => Scalar::Number(*x),
            #[allow(clippy::cast_precision_loss)]
            (Kind::Fraction | Kind::Dollars, toml::Value::Integer(n)) => Scalar::Number(*n as f64),
            (Kind::Fraction | Kind::Dollars, _) => return Err(wrong("a number")),
            (Kind::Flag, toml::Value::Boolean(b)) => Scalar::Flag(*b),
            (Kind::Flag, _) => return Err(wrong("true or false")),
            (Kind::Text(_), toml::Value::String(s)) => Scalar::Text(s.clone()),
            (Kind::Text(_), _) => return Err(wrong("a string")),
            (Kind::Choice(choices), toml::Value::String(s)) => {
                let all = choices();
                match all.iter().find(|c| **c == s) {
                    Some(c) => Scalar::Choice(c),
                    None => return Err(format!("{s:?} is not one of: {}", all.join(", "))),
                }
            }
            (Kind::Choice(_), _) => return Err(wrong("a string")),
            (Kind::Structured(_), _) => {
                return Err("a structured key is read by its own code".to_owned());
            }
        };
        self.check(&scalar)?;
        Ok(scalar)
    }

    /// Checks a value against the key's bounds and rules.
    pub(crate) fn check(&self, v: &Scalar) -> Result<(), String> {
        match (self.kind, v) {
            (
                Kind::Count {
                    min,
                    max,
                    off_at_zero,
                },
                Scalar::Count(n),
            ) => {
                if *n == 0 && off_at_zero {
                    Ok(())
                } else if *n < min {
                    if min == 1 {
                        Err("must be a positive integer, not 0".to_owned())
                    } else {
                        Err(format!("{n} is less than {min}, the least accepted"))
                    }
                } else if *n > max {
                    Err(format!("{n} is more than {max}{}", self.above_max))
                } else {
                    Ok(())
                }
            }
            (Kind::Fraction, Scalar::Number(x)) => {
                if *x > 0.0 && *x <= 1.0 {
                    Ok(())
                } else {
                    Err(format!("{x} is not a fraction in (0, 1]"))
                }
            }
            (Kind::Dollars, Scalar::Number(x)) => {
                if x.is_finite() && *x >= 0.0 {
                    Ok(())
                } else {
                    Err(format!("{x} is not a number of 0 or more"))
                }
            }
            (Kind::Text(rule), Scalar::Text(s)) => match rule {
                TextRule::NonEmpty if s.trim().is_empty() => Err("must not be empty".to_owned()),
                TextRule::NonEmpty => Ok(()),
                TextRule::Url => check_url(s),
                TextRule::EnvName => check_env_name(s),
            },
            (Kind::Flag, Scalar::Flag(_)) | (Kind::Choice(_), Scalar::Choice(_)) => Ok(()),
            _ => Err(format!("not a value of {}", self.name)),
        }
    }

    /// Whether `a` is looser than `b` (for [`Trust::Tightens`] and the managed file's
    /// ceilings and locks).
    pub(crate) fn looser(&self, a: &Scalar, b: &Scalar) -> bool {
        let rank = |v: &Scalar| -> f64 {
            #[allow(clippy::cast_precision_loss)]
            match (self.kind, v) {
                (Kind::Count { off_at_zero, .. }, Scalar::Count(0)) if off_at_zero => f64::INFINITY,
                (_, Scalar::Count(n)) => *n as f64,
                (Kind::Dollars, Scalar::Number(x)) if *x == 0.0 => f64::INFINITY,
                (_, Scalar::Number(x)) => *x,
                (_, Scalar::Flag(b)) => f64::from(u8::from(*b)),
                (Kind::Choice(choices), Scalar::Choice(c)) => {
                    choices().iter().position(|x| x == c).unwrap_or(0) as f64
                }
                _ => 0.0,
            }
        };
        rank(a) > rank(b)
    }

    /// Whether `v` is the tightest value this key takes.
    pub(crate) fn is_tightest(&self, v: &Scalar) -> bool {
        match (self.kind, v) {
            (Kind::Choice(choices), Scalar::Choice(c)) => choices().first() == Some(c),
            (Kind::Flag, Scalar::Flag(b)) => !b,
            _ => false,
        }
    }

    /// Whether `v` is the loosest value this key takes.
    pub(crate) fn is_loosest(&self, v: &Scalar) -> bool {
        match (self.kind, v) {
            (Kind::Choice(choices), Scalar::Choice(c)) => choices().last() == Some(c),
            (Kind::Flag, Scalar::Flag(b)) => *b,
            _ => false,
        }
    }

    /// Stores `v` into `config`.
    pub(crate) fn store(&self, config: &mut Config, v: Option<&Scalar>) {
        (self.set)(config, v);
    }

    /// Whether the key is a scalar the table merges (not a list or table).
    pub fn is_scalar(&self) -> bool {
        !matches!(self.kind, Kind::Structured(_))
    }

    /// The type as the reference names it.
    pub fn type_name(&self) -> String {
        match self.kind {
            Kind::Count {
                min,
                max,
                off_at_zero,
            } => {
                let range = if max == u64::MAX {
                    format!("integer ≥ {min}")
                } else {
                    format!("integer {min}–{max}")
                };
                if off_at_zero {
                    format!("{range}, or 0 for no limit")
                } else {
                    range
                }
            }
            Kind::Fraction => "number in (0, 1]".to_owned(),
            Kind::Dollars => "number ≥ 0 (USD), 0 for no budget".to_owned(),
            Kind::Flag => "true or false".to_owned(),
            Kind::Text(TextRule::NonEmpty) => "string".to_owned(),
            Kind::Text(TextRule::Url) => "http(s) URL".to_owned(),
            Kind::Text(TextRule::EnvName) => "environment variable name".to_owned(),
            Kind::Choice(choices) => choices()
                .iter()
                .map(|c| format!("\"{c}\""))
                .collect::<Vec<_>>()
                .join(" | "),
            Kind::Structured(what) => what.to_owned(),
        }
    }

    /// What an untrusted project may do with it, for the reference.
    pub fn trust_text(&self) -> String {
        match self.trust {
            Trust::Ignored => "ignored".to_owned(),
            Trust::Applied => "applies".to_owned(),
            Trust::Tightens => "only tightens".to_owned(),
            Trust::Only(v) => format!("only \"{v}\""),
        }
    }
}

/// The key named `name`.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The top-level tables, in the order the table declares them.
pub(crate) fn sections() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for k in KEYS {
        let top = k.name.split('.').next().unwrap_or(k.name);
        if !out.contains(&top) {
            out.push(top);
        }
    }
    out
}

/// The keys directly in table `section`, in declaration order (their last name).
pub(crate) fn keys_in(section: &str) -> Vec<&'static str> {
    KEYS.iter()
        .filter_map(|k| k.name.strip_prefix(section)?.strip_prefix('.'))
        .collect()
}

/// The configuration reference, one Markdown table row per key: name, type, default, what
/// an untrusted project may do, and the doc.
pub fn reference() -> String {
    let mut out = String::from(
        "| key | type | default | from an untrusted project | what it does |\n|---|---|---|---|---|\n",
    );
    for k in KEYS {
        let default = match k.default {
            Some(v) => format!("`{}`", v.scalar()),
            None => k.unset.to_owned(),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            k.name,
            k.type_name(),
            default,
            k.trust_text(),
            k.doc
        ));
    }
    out
}

fn describe(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("string {s:?}"),
        toml::Value::Integer(n) => format!("integer `{n}`"),
        toml::Value::Float(x) => format!("floating point `{x}`"),
        toml::Value::Boolean(b) => format!("boolean `{b}`"),
        toml::Value::Datetime(d) => format!("datetime {d}"),
        toml::Value::Array(_) => "array".to_owned(),
        toml::Value::Table(_) => "table".to_owned(),
    }
}

pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(host)
            if !host.is_empty() && !host.starts_with('/') && !url.contains(char::is_whitespace) =>
        {
            Ok(())
        }
        _ => Err(format!("{url:?} is not an http:// or https:// URL")),
    }
}

pub(crate) fn check_env_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!("{name:?} is not an environment variable name"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_documented_once_with_a_sentence() {
        for (i, k) in KEYS.iter().enumerate() {
            assert!(
                k.doc.len() > 10 && k.doc.ends_with('.'),
                "{}: its doc must be a sentence: {:?}",
                k.name,
                k.doc
            );
            assert!(
                KEYS[..i].iter().all(|o| o.name != k.name),
                "{} is declared twice",
                k.name
            );
            if k.is_scalar() && k.default.is_none() {
                assert!(
                    !k.unset.is_empty(),
                    "{}: say what its absence means",
                    k.name
                );
            }
        }
    }

    #[test]
    fn defaults_pass_their_own_checks() {
        for k in KEYS {
            if let Some(d) = k.default {
                assert_eq!(k.check(&d.scalar()), Ok(()), "{}", k.name);
            }
        }
    }

    #[test]
    fn orders_put_the_tightest_first() {
        let k = key("sandbox.mode").unwrap();
        assert!(k.is_tightest(&Scalar::Choice("required")));
        assert!(k.looser(&Scalar::Choice("off"), &Scalar::Choice("auto")));
        let k = key("permissions.mode").unwrap();
        assert!(k.is_loosest(&Scalar::Choice("yolo")));
        let k = key("shell.unlisted").unwrap();
        assert!(k.looser(&Scalar::Choice("ask"), &Scalar::Choice("deny")));
        let k = key("limits.max_tokens").unwrap();
        assert!(k.looser(&Scalar::Count(0), &Scalar::Count(5)));
    }
}
