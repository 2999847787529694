//! A wire format ([`Wire`]: how a request is written, which [`Decoder`] reads the stream)
//! and the one [`Provider`] body every wire format shares.

use eventsource_stream::Event;
use tokio_util::sync::CancellationToken;

use super::Endpoint;
use crate::types::{ChatRequest, Completion, ModelError, Provider, StreamEvent};

/// A wire format over an [`Endpoint`]: how a request is written and its stream read. Every
/// provider is one, and shares the one body of [`Provider`] below: encode the request,
/// stream the turn through the endpoint (retries, timeouts, cancellation), decode.
pub(crate) trait Wire: Send + Sync {
    type Decoder: Decoder + Default;

    /// Where the endpoint lists its models, after the base URL.
    const MODELS_PATH: &'static str;

    fn endpoint(&self) -> &Endpoint;

    /// The request's JSON body in this wire format.
    fn request_body(&self, request: &ChatRequest) -> serde_json::Value;
}

#[async_trait::async_trait]
impl<W: Wire> Provider for W {
    fn name(&self) -> &str {
        &self.endpoint().provider
    }

    fn model(&self) -> &str {
        &self.endpoint().model
    }

    fn base_url(&self) -> &str {
        &self.endpoint().base_url
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
        cancel: &CancellationToken,
    ) -> Result<Completion, ModelError> {
        let body = serde_json::to_vec(&self.request_body(request))
            .map_err(|e| ModelError::Protocol(format!("cannot encode the request: {e}")))?;
        self.endpoint()
            .stream_turn(body, W::Decoder::default, on_event, cancel)
            .await
    }

    async fn list_models(&self) -> Result<Vec<String>, ModelError> {
        self.endpoint().list_models(W::MODELS_PATH).await
    }
}

pub(crate) trait Decoder: Send {
    /// Handles one SSE event, streaming what it can through `emit`. `Ok(true)` means the stream
    /// is complete (`[DONE]`, `message_stop`).
    fn event(
        &mut self,
        event: &Event,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<bool, ModelError>;

    /// Whether the turn is complete enough to keep if the stream ends now (its finish reason
    /// arrived; only trailing usage could be missing).
    fn finished(&self) -> bool;

    /// A complete, non-streamed answer in the same wire format (a server that answered JSON
    /// to a streaming request), taken in as if it had streamed: its text goes through `emit`
    /// too. `Ok(false)` when `body` is not such an answer.
    fn whole(
        &mut self,
        body: &serde_json::Value,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<bool, ModelError>;

    /// The assembled turn.
    fn finish(self) -> Result<Completion, ModelError>;
}
