//! An MCP tool result as dsh's tool output: the text the model reads (every content block
//! rendered, binary data named but not shown) and the structured value the pipeline checks
//! against the tool's declared output schema (SPEC P9): the server's `structuredContent` for
//! a tool with an `outputSchema`, otherwise the content blocks in the standard MCP shape,
//! binary data left out and long text cut, so the journal stays bounded.

use serde_json::{Map, Value, json};

/// The most characters of one text block kept in the structured value (the model's text is
/// bounded and spilled by the pipeline, like any output).
const VALUE_TEXT_CHARS: usize = 16 * 1024;

/// The output schema of a tool that declares none: the standard MCP content list.
pub fn content_schema() -> Value {
    json!({
        "type": "object",
        "required": ["content"],
        "properties": {
            "content": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["type"],
                    "properties": {"type": {"type": "string"}}
                }
            }
        }
    })
}

/// A result's parts, read from its wire form.
#[derive(Debug, PartialEq)]
pub(crate) struct Rendered {
    /// What the model reads.
    pub text: String,
    /// The structured value.
    pub value: Value,
    /// The server said the call failed (`isError`).
    pub is_error: bool,
}

/// Renders a `CallToolResult` (as JSON). `structured`: the tool declared an output schema,
/// so its value is the result's `structuredContent` (`null` when missing, which the schema
/// then refuses).
pub(crate) fn render(result: &Value, structured: bool) -> Rendered {
    let blocks: &[Value] = result
        .get("content")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let mut text = String::new();
    for block in blocks {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&block_text(block));
    }
    let structured_content = result.get("structuredContent").cloned();
    if text.is_empty()
        && let Some(v) = &structured_content
    {
        text = serde_json::to_string_pretty(v).unwrap_or_default();
    }
    let value = if structured {
        structured_content.unwrap_or(Value::Null)
    } else {
        json!({"content": blocks.iter().map(block_value).collect::<Vec<_>>()})
    };
    Rendered {
        text,
        value,
        is_error: result.get("isError").and_then(Value::as_bool) == Some(true),
    }
}

fn field<'a>(block: &'a Value, key: &str) -> Option<&'a str> {
    block.get(key).and_then(Value::as_str)
}

/// The size of base64 `data`, in bytes.
fn decoded_len(data: &str) -> usize {
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    (data.len() / 4 * 3).saturating_sub(padding)
}

/// What the model reads of one content block.
fn block_text(block: &Value) -> String {
    let kind = field(block, "type").unwrap_or("unknown");
    match kind {
        "text" => field(block, "text").unwrap_or_default().to_owned(),
        "image" | "audio" => format!(
            "[{kind} {}, {} bytes: not shown]",
            field(block, "mimeType").unwrap_or("of unknown type"),
            decoded_len(field(block, "data").unwrap_or_default())
        ),
        "resource" => {
            let r = block.get("resource").unwrap_or(&Value::Null);
            let uri = field(r, "uri").unwrap_or("?");
            match (field(r, "text"), field(r, "blob")) {
                (Some(t), _) => format!("[resource {uri}]\n{t}"),
                (None, Some(b)) => format!(
                    "[resource {uri}, {}, {} bytes: not shown]",
                    field(r, "mimeType").unwrap_or("binary"),
                    decoded_len(b)
                ),
                (None, None) => format!("[resource {uri}]"),
            }
        }
        "resource_link" => format!(
            "[resource link {}{}]",
            field(block, "uri").unwrap_or("?"),
            field(block, "name")
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        ),
        other => format!("[{other} content]"),
    }
}

/// One content block as kept in the structured value: binary data replaced by its size,
/// text cut to [`VALUE_TEXT_CHARS`].
fn block_value(block: &Value) -> Value {
    let Some(obj) = block.as_object() else {
        return json!({"type": "unknown"});
    };
    let mut out = Map::new();
    for (k, v) in obj {
        match (k.as_str(), v) {
            ("data" | "blob", Value::String(s)) => {
                out.insert("bytes".into(), json!(decoded_len(s)));
            }
            ("text", Value::String(s)) => {
                let (kept, cut) = cut(s);
                out.insert("text".into(), json!(kept));
                if cut {
                    out.insert("truncated".into(), json!(true));
                }
            }
            ("resource", Value::Object(_)) => {
                out.insert("resource".into(), block_value(v));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if !out.contains_key("type") {
        out.insert("type".into(), json!("unknown"));
    }
    Value::Object(out)
}

fn cut(s: &str) -> (&str, bool) {
    match s.char_indices().nth(VALUE_TEXT_CHARS) {
        Some((i, _)) => (&s[..i], true),
        None => (s, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_binary_blocks_render_for_the_model_and_the_value() {
        let r = render(
            &json!({"content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "mimeType": "image/png", "data": "AAAA"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
                {"type": "resource_link", "uri": "file:///b", "name": "b"}
            ]}),
            false,
        );
        assert_eq!(
            r.text,
            "hello\n[image image/png, 3 bytes: not shown]\n[resource file:///a]\nbody\n[resource link file:///b (b)]"
        );
        assert_eq!(
            r.value["content"][1],
            json!({"type": "image", "mimeType": "image/png", "bytes": 3})
        );
        assert!(!r.is_error);
    }

    #[test]
    fn structured_content_is_the_value_and_its_absence_is_null() {
        let r = render(&json!({"content": [], "structuredContent": {"n": 1}}), true);
        assert_eq!(r.value, json!({"n": 1}));
        assert!(r.text.contains("\"n\": 1"));
        assert_eq!(render(&json!({"content": []}), true).value, Value::Null);
    }

    #[test]
    fn long_text_is_cut_in_the_value_only() {
        let long = "x".repeat(VALUE_TEXT_CHARS + 10);
        let r = render(
            &json!({"content": [{"type": "text", "text": long}], "isError": true}),
            false,
        );
        assert_eq!(r.text.len(), VALUE_TEXT_CHARS + 10);
        assert_eq!(r.value["content"][0]["truncated"], json!(true));
        assert!(r.is_error);
    }
}
