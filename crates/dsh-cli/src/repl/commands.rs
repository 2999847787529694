//! Slash commands: one table (name, arguments, help, argument values for completion), one
//! parser. An unknown command or a bad argument is a one-line error naming the closest
//! command.

/// One slash command as `/help` shows it.
pub(crate) struct Spec {
    pub name: &'static str,
    /// The arguments as `/help` writes them, e.g. `[N]`.
    pub args: &'static str,
    pub help: &'static str,
    /// Words its first argument may be (for completion); empty: free text or a number.
    pub values: &'static [&'static str],
}

/// Every command, in `/help`'s order.
pub(crate) const COMMANDS: &[Spec] = &[
    Spec {
        name: "help",
        args: "[COMMAND]",
        help: "list the commands, or say what one does",
        values: &[],
    },
    Spec {
        name: "clear",
        args: "",
        help: "empty the conversation (the system prompt stays); journaled as history_cleared",
        values: &[],
    },
    Spec {
        name: "tools",
        args: "",
        help: "the tools the model is offered: read-only and parallel-safe flags, where each comes from",
        values: &[],
    },
    Spec {
        name: "log",
        args: "[N]",
        help: "the last N records of this session's journal (default 20), readable",
        values: &[],
    },
    Spec {
        name: "stats",
        args: "",
        help: "tokens in and out, cost where known, time, model and tool calls by outcome, per agent",
        values: &[],
    },
    Spec {
        name: "expand",
        args: "",
        help: "the last tool call's result whole (also Ctrl-O at the prompt)",
        values: &[],
    },
    Spec {
        name: "init",
        args: "",
        help: "ask the model to survey the project and write AGENTS.md (build, test, layout, conventions); the write asks you as any would",
        values: &[],
    },
    Spec {
        name: "permissions",
        args: "",
        help: "the permission mode and every rule in force (deny, ask, allow), with the file and line each came from; the protected paths",
        values: &[],
    },
    Spec {
        name: "cost",
        args: "",
        help: "what this session spent: tokens in and out, the cached share, cost where known, per agent",
        values: &[],
    },
    Spec {
        name: "undo",
        args: "[N]",
        help: "put back what the last N turns (default 1) changed with the file tools; a file changed since is left alone; commands' changes are not covered",
        values: &[],
    },
    Spec {
        name: "compact",
        args: "[FOCUS]",
        help: "summarize the older turns now (all but the last two), keeping FOCUS in particular; journaled as context_compacted",
        values: &[],
    },
    Spec {
        name: "turns",
        args: "[N]",
        help: "send only the last N whole turns from the next request on (0: all of them; no argument: the current setting)",
        values: &[],
    },
    Spec {
        name: "memory",
        args: "[add TEXT|clear]",
        help: "show the project memory file (.dsh/memory.md), add a line to it or empty it; the system prompt follows at once",
        values: &["add", "clear"],
    },
    Spec {
        name: "model",
        args: "[PROVIDER/MODEL]",
        help: "switch the model for the next request (no argument: pick from a list)",
        values: &[],
    },
    Spec {
        name: "mode",
        args: "[read-only|ask|auto]",
        help: "switch the permission mode (no argument: the next one, as Shift-Tab does); recorded in the journal",
        values: &["read-only", "ask", "auto"],
    },
    Spec {
        name: "verify",
        args: "[on|off]",
        help: "after a reply that changed files, run [verify] command and hand a failure back to the model (no argument: the current setting)",
        values: &["on", "off"],
    },
    Spec {
        name: "reload",
        args: "",
        help: "read the configuration again: the session goes on in a new journal linked to this one",
        values: &[],
    },
    Spec {
        name: "save",
        args: "[NAME]",
        help: "save this point of the conversation as NAME (a session_named record): /load NAME or dsh --resume NAME comes back to it",
        values: &[],
    },
    Spec {
        name: "load",
        args: "NAME",
        help: "go back to the point saved as NAME, in a new journal (this session ends; a branch when more followed the save)",
        values: &[],
    },
    Spec {
        name: "sessions",
        args: "",
        help: "the recent sessions of this workspace",
        values: &[],
    },
    Spec {
        name: "mcp",
        args: "",
        help: "the configured MCP servers",
        values: &[],
    },
    Spec {
        name: "plugins",
        args: "",
        help: "the configured plugins",
        values: &[],
    },
    Spec {
        name: "skills",
        args: "",
        help: "the skills the model may load",
        values: &[],
    },
    Spec {
        name: "verbose",
        args: "[on|off]",
        help: "show the model's reasoning in full (off: one dimmed line; no argument: the current setting)",
        values: &["on", "off"],
    },
    Spec {
        name: "exit",
        args: "",
        help: "leave (also Ctrl-D, or Ctrl-C twice on an empty prompt)",
        values: &[],
    },
];

