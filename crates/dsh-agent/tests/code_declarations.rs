//! The TypeScript declarations a Code Mode system prompt carries, for every built-in tool a
//! program may call (issue 25): a snapshot, so a change to a tool's schemas shows here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_agent::{Session, SessionSettings};

#[test]
fn the_declarations_of_every_built_in_tool() {
    let dir = tempfile::tempdir().unwrap();
    let settings = SessionSettings::new(dir.path(), dir.path().join("home"));
    let session = Session::assemble_dry(&settings).unwrap();
    let specs = session.pipeline.specs(&session.main_tools());
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    // Every built-in but the person's restore_file; run_code is reserved and not declared.
    assert!(names.contains(&"run_shell") && names.contains(&"call_sub_agent"));
    assert!(!names.contains(&"restore_file"));
    let declared = dsh_code::declarations(specs.iter().filter(|s| !s.reserved).map(|s| &**s));
    assert!(!declared.contains("run_code("));
    insta::assert_snapshot!(declared);
}
