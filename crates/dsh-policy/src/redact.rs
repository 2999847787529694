//! The redaction disposition (gate 5, SPEC P6): secrets in a tool's output are replaced with a
//! marker naming their kind — `[redacted: OPENAI_API_KEY]`, `[redacted: GitHub token]` — before
//! the model, the journal or the spill store sees the result. It rewrites the content, every
//! string of the structured value (object keys too) and the reason; it never changes `ok` or
//! who decided the call. If it panics, the pipeline withholds the whole result (fail closed).
//!
//! What counts as a secret:
//!
//! * **known values** — the credentials dsh was given (the model's API key, the providers'
//!   key variables, the variables an MCP server's headers name), matched exactly and named by
//!   their variable. Values shorter than [`Redact::MIN_KNOWN_CHARS`] characters (after
//!   trimming) are ignored: a key such as `x` or `test` would otherwise shred every output;
//! * **token shapes** — [`SHAPES`], each with its kind: private-key blocks, cloud and service
//!   keys with a fixed prefix, bearer and basic credentials in headers, JSON web tokens,
//!   passwords in URLs. Every shape needs a prefix or a context no ordinary text has, so a git
//!   SHA, a UUID or a base64 blob without a prefix passes untouched.
//!
//! One pass: the known values and the shapes are compiled into one multi-pattern regex
//! (leftmost-first, known values first, so a known key that also has a shape is named by its
//! variable). An output with nothing to redact is scanned once and not copied.
//!
//! Not covered: a secret re-encoded (base64, URL-escaped, split across lines) or a known value
//! quoted only in part. A tool that cuts its output before gate 5 can split a secret so that
//! neither half matches; `run_shell` therefore redacts the whole output through the session's
//! spill store ([`dsh_core::SpillStore::scrub`]) before it cuts and spills.

use std::sync::Arc;

use dsh_core::{Action, Candidate, Disposition, Scrub, ToolCall, async_trait};
use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};
use serde_json::Value;

/// A token shape: what a match is called, its pattern, and which part of it is the secret.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Shown in the marker: `[redacted: KIND]`.
    pub kind: &'static str,
    pub pattern: &'static str,
    /// Only the pattern's first group is the secret (the header name or the URL around it
    /// stays); otherwise the whole match.
    pub group: bool,
    /// A further test of the secret, for shapes whose prefix alone is too common. A match it
    /// rejects is searched again from its second character, so it should only reject short
    /// matches.
    pub check: Option<fn(&str) -> bool>,
}

const fn whole(kind: &'static str, pattern: &'static str) -> Shape {
    Shape {
        kind,
        pattern,
        group: false,
        check: None,
    }
}

const fn group(kind: &'static str, pattern: &'static str) -> Shape {
    Shape {
        kind,
        pattern,
        group: true,
        check: None,
    }
}

/// At least 20 characters after `sk-` (the pattern cannot count them and also require a digit).
fn long_enough(secret: &str) -> bool {
    secret.len() >= 23
}

