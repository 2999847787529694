//! What the fuzz targets share: splitting an input into parts, and the model stream harness
//! both wire formats' targets run.

use dsh_model::fuzzing::{self, Format};

/// `data` split at the first `sep`: the part before and the rest (everything and nothing
/// when there is no `sep`).
pub fn split_at_byte(data: &[u8], sep: u8) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == sep) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// Runs one stream in `format`: the first byte chooses whether the connection breaks at the
/// end (bit 0) and the chunk size (the rest: 0 means one chunk per byte … up to 127 bytes),
/// the rest is the body. The body is decoded whole and in chunks: SSE framing must not
/// depend on where the network cut the bytes, so both must give the same turn, the same
/// error and the same streamed events.
pub fn stream(format: Format, data: &[u8]) {
    let Some((&head, body)) = data.split_first() else {
        return;
    };
    let broken = head & 1 == 1;
    let size = usize::from(head >> 1).max(1);
    let whole = fuzzing::stream(format, &[body], broken);
    let chunks: Vec<&[u8]> = body.chunks(size).collect();
    let cut = fuzzing::stream(format, &chunks, broken);
    let said = |d: &fuzzing::Decoded| {
        format!(
            "{:?} retried={} events={:?}",
            d.result.as_ref().map_err(ToString::to_string),
            d.retried,
            d.events
        )
    };
    assert_eq!(
        said(&whole),
        said(&cut),
        "the stream decodes differently whole and in chunks of {size}"
    );
    if let Ok(turn) = &whole.result {
        // What streamed is what the turn holds: the text events add up to the answer.
        let streamed: String = whole
            .events
            .iter()
            .filter_map(|e| match e {
                dsh_model::StreamEvent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            streamed, turn.message.content,
            "streamed text differs from the turn"
        );
    }
}

/// A small workspace: a source file, a secret, docs, a git directory, a Python module.
pub fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().expect("a temporary directory");
    let files = [
        ("src/main.rs", "fn main() {}\n"),
        ("src/lib.py", "def f():\n    return 1\n"),
        ("tool.py", "import os\nprint(os.getcwd())\n"),
        (".env", "TOKEN=secret\n"),
        ("docs/a.md", "# a\n"),
        (".git/config", "[core]\n"),
        ("README.md", "hello\n"),
    ];
    for (path, text) in files {
        let path = ws.path().join(path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("a directory");
        }
        std::fs::write(path, text).expect("a file");
    }
    ws
}
