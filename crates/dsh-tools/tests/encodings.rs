//! Files in legacy encodings through the pipeline: `read_file` decodes Windows-1252 (Latin-1)
//! and UTF-16 with a byte order mark under a notice line, and `edit_file` / `write_file` write
//! them back in their encoding, every byte outside the change exactly as it was, or refuse.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::write_under;
use dsh_core::journal::MemoryJournal;
use dsh_core::{
    ApprovalOutcome, CancellationToken, FailureKind, FrozenResult, Pipeline, Registry, SpillStore,
    ToolCall, Workspace,
};
use dsh_testkit::ScriptedApprover;
use dsh_tools::{FileSeam, ReadCaps, session_tools};
use serde_json::{Value, json};
use tempfile::TempDir;

const NOTICE_1252: &str = "[dsh: decoded as windows-1252; edits are written back in windows-1252]";

/// One session (its own file seam) over a temp workspace, approving every ask.
struct Env {
    ws: TempDir,
    _spill: TempDir,
    pipeline: Arc<Pipeline>,
}

fn env() -> Env {
    let ws = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let workspace = Arc::new(Workspace::new(ws.path()).unwrap());
    let store = Arc::new(SpillStore::new(spill.path().join("session")));
    let mut registry = Registry::new();
    for tool in session_tools(
        workspace,
        &ReadCaps::default(),
        Arc::new(FileSeam::new()),
        store,
        20_000,
    ) {
        registry.register_arc(tool).unwrap();
    }
    let pipeline = Pipeline::builder(registry, Arc::new(MemoryJournal::new("encodings")))
        .approver(ScriptedApprover::answering(ApprovalOutcome::AllowedOnce))
        .build();
    Env {
        ws,
        _spill: spill,
        pipeline,
    }
}

impl Env {
    fn path(&self, rel: &str) -> PathBuf {
        self.ws.path().join(rel)
    }

    fn write(&self, rel: &str, bytes: &[u8]) {
        write_under(self.ws.path(), rel, bytes);
    }

    fn bytes(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).unwrap()
    }

    async fn call(&self, name: &str, args: Value) -> Arc<FrozenResult> {
        self.pipeline
            .run_batch(
                vec![ToolCall::new("c", name, args)],
                &CancellationToken::new(),
            )
            .await
            .unwrap()
            .results
            .remove(0)
    }

    async fn ok(&self, name: &str, args: Value) -> (String, Value) {
        let r = self.call(name, args).await;
        assert!(r.ok(), "{}", r.to_json());
        (r.content().to_owned(), r.value().cloned().unwrap())
    }

    async fn fails(&self, name: &str, args: Value, kind: FailureKind) -> String {
        let r = self.call(name, args).await;
        assert_eq!(r.failure_kind(), Some(kind), "{}", r.to_json());
        r.content().to_owned()
    }

    async fn read(&self, rel: &str) -> (String, Value) {
        self.ok("read_file", json!({"path": rel})).await
    }
}

fn edit(path: &str, old: &str, new: &str) -> Value {
    json!({"path": path, "old_string": old, "new_string": new})
}

fn utf16(text: &str, little_endian: bool) -> Vec<u8> {
    std::iter::once(0xFEFF)
        .chain(text.encode_utf16())
        .flat_map(|u| {
            if little_endian {
                u.to_le_bytes()
            } else {
                u.to_be_bytes()
            }
        })
        .collect()
}

