//! A loaded session's conversation sent back as updates before `session/load` answers, as
//! the protocol asks: the person's messages, the agent's answers, each tool call and what it
//! returned — the conversation as the model will go on from it (after a compaction, the
//! summary stands for the turns it replaced).

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, SessionUpdate, TextContent, ToolCall, ToolCallContent,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use dsh_model::{Message, Role};

/// The updates that replay `history`.
pub(crate) fn updates(history: &[Message]) -> Vec<SessionUpdate> {
    let chunk = |text: &str| ContentChunk::new(ContentBlock::Text(TextContent::new(text)));
    let mut out = Vec::new();
    for m in history {
        match m.role {
            Role::User if !m.content.is_empty() => {
                out.push(SessionUpdate::UserMessageChunk(chunk(&m.content)));
            }
            Role::Assistant => {
                if !m.content.is_empty() {
                    out.push(SessionUpdate::AgentMessageChunk(chunk(&m.content)));
                }
                for call in &m.tool_calls {
                    let input = serde_json::from_str(&call.arguments)
                        .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
                    out.push(SessionUpdate::ToolCall(
                        ToolCall::new(call.id.clone(), call.name.clone())
                            .status(ToolCallStatus::Pending)
                            .raw_input(input),
                    ));
                }
            }
            Role::Tool => {
                let Some(id) = &m.tool_call_id else { continue };
                out.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    id.clone(),
                    ToolCallUpdateFields::new()
                        .status(ToolCallStatus::Completed)
                        .content(vec![ToolCallContent::from(ContentBlock::Text(
                            TextContent::new(m.content.as_str()),
                        ))]),
                )));
            }
            _ => {}
        }
    }
    out
}
