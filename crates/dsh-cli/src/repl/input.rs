//! Reading what the person types. On a terminal: reedline — history persisted under
//! `DSH_HOME`, Ctrl-R search, Alt-Enter or a trailing `\` for another line, Tab completion of
//! slash commands, their arguments and workspace paths. Piped: plain lines from stdin.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use reedline::{
    ColumnarMenu, Completer, EditCommand, Emacs, FileBackedHistory, KeyCode, KeyModifiers,
    MenuBuilder, Prompt, PromptEditMode, PromptHistorySearch, PromptHistorySearchStatus, Reedline,
    ReedlineEvent, ReedlineMenu, Signal, Span, Suggestion, ValidationResult, Validator,
    default_emacs_keybindings,
};
use tokio::io::AsyncBufReadExt;

use super::commands::COMMANDS;
use super::paste::{Collapsing, Pastes};

/// What reading gave.
pub(crate) enum Read {
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupt,
    /// Ctrl-D, or the end of piped input.
    Eof,
}

/// The line source.
pub(crate) enum Input {
    /// The line editor, and the long pastes of the line it edits.
    Terminal(Option<Box<Reedline>>, Pastes),
    Piped(tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>),
}

/// How many entries the history file keeps.
const HISTORY_SIZE: usize = 10_000;

const MENU: &str = "completion_menu";

/// What Shift-Tab runs.
const MODE_NEXT: &str = "/mode";

impl Input {
    /// The terminal's line editor, its history in `history`; paths complete under `workspace`;
    /// `color` false (`NO_COLOR`): the prompt, menu and hints carry no colour either.
    pub(crate) fn terminal(history: &Path, workspace: &Path, color: bool) -> Input {
        let mut keys = default_emacs_keybindings();
        keys.add_binding(
            KeyModifiers::NONE,
            KeyCode::Tab,
            ReedlineEvent::UntilFound(vec![
                ReedlineEvent::Menu(MENU.to_owned()),
                ReedlineEvent::MenuNext,
            ]),
        );
        // Shift-Tab: the next permission mode (read-only → ask → auto), as `/mode` does.
        keys.add_binding(
            KeyModifiers::SHIFT,
            KeyCode::BackTab,
            ReedlineEvent::ExecuteHostCommand(MODE_NEXT.to_owned()),
        );
        // Ctrl-O: the last tool result whole.
        keys.add_binding(
            KeyModifiers::CONTROL,
            KeyCode::Char('o'),
            ReedlineEvent::ExecuteHostCommand("/expand".to_owned()),
        );
        keys.add_binding(
            KeyModifiers::ALT,
            KeyCode::Enter,
            ReedlineEvent::Edit(vec![EditCommand::InsertNewline]),
        );
        let menu = ColumnarMenu::default().with_name(MENU);
        let pastes = Pastes::default();
        let mut editor = Reedline::create()
            .with_edit_mode(Box::new(Collapsing::new(Emacs::new(keys), pastes.clone())))
            .with_completer(Box::new(Completions {
                workspace: workspace.to_owned(),
            }))
            .with_menu(ReedlineMenu::EngineCompleter(Box::new(menu)))
            .with_validator(Box::new(TrailingBackslash))
            .use_bracketed_paste(true)
            // Tab on a word with one completion completes it in place; with several, the
            // common prefix first, then the menu.
            .with_quick_completions(true)
            .with_partial_completions(true)
            .with_ansi_colors(color);
        // Without a usable history file the editor still works, with history for this run.
        match FileBackedHistory::with_file(HISTORY_SIZE, history.to_owned()) {
            Ok(h) => editor = editor.with_history(Box::new(h)),
            Err(e) => eprintln!(
                "dsh: the prompt history {} is not usable ({e}); it is kept for this run only",
                history.display()
            ),
        }
        Input::Terminal(Some(Box::new(editor)), pastes)
    }

    pub(crate) fn piped() -> Input {
        Input::Piped(tokio::io::BufReader::new(tokio::io::stdin()).lines())
    }

