//! The server's side of HTTP/1.1 and SSE: reading a request, writing a status, a chunked
//! event stream, and the provider's own error for a conversation it would refuse.

use std::collections::BTreeMap;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Dialect, Recorded, Turn};

pub(super) async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut received = None;
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        received.get_or_insert_with(std::time::Instant::now);
        buf.extend_from_slice(&chunk[..n]);
        if !buf[0].is_ascii_uppercase() {
            return None; // not HTTP (a TLS handshake, say): hang up
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Some(Recorded {
        method,
        path,
        headers,
        body,
        received: received?,
    })
}

pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

pub(super) fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Scripted",
    }
}

pub(super) async fn write_status(
    socket: &mut TcpStream,
    code: u16,
    body: &str,
    retry_after: Option<&str>,
) -> std::io::Result<()> {
    let content_type = if body.trim_start().starts_with('{') {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    let mut head = format!(
        "HTTP/1.1 {code} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n",
        reason(code),
        body.len()
    );
    if let Some(r) = retry_after {
        head.push_str(&format!("retry-after: {r}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    socket.flush().await?;
    socket.shutdown().await
}

/// Writes one HTTP chunk.
pub(super) async fn write_chunk(socket: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let mut frame = format!("{:x}\r\n", bytes.len()).into_bytes();
    frame.extend_from_slice(bytes);
    frame.extend_from_slice(b"\r\n");
    socket.write_all(&frame).await?;
    socket.flush().await
}

pub(super) async fn write_stream(
    socket: &mut TcpStream,
    turn: &Turn,
    mut events: Vec<String>,
) -> std::io::Result<()> {
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
              transfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )
        .await?;
    socket.flush().await?;

    if turn.cut {
        let keep = (events.len() / 2).max(1);
        events.truncate(keep);
    }

    match &turn.write_sizes {
        None => {
            for (i, event) in events.iter().enumerate() {
                if i > 0 && !turn.delay.is_zero() {
                    tokio::time::sleep(turn.delay).await;
                }
                if let Some((after, pause)) = turn.stall
                    && i == after
                {
                    tokio::time::sleep(pause).await;
                }
                if let Some((after, gate)) = &turn.hold
                    && i == *after
                {
                    gate.wait().await;
                }
                write_chunk(socket, event.as_bytes()).await?;
            }
        }
        Some(sizes) => {
            // One continuous body, so the splits also straddle event boundaries.
            let body = events.concat().into_bytes();
            let mut at = 0;
            let mut k = 0;
            while at < body.len() {
                let n = sizes[k % sizes.len()].min(body.len() - at);
                write_chunk(socket, &body[at..at + n]).await?;
                // Let each piece leave as its own segment.
                tokio::task::yield_now().await;
                at += n;
                k += 1;
            }
        }
    }
    if turn.cut {
        // Close without the terminating chunk: the body is incomplete.
        return Ok(());
    }
    socket.write_all(b"0\r\n\r\n").await?;
    socket.flush().await?;
    socket.shutdown().await
}

/// The first tool result without its call, or call without its result, in a request body,
/// said in the words of the API whose dialect the server speaks.
pub(super) fn orphan(dialect: Dialect, body: &Value) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    let ids = |v: Option<&Value>, key: &str| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.get(key).and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    match dialect {
        Dialect::OpenAi => {
            let mut pending: Vec<String> = Vec::new();
            let mut answerable: Vec<String> = Vec::new();
            for m in messages {
                let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
                if role == "tool" {
                    let id = m
                        .get("tool_call_id")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if !answerable.iter().any(|a| a == id) {
                        return Some("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".to_owned());
                    }
                    pending.retain(|p| p != id);
                    continue;
                }
                if !pending.is_empty() {
                    return Some(format!(
                        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                        pending.join(", ")
                    ));
                }
                answerable = if role == "assistant" {
                    ids(m.get("tool_calls"), "id")
                } else {
                    Vec::new()
                };
                pending.clone_from(&answerable);
            }
            None
        }
        Dialect::Anthropic => {
            let blocks = |m: &Value, kind: &str, key: &str| -> Vec<String> {
                m.get("content")
                    .and_then(Value::as_array)
                    .map(|c| {
                        c.iter()
                            .filter(|b| b.get("type").and_then(Value::as_str) == Some(kind))
                            .filter_map(|b| b.get(key).and_then(Value::as_str).map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for (i, m) in messages.iter().enumerate() {
                let uses = blocks(m, "tool_use", "id");
                if !uses.is_empty() && i + 1 < messages.len() {
                    let answered = blocks(&messages[i + 1], "tool_result", "tool_use_id");
                    let missing: Vec<&String> =
                        uses.iter().filter(|u| !answered.contains(u)).collect();
                    if let Some(id) = missing.first() {
                        return Some(format!(
                            "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {id}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                        ));
                    }
                }
                let results = blocks(m, "tool_result", "tool_use_id");
                if !results.is_empty() {
                    let called = if i > 0 {
                        blocks(&messages[i - 1], "tool_use", "id")
                    } else {
                        Vec::new()
                    };
                    if let Some(id) = results.iter().find(|r| !called.contains(r)) {
                        return Some(format!(
                            "messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                }
            }
            None
        }
    }
}