/// A parsed command.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command {
    Help(Option<String>),
    Clear,
    Tools,
    Log(usize),
    Verbose(bool),
    Stats,
    Expand,
    Init,
    Permissions,
    Cost,
    /// How many turns that changed files to undo.
    Undo(usize),
    /// What the summary should keep in particular.
    Compact(Option<String>),
    /// `None`: every turn.
    Turns(Option<usize>),
    Memory(MemoryAction),
    /// `None`: pick from a list.
    Model(Option<String>),
    Verify(bool),
    /// `None`: the next mode (Shift-Tab).
    Mode(Option<dsh_config::PermissionMode>),
    Reload,
    Save(Option<String>),
    Load(String),
    Sessions,
    Mcp,
    Plugins,
    Skills,
    Exit,
    /// A setting's command without its argument: the current value.
    Show(Setting),
}

/// A setting a command without argument shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Setting {
    Turns,
    Verbose,
    Verify,
}

/// `/memory`'s argument.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum MemoryAction {
    Show,
    Add(String),
    Clear,
}

/// How many records `/log` shows without an argument.
const LOG_DEFAULT: usize = 20;

/// Parses a line starting with `/`.
pub(crate) fn parse(line: &str) -> Result<Command, String> {
    let line = line.trim();
    let body = line.strip_prefix('/').unwrap_or(line);
    let (name, arg) = match body.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (body, ""),
    };
    let Some(spec) = COMMANDS.iter().find(|c| c.name == name) else {
        return Err(match closest(name) {
            Some(c) => format!("unknown command /{name}; did you mean /{c}? (/help lists them)"),
            None => format!("unknown command /{name} (/help lists them)"),
        });
    };
    let bad = |why: &str| {
        format!(
            "/{}: {why}; usage: /{}{}{}",
            spec.name,
            spec.name,
            if spec.args.is_empty() { "" } else { " " },
            spec.args
        )
    };
    let no_arg = |c: Command| {
        if arg.is_empty() {
            Ok(c)
        } else {
            Err(bad("takes no argument"))
        }
    };
    match spec.name {
        "help" => Ok(Command::Help(
            (!arg.is_empty()).then(|| arg.trim_start_matches('/').to_owned()),
        )),
        "clear" => no_arg(Command::Clear),
        "tools" => no_arg(Command::Tools),
        "exit" => no_arg(Command::Exit),
        "log" if arg.is_empty() => Ok(Command::Log(LOG_DEFAULT)),
        "log" => arg
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .map(Command::Log)
            .ok_or_else(|| bad(&format!("{arg:?} is not a positive number"))),
        "verbose" | "verify" => {
            let on = match arg {
                "on" => true,
                "off" => false,
                "" if spec.name == "verbose" => return Ok(Command::Show(Setting::Verbose)),
                "" => return Ok(Command::Show(Setting::Verify)),
                other => return Err(bad(&format!("{other:?} is neither on nor off"))),
            };
            Ok(if spec.name == "verbose" {
                Command::Verbose(on)
            } else {
                Command::Verify(on)
            })
        }
        "mode" if arg.is_empty() => Ok(Command::Mode(None)),
        "mode" => match arg.parse::<dsh_config::PermissionMode>() {
            Ok(dsh_config::PermissionMode::Yolo) => Err(bad(
                "yolo is chosen only by a flag (--mode yolo, --yolo) or your user configuration",
            )),
            Ok(m) => Ok(Command::Mode(Some(m))),
            Err(_) => Err(bad(&format!("{arg:?} is not a mode"))),
        },
        "stats" => no_arg(Command::Stats),
        "cost" => no_arg(Command::Cost),
        "permissions" => no_arg(Command::Permissions),
        "init" => no_arg(Command::Init),
        "expand" => no_arg(Command::Expand),
        "undo" if arg.is_empty() => Ok(Command::Undo(1)),
        "undo" => arg
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .map(Command::Undo)
            .ok_or_else(|| bad(&format!("{arg:?} is not a positive number"))),
        "compact" => Ok(Command::Compact((!arg.is_empty()).then(|| arg.to_owned()))),
        "reload" => no_arg(Command::Reload),
        "sessions" => no_arg(Command::Sessions),
        "mcp" => no_arg(Command::Mcp),
        "plugins" => no_arg(Command::Plugins),
        "skills" => no_arg(Command::Skills),
        "turns" if arg.is_empty() => Ok(Command::Show(Setting::Turns)),
        "turns" => match arg.parse::<usize>() {
            Ok(0) => Ok(Command::Turns(None)),
            Ok(n) => Ok(Command::Turns(Some(n))),
            Err(_) => Err(bad(&format!("{arg:?} is not a number"))),
        },
        "memory" => {
            let (what, text) = match arg.split_once(char::is_whitespace) {
                Some((w, t)) => (w, t.trim()),
                None => (arg, ""),
            };
            match (what, text.is_empty()) {
                ("", _) => Ok(Command::Memory(MemoryAction::Show)),
                ("clear", true) => Ok(Command::Memory(MemoryAction::Clear)),
                ("add", false) => Ok(Command::Memory(MemoryAction::Add(text.to_owned()))),
                ("add", true) => Err(bad("say what to add")),
                (other, _) => Err(bad(&format!("{other:?} is neither add nor clear"))),
            }
        }
        "model" => Ok(Command::Model((!arg.is_empty()).then(|| arg.to_owned()))),
        "save" => {
            if arg.chars().any(char::is_control) {
                return Err(bad("a name has no control characters"));
            }
            Ok(Command::Save((!arg.is_empty()).then(|| arg.to_owned())))
        }
        "load" if arg.is_empty() => Err(bad("say which name")),
        "load" => Ok(Command::Load(arg.to_owned())),
        _ => Err(bad("unknown")),
    }
}

