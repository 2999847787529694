//! Faults of the file seam found from outside (issue 13), through the real `dsh` binary: the
//! temporary files a killed write leaves behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Dirs, json_lines, kind, stderr};
use serde_json::{Value, json};

/// A session start removes the seam's temporary files whose writer is dead, and nothing else:
/// not one whose writer lives (this test), not a fresh one, not a look-alike name, not a
/// symlink with the name, not one reached through a symlinked directory (outside the
/// workspace). And neither grep nor find_files ever shows one.
#[cfg(target_os = "linux")]
#[test]
fn a_session_start_sweeps_dead_writers_temp_files_and_search_never_shows_them() {
    use std::os::unix::fs::symlink;

    /// Sets a file's modification time an hour back: older than the sweep's minimum age.
    fn age(path: &std::path::Path) {
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
    }

    /// A PID that belonged to a process which has exited and been reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    let d = Dirs::new();
    let sub = d.ws.join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("code.rs"), "needle in the real file\n").unwrap();
    let dead = dead_pid();
    let me = std::process::id();
    let temp = |pid: u32, n: u32| format!(".code.rs.dsh-{pid}-{n}.tmp");
    let stale = [d.ws.join(temp(dead, 0)), sub.join(temp(dead, 1))];
    let kept = [
        sub.join(temp(me, 2)),                           // live writer
        sub.join(format!(".code.rs.dsh-0{dead}-3.tmp")), // not the grammar
        sub.join(format!("code.rs.dsh-{dead}-4.tmp")),   // not hidden: not the grammar
    ];
    for p in stale.iter().chain(&kept) {
        std::fs::write(p, "needle in a temporary file\n").unwrap();
        age(p);
    }
    let fresh = sub.join(temp(dead, 5));
    std::fs::write(&fresh, "needle in a temporary file\n").unwrap();
    // Outside: a file with the grammar's name, reached through a symlinked directory, and the
    // target of a symlink that has the grammar's name.
    let outside_temp = d.outside.join(temp(dead, 6));
    std::fs::write(&outside_temp, "outside\n").unwrap();
    age(&outside_temp);
    symlink(&d.outside, d.ws.join("src/out")).unwrap();
    let outside_target = d.outside.join("precious");
    std::fs::write(&outside_target, "outside\n").unwrap();
    let link = sub.join(temp(dead, 7));
    symlink(&outside_target, &link).unwrap();

    let calls = [
        json!({"id": "grep", "name": "grep", "args": {"pattern": "needle"}}),
        json!({"id": "find", "name": "find_files", "args": {"pattern": "*"}}),
        json!({"id": "find_tmp", "name": "find_files", "args": {"pattern": "*.tmp"}}),
        json!({"id": "grep_sub", "name": "grep", "args": {"pattern": "needle", "path": "src/deep"}}),
    ];
    let out = d.batch_output(&calls, &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = json_lines(&out);

    for p in &stale {
        assert!(!p.exists(), "{} was not swept", p.display());
    }
    for p in kept.iter().chain([&fresh, &outside_temp, &outside_target]) {
        assert!(p.exists(), "{} was removed", p.display());
    }
    assert!(link.symlink_metadata().is_ok(), "the symlink was removed");

    for r in &results {
        assert_eq!(kind(r), "ok", "{r}");
        let text = r.to_string();
        // Every temporary name the seam makes here starts so; the visible look-alike does not.
        assert!(
            !text.contains(".code.rs.dsh-"),
            "{} shows a temporary file: {text}",
            r["call_id"]
        );
    }
    let paths = |r: &Value| r["value"]["paths"].as_array().unwrap().clone();
    assert_eq!(
        paths(&results[1]),
        [
            json!("src/deep/code.rs"),
            json!(format!("src/deep/code.rs.dsh-{dead}-4.tmp")),
            json!("src/out"),
        ],
        "find_files lists the real file, the visible look-alike and the symlink only"
    );
    assert_eq!(paths(&results[2]).len(), 1, "{}", results[2]);
    for r in [&results[0], &results[3]] {
        let hits = r["value"]["matches"].as_array().unwrap();
        assert_eq!(hits.len(), 2, "the real file and the look-alike: {r}");
    }
}
