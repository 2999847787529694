//! What goes to the client for one session: its `session/update` notifications and the
//! requests it answers (permission). Sending never blocks a turn; a client that went away
//! is ignored here (the session ends when stdin closes).

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, RequestPermissionRequest, RequestPermissionResponse, SessionId,
    SessionNotification, SessionUpdate, TextContent,
};

/// One session's line to the client.
#[derive(Clone)]
pub(crate) struct Outbox {
    cx: ConnectionTo<Client>,
    id: SessionId,
}

impl Outbox {
    pub(crate) fn new(cx: ConnectionTo<Client>, id: SessionId) -> Outbox {
        Outbox { cx, id }
    }

    pub(crate) fn session_id(&self) -> SessionId {
        self.id.clone()
    }

    /// Sends one update.
    pub(crate) fn update(&self, update: SessionUpdate) {
        let _ = self
            .cx
            .send_notification(SessionNotification::new(self.id.clone(), update));
    }

    /// Says `text` as the agent's message.
    pub(crate) fn say(&self, text: &str) {
        self.update(SessionUpdate::AgentMessageChunk(ContentChunk::new(
            ContentBlock::Text(TextContent::new(text)),
        )));
    }

    /// Asks the client; its answer (or the error it sent).
    pub(crate) async fn request(
        &self,
        request: RequestPermissionRequest,
    ) -> Result<RequestPermissionResponse, agent_client_protocol::Error> {
        self.cx.send_request(request).block_task().await
    }
}
