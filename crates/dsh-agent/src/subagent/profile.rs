//! Sub-agent profiles (SPEC A9): a profile *is* its permission — the tools it lists are all
//! its model is offered and all its calls may dispatch. Four are built in; users add more
//! under `[agents.NAME]`, checked against the session's tools when it is assembled.

use std::collections::BTreeSet;

use dsh_core::{Parallel, ToolSet, ToolSpec};

/// The name of the tool that starts sub-agents; never in a profile.
pub const CALL_SUB_AGENT: &str = "call_sub_agent";

/// What a child that calls `call_sub_agent` is told (the call is refused at the registry,
/// before any policy).
pub const NO_NESTING: &str = "sub-agents cannot start sub-agents: `call_sub_agent` is only for \
the agent that started you. Do this part of the task with your own tools, or say in your answer \
what is left for it to do";

/// The steps a sub-agent may take when its profile does not say (`[agents.NAME] max_steps`).
pub const DEFAULT_MAX_STEPS: u32 = 40;

/// A sub-agent profile as configured: plain data, read from `[agents.NAME]` by `settings.rs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileSpec {
    pub name: String,
    pub description: Option<String>,
    /// Each tool name with where it is written (`file:line: agents.NAME.tools[i]`). Required:
    /// `None` (the key left out) is an error, not "every tool".
    pub tools: Option<Vec<(String, String)>>,
    pub system: Option<String>,
    /// Another model of the parent's provider.
    pub model: Option<String>,
    pub max_steps: Option<u32>,
    /// Where the profile is defined (`file:line: agents.NAME`).
    pub at: String,
}

/// Configuration sub-agents cannot run with: a profile naming a tool the session does not
/// have or `call_sub_agent`, or a rule for `call_sub_agent` with a specifier.
#[derive(Debug, thiserror::Error)]
#[error("{at}: {message}")]
pub struct SubAgentConfigError {
    pub at: String,
    pub message: String,
}

/// A profile ready to run: its tool set resolved.
#[derive(Clone, Debug)]
pub struct Profile {
    pub name: String,
    pub description: String,
    /// Its tools by name; `None`: every tool of the session but `call_sub_agent` (including
    /// tools registered later, such as MCP servers').
    pub tools: Option<Vec<String>>,
    /// Its own system prompt (the workspace facts are added when a child starts).
    pub system: String,
    pub model: Option<String>,
    pub max_steps: u32,
}

impl Profile {
    /// What the child's model is offered and the only tools its calls may dispatch:
    /// `call_sub_agent` is withheld with the reason a child is told.
    pub fn tool_set(&self) -> ToolSet {
        self.tool_set_adding(&[])
    }

    /// [`Profile::tool_set`] with `extra` tools beside the profile's own (Code Mode's
    /// `run_code`, which every agent has in the `code` and `both` tools modes).
    pub fn tool_set_adding(&self, extra: &[&str]) -> ToolSet {
        let set = match &self.tools {
            Some(names) => ToolSet::only(
                names
                    .iter()
                    .cloned()
                    .chain(extra.iter().map(|s| (*s).to_owned())),
            ),
            None => ToolSet::all(),
        };
        set.withholding(CALL_SUB_AGENT, NO_NESTING)
    }

    /// Whether the profile names `tool` among its tools.
    pub fn names(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_some_and(|t| t.iter().any(|n| n == tool))
    }

    /// Whether children of this profile may run beside other calls: only when every tool
    /// it can use declares itself read-only and always parallel-safe — read from the
    /// registry's declarations, never from the profile's name. A profile of every tool, or
    /// one naming a tool the session no longer has, is exclusive.
    pub fn parallel_safe<S: std::ops::Deref<Target = ToolSpec>>(
        &self,
        spec: impl Fn(&str) -> Option<S>,
    ) -> bool {
        let Some(names) = &self.tools else {
            return false;
        };
        names
            .iter()
            .all(|name| spec(name).is_some_and(|s| s.read_only && s.parallel == Parallel::Always))
    }

    /// Its tools as a person or a model reads them.
    pub fn tools_text(&self) -> String {
        match &self.tools {
            Some(names) => names.join(", "),
            None => format!("every tool of the session but {CALL_SUB_AGENT}"),
        }
    }