/// The `/help` text: every command, or one, laid out for `cols` columns (descriptions wrap
/// at word boundaries under their column).
pub(crate) fn help(which: Option<&str>, cols: usize) -> Result<Vec<String>, String> {
    let usage = |c: &Spec| {
        if c.args.is_empty() {
            format!("/{}", c.name)
        } else {
            format!("/{} {}", c.name, c.args)
        }
    };
    // One column for every usage, as wide as the widest (counted in characters).
    let width = COMMANDS
        .iter()
        .map(|c| usage(c).chars().count())
        .max()
        .unwrap_or(0);
    // The description column, as wide as is left (never under 30 columns).
    let room = cols.saturating_sub(width + 2).max(30);
    let line = |c: &Spec| {
        let mut rows: Vec<String> = Vec::new();
        let mut row = String::new();
        for word in c.help.split(' ') {
            if !row.is_empty() && row.chars().count() + 1 + word.chars().count() > room {
                rows.push(std::mem::take(&mut row));
            }
            if !row.is_empty() {
                row.push(' ');
            }
            row.push_str(word);
        }
        rows.push(row);
        rows.iter()
            .enumerate()
            .map(|(i, r)| {
                let usage = if i == 0 { usage(c) } else { String::new() };
                format!("{usage:<width$}  {r}")
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    match which {
        None => {
            let mut lines: Vec<String> = COMMANDS
                .iter()
                .flat_map(|c| line(c).lines().map(str::to_owned).collect::<Vec<_>>())
                .collect();
            lines.push(String::new());
            lines.push(
                "Enter sends; Alt-Enter or a trailing \\ continues on a new line; Ctrl-R searches the history; Tab completes."
                    .to_owned(),
            );
            lines.push(
                "Esc or Ctrl-C interrupts a turn; typing during a turn queues the next prompt."
                    .to_owned(),
            );
            lines.push(
                "!COMMAND runs your own command (typed, so not asked; deny rules and the sandbox hold) and gives its output to the model with your next prompt."
                    .to_owned(),
            );
            Ok(lines)
        }
        Some(name) => COMMANDS
            .iter()
            .find(|c| c.name == name)
            .map(|c| line(c).lines().map(str::to_owned).collect())
            .ok_or_else(|| match closest(name) {
                Some(c) => format!("no command /{name}; did you mean /{c}?"),
                None => format!("no command /{name} (/help lists them)"),
            }),
    }
}

/// The command whose name is nearest to `name`: one it starts, else the smallest edit
/// distance up to 3.
pub(crate) fn closest(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return None;
    }
    if let Some(c) = COMMANDS.iter().find(|c| c.name.starts_with(name)) {
        return Some(c.name);
    }
    COMMANDS
        .iter()
        .map(|c| (distance(name, c.name), c.name))
        .filter(|(d, _)| *d <= 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(row[j + 1])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_their_arguments() {
        assert_eq!(parse("/log"), Ok(Command::Log(LOG_DEFAULT)));
        assert_eq!(parse("/log 5"), Ok(Command::Log(5)));
        assert_eq!(parse("  /verbose on "), Ok(Command::Verbose(true)));
        assert_eq!(parse("/help log"), Ok(Command::Help(Some("log".into()))));
        assert_eq!(parse("/exit"), Ok(Command::Exit));
        assert_eq!(parse("/turns 1"), Ok(Command::Turns(Some(1))));
        assert_eq!(parse("/turns 0"), Ok(Command::Turns(None)));
        assert_eq!(
            parse("/memory add use tabs"),
            Ok(Command::Memory(MemoryAction::Add("use tabs".into())))
        );
        assert_eq!(parse("/memory"), Ok(Command::Memory(MemoryAction::Show)));
        assert_eq!(
            parse("/memory clear"),
            Ok(Command::Memory(MemoryAction::Clear))
        );
        assert_eq!(
            parse("/model anthropic/claude-sonnet-4-5"),
            Ok(Command::Model(Some("anthropic/claude-sonnet-4-5".into())))
        );
        assert_eq!(parse("/save work"), Ok(Command::Save(Some("work".into()))));
        assert_eq!(parse("/load work"), Ok(Command::Load("work".into())));
        assert!(parse("/load").is_err());
        assert!(parse("/memory add").is_err());
        assert!(parse("/verify maybe").is_err());
        assert_eq!(parse("/turns"), Ok(Command::Show(Setting::Turns)));
        assert_eq!(parse("/verbose"), Ok(Command::Show(Setting::Verbose)));
        assert_eq!(parse("/verify"), Ok(Command::Show(Setting::Verify)));
    }

    #[test]
    fn unknown_commands_and_bad_arguments_name_the_closest_command() {
        assert_eq!(
            parse("/exti").unwrap_err(),
            "unknown command /exti; did you mean /exit? (/help lists them)"
        );
        assert_eq!(
            parse("/to").unwrap_err(),
            "unknown command /to; did you mean /tools? (/help lists them)"
        );
        assert!(parse("/log many").unwrap_err().contains("usage: /log [N]"));
        assert!(parse("/turns x").unwrap_err().contains("usage: /turns [N]"));
        assert!(parse("/log 0").is_err());
        assert!(
            parse("/clear now")
                .unwrap_err()
                .contains("takes no argument")
        );
        assert!(
            parse("/zzzzzzzz")
                .unwrap_err()
                .ends_with("(/help lists them)")
        );
    }

    #[test]
    fn every_command_has_help_and_parses() {
        for c in COMMANDS {
            assert!(!c.help.is_empty());
            let line = match (c.values.first(), c.name) {
                (_, "load") => "/load x".to_owned(),
                (_, "turns") => "/turns 2".to_owned(),
                (_, "memory") => "/memory".to_owned(),
                (Some(v), _) => format!("/{} {v}", c.name),
                (None, _) => format!("/{}", c.name),
            };
            assert!(parse(&line).is_ok(), "{line}");
        }
    }

    /// Every description starts in one column, whatever the usage's width.
    #[test]
    fn help_aligns_every_description_in_one_column() {
        let lines = help(None, 100).unwrap();
        let commands: Vec<&String> = lines
            .iter()
            .take_while(|l| !l.is_empty())
            .filter(|l| l.starts_with('/'))
            .collect();
        assert_eq!(commands.len(), COMMANDS.len());
        // Continuation rows start under the description column, and no row is wider than 100.
        assert!(
            lines
                .iter()
                .take_while(|l| !l.is_empty())
                .all(|l| l.chars().count() <= 100),
            "{lines:#?}"
        );
        let column = |l: &str| {
            l.find("  ")
                .map(|i| i + l[i..].len() - l[i..].trim_start().len())
        };
        let first = column(commands[0]);
        assert!(commands.iter().all(|l| column(l) == first), "{commands:#?}");
        insta::assert_snapshot!("help", lines.join("\n"));
    }
}
