//! The bound on one message from a stdio server: MCP's stdio transport is one JSON-RPC
//! message a line, and a line longer than [`MAX_MESSAGE_BYTES`] ends the connection — what
//! dsh holds of one message is bounded, and the call waiting for it fails at once naming the
//! server and the bound (rather than the line being dropped and the call waiting for its
//! timeout, rmcp's own handling).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// The longest message (one line, its newline included) a stdio MCP server may send: 16 MiB,
/// as rmcp's own line bound and its streamable-HTTP client's bound on one event.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// [`MAX_MESSAGE_BYTES`] as a person reads it.
pub(crate) fn describe_bound() -> String {
    format!("{} MiB", MAX_MESSAGE_BYTES >> 20)
}

/// A server's stdout, read through the bound: once a line grows past `limit` bytes, the
/// complete lines before it are still delivered, then every read fails and `overrun` is set.
pub(crate) struct Bounded<R> {
    inner: R,
    limit: usize,
    /// Bytes of the current line read so far.
    line: usize,
    overrun: Arc<AtomicBool>,
}

impl<R> Bounded<R> {
    /// `inner` read with lines of at most `limit` bytes; `overrun` is set when one is longer.
    pub(crate) fn new(inner: R, limit: usize, overrun: Arc<AtomicBool>) -> Self {
        Bounded {
            inner,
            limit,
            line: 0,
            overrun,
        }
    }

    /// Where in `fresh` the first line longer than the limit starts (0 when it began in an
    /// earlier read), updating the current line's length; `None` while every line fits.
    fn scan(&mut self, fresh: &[u8]) -> Option<usize> {
        let mut start = 0;
        for segment in fresh.split_inclusive(|b| *b == b'\n') {
            self.line = self.line.saturating_add(segment.len());
            if self.line > self.limit {
                return Some(start);
            }
            if segment.ends_with(b"\n") {
                self.line = 0;
            }
            start += segment.len();
        }
        None
    }
}

fn too_long(limit: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a message longer than {limit} bytes"),
    )
}

impl<R: AsyncRead + Unpin> AsyncRead for Bounded<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.overrun.load(Ordering::SeqCst) {
            return Poll::Ready(Err(too_long(this.limit)));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        let Some(cut) = this.scan(&buf.filled()[before..]) else {
            return Poll::Ready(Ok(()));
        };
        this.overrun.store(true, Ordering::SeqCst);
        if cut == 0 {
            buf.set_filled(before);
            return Poll::Ready(Err(too_long(this.limit)));
        }
        // The whole lines before the long one go through; the next read fails.
        buf.set_filled(before + cut);
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use tokio::io::AsyncReadExt;

    async fn read_all(input: &[u8], limit: usize, chunk: usize) -> (Vec<u8>, bool, bool) {
        let overrun = Arc::new(AtomicBool::new(false));
        let (mut w, r) = tokio::io::duplex(chunk);
        let data = input.to_vec();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = w.write_all(&data).await;
        });
        let mut reader = Bounded::new(r, limit, overrun.clone());
        let mut got = Vec::new();
        let mut buf = vec![0u8; chunk];
        let failed = loop {
            match reader.read(&mut buf).await {
                Ok(0) => break false,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
                    break true;
                }
            }
        };
        drop(reader);
        writer.abort();
        (got, failed, overrun.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn lines_within_the_limit_pass_whole_in_any_chunking() {
        let input = b"0123456789\nabcdefghi\n\nxyz\n";
        for chunk in [1, 3, 7, 64] {
            let (got, failed, overrun) = read_all(input, 11, chunk).await;
            assert_eq!(got, input, "chunk {chunk}");
            assert!(!failed && !overrun, "chunk {chunk}");
        }
    }

    #[tokio::test]
    async fn a_longer_line_fails_the_read_after_the_lines_before_it() {
        let input = b"ok\nfine\n0123456789AB\nnever\n";
        for chunk in [1, 4, 5, 64] {
            let (got, failed, overrun) = read_all(input, 11, chunk).await;
            assert!(failed && overrun, "chunk {chunk}");
            // The lines before it, and at most the limit of the long one.
            assert!(got.starts_with(b"ok\nfine\n"), "chunk {chunk}: {got:?}");
            assert!(got.len() - 8 <= 11, "chunk {chunk}: {got:?}");
        }
        // All of one chunk: the whole lines before the long one are delivered.
        let (got, _, _) = read_all(input, 11, 64).await;
        assert_eq!(got, b"ok\nfine\n");
    }

    #[tokio::test]
    async fn a_line_without_a_newline_is_cut_at_the_limit() {
        let input = vec![b'x'; 1000];
        let (got, failed, overrun) = read_all(&input, 100, 64).await;
        assert!(failed && overrun);
        assert!(got.len() <= 100, "{} bytes passed", got.len());
    }
}
