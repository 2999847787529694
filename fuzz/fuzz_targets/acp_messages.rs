//! Lines an editor sends to `dsh acp`, as dsh reads them (the line as text, JSON-RPC, each
//! method's parameters, then dsh's own reading of them): nothing panics; the client's MCP
//! servers get unique names that make valid tool names; a prompt taken is not empty.
#![no_main]
use std::collections::BTreeSet;
use std::path::Path;

use dsh_acp::fuzzing::client_line;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let read = client_line(data, Path::new("/ws"));
    let mut names = BTreeSet::new();
    for (name, _) in read.servers.iter() {
        assert!(
            names.insert(name.clone()),
            "two servers named {name:?}: {read:?}"
        );
        assert!(
            dsh_mcp::tool_name(name, "t").is_ok(),
            "server name {name:?} makes no tool name"
        );
    }
    if let Some(Ok(text)) = &read.prompt {
        assert!(!text.trim().is_empty());
    }
});
