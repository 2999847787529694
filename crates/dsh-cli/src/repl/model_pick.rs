//! `/model`'s picker: the choices as a list, moved through with the arrow keys, Enter picks,
//! Esc leaves. It owns the terminal while it is open (raw mode, crossterm), so it runs only
//! at the prompt, never beside the line editor or a turn's key reader.

use std::io::Write;

use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers, read};

use super::style::Style;

/// Lets the person pick one of `items` (starting on `current`); `None` when left with Esc
/// or Ctrl-C. Blocking: call it off the runtime's workers.
pub(crate) fn pick(
    title: &str,
    items: &[String],
    current: usize,
    st: Style,
) -> std::io::Result<Option<usize>> {
    crossterm::terminal::enable_raw_mode()?;
    let picked = run(title, items, current.min(items.len().saturating_sub(1)), st);
    let _ = crossterm::terminal::disable_raw_mode();
    picked
}

fn run(title: &str, items: &[String], mut at: usize, st: Style) -> std::io::Result<Option<usize>> {
    if items.is_empty() {
        return Ok(None);
    }
    let mut out = std::io::stdout();
    let rows = items.len() + 1;
    let mut drawn = false;
    loop {
        let mut frame = String::new();
        if drawn {
            frame.push_str(&format!("\r\x1b[{}A\x1b[J", rows - 1));
        }
        frame.push_str(&st.dim(title));
        for (i, item) in items.iter().enumerate() {
            frame.push_str("\r\n");
            if i == at {
                frame.push_str(&format!("{} {}", st.cyan("›"), st.bold(item)));
            } else {
                frame.push_str(&format!("  {item}"));
            }
        }
        out.write_all(frame.as_bytes())?;
        out.flush()?;
        drawn = true;
        let Event::Key(key) = read()? else {
            continue;
        };
        if key.kind == KeyEventKind::Release {
            continue;
        }
        match key.code {
            KeyCode::Up => at = at.checked_sub(1).unwrap_or(items.len() - 1),
            KeyCode::Down => at = (at + 1) % items.len(),
            KeyCode::Enter => {
                out.write_all(b"\r\n")?;
                return Ok(Some(at));
            }
            KeyCode::Esc => {
                out.write_all(b"\r\n")?;
                return Ok(None);
            }
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                out.write_all(b"\r\n")?;
                return Ok(None);
            }
            _ => {}
        }
    }
}