#[tokio::test]
async fn a_latin1_file_reads_decoded_under_a_notice_that_keeps_the_files_line_numbers() {
    let e = env();
    e.write("latin1.txt", b"caf\xe9\r\nna\xefve \xb0C\r\nend\r\n");
    let (content, value) = e.read("latin1.txt").await;
    assert_eq!(
        content,
        format!("{NOTICE_1252}\n     1\tcaf\u{e9}\r\n     2\tna\u{ef}ve \u{b0}C\r\n     3\tend\r")
    );
    assert_eq!(
        value,
        json!({"path": "latin1.txt", "start_line": 1, "end_line": 3, "total_lines": 3,
               "truncated": false, "encoding": "windows-1252"})
    );
    // Paging counts the file's lines, not the notice.
    let (content, value) = e
        .ok(
            "read_file",
            json!({"path": "latin1.txt", "offset": 2, "limit": 1}),
        )
        .await;
    assert_eq!(
        content,
        format!(
            "{NOTICE_1252}\n     2\tna\u{ef}ve \u{b0}C\r\n[showing lines 2-2 of 3; continue with offset=3]"
        )
    );
    assert_eq!(
        (value["start_line"].as_u64(), value["end_line"].as_u64()),
        (Some(2), Some(2))
    );
}

#[tokio::test]
async fn a_1252_file_with_smart_quotes_reads_as_the_characters_they_are() {
    let e = env();
    e.write("quotes.txt", b"\x93quoted\x94 \x91a\x92 \x96 \x80 5 \x85\n");
    let (content, value) = e.read("quotes.txt").await;
    assert_eq!(
        content,
        format!(
            "{NOTICE_1252}\n     1\t\u{201c}quoted\u{201d} \u{2018}a\u{2019} \u{2013} \u{20ac} 5 \u{2026}"
        )
    );
    assert_eq!(value["encoding"], "windows-1252");
}

#[tokio::test]
async fn utf16_files_with_a_bom_are_decoded_in_either_byte_order() {
    let e = env();
    let text = "first \u{fc}\r\nsecond \u{1F600}\r\n";
    for (name, le, enc) in [("le.txt", true, "utf-16le"), ("be.txt", false, "utf-16be")] {
        e.write(name, &utf16(text, le));
        let (content, value) = e.read(name).await;
        assert_eq!(
            content,
            format!(
                "[dsh: decoded as {enc}; edits are written back in {enc}]\n     1\tfirst \u{fc}\r\n     2\tsecond \u{1F600}\r"
            ),
            "{name}"
        );
        assert_eq!(value["encoding"], enc);
        assert_eq!(value["total_lines"], 2);
    }
}

#[tokio::test]
async fn utf8_files_are_read_as_before_without_a_notice() {
    let e = env();
    // A UTF-8 byte order mark stays part of the text, as it always was.
    e.write("bom.txt", "\u{feff}caf\u{e9}\n".as_bytes());
    let (content, value) = e.read("bom.txt").await;
    assert_eq!(content, "     1\t\u{feff}caf\u{e9}");
    assert_eq!(value["encoding"], "utf-8");
}

/// Each edit changes one spot; the expected bytes are the original's with only that spot
/// changed (in the file's encoding), so any transcoding elsewhere would show.
#[tokio::test]
async fn edits_of_legacy_files_keep_every_byte_outside_the_edit() {
    let e = env();
    let latin1 = b"caf\xe9 \x80 5\r\nprice \x80 5\r\nlast \xff\x81\r\n".to_vec();
    let text16 = "first \u{fc}\r\nsecond \u{1F600}\r\nthird\r\n";
    let cases: Vec<(&str, Vec<u8>, Value, Vec<u8>)> = vec![
        (
            "one-line.txt",
            latin1.clone(),
            edit(
                "one-line.txt",
                "price \u{20ac} 5",
                "price \u{20ac} 6 \u{e9}",
            ),
            b"caf\xe9 \x80 5\r\nprice \x80 6 \xe9\r\nlast \xff\x81\r\n".to_vec(),
        ),
        (
            // LF strings in a CRLF file: replaced in CRLF.
            "two-lines.txt",
            latin1.clone(),
            edit("two-lines.txt", "5\nprice", "5\nPRICE"),
            b"caf\xe9 \x80 5\r\nPRICE \x80 5\r\nlast \xff\x81\r\n".to_vec(),
        ),
        (
            "le.txt",
            utf16(text16, true),
            edit("le.txt", "second", "zweite \u{65e5}"),
            utf16(
                "first \u{fc}\r\nzweite \u{65e5} \u{1F600}\r\nthird\r\n",
                true,
            ),
        ),
        (
            "be.txt",
            utf16(text16, false),
            edit("be.txt", "third", "dritte"),
            utf16("first \u{fc}\r\nsecond \u{1F600}\r\ndritte\r\n", false),
        ),
    ];
    for (name, before, args, after) in cases {
        e.write(name, &before);
        e.read(name).await;
        let (content, value) = e.ok("edit_file", args).await;
        assert_eq!(e.bytes(name), after, "{name}");
        let enc = value["encoding"].as_str().unwrap().to_owned();
        assert_ne!(enc, "utf-8", "{name}");
        assert!(
            content.starts_with(&format!(
                "edited {name}: 1 replacement, written back in {enc}\n"
            )),
            "{content}"
        );
        // Read back, the file is the same encoding still.
        let (_, value) = e.read(name).await;
        assert_eq!(value["encoding"], enc.as_str(), "{name}");
    }
}

