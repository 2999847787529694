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

    /// Forgets every paste (a line starts, or was left unsent).
    pub(crate) fn clear(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// `line` with each paste token of this line replaced by its text, in one pass over
    /// what was typed (a pasted text that holds a token is not expanded again); the pastes
    /// are forgotten.
    pub(crate) fn expand(&self, line: &str) -> String {
        let kept = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        let tokens: Vec<String> = kept
            .iter()
            .enumerate()
            .map(|(i, text)| Self::token(i + 1, text.lines().count()))
            .collect();
        let mut used = vec![false; kept.len()];
        let mut out = String::with_capacity(line.len());
        let mut rest = line;
        loop {
            // The earliest token still unused.
            let next = tokens
                .iter()
                .enumerate()
                .filter(|(i, _)| !used[*i])
                .filter_map(|(i, t)| rest.find(t.as_str()).map(|at| (at, i)))
                .min();
            let Some((at, i)) = next else {
                out.push_str(rest);
                return out;
            };
            out.push_str(&rest[..at]);
            out.push_str(&kept[i]);
            used[i] = true;
            rest = &rest[at + tokens[i].len()..];
        }
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
    fn a_paste_holding_another_token_is_not_expanded_again() {
        let pastes = Pastes::default();
        let first = format!("{}[pasted 12 lines #2]\n", "a\n".repeat(11));
        let second = "b\n".repeat(12);
        let t1 = pastes.collapse(&first).unwrap();
        let t2 = pastes.collapse(&second).unwrap();
        assert_eq!(t2, "[pasted 12 lines #2]");
        assert_eq!(
            pastes.expand(&format!("{t1} {t2}")),
            format!("{first} {second}")
        );
        // Left unsent (Ctrl-C): a recalled line does not bring it back.
        let t = pastes.collapse(&second).unwrap();
        pastes.clear();
        assert_eq!(pastes.expand(&t), t);
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
