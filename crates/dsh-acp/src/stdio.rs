//! The process's stdin and stdout as the protocol's newline-delimited transport. A line that
//! is not UTF-8 does not end the connection (the protocol crate's own stdio transport ends
//! it, with every open session): it reaches the protocol layer as a line that is not JSON,
//! so the client gets a parse error for it and dsh goes on serving.

use agent_client_protocol::Lines;
use futures::{Sink, Stream};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// stdin's lines, in, and the protocol's messages, out to stdout (flushed each).
pub(crate) fn transport() -> Lines<
    impl Sink<String, Error = std::io::Error> + Send + 'static,
    impl Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let incoming =
        futures::stream::unfold(BufReader::new(tokio::io::stdin()), |mut input| async move {
            let mut bytes = Vec::new();
            match input.read_until(b'\n', &mut bytes).await {
                Ok(0) => None,
                Ok(_) => Some((Ok(line(bytes)), input)),
                Err(e) => Some((Err(e), input)),
            }
        });
    let outgoing =
        futures::sink::unfold(tokio::io::stdout(), |mut out, message: String| async move {
            out.write_all(message.as_bytes()).await?;
            out.write_all(b"\n").await?;
            out.flush().await?;
            Ok::<_, std::io::Error>(out)
        });
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

/// One line's text without its line ending; bytes that are not UTF-8 make it a line no
/// JSON parser accepts, saying why.
pub(crate) fn line(mut bytes: Vec<u8>) -> String {
    while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        bytes.pop();
    }
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => format!(
            "(a line that is not UTF-8) {}",
            String::from_utf8_lossy(e.as_bytes())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_is_not_utf8_is_no_json() {
        assert_eq!(line(b"{\"a\":1}\r\n".to_vec()), "{\"a\":1}");
        let bad = line(b"{\"params\":\"\xc3\x28\"}\n".to_vec());
        assert!(bad.starts_with("(a line that is not UTF-8)"), "{bad}");
        assert!(serde_json::from_str::<serde_json::Value>(&bad).is_err());
    }
}
