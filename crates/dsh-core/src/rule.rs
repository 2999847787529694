//! [`Rule`]: one permission rule, the one type from the configuration file to the policy that
//! judges it.
//!
//! The configuration parses each entry of `[permissions] allow/ask/deny` into a `Rule` with
//! the one grammar of the rule text ([`Rule::parse`]), tagged with the list it is on and its
//! [`Origin`]; the session carries it unchanged; the policies take it as it is. What the
//! specifier means is the policy's business (dsh-policy compiles a file tool's specifier
//! into a path pattern and reads a `run_shell` one as command words): that compiled form is
//! the second stage of "configuration in two stages" (STYLE 9) and private to the policy.

use std::fmt;

use serde::Serialize;

use crate::decision::Decision;
use crate::origin::Origin;

/// A permission rule: `ToolName` (every call of the tool) or `ToolName(specifier)`, on the
/// `allow`, `ask` or `deny` list, with where it was written. `mcp__SERVER__*` names every
/// tool of one MCP server ([`Rule::names`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// Which list the rule is on.
    pub decision: Decision,
    /// `[A-Za-z0-9_-]+`, or `mcp__SERVER__*`.
    pub tool: String,
    /// The text between the outer parentheses, if any (never empty when parsed).
    pub specifier: Option<String>,
    /// Where the rule was written: its `Display` explains a decision
    /// (`project /repo/.dsh/config.toml:3`), its [`Origin::location`] points an error at it
    /// (`/repo/.dsh/config.toml:3: permissions.allow[0]`).
    pub origin: Origin,
}

impl Rule {
    /// Parses `ToolName` or `ToolName(specifier)` as a `decision` rule written at `origin`.
    /// The error completes the sentence `"…" is not a rule: …`.
    pub fn parse(decision: Decision, text: &str, origin: Origin) -> Result<Rule, String> {
        let (tool, specifier) = parse_rule(text)?;
        Ok(Rule {
            decision,
            tool: tool.to_string(),
            specifier: specifier.map(str::to_string),
            origin,
        })
    }

    /// Whether the rule is about calls of `tool`: its name as written, or for
    /// `mcp__SERVER__*` every tool whose name starts `mcp__SERVER__`.
    pub fn names(&self, tool: &str) -> bool {
        match self.tool.strip_suffix('*') {
            Some(prefix) => tool.starts_with(prefix),
            None => self.tool == tool,
        }
    }

    /// Whether the rule may only tighten a decision: it comes from an untrusted project, so a
    /// policy drops it where it would loosen one (an untrusted `allow` never gets this far).
    pub fn tighten_only(&self) -> bool {
        self.origin.tighten_only()
    }
}

impl fmt::Display for Rule {
    /// The rule as written: `tool` or `tool(specifier)`.
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
    // `mcp__SERVER__*`: the one place a tool name may hold a wildcard, at its end.
    let plain = match name.strip_suffix('*') {
        Some(prefix) => {
            let server = prefix
                .strip_prefix("mcp__")
                .and_then(|p| p.strip_suffix("__"))
                .filter(|s| !s.is_empty() && !s.contains("__"));
            if server.is_none() {
                return Err(format!(
                    "tool name {name:?}: `*` may only end `mcp__SERVER__*` (every tool of one MCP server)"
                ));
            }
            prefix
        }
        None => name,
    };
    if let Some(bad) = plain
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
    // An MCP server's tool declares no paths, so a path rule about it would never apply: a
    // `deny` that denies nothing. Refused, so nobody relies on one.
    if name.starts_with("mcp__") {
        return Err(format!(
            "an MCP server's tool declares no paths, so a rule about it takes no \"(…)\": write {name:?} alone"
        ));
    }
    Ok((name, Some(spec)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::origin::Layer;

    fn rule(text: &str) -> Result<String, String> {
        Rule::parse(Decision::Allow, text, Origin::builtin())
            .map(|r| format!("{}|{:?}", r.tool, r.specifier))
    }

    #[test]
    fn rule_parses_bare_tool_and_specifier() {
        assert_eq!(rule("read_file").unwrap(), "read_file|None");
        assert_eq!(
            rule("run_shell(git status)").unwrap(),
            "run_shell|Some(\"git status\")"
        );
        assert_eq!(
            rule("run_shell(echo $(date))").unwrap(),
            "run_shell|Some(\"echo $(date)\")"
        );
        assert_eq!(rule("mcp__git__log").unwrap(), "mcp__git__log|None");
        assert_eq!(rule("mcp__git__*").unwrap(), "mcp__git__*|None");
    }

    #[test]
    fn a_wildcard_names_one_servers_tools_and_nothing_else() {
        for bad in [
            "*",
            "mcp__*",
            "mcp____*",
            "read_*",
            "mcp__a__b*",
            "mcp__a__b__*",
            "mcp__a*__*",
            "mcp__git__log(src/**)",
            "mcp__git__*(x)",
        ] {
            assert!(rule(bad).is_err(), "{bad} parsed");
        }
        let r = Rule::parse(Decision::Allow, "mcp__git__*", Origin::builtin()).unwrap();
        assert!(r.names("mcp__git__git_status"));
        assert!(!r.names("mcp__github__x"));
        assert!(!r.names("mcp__git"));
        let exact = Rule::parse(Decision::Allow, "mcp__git__log", Origin::builtin()).unwrap();
        assert!(exact.names("mcp__git__log"));
        assert!(!exact.names("mcp__git__log2"));
    }

    #[test]
    fn rule_rejects_malformed_text_with_reason() {
        assert_eq!(rule("read_file(src/**").unwrap_err(), "missing \")\"");
        assert_eq!(rule("(x)").unwrap_err(), "missing tool name before \"(\"");
        assert!(rule("read file").unwrap_err().contains("may only contain"));
        assert!(rule("").is_err());
        assert!(
            rule("read_file(a)b")
                .unwrap_err()
                .contains("after the closing")
        );
        assert!(rule("read_file()").unwrap_err().contains("empty specifier"));
        assert!(rule("read_file)").unwrap_err().contains("without"));
    }

    #[test]
    fn rule_display_round_trips() {
        let r = Rule::parse(Decision::Ask, "run_shell(git push *)", Origin::builtin()).unwrap();
        assert_eq!(r.to_string(), "run_shell(git push *)");
    }

    #[test]
    fn a_rule_keeps_its_decision_and_origin_and_tightens_only_from_an_untrusted_project() {
        let origin = Origin {
            layer: Layer::UntrustedProject,
            path: Some("/repo/.dsh/config.toml".into()),
            line: Some(3),
            key: Some("permissions.deny[0]".to_owned()),
        };
        let r = Rule::parse(Decision::Deny, "read_file(.env)", origin).unwrap();
        assert_eq!(r.decision, Decision::Deny);
        assert!(r.tighten_only());
        assert_eq!(
            r.origin.to_string(),
            "untrusted project /repo/.dsh/config.toml:3"
        );
        assert_eq!(
            r.origin.location(),
            "/repo/.dsh/config.toml:3: permissions.deny[0]"
        );
        let user = Rule {
            origin: Origin {
                layer: Layer::User,
                ..r.origin.clone()
            },
            ..r
        };
        assert!(!user.tighten_only());
    }
}
