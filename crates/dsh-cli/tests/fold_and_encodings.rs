//! End to end through `dsh batch`: protected paths are refused however a folding file system
//! would spell them, and files in legacy encodings are read and edited byte-exactly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Dirs, json_lines, kind, stderr};
use serde_json::{Value, json};

fn batch(d: &Dirs, calls: &[Value], extra: &[&str]) -> Vec<Value> {
    let out = d.batch_output(calls, extra, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = json_lines(&out);
    assert_eq!(results.len(), calls.len(), "{results:?}");
    results
}

/// A workspace may sit on a case-folding mount, where each of these writes `.git` or `.dsh`:
/// all are denied at gate 1 even with `--yolo`, naming the pattern, and nothing is written
/// (on this case-sensitive file system they would have created new directories).
#[test]
fn yolo_batch_cannot_write_protected_paths_spelled_as_a_folding_file_system_resolves_them() {
    let d = Dirs::new();
    std::fs::create_dir_all(d.ws.join(".git/hooks")).unwrap();
    let cases = [
        (".Git/hooks/pre-commit", ".git/**"),
        (".DSH/config.toml", ".dsh/**"),
        (".git./config", ".git/**"),
    ];
    let calls: Vec<Value> = cases
        .iter()
        .map(|(path, _)| {
            json!({"name": "write_file", "args": {"path": path, "content": "#!/bin/sh\necho pwned\n"}})
        })
        .collect();
    let results = batch(&d, &calls, &["--yolo"]);
    for (r, (path, pattern)) in results.iter().zip(cases) {
        assert_eq!(kind(r), "denied", "{path}: {r}");
        assert_eq!(r["decided_by"]["gate"], "pre_policy", "{path}: {r}");
        assert_eq!(r["decided_by"]["policy"], "protected_paths", "{path}: {r}");
        let reason = r["decided_by"]["reason"].as_str().unwrap();
        assert!(reason.contains(&format!("`{pattern}`")), "{path}: {reason}");
    }
    let mut names: Vec<String> = std::fs::read_dir(&d.ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [".git"], "nothing else was created");
    assert_eq!(
        std::fs::read_dir(d.ws.join(".git/hooks")).unwrap().count(),
        0
    );
}

/// `read_file` decodes a Latin-1 file under its notice; `edit_file` in the same batch writes it
/// back in Windows-1252, every byte outside the edit (CRLF, `é`, `€`) unchanged.
#[test]
fn batch_reads_and_edits_a_latin1_file_byte_exactly() {
    let d = Dirs::new();
    let before = b"caf\xe9 \x80 5\r\nprice: 5\r\nna\xefve\r\n";
    std::fs::write(d.ws.join("legacy.txt"), before).unwrap();
    let calls = [
        json!({"id": "read", "name": "read_file", "args": {"path": "legacy.txt"}}),
        json!({"id": "edit", "name": "edit_file", "args": {
            "path": "legacy.txt", "old_string": "price: 5", "new_string": "Preis: 6 \u{20ac} \u{fc}"}}),
    ];
    let results = batch(&d, &calls, &["--yolo"]);
    let (read, edit) = (&results[0], &results[1]);
    assert_eq!(kind(read), "ok", "{read}");
    assert_eq!(
        read["content"],
        "[dsh: decoded as windows-1252; edits are written back in windows-1252]\n     1\tcaf\u{e9} \u{20ac} 5\r\n     2\tprice: 5\r\n     3\tna\u{ef}ve\r"
    );
    assert_eq!(read["value"]["encoding"], "windows-1252");
    assert_eq!(kind(edit), "ok", "{edit}");
    assert_eq!(edit["value"]["encoding"], "windows-1252");
    assert_eq!(
        std::fs::read(d.ws.join("legacy.txt")).unwrap(),
        b"caf\xe9 \x80 5\r\nPreis: 6 \x80 \xfc\r\nna\xefve\r\n"
    );
}
