//! Entry points for the fuzz targets (`fuzz/` at the repository root), not an API: the two
//! wire formats' stream decoders behind the one event loop every request uses
//! ([`Endpoint::read_events`]), the JSON-for-stream path ([`Endpoint::not_a_stream`]) and the
//! error-body reading, fed from memory instead of a connection.

use std::future::Future;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};

use tokio_util::sync::CancellationToken;

use super::{Endpoint, Failure, Transport, server_message};
use crate::ProviderConfig;
use crate::anthropic::MessageDecoder;
use crate::openai::ChunkDecoder;
use crate::types::{Completion, ModelError, StreamEvent};

/// Which wire format decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    OpenAi,
    Anthropic,
}

/// What one decoded answer gave.
#[derive(Debug)]
pub struct Decoded {
    /// The turn, or why there is none.
    pub result: Result<Completion, ModelError>,
    /// The failure would be retried (a broken stream, an overloaded server).
    pub retried: bool,
    /// What was streamed on the way, in order.
    pub events: Vec<StreamEvent>,
}

/// An endpoint that is never contacted: the decoders need one for their error hints.
fn endpoint() -> &'static Endpoint {
    static ENDPOINT: OnceLock<Endpoint> = OnceLock::new();
    ENDPOINT.get_or_init(|| {
        let config = ProviderConfig::new("fuzz", "http://127.0.0.1:9", "fuzz-model");
        match config.endpoint("/v1/chat", |_| Vec::new()) {
            Ok(e) => e,
            Err(e) => panic!("the fuzzing endpoint cannot be built: {e}"),
        }
    })
}

/// Polls `f` to the end without a runtime: everything here is in memory, never pending for
/// long (a future that stayed pending would spin, which the fuzzer reports as a timeout).
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn decoded(outcome: Result<Completion, Failure>, events: Vec<StreamEvent>) -> Decoded {
    match outcome {
        Ok(c) => Decoded {
            result: Ok(c),
            retried: false,
            events,
        },
        Err(f) => Decoded {
            retried: f.retry.is_some(),
            result: Err(f.error),
            events,
        },
    }
}

/// A 200 answer's body, arriving in `chunks`, read as an event stream in `format`; `broken`:
/// the connection fails after the last chunk instead of ending.
pub fn stream(format: Format, chunks: &[&[u8]], broken: bool) -> Decoded {
    let mut items: Vec<Result<Vec<u8>, Transport>> =
        chunks.iter().map(|c| Ok(c.to_vec())).collect();
    if broken {
        items.push(Err(Transport::Idle(std::time::Duration::from_secs(1))));
    }
    let bytes: super::Bytes = Box::pin(futures::stream::iter(items));
    let mut events = Vec::new();
    let mut emit = |e: StreamEvent| events.push(e);
    let cancel = CancellationToken::new();
    let outcome = match format {
        Format::OpenAi => {
            ready(endpoint().read_events(bytes, ChunkDecoder::default(), &mut emit, &cancel))
        }
        Format::Anthropic => {
            ready(endpoint().read_events(bytes, MessageDecoder::default(), &mut emit, &cancel))
        }
    };
    decoded(outcome, events)
}

/// A 200 answer that is JSON where a stream was asked for, read in `format`.
pub fn json_reply(format: Format, body: &str) -> Decoded {
    let mut events = Vec::new();
    let mut emit = |e: StreamEvent| events.push(e);
    let outcome = match format {
        Format::OpenAi => endpoint().not_a_stream(body, ChunkDecoder::default(), &mut emit),
        Format::Anthropic => endpoint().not_a_stream(body, MessageDecoder::default(), &mut emit),
    };
    decoded(outcome, events)
}

/// The server's own words in an error body (of any status), as an error names them.
pub fn error_message(body: &str) -> Option<String> {
    server_message(body)
}
