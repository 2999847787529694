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
        name: "verbose",
        args: "on|off",
        help: "show the model's reasoning in full (off: one dimmed line)",
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
    Exit,
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
        "verbose" => match arg {
            "on" => Ok(Command::Verbose(true)),
            "off" => Ok(Command::Verbose(false)),
            "" => Err(bad("say on or off")),
            other => Err(bad(&format!("{other:?} is neither on nor off"))),
        },
        _ => Err(bad("not implemented yet")),
    }
}

/// The `/help` text: every command, or one.
pub(crate) fn help(which: Option<&str>) -> Result<Vec<String>, String> {
    let line = |c: &Spec| {
        let usage = if c.args.is_empty() {
            format!("/{}", c.name)
        } else {
            format!("/{} {}", c.name, c.args)
        };
        format!("{usage:<18} {}", c.help)
    };
    match which {
        None => {
            let mut lines: Vec<String> = COMMANDS.iter().map(line).collect();
            lines.push(String::new());
            lines.push(
                "Enter sends; Alt-Enter or a trailing \\ continues on a new line; Ctrl-R searches the history; Tab completes."
                    .to_owned(),
            );
            lines.push(
                "Esc or Ctrl-C interrupts a turn; typing during a turn queues the next prompt."
                    .to_owned(),
            );
            Ok(lines)
        }
        Some(name) => COMMANDS
            .iter()
            .find(|c| c.name == name)
            .map(|c| vec![line(c)])
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
            let line = match c.values.first() {
                Some(v) => format!("/{} {v}", c.name),
                None => format!("/{}", c.name),
            };
            assert!(parse(&line).is_ok(), "{line}");
        }
    }
}