    /// The next input; `pending` is typed-ahead text to start the line with.
    pub(crate) async fn read(&mut self, pending: &str) -> std::io::Result<Read> {
        match self {
            Input::Terminal(slot, pastes) => {
                let Some(mut editor) = slot.take() else {
                    return Ok(Read::Eof);
                };
                // A paste belongs to the line it was made in.
                pastes.clear();
                if !pending.is_empty() {
                    editor.run_edit_commands(&[EditCommand::InsertString(pending.to_owned())]);
                }
                // reedline blocks on the terminal: off the runtime's workers.
                let (editor, signal) = tokio::task::spawn_blocking(move || {
                    let signal = editor.read_line(&ReplPrompt);
                    (editor, signal)
                })
                .await
                .map_err(std::io::Error::other)?;
                *slot = Some(editor);
                Ok(match signal? {
                    Signal::Success(text) => Read::Line(pastes.expand(&join_continued(&text))),
                    Signal::HostCommand(command) => Read::Line(command),
                    Signal::CtrlC => Read::Interrupt,
                    _ => Read::Eof,
                })
            }
            Input::Piped(lines) => {
                let mut text = String::new();
                loop {
                    let Some(line) = lines.next_line().await? else {
                        return Ok(if text.is_empty() {
                            Read::Eof
                        } else {
                            Read::Line(text)
                        });
                    };
                    match line.strip_suffix('\\') {
                        Some(head) => {
                            text.push_str(head);
                            text.push('\n');
                        }
                        None => {
                            text.push_str(&line);
                            return Ok(Read::Line(text));
                        }
                    }
                }
            }
        }
    }
}

/// A line ending in `\` continues on the next; the backslashes go.
fn join_continued(text: &str) -> String {
    text.replace("\\\n", "\n")
}

/// The prompt: `› `.
struct ReplPrompt;

impl Prompt for ReplPrompt {
    fn render_prompt_left(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn render_prompt_right(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn render_prompt_indicator(&self, _mode: PromptEditMode) -> Cow<'_, str> {
        Cow::Borrowed("› ")
    }
    fn render_prompt_multiline_indicator(&self) -> Cow<'_, str> {
        Cow::Borrowed("· ")
    }
    fn render_prompt_history_search_indicator(&self, search: PromptHistorySearch) -> Cow<'_, str> {
        let failing = match search.status {
            PromptHistorySearchStatus::Passing => "",
            PromptHistorySearchStatus::Failing => "failing ",
        };
        Cow::Owned(format!("({failing}search: {}) ", search.term))
    }
}

/// Enter on a line ending in `\` starts another line instead of sending.
struct TrailingBackslash;

impl Validator for TrailingBackslash {
    fn validate(&self, line: &str) -> ValidationResult {
        if line.ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Complete
        }
    }
}

/// Tab: slash commands and their argument words at the start of the line, workspace paths
/// elsewhere.
struct Completions {
    workspace: PathBuf,
}

impl Completer for Completions {
    fn complete(&mut self, line: &str, pos: usize) -> reedline::CompletionResult {
        let pos = pos.min(line.len());
        let head = &line[..pos];
        let start = head.rfind(char::is_whitespace).map_or(0, |i| {
            i + head[i..].chars().next().map_or(1, char::len_utf8)
        });
        let word = &head[start..];
        let span = Span::new(start, pos);
        let suggestions = if start == 0 && word.starts_with('/') {
            command_names(word, span)
        } else if let Some(cmd) = head.strip_prefix('/')
            && let Some((name, _)) = cmd.split_once(' ')
            && let Some(spec) = COMMANDS.iter().find(|c| c.name == name)
            && !spec.values.is_empty()
        {
            spec.values
                .iter()
                .filter(|v| v.starts_with(word))
                .map(|v| suggestion((*v).to_owned(), None, span, true))
                .collect()
        } else if let Some(rest) = word.strip_prefix('@') {
            // `@path`: the file goes with the prompt; completed as a path, `@` kept.
            paths(&self.workspace, rest, span)
                .into_iter()
                .map(|mut s| {
                    s.value = format!("@{}", s.value);
                    s
                })
                .collect()
        } else {
            paths(&self.workspace, word, span)
        };
        reedline::CompletionResult::fresh(suggestions)
    }
}

