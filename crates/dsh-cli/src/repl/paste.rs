//! Long pastes at the prompt: a paste of more than [`COLLAPSE_LINES`] lines shows in the line
//! editor as one token, `[pasted 300 lines #1]`, and is sent whole. The edit mode wraps the
//! Emacs one and keeps the pasted texts; [`Pastes::expand`] puts them back when the line is
//! sent. A token the person typed themselves is left alone unless its number is one of this
//! line's pastes, and then only when it is exactly that paste's token.

use std::sync::{Arc, Mutex, PoisonError};

use crossterm::event::Event;
use reedline::{EditCommand, EditMode, Emacs, PromptEditMode, ReedlineEvent, ReedlineRawEvent};

/// A paste of more lines than this is collapsed.
pub(crate) const COLLAPSE_LINES: usize = 10;

/// The pastes of the line being edited, shared between the edit mode and the reader.
#[derive(Clone, Default)]
pub(crate) struct Pastes(Arc<Mutex<Vec<String>>>);

impl Pastes {
    /// The token that stands for paste `n` (1-based) of `lines` lines.
    fn token(n: usize, lines: usize) -> String {
        format!("[pasted {lines} lines #{n}]")
    }

    /// Keeps `text` and returns its token; `None` for a paste short enough to show.
    fn collapse(&self, text: &str) -> Option<String> {
        let lines = text.lines().count();
        if lines <= COLLAPSE_LINES {
            return None;
        }
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.push(text.to_owned());
        Some(Self::token(kept.len(), lines))
    }

    /// `line` with each paste token of this line replaced by its text; the pastes are
    /// forgotten (the next line starts with none).
    pub(crate) fn expand(&self, line: &str) -> String {
        let kept = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        let mut out = line.to_owned();
        for (i, text) in kept.iter().enumerate() {
            let token = Self::token(i + 1, text.lines().count());
            out = out.replacen(&token, text, 1);
        }
        out
    }
}

/// Emacs editing, with long pastes collapsed into tokens.
pub(crate) struct Collapsing {
    emacs: Emacs,
    pastes: Pastes,
}

impl Collapsing {
    pub(crate) fn new(emacs: Emacs, pastes: Pastes) -> Collapsing {
        Collapsing { emacs, pastes }
    }
}

impl EditMode for Collapsing {
    fn parse_event(&mut self, event: ReedlineRawEvent) -> ReedlineEvent {
        let event = Event::from(event);
        if let Event::Paste(text) = &event {
            let text = text.replace("\r\n", "\n").replace('\r', "\n");
            if let Some(token) = self.pastes.collapse(&text) {
                return ReedlineEvent::Edit(vec![EditCommand::InsertString(token)]);
            }
        }
        match ReedlineRawEvent::try_from(event) {
            Ok(raw) => self.emacs.parse_event(raw),
            Err(()) => ReedlineEvent::None,
        }
    }

    fn edit_mode(&self) -> PromptEditMode {
        self.emacs.edit_mode()
    }
    // Mode switches: none are bound (Emacs accepts only a switch into itself), so the
    // trait's default answer stands.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_paste_is_one_token_and_comes_back_whole() {
        let pastes = Pastes::default();
        let long: String = (1..=300).map(|i| format!("line {i}\n")).collect();
        assert_eq!(pastes.collapse("short\npaste"), None);
        let token = pastes.collapse(&long).unwrap();
        assert_eq!(token, "[pasted 300 lines #1]");
        let sent = pastes.expand(&format!("look at this: {token} thanks"));
        assert_eq!(sent, format!("look at this: {long} thanks"));
        // Forgotten once sent: the same words typed later stay as typed.
        assert_eq!(pastes.expand(&token), token);
    }

    #[test]
    fn a_typed_token_that_names_no_paste_stays() {
        let pastes = Pastes::default();
        let long = "x\n".repeat(20);
        let token = pastes.collapse(&long).unwrap();
        let line = format!("[pasted 20 lines #2] {token} [pasted 5 lines #1]");
        assert_eq!(
            pastes.expand(&line),
            format!("[pasted 20 lines #2] {long} [pasted 5 lines #1]")
        );
    }
}
