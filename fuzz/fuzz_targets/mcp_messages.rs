//! Lines an MCP server sends (a tool list, a call result, anything) as dsh's MCP client
//! reads them, and lines a client sends to `dsh mcp serve`: nothing panics; every tool dsh
//! would hand the session registers or is refused with a reason (a hostile schema included);
//! a rendered result without an output schema always matches the content schema dsh
//! declares for such tools.
#![no_main]
use std::sync::OnceLock;

use dsh_core::{Registry, Tool};
use dsh_mcp::fuzzing::{client_line, server_line};
use libfuzzer_sys::fuzz_target;

fn content_schema() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        jsonschema::validator_for(&dsh_mcp::content_schema()).expect("the content schema compiles")
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = client_line(data);
    let read = server_line(data);
    let mut registry = Registry::new();
    for tool in read.tools.into_iter().flatten() {
        let spec = tool.spec();
        assert!(spec.name.starts_with("mcp__fuzz__"), "{}", spec.name);
        assert!(spec.description.chars().count() <= 4000);
        let _ = tool.accesses(&serde_json::json!({}));
        // A name the session already has is refused like a bad schema: never a panic.
        let _ = registry.register_arc(tool);
    }
    if let Some((_, value, _)) = read.rendered.first() {
        assert!(
            content_schema().is_valid(value),
            "a rendered result does not match the content schema: {value}"
        );
    }
});
