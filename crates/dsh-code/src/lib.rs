//! Code Mode (SPEC P11, DESIGN §2–§3): the model writes one program that calls tools, so many
//! round trips fold into one — without a back door. The program runs in an embedded
//! JavaScript interpreter with hard limits and nothing of its own to reach the world with;
//! each `tools.NAME(args)` it makes is a real call through the session's pipeline, within the
//! tools of the agent that runs it. The gates are the boundary; the interpreter is
//! containment.
//!
//! - `tool.rs`: `run_code`, the reserved tool, and the result of a program.
//! - `engine.rs`: the interpreter (the only file naming it), behind the `interpreter` feature.
//! - `program.rs`: what passes between the two.
//! - `limits.rs`: memory, time, calls and output, with their defaults.
//! - `declare.rs`: TypeScript declarations of the tools, for the system prompt.

mod declare;
#[cfg(feature = "interpreter")]
mod engine;
mod limits;
mod program;
mod tool;

pub use declare::declarations;
pub use limits::CodeLimits;
pub use tool::{RUN_CODE, RunCode};
