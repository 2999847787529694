//! `read_file` through the pipeline: paging, caps, and what it refuses (SPEC A2).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{env, env_with, mkfifo, mknod_null};
use dsh_core::FailureKind;
use dsh_tools::ReadCaps;
use serde_json::json;

fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

#[tokio::test]
async fn pages_by_lines_with_right_aligned_numbers_and_says_how_to_continue() {
    let e = env();
    e.write("src/ten.txt", numbered(10));
    let (content, value) = e
        .ok(
            "read_file",
            json!({"path": "src/ten.txt", "offset": 3, "limit": 4}),
        )
        .await;
    assert_eq!(
        content,
        "     3\tline 3\n     4\tline 4\n     5\tline 5\n     6\tline 6\n\
         [showing lines 3-6 of 10; continue with offset=7]"
    );
    assert_eq!(
        value,
        json!({"path": "src/ten.txt", "start_line": 3, "end_line": 6, "total_lines": 10, "truncated": true, "encoding": "utf-8"})
    );
}

#[tokio::test]
async fn a_whole_small_file_has_no_notice() {
    let e = env();
    e.write("a.txt", "alpha\nbeta");
    let (content, value) = e.ok("read_file", json!({"path": "./a.txt"})).await;
    assert_eq!(content, "     1\talpha\n     2\tbeta");
    assert_eq!(
        value,
        json!({"path": "a.txt", "start_line": 1, "end_line": 2, "total_lines": 2, "truncated": false, "encoding": "utf-8"})
    );
    // The last page ends exactly at the end: not truncated.
    let (content, value) = e
        .ok(
            "read_file",
            json!({"path": "a.txt", "offset": 2, "limit": 1}),
        )
        .await;
    assert_eq!(content, "     2\tbeta");
    assert_eq!(value["truncated"], false);
}

#[tokio::test]
async fn the_default_and_largest_limit_is_max_read_lines() {
    let e = env_with(&ReadCaps {
        max_read_lines: 5,
        ..ReadCaps::default()
    });
    e.write("twelve.txt", numbered(12));
    for args in [
        json!({"path": "twelve.txt"}),
        json!({"path": "twelve.txt", "limit": 100}),
    ] {
        let (content, value) = e.ok("read_file", args).await;
        assert!(
            content.ends_with("[showing lines 1-5 of 12; continue with offset=6]"),
            "{content}"
        );
        assert_eq!(value["end_line"], 5);
    }
}

#[tokio::test]
async fn the_byte_cap_stops_a_page_and_says_how_to_page_on() {
    let e = env_with(&ReadCaps {
        max_read_bytes: 1024,
        ..ReadCaps::default()
    });
    let line = "x".repeat(99);
    e.write("wide.txt", format!("{line}\n").repeat(100));
    let (content, value) = e.ok("read_file", json!({"path": "wide.txt"})).await;
    // 10 lines of 99 bytes fit in 1024; the 11th does not.
    assert_eq!(value["end_line"], 10);
    assert_eq!(value["total_lines"], 100);
    assert_eq!(value["truncated"], true);
    assert!(
        content.ends_with(
            "[stopped after 1 KiB of content: showing lines 1-10 of 100; continue with offset=11]"
        ),
        "{content}"
    );
    let (_, value) = e
        .ok("read_file", json!({"path": "wide.txt", "offset": 95}))
        .await;
    assert_eq!(
        value,
        json!({"path": "wide.txt", "start_line": 95, "end_line": 100, "total_lines": 100, "truncated": false, "encoding": "utf-8"})
    );
}

#[tokio::test]
async fn long_lines_are_cut_with_a_marker() {
    let e = env();
    e.write("min.js", format!("{}\nshort\n", "é".repeat(5000)));
    let (content, _) = e.ok("read_file", json!({"path": "min.js"})).await;
    let first = content.lines().next().unwrap();
    assert!(first.starts_with("     1\téé"));
    assert!(first.ends_with("[… line cut at 2000 chars]"), "{first}");
    assert_eq!(first.chars().filter(|&c| c == 'é').count(), 2000);
    assert!(content.ends_with("     2\tshort"));
}

#[tokio::test]
async fn a_big_file_is_streamed_and_its_total_is_null_when_not_counted() {
    let e = env();
    // 200 000 lines of 50 bytes: 10 MB, more than is counted ahead of a first page.
    let body: String = (1..=200_000)
        .map(|i| format!("{i:>8} {}\n", "y".repeat(40)))
        .collect();
    assert_eq!(body.len(), 10_000_000);
    e.write("big.log", &body);
    let (content, value) = e
        .ok("read_file", json!({"path": "big.log", "limit": 20}))
        .await;
    assert_eq!(
        value,
        json!({"path": "big.log", "start_line": 1, "end_line": 20, "total_lines": null, "truncated": true, "encoding": "utf-8"})
    );
    assert!(
        content.ends_with("[showing lines 1-20; the file goes on; continue with offset=21]"),
        "{content}"
    );
    let (content, value) = e
        .ok(
            "read_file",
            json!({"path": "big.log", "offset": 199_990, "limit": 5}),
        )
        .await;
    assert_eq!(value["total_lines"], 200_000);
    assert!(content.starts_with(&format!("199990\t  199990 {}", "y".repeat(40))));
    assert!(
        content.ends_with("[showing lines 199990-199994 of 200000; continue with offset=199995]")
    );
}

