//! The scripted task `e2e` and `acp` run: `steps` turns of one cheap tool call each
//! (`read_file` of a small module and `list_dir`, alternating so the repeated-call stop
//! line never fires), then a final answer.

use dsh_testkit::model_server::{Reply, Turn};

/// `steps` tool-call turns, then a final answer.
pub fn script(steps: usize) -> Vec<Reply> {
    let mut replies: Vec<Reply> = (0..steps)
        .map(|i| {
            let turn = if i % 2 == 0 {
                Turn::tool_call(
                    &format!("c{i}"),
                    "read_file",
                    &format!(r#"{{"path":"src/m{i}.rs"}}"#),
                )
            } else {
                Turn::tool_call(&format!("c{i}"), "list_dir", r#"{"path":"src"}"#)
            };
            turn.usage(1000, 20).deltas(64).into()
        })
        .collect();
    replies.push(
        Turn::text("Every module returns its index.")
            .deltas(64)
            .into(),
    );
    replies
}