/// The token shapes, in priority order (at one position the first that matches wins). Word
/// boundaries are ASCII (`(?-u:\b)`), which keeps the whole set on the fast DFA engines.
pub const SHAPES: &[Shape] = &[
    // `-----BEGIN … PRIVATE KEY-----` to its END line, or to the end of the text when the END
    // was cut off (PKCS#1/#8, OpenSSH, EC, encrypted, PGP's `PRIVATE KEY BLOCK`).
    whole(
        "private key block",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
    ),
    whole(
        "AWS access key id",
        r"(?-u:\b)(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)",
    ),
    // `aws_secret_access_key = …` (credentials files, environments) and the CLI's JSON
    // (`"SecretAccessKey": "…"`, `"SessionToken": "…"`). Case variants are spelled out:
    // `(?i)` would multiply the literal prefixes the search looks for first.
    group(
        "AWS secret access key",
        r"(?:(?:aws_?secret|AWS_?SECRET|Aws_?Secret|aws_?Secret)(?:_?access|_?ACCESS|_?Access)?(?:_?key|_?KEY|_?Key)|SecretAccessKey)[\x22']?[ \t]*[:=][ \t]*[\x22']?([A-Za-z0-9/+=]{16}[A-Za-z0-9/+=]*)",
    ),
    group(
        "AWS session token",
        r"(?:aws_?session_?token|AWS_?SESSION_?TOKEN|SessionToken)[\x22']?[ \t]*[:=][ \t]*[\x22']?([A-Za-z0-9/+=]{16}[A-Za-z0-9/+=]*)",
    ),
    whole(
        "GitHub token",
        r"(?-u:\b)gh[pousr]_[A-Za-z0-9]{36}[A-Za-z0-9]*",
    ),
    whole(
        "GitHub token",
        r"(?-u:\b)github_pat_[A-Za-z0-9_]{22}[A-Za-z0-9_]*",
    ),
    whole(
        "Anthropic API key",
        r"(?-u:\b)sk-ant-[A-Za-z0-9_\-]{20}[A-Za-z0-9_\-]*",
    ),
    // A digit among its first 40 characters (a random key has one; a kebab-case name after
    // `sk-` does not), and at least 20 characters, checked after the match: a rejected match
    // is short, so a text cannot make the search go back over long stretches.
    Shape {
        check: Some(long_enough),
        ..whole(
            "OpenAI-style API key",
            r"(?-u:\b)sk-(?:proj-|svcacct-|admin-)?[A-Za-z_\-]{0,40}[0-9][A-Za-z0-9_\-]*",
        )
    },
    whole(
        "Stripe key",
        r"(?-u:\b)(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16}[A-Za-z0-9]*",
    ),
    whole(
        "Stripe webhook secret",
        r"(?-u:\b)whsec_[A-Za-z0-9]{24}[A-Za-z0-9]*",
    ),
    whole(
        "Slack token",
        r"(?-u:\b)xox[abprs]-[A-Za-z0-9\-]{10}[A-Za-z0-9\-]*",
    ),
    whole(
        "Slack webhook URL",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]{20}[A-Za-z0-9_/]*",
    ),
    whole("Google API key", r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}"),
    whole(
        "JSON web token",
        r"(?-u:\b)eyJ[A-Za-z0-9_\-]{8}[A-Za-z0-9_\-]*\.ey[A-Za-z0-9_\-]{8}[A-Za-z0-9_\-]*\.[A-Za-z0-9_\-]*",
    ),
    // `Authorization: Bearer …` and a bare `Bearer …`; the header and the scheme stay.
    group(
        "bearer token",
        r"(?-u:\b)(?:[Bb]earer|BEARER)[ \t]+([A-Za-z0-9\-._~+/]{16}[A-Za-z0-9\-._~+/]*=*)",
    ),
    group(
        "basic auth credentials",
        r"(?:[Aa]uthorization|AUTHORIZATION)[\x22']?[ \t]*[:=][ \t]*[\x22']?(?:[Bb]asic|BASIC)[ \t]+([A-Za-z0-9+/]{8}[A-Za-z0-9+/]*=*)",
    ),
    group(
        "authorization header",
        r"(?:[Aa]uthorization|AUTHORIZATION)[\x22']?[ \t]*[:=][ \t]*[\x22']?(?:(?:[Tt]oken|[Bb]ot)[ \t]+)?([A-Za-z0-9\-._~+/]{16}[A-Za-z0-9\-._~+/]*=*)",
    ),
    group(
        "API key header",
        r"(?:[Xx]-[Aa]pi-[Kk]ey|X-API-Key|X-API-KEY|[Aa]pi-[Kk]ey|API-Key|API-KEY|[Xx]-[Gg]oog-[Aa]pi-[Kk]ey|[Xx]-[Aa]uth-[Tt]oken|X-AUTH-TOKEN)[\x22']?[ \t]*:[ \t]*[\x22']?([A-Za-z0-9\-._~+/]{16}[A-Za-z0-9\-._~+/]*=*)",
    ),
    // `scheme://user:password@host`: the password only.
    group("password in URL", r"://[^\s:/@\x22'<>]+:([^\s/@\x22'<>]+)@"),
];

/// What one pattern of the compiled set stands for.
struct Kind {
    name: String,
    group: bool,
    check: Option<fn(&str) -> bool>,
}

/// The compiled set, or why it could not be compiled (then every output is withheld).
enum Matcher {
    Ready { re: Regex, kinds: Vec<Kind> },
    Broken(String),
}

/// Replaces secrets in every result with markers naming their kind (see the module docs).
/// One per session; cheap to clone (the compiled set is shared).
#[derive(Clone)]
pub struct Redact {
    matcher: Arc<Matcher>,
    known: usize,
}

impl std::fmt::Debug for Redact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values.
        f.debug_struct("Redact")
            .field("known_values", &self.known)
            .field("shapes", &SHAPES.len())
            .finish()
    }
}

impl Redact {
    /// Known values shorter than this (in characters, after trimming) are not redacted.
    pub const MIN_KNOWN_CHARS: usize = 8;

    /// A redactor for `known` credentials — `(variable name, value)`, the name shown in the
    /// marker — and every token shape. Values shorter than [`Redact::MIN_KNOWN_CHARS`] are
    /// ignored; a value given twice is named by its first variable.
    pub fn new(known: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut values: Vec<(String, String)> = Vec::new();
        for (name, value) in known {
            let value = value.trim();
            if value.chars().count() < Self::MIN_KNOWN_CHARS
                || values.iter().any(|(_, v)| v == value)
            {
                continue;
            }
            values.push((name, value.to_owned()));
        }
        let mut patterns: Vec<String> = values.iter().map(|(_, v)| literal(v)).collect();
        let mut kinds: Vec<Kind> = values
            .iter()
            .map(|(name, _)| Kind {
                name: name.clone(),
                group: false,
                check: None,
            })
            .collect();
        patterns.extend(SHAPES.iter().map(|s| s.pattern.to_owned()));
        kinds.extend(SHAPES.iter().map(|s| Kind {
            name: s.kind.to_owned(),
            group: s.group,
            check: s.check,
        }));
        let matcher = match Regex::new_many(&patterns) {
            Ok(re) => Matcher::Ready { re, kinds },
            Err(e) => Matcher::Broken(e.to_string()),
        };
        Redact {
            matcher: Arc::new(matcher),
            known: values.len(),
        }
    }

