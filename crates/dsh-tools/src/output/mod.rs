//! Tools over dsh's own state rather than the workspace.

pub mod read_output;