    /// `- name: description (tools: …)`, for `call_sub_agent`'s own description.
    fn listing(&self) -> String {
        format!(
            "- {}: {} (tools: {})",
            self.name,
            self.description,
            self.tools_text()
        )
    }
}

/// The session's profiles: the built-in four, then the configured ones by name.
#[derive(Clone, Debug, Default)]
pub struct Profiles {
    list: Vec<Profile>,
}

/// Whether a profile's tool name is an MCP server's (`mcp__SERVER__TOOL`, or
/// `mcp__SERVER__*` for all of them): `None` when it is not, `Err` when it is malformed.
fn mcp_name(name: &str) -> Option<Result<(), String>> {
    let rest = name.strip_prefix("mcp__")?;
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    let ok = match rest.split_once("__") {
        Some((server, tool)) => {
            plain(server) && !server.contains("__") && (tool == "*" || plain(tool))
        }
        None => false,
    };
    Some(if ok {
        Ok(())
    } else {
        Err(format!(
            "{} is not an MCP tool name: write mcp__SERVER__TOOL, or mcp__SERVER__* for every tool of one server",
            dsh_core::quote_capped(name)
        ))
    })
}

fn built_in(name: &str, description: &str, tools: Option<&[&str]>, system: &str) -> Profile {
    Profile {
        name: name.to_owned(),
        description: description.to_owned(),
        tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
        system: system.to_owned(),
        model: None,
        max_steps: DEFAULT_MAX_STEPS,
    }
}

/// The built-in profiles, as in the seed; each file-reading profile also has `read_output`,
/// so a long result the pipeline saved aside can be paged.
fn built_ins() -> Vec<Profile> {
    const SEARCH: &[&str] = &["read_file", "list_dir", "grep", "find_files", "read_output"];
    const CODE: &[&str] = &[
        "read_file",
        "list_dir",
        "grep",
        "find_files",
        "read_output",
        "write_file",
        "edit_file",
    ];
    const SHELL: &[&str] = &["run_shell", "read_file", "list_dir", "read_output"];
    vec![
        built_in(
            "search",
            "read-only search and analysis; changes nothing",
            Some(SEARCH),
            "You are a search sub-agent. You find and analyse; you cannot change files. \
             End with one paragraph that answers the task, naming the files and lines you found.",
        ),
        built_in(
            "code",
            "reads, writes and edits files",
            Some(CODE),
            "You are a coding sub-agent. You read, write and change code. Read a file before \
             you change it. End with a short account of what you changed.",
        ),
        built_in(
            "shell",
            "runs commands and reports what they print",
            Some(SHELL),
            "You are a command sub-agent. You run commands and report their results. End \
             with a short conclusion.",
        ),
        built_in(
            "general",
            "every tool of the session (MCP and plugin tools included) but call_sub_agent",
            None,
            "You are a general sub-agent. You may use every tool you are offered to do the \
             task. End with a short conclusion.",
        ),
    ]
}