    /// `text` with every secret replaced by its marker; `None` when there is none (nothing
    /// is copied then).
    pub fn redact_text(&self, text: &str) -> Option<String> {
        let (re, kinds) = match &*self.matcher {
            Matcher::Ready { re, kinds } => (re, kinds),
            Matcher::Broken(why) => {
                return Some(format!(
                    "[withheld: the redactor could not be built: {why}]"
                ));
            }
        };
        let mut out: Option<String> = None;
        let mut copied = 0;
        let mut at = 0;
        while at < text.len() {
            let Some(m) = re.search(&Input::new(text).range(at..)) else {
                break;
            };
            let kind = &kinds[m.pattern().as_usize()];
            let (start, end) = if kind.group {
                secret_group(re, text, m.start(), m.end(), m.pattern())
            } else {
                (m.start(), m.end())
            };
            if start == end || kind.check.is_some_and(|check| !check(&text[start..end])) {
                // Not a secret after all: look again from the next character.
                at = m.start() + text[m.start()..].chars().next().map_or(1, char::len_utf8);
                continue;
            }
            let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
            o.push_str(&text[copied..start]);
            o.push_str("[redacted: ");
            o.push_str(&kind.name);
            o.push(']');
            copied = end;
            at = m.end();
        }
        let mut out = out?;
        out.push_str(&text[copied..]);
        Some(out)
    }

    /// `value` with every string in it (object keys too) redacted; `None` when nothing
    /// changed.
    pub fn redact_value(&self, value: &Value) -> Option<Value> {
        match value {
            Value::String(s) => self.redact_text(s).map(Value::String),
            Value::Array(items) => {
                let changed: Vec<Option<Value>> =
                    items.iter().map(|v| self.redact_value(v)).collect();
                if changed.iter().all(Option::is_none) {
                    return None;
                }
                Some(Value::Array(
                    items
                        .iter()
                        .zip(changed)
                        .map(|(old, new)| new.unwrap_or_else(|| old.clone()))
                        .collect(),
                ))
            }
            Value::Object(map) => {
                let changed: Vec<(Option<String>, Option<Value>)> = map
                    .iter()
                    .map(|(k, v)| (self.redact_text(k), self.redact_value(v)))
                    .collect();
                if changed.iter().all(|(k, v)| k.is_none() && v.is_none()) {
                    return None;
                }
                Some(Value::Object(
                    map.iter()
                        .zip(changed)
                        .map(|((k, v), (nk, nv))| {
                            (
                                nk.unwrap_or_else(|| k.clone()),
                                nv.unwrap_or_else(|| v.clone()),
                            )
                        })
                        .collect(),
                ))
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => None,
        }
    }

    /// This redactor as a spill store's [`Scrub`], so that nothing a session saves under
    /// `DSH_HOME/spill` holds a secret either.
    pub fn scrubber(&self) -> Scrub {
        let r = self.clone();
        Arc::new(move |text: &str| r.redact_text(text))
    }
}

/// The secret part of a match of a shape with a group: its first group (the header name or
/// the URL around it is kept).
fn secret_group(
    re: &Regex,
    text: &str,
    start: usize,
    end: usize,
    pattern: regex_automata::PatternID,
) -> (usize, usize) {
    let mut caps = re.create_captures();
    re.search_captures(
        &Input::new(text)
            .range(start..end)
            .anchored(Anchored::Pattern(pattern)),
        &mut caps,
    );
    // The whole match when the group cannot be found (it always can): redacting too much is
    // the safe side.
    caps.get_group(1)
        .map_or((start, end), |span| (span.start, span.end))
}

/// `value` as a pattern matching exactly it: ASCII letters and digits as they are, every
/// other character as `\x{…}`.
fn literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 2);
    for c in value.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else {
            out.push_str(&format!("\\x{{{:X}}}", u32::from(c)));
        }
    }
    out
}

#[async_trait]
impl Disposition for Redact {
    fn name(&self) -> &str {
        "redact"
    }

    async fn dispose(&self, _call: &ToolCall, candidate: &Candidate) -> Action {
        let content = self.redact_text(candidate.content());
        let value = candidate.value().and_then(|v| self.redact_value(v));
        let reason = self.redact_text(&candidate.decided_by().reason);
        if content.is_none() && value.is_none() && reason.is_none() {
            return Action::Accept;
        }
        Action::Redact {
            content: content.unwrap_or_else(|| candidate.content().to_owned()),
            value: value.or_else(|| candidate.value().cloned()),
            reason: reason.unwrap_or_else(|| candidate.decided_by().reason.clone()),
        }
    }
}

#[cfg(test)]
mod tests;
