//! The names MCP tools get in dsh: `mcp__SERVER__TOOL`, within the registry's
//! `[A-Za-z0-9_-]{1,64}`.

/// What every MCP tool's name starts with.
pub const PREFIX: &str = "mcp__";

/// The longest tool name a model provider accepts.
const MAX_NAME: usize = 64;

/// The dsh name of `server`'s tool `tool`: characters outside `[A-Za-z0-9_-]` become `_`
/// (an MCP name may hold `.` or `/`). An empty or too long result is an error saying why,
/// for `/mcp`.
pub fn tool_name(server: &str, tool: &str) -> Result<String, String> {
    if tool.is_empty() {
        return Err("the server offers a tool without a name".to_owned());
    }
    let plain: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!("{PREFIX}{server}__{plain}");
    if name.len() > MAX_NAME {
        return Err(format!(
            "`{name}` is longer than the {MAX_NAME} characters a tool name may have"
        ));
    }
    Ok(name)
}

/// The server a dsh tool name belongs to, if it is an MCP tool's.
pub fn server_of(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(PREFIX)?;
    rest.split_once("__").map(|(server, _)| server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_plain() {
        assert_eq!(
            tool_name("git", "git_status").unwrap(),
            "mcp__git__git_status"
        );
        assert_eq!(
            tool_name("fs", "read.file/x").unwrap(),
            "mcp__fs__read_file_x"
        );
        assert!(tool_name("s", "").is_err());
        assert!(tool_name("s", &"x".repeat(60)).unwrap_err().contains("64"));
        assert_eq!(server_of("mcp__git__git_status"), Some("git"));
        assert_eq!(server_of("read_file"), None);
    }
}