#[tokio::test]
async fn an_edit_with_a_character_the_encoding_has_not_is_refused_and_changes_nothing() {
    let e = env();
    let before = b"caf\xe9\nprice \x80 5\n";
    e.write("latin1.txt", before);
    e.read("latin1.txt").await;
    let msg = e
        .fails(
            "edit_file",
            edit("latin1.txt", "price", "\u{65e5}\u{672c} price"),
            FailureKind::InvalidArgs,
        )
        .await;
    assert!(
        msg.starts_with(
            "`latin1.txt` is kept in windows-1252, and the new text has `\u{65e5}` (U+65E5), which windows-1252 cannot encode; nothing was changed"
        ),
        "{msg}"
    );
    assert_eq!(e.bytes("latin1.txt"), before);
    // The refusal changed nothing the seam knows: an encodable edit goes through unread.
    e.ok("edit_file", edit("latin1.txt", "price", "Preis \u{fc}"))
        .await;
    assert_eq!(e.bytes("latin1.txt"), b"caf\xe9\nPreis \xfc \x80 5\n");
}

#[tokio::test]
async fn write_file_replaces_a_legacy_file_in_its_encoding_and_creates_utf8() {
    let e = env();
    e.write("latin1.txt", b"alt: caf\xe9\n");
    e.read("latin1.txt").await;
    let msg = e
        .fails(
            "write_file",
            json!({"path": "latin1.txt", "content": "neu \u{65e5}\n"}),
            FailureKind::InvalidArgs,
        )
        .await;
    assert!(
        msg.contains("`\u{65e5}` (U+65E5), which windows-1252 cannot encode"),
        "{msg}"
    );
    assert_eq!(e.bytes("latin1.txt"), b"alt: caf\xe9\n");
    let (content, value) = e
        .ok(
            "write_file",
            json!({"path": "latin1.txt", "content": "neu: \u{fc} \u{20ac}\n"}),
        )
        .await;
    assert_eq!(e.bytes("latin1.txt"), b"neu: \xfc \x80\n");
    assert_eq!(
        content,
        "replaced latin1.txt (9 bytes, written in windows-1252)"
    );
    assert_eq!(
        value,
        json!({"path": "latin1.txt", "bytes": 9, "created": false, "encoding": "windows-1252"})
    );

    e.write("le.txt", &utf16("old\r\n", true));
    e.read("le.txt").await;
    e.ok(
        "write_file",
        json!({"path": "le.txt", "content": "new \u{65e5}\r\n"}),
    )
    .await;
    assert_eq!(e.bytes("le.txt"), utf16("new \u{65e5}\r\n", true));

    let (_, value) = e
        .ok(
            "write_file",
            json!({"path": "fresh.txt", "content": "caf\u{e9}\n"}),
        )
        .await;
    assert_eq!(e.bytes("fresh.txt"), "caf\u{e9}\n".as_bytes());
    assert_eq!(value["encoding"], "utf-8");
}