#[tokio::test]
async fn an_empty_file_and_an_offset_past_the_end() {
    let e = env();
    e.write("empty.txt", "");
    e.write("three.txt", numbered(3));
    let (content, value) = e.ok("read_file", json!({"path": "empty.txt"})).await;
    assert_eq!(content, "[the file is empty]");
    assert_eq!(
        value,
        json!({"path": "empty.txt", "start_line": 1, "end_line": 0, "total_lines": 0, "truncated": false, "encoding": "utf-8"})
    );
    let msg = e
        .fails(
            "read_file",
            json!({"path": "three.txt", "offset": 9}),
            FailureKind::InvalidArgs,
        )
        .await;
    assert_eq!(
        msg,
        "offset 9 is past the end of `three.txt`, which has 3 lines; use an offset from 1 to 3"
    );
    let msg = e
        .fails(
            "read_file",
            json!({"path": "three.txt", "offset": 4}),
            FailureKind::InvalidArgs,
        )
        .await;
    assert!(msg.contains("which has 3 lines"), "{msg}");
}

#[tokio::test]
async fn binary_files_are_refused_and_said_to_be_binary() {
    let e = env();
    let mut elf = b"\x7fELF\x02\x01\x01\0\0\0".to_vec();
    elf.extend_from_slice(&[0u8; 100]);
    e.write("a.out", &elf);
    let msg = e
        .fails(
            "read_file",
            json!({"path": "a.out"}),
            FailureKind::ToolError,
        )
        .await;
    assert!(
        msg.starts_with(
            "`a.out` looks binary (it contains NUL bytes); read_file shows text only (UTF-8, UTF-16 with a byte order mark, Windows-1252)"
        ),
        "{msg}"
    );
    // No NUL in the first 8 KiB, but control bytes throughout and not UTF-8.
    let noisy: Vec<u8> = (0..10_000u32)
        .map(|i| [0x01, 0xE9, 0x02, 0x80][(i % 4) as usize])
        .collect();
    e.write("noisy.bin", &noisy);
    let msg = e
        .fails(
            "read_file",
            json!({"path": "noisy.bin"}),
            FailureKind::ToolError,
        )
        .await;
    assert!(
        msg.starts_with(
            "`noisy.bin` looks binary (it is neither UTF-8 nor text in UTF-16 or Windows-1252)"
        ),
        "{msg}"
    );
    // A UTF-16 byte order mark before bytes that are not UTF-16 (a lone surrogate).
    e.write("bad16.txt", b"\xff\xfea\x00\x00\xd8b\x00");
    let msg = e
        .fails(
            "read_file",
            json!({"path": "bad16.txt"}),
            FailureKind::ToolError,
        )
        .await;
    assert!(
        msg.starts_with("`bad16.txt` looks binary (it is not valid utf-16le at byte 4)"),
        "{msg}"
    );
}

#[tokio::test]
async fn directories_fifos_devices_and_missing_files_are_refused_with_advice() {
    let e = env();
    std::fs::create_dir(e.ws.path().join("src")).unwrap();
    let msg = e
        .fails(
            "read_file",
            json!({"path": "src"}),
            FailureKind::InvalidArgs,
        )
        .await;
    assert_eq!(
        msg,
        "`src` is a directory, not a regular file; use list_dir to see its entries, or find_files to search it"
    );

    // A FIFO with no writer would block a plain open forever; the batch's timeout catches that.
    mkfifo(&e.ws.path().join("pipe"));
    let msg = e
        .fails(
            "read_file",
            json!({"path": "pipe"}),
            FailureKind::InvalidArgs,
        )
        .await;
    assert_eq!(
        msg,
        "`pipe` is a FIFO (named pipe), not a regular file; only regular files can be read"
    );

    if mknod_null(&e.ws.path().join("null")) {
        let msg = e
            .fails(
                "read_file",
                json!({"path": "null"}),
                FailureKind::InvalidArgs,
            )
            .await;
        assert_eq!(
            msg,
            "`null` is a device file, not a regular file; only regular files can be read"
        );
    } else {
        eprintln!("note: mknod not permitted here; the device case is covered through /dev/null");
    }
    // The real /dev/null, by absolute path or through a symlink, is outside the workspace.
    std::os::unix::fs::symlink("/dev/null", e.ws.path().join("devnull")).unwrap();
    for p in ["/dev/null", "devnull"] {
        let msg = e
            .fails("read_file", json!({"path": p}), FailureKind::Denied)
            .await;
        assert!(msg.contains("is outside the workspace"), "{msg}");
    }

    let msg = e
        .fails(
            "read_file",
            json!({"path": "nope.rs"}),
            FailureKind::NotFound,
        )
        .await;
    assert_eq!(
        msg,
        "`nope.rs` does not exist; check the name with list_dir or find_files"
    );
}

/// A UTF-8 file with one stray byte is not shown as Windows-1252 (which would garble every
/// UTF-8 character): its valid lines read as UTF-8, the broken one is refused as before.
#[tokio::test]
async fn utf8_with_a_stray_byte_stays_utf8_and_only_its_broken_line_is_refused() {
    let e = env();
    e.write("stray.txt", b"caf\xc3\xa9\nbroken \xe9\nplain\n");
    let (content, value) = e
        .ok("read_file", json!({"path": "stray.txt", "limit": 1}))
        .await;
    assert_eq!(
        content,
        "     1\tcaf\u{e9}\n[showing lines 1-1 of 3; continue with offset=2]"
    );
    assert_eq!(value["encoding"], "utf-8");
    let msg = e
        .fails(
            "read_file",
            json!({"path": "stray.txt"}),
            FailureKind::ToolError,
        )
        .await;
    assert!(msg.contains("line 2 is not valid UTF-8 text"), "{msg}");
    let (content, _) = e
        .ok("read_file", json!({"path": "stray.txt", "offset": 3}))
        .await;
    assert_eq!(content, "     3\tplain");
}