impl Profiles {
    /// The built-in profiles and `configured`, whose tool names must all be in `tools` (the
    /// session's registered tools) and never `call_sub_agent`.
    pub fn resolve(
        configured: &[ProfileSpec],
        tools: &BTreeSet<String>,
    ) -> Result<Profiles, SubAgentConfigError> {
        let mut list = built_ins();
        for spec in configured {
            if list.iter().any(|p| p.name == spec.name) {
                return Err(SubAgentConfigError {
                    at: spec.at.clone(),
                    message: format!(
                        "`{}` is a built-in agent profile and cannot be redefined",
                        spec.name
                    ),
                });
            }
            let names = match &spec.tools {
                None => {
                    return Err(SubAgentConfigError {
                        at: spec.at.clone(),
                        message: format!(
                            "the `{}` profile does not list its tools (`tools = [\"read_file\", \
                             …]`): a profile is its permission, so it has none by default; the \
                             built-in `general` profile has every tool",
                            spec.name
                        ),
                    });
                }
                Some(listed) => {
                    let mut names = Vec::with_capacity(listed.len());
                    for (name, at) in listed {
                        if name == CALL_SUB_AGENT {
                            return Err(SubAgentConfigError {
                                at: at.clone(),
                                message: format!(
                                    "a profile cannot list `{CALL_SUB_AGENT}`: sub-agents cannot \
                                     start sub-agents"
                                ),
                            });
                        }
                        // An MCP server's tools are registered once it is up, so its names
                        // (or all of them, `mcp__SERVER__*`) are taken as written.
                        let mcp = mcp_name(name);
                        if let Some(Err(why)) = &mcp {
                            return Err(SubAgentConfigError {
                                at: at.clone(),
                                message: why.clone(),
                            });
                        }
                        if mcp.is_none() && !tools.contains(name) {
                            let known: Vec<&str> = tools
                                .iter()
                                .map(String::as_str)
                                .filter(|t| *t != CALL_SUB_AGENT)
                                .collect();
                            return Err(SubAgentConfigError {
                                at: at.clone(),
                                message: format!(
                                    "there is no tool named {} in this session; the tools are: {}",
                                    dsh_core::quote_capped(name),
                                    known.join(", ")
                                ),
                            });
                        }
                        if !names.contains(name) {
                            names.push(name.clone());
                        }
                    }
                    Some(names)
                }
            };
            let description = spec
                .description
                .clone()
                .unwrap_or_else(|| format!("the `{}` profile", spec.name));
            let system = spec.system.clone().unwrap_or_else(|| {
                format!(
                    "You are the `{}` sub-agent: {description}. Use the tools you are offered to \
                     do the task. End with a short conclusion.",
                    spec.name
                )
            });
            list.push(Profile {
                name: spec.name.clone(),
                description,
                tools: names,
                system,
                model: spec.model.clone(),
                max_steps: spec.max_steps.unwrap_or(DEFAULT_MAX_STEPS),
            });
        }
        Ok(Profiles { list })
    }

    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.list.iter().find(|p| p.name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Profile> {
        self.list.iter()
    }

    /// The profile names, built-in first.
    pub fn names(&self) -> Vec<&str> {
        self.list.iter().map(|p| p.name.as_str()).collect()
    }

    /// Every profile as one line each, for `call_sub_agent`'s description.
    pub(crate) fn listing(&self) -> String {
        self.list
            .iter()
            .map(Profile::listing)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Refuses a `call_sub_agent(X)` rule: the tool takes no path, and a specifier would be read
/// as a path pattern (spread over other tools' declared reads) instead of limiting
/// sub-agents. The bare rule names the tool (`deny = ["call_sub_agent"]` turns them off).
pub fn check_rules(rules: &[dsh_core::Rule]) -> Result<(), SubAgentConfigError> {
    match rules
        .iter()
        .find(|r| r.tool == CALL_SUB_AGENT && r.specifier.is_some())
    {
        None => Ok(()),
        Some(r) => Err(SubAgentConfigError {
            at: r.origin.location(),
            message: format!(
                "`{CALL_SUB_AGENT}` takes no path, so a rule names it alone (`deny = \
                 [\"{CALL_SUB_AGENT}\"]` turns sub-agents off); what a sub-agent may do is its \
                 profile's tools, each judged by the rules for that tool"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(tools: &[&str]) -> ProfileSpec {
        ProfileSpec {
            name: "git".into(),
            description: None,
            tools: Some(
                tools
                    .iter()
                    .map(|t| ((*t).to_owned(), "here".to_owned()))
                    .collect(),
            ),
            system: None,
            model: None,
            max_steps: None,
            at: "here".into(),
        }
    }

    #[test]
    fn a_profile_may_name_mcp_tools_before_their_server_is_up() {
        let known: BTreeSet<String> = ["read_file".to_owned()].into();
        let p = Profiles::resolve(
            &[spec(&["read_file", "mcp__git__*", "mcp__time__now"])],
            &known,
        )
        .unwrap();
        let set = dsh_core::ToolSet::only(p.get("git").unwrap().tools.clone().unwrap());
        assert!(set.contains("mcp__git__git_status"));
        assert!(set.contains("mcp__time__now"));
        assert!(!set.contains("mcp__time__other"));
        assert!(!set.contains("mcp__github__x"));
        assert!(!set.contains("write_file"));
        for bad in [
            "mcp__",
            "mcp__git",
            "mcp__git__",
            "mcp__a__b__*",
            "mcp__g*__x",
        ] {
            let e = Profiles::resolve(&[spec(&[bad])], &known).unwrap_err();
            assert!(
                e.message.contains("not an MCP tool name"),
                "{bad}: {}",
                e.message
            );
        }
    }
}
