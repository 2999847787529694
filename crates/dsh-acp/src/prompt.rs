//! A `session/prompt`'s content as the text of one user message. Text is taken as it is; a
//! resource link names a file the model may read (through the gates, like any read: nothing
//! is read here); an embedded resource — a selection, an unsaved buffer the editor sent — is
//! what the person handed over, so its text goes with the prompt under its URI. Images and
//! audio are not offered in `initialize`, so a prompt carrying them is refused.

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};

/// The prompt's text, or why it cannot be sent.
pub(crate) fn text(blocks: &[ContentBlock], root: &std::path::Path) -> Result<String, String> {
    let mut parts: Vec<String> = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::ResourceLink(link) => parts.push(mention(&link.uri, root)),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => parts.push(format!(
                    "<context uri=\"{}\">\n{}\n</context>",
                    t.uri.replace('"', "%22"),
                    t.text
                )),
                EmbeddedResourceResource::BlobResourceContents(b) => parts.push(format!(
                    "(a binary resource, {}, was attached; dsh reads only text)",
                    b.uri
                )),
                _ => {}
            },
            ContentBlock::Image(_) => {
                return Err("dsh takes no images (promptCapabilities.image is false)".to_owned());
            }
            ContentBlock::Audio(_) => {
                return Err("dsh takes no audio (promptCapabilities.audio is false)".to_owned());
            }
            _ => {}
        }
    }
    let text = parts.join("\n");
    if text.trim().is_empty() {
        return Err("the prompt is empty".to_owned());
    }
    Ok(text)
}

/// A link as the model reads it: `@path` for a file of the workspace (the REPL's mention),
/// else the URI.
fn mention(uri: &str, root: &std::path::Path) -> String {
    if let Some(path) = uri.strip_prefix("file://")
        && let Ok(rel) = std::path::Path::new(&percent_decoded(path)).strip_prefix(root)
    {
        return format!("@{}", rel.display());
    }
    uri.to_owned()
}

/// `%XX` escapes in a file URI's path decoded (invalid ones kept as they are).
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        EmbeddedResource, ImageContent, ResourceLink, TextContent, TextResourceContents,
    };
    use std::path::Path;

    #[test]
    fn links_become_mentions_and_resources_go_with_the_prompt() {
        let blocks = vec![
            ContentBlock::Text(TextContent::new("explain")),
            ContentBlock::ResourceLink(ResourceLink::new("a b.rs", "file:///ws/src/a%20b.rs")),
            ContentBlock::ResourceLink(ResourceLink::new("x", "https://example.org/x")),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn main() {}",
                    "file:///ws/unsaved.rs",
                )),
            )),
        ];
        assert_eq!(
            text(&blocks, Path::new("/ws")).unwrap(),
            "explain\n@src/a b.rs\nhttps://example.org/x\n<context uri=\"file:///ws/unsaved.rs\">\nfn main() {}\n</context>"
        );
        let image = vec![ContentBlock::Image(ImageContent::new("AAAA", "image/png"))];
        assert!(
            text(&image, Path::new("/ws"))
                .unwrap_err()
                .contains("no images")
        );
        assert!(text(&[], Path::new("/ws")).is_err());
    }
}