fn suggestion(value: String, description: Option<String>, span: Span, space: bool) -> Suggestion {
    Suggestion {
        value,
        display_override: None,
        description,
        style: None,
        extra: None,
        span,
        append_whitespace: space,
        match_indices: None,
    }
}

fn command_names(word: &str, span: Span) -> Vec<Suggestion> {
    let typed = &word[1..];
    COMMANDS
        .iter()
        .filter(|c| c.name.starts_with(typed))
        .map(|c| {
            suggestion(
                format!("/{}", c.name),
                Some(c.help.to_owned()),
                span,
                !c.args.is_empty(),
            )
        })
        .collect()
}

/// Entries of the workspace directory `word` points into whose names start with its last
/// part; directories end with `/`. Nothing outside the workspace is listed.
fn paths(workspace: &Path, word: &str, span: Span) -> Vec<Suggestion> {
    if word.starts_with('/') || word.split('/').any(|p| p == "..") {
        return Vec::new();
    }
    let (dir, prefix) = match word.rfind('/') {
        Some(i) => (&word[..=i], &word[i + 1..]),
        None => ("", word),
    };
    // Through a symlink the directory may lie elsewhere: then nothing is listed.
    let inside = workspace
        .join(dir)
        .canonicalize()
        .ok()
        .zip(workspace.canonicalize().ok())
        .filter(|(d, w)| d.starts_with(w));
    let Some(Ok(entries)) = inside.map(|(d, _)| std::fs::read_dir(d)) else {
        return Vec::new();
    };
    let mut out: Vec<Suggestion> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if !name.starts_with(prefix) || (prefix.is_empty() && name.starts_with('.')) {
                return None;
            }
            // A name with control or invisible characters would reach the terminal raw
            // through the completion menu: not offered.
            if super::visible::has_hidden(&name) || name.contains('\n') {
                return None;
            }
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            let value = format!("{dir}{name}{}", if is_dir { "/" } else { "" });
            Some(suggestion(value, None, span, !is_dir))
        })
        .collect();
    out.sort_by(|a, b| a.value.cmp(&b.value));
    out.truncate(200);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(c: &mut Completions, line: &str) -> Vec<String> {
        match c.complete(line, line.len()) {
            reedline::CompletionResult::Fresh { suggestions, .. } => {
                suggestions.iter().map(|s| s.value.clone()).collect()
            }
            _ => Vec::new(),
        }
    }

    #[test]
    fn tab_completes_commands_their_values_and_workspace_paths() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "").unwrap();
        std::fs::write(dir.path().join("README.md"), "").unwrap();
        let mut c = Completions {
            workspace: dir.path().to_owned(),
        };
        assert_eq!(values(&mut c, "/to"), ["/tools"]);
        assert_eq!(values(&mut c, "/verbose o"), ["on", "off"]);
        assert_eq!(values(&mut c, "look at sr"), ["src/"]);
        assert_eq!(values(&mut c, "look at src/m"), ["src/main.rs"]);
        assert_eq!(values(&mut c, "explain @src/m"), ["@src/main.rs"]);
        assert_eq!(values(&mut c, "explain @READ"), ["@README.md"]);
        assert!(values(&mut c, "see ../").is_empty());
        assert!(values(&mut c, "see /etc/").is_empty());
        #[cfg(unix)]
        {
            let outside = tempfile::tempdir().unwrap();
            std::fs::write(outside.path().join("secret.txt"), "").unwrap();
            std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
            assert!(values(&mut c, "link/").is_empty());
            std::fs::write(dir.path().join("evil\x1b]0;x\x07.txt"), "").unwrap();
            assert!(values(&mut c, "evil").is_empty());
        }
    }

    #[test]
    fn a_trailing_backslash_continues_the_line() {
        assert!(matches!(
            TrailingBackslash.validate("first \\"),
            ValidationResult::Incomplete
        ));
        assert_eq!(join_continued("one \\\ntwo"), "one \ntwo");
    }
}
