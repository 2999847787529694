//! A command's output: captured from one pipe shared by stdout and stderr (so the two
//! interleave exactly as written), kept within a bounded buffer, and cut to head and tail
//! for the model.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes kept from the start of an output (and the most a plugin may answer).
pub(crate) const HEAD_BYTES: usize = 4 << 20;
/// Bytes on each side of a flood's cut that are dropped with its middle.
const EDGE_BYTES: usize = 512;
/// Bytes kept from the end of an output longer than [`HEAD_BYTES`].
const TAIL_BYTES: usize = 1 << 20;

/// What a command wrote, bounded: the first [`HEAD_BYTES`] and the last [`TAIL_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capture {
    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < HEAD_BYTES {
            let n = bytes.len().min(HEAD_BYTES - self.head.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() >= TAIL_BYTES {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - TAIL_BYTES..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(TAIL_BYTES);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// The output as text (invalid UTF-8 replaced), with a line saying how many bytes in the
    /// middle were not kept, if any. Around that cut, [`EDGE_BYTES`] more on each side go with
    /// the middle: a secret the cut split would leave halves the redactor cannot recognise.
    pub(crate) fn text(&self) -> String {
        let (a, b) = self.tail.as_slices();
        let tail: std::borrow::Cow<'_, [u8]> = if b.is_empty() {
            a.into()
        } else {
            [a, b].concat().into()
        };
        let kept = (self.head.len() + tail.len()) as u64;
        if self.total <= kept {
            let mut text = String::from_utf8_lossy(&self.head).into_owned();
            text.push_str(&String::from_utf8_lossy(&tail));
            return text;
        }
        let head = &self.head[..self.head.len().saturating_sub(EDGE_BYTES)];
        let tail = &tail[EDGE_BYTES.min(tail.len())..];
        let mut text = String::from_utf8_lossy(head).into_owned();
        text.push_str(&format!(
            "\n[… {} bytes of output were not kept …]\n",
            self.total - (head.len() + tail.len()) as u64
        ));
        text.push_str(&String::from_utf8_lossy(tail));
        text
    }

    /// The last `max` bytes written at most, as text (invalid UTF-8 replaced), from the
    /// start of a line when one starts within them.
    pub(crate) fn last(&self, max: usize) -> String {
        // The tail, once anything is in it, holds the latest bytes (the head ended before).
        let bytes: Vec<u8> = if self.tail.is_empty() {
            self.head[self.head.len().saturating_sub(max)..].to_vec()
        } else {
            let from = self.tail.len().saturating_sub(max);
            self.tail.range(from..).copied().collect()
        };
        let mut shown = bytes.as_slice();
        if (self.total as usize) > bytes.len()
            && let Some(nl) = memchr::memchr(b'\n', shown)
            && nl + 1 < shown.len()
        {
            shown = &shown[nl + 1..];
        }
        String::from_utf8_lossy(shown).into_owned()
    }

    /// Bytes written in all.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Everything written, when all of it was kept (at most [`HEAD_BYTES`]).
    pub(crate) fn whole(&self) -> Option<&[u8]> {
        (self.total == self.head.len() as u64).then_some(self.head.as_slice())
    }
}

/// Reads `pipe` to its end on a thread of its own, into a shared [`Capture`]; the receiver
/// resolves at end of file. A thread, not the blocking pool: when a command's descendant
/// keeps the pipe open, the read may outlast the call, and it must not hold a pool slot.
pub(crate) fn spawn_reader(
    mut pipe: std::io::PipeReader,
) -> std::io::Result<(Arc<Mutex<Capture>>, tokio::sync::oneshot::Receiver<()>)> {
    let capture = Arc::new(Mutex::new(Capture::default()));
    let (done, finished) = tokio::sync::oneshot::channel();
    let sink = capture.clone();
    std::thread::Builder::new()
        .name("dsh-shell-output".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => sink
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = done.send(());
        })?;
    Ok((capture, finished))
}

/// `text` cut to at most `max_chars` characters: `Some((head, tail, omitted))` with two
/// thirds of the budget for the head and one third for the tail, or `None` when it fits.
pub fn head_tail(text: &str, max_chars: usize) -> Option<(String, String, usize)> {
    let total = text.chars().count();
    if total <= max_chars {
        return None;
    }
    let head_n = max_chars * 2 / 3;
    let tail_n = max_chars - head_n;
    let head: String = text.chars().take(head_n).collect();
    let tail: String = text.chars().skip(total - tail_n).collect();
    Some((head, tail, total - head_n - tail_n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_head_and_tail_of_a_flood() {
        let mut c = Capture::default();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..10 {
            c.push(&chunk);
        }
        c.push(b"THE END");
        assert_eq!(c.total_bytes(), (10 << 20) + 7);
        let text = c.text();
        assert!(text.starts_with("aaaa"));
        assert!(text.ends_with("aTHE END"));
        assert!(text.contains(&format!(
            "[… {} bytes of output were not kept …]",
            (10u64 << 20) + 7 - (HEAD_BYTES + TAIL_BYTES - 2 * EDGE_BYTES) as u64
        )));
        assert!(text.len() < HEAD_BYTES + TAIL_BYTES + 100);
        assert_eq!(c.whole(), None, "not all of it was kept");
    }

    #[test]
    fn small_outputs_are_kept_whole() {
        let mut c = Capture::default();
        c.push("héllo ".as_bytes());
        c.push(b"world");
        assert_eq!(c.text(), "héllo world");
        assert_eq!(c.whole(), Some("héllo world".as_bytes()));
    }

    #[test]
    fn the_latest_output_starts_at_a_line_and_comes_from_the_tail_in_a_flood() {
        let mut c = Capture::default();
        c.push(b"one\ntwo\nthree\n");
        assert_eq!(
            c.last(100),
            "one\ntwo\nthree\n",
            "all of it, from its start"
        );
        assert_eq!(c.last(8), "three\n", "a cut first line is left out");
        for _ in 0..5 {
            c.push(&vec![b'x'; 1 << 20]);
        }
        c.push(b"\nlast line\n");
        assert_eq!(c.last(64), "last line\n");
    }
}
