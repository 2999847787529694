//! A permission rule as written in a file (`tool` or `tool(specifier)`): the one grammar of
//! the rule text ([`Rule::parse`]).

use std::fmt;

use serde::Serialize;

use crate::origin::Origin;

/// A permission rule: `ToolName` (every call of the tool) or `ToolName(specifier)`.
/// What the specifier means is the policy's business (a glob for paths, a command
/// pattern for `run_shell`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// `[A-Za-z0-9_-]+`.
    pub tool: String,
    /// The text between the outer parentheses, if any (never empty).
    pub specifier: Option<String>,
    /// Where the rule came from.
    pub origin: Origin,
}

impl Rule {
    /// Parses `ToolName` or `ToolName(specifier)`. The error completes the sentence
    /// `"…" is not a rule: …`.
    pub fn parse(text: &str, origin: Origin) -> Result<Rule, String> {
        let (tool, specifier) = parse_rule(text)?;
        Ok(Rule {
            tool: tool.to_string(),
            specifier: specifier.map(str::to_string),
            origin,
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.specifier {
            Some(s) => write!(f, "{}({s})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

fn parse_rule(text: &str) -> Result<(&str, Option<&str>), String> {
    let (name, rest) = match text.find('(') {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    if name.is_empty() {
        return Err("missing tool name before \"(\"".to_string());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(if bad == ')' {
            "unexpected \")\" without \"(\"".to_string()
        } else {
            format!("tool name {name:?} may only contain letters, digits, '_' and '-'")
        });
    }
    let Some(rest) = rest else {
        return Ok((name, None));
    };
    let mut depth = 1usize;
    let mut close = None;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(close) = close else {
        return Err("missing \")\"".to_string());
    };
    let after = &rest[close + 1..];
    if !after.is_empty() {
        return Err(format!("unexpected text {after:?} after the closing \")\""));
    }
    let spec = &rest[..close];
    if spec.trim().is_empty() {
        return Err(format!(
            "empty specifier (write {name:?} alone to match every call)"
        ));
    }
    Ok((name, Some(spec)))
}
