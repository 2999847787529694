//! A program's hard limits: what it may use of memory, time, tool calls and output. Each
//! default is here, once.

use std::time::Duration;

/// What one `run_code` program may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeLimits {
    /// The interpreter's heap.
    pub memory_bytes: usize,
    /// The interpreter's stack (deep recursion fails as a `RangeError`, never a crash).
    pub stack_bytes: usize,
    /// Wall time for the whole program, counting the time it waits for its tool calls
    /// (`[tools] code_timeout_s`).
    pub wall: Duration,
    /// Tool calls the program may make in all.
    pub max_calls: usize,
    /// Bytes `console.log` may write; more stops the program.
    pub max_log_bytes: usize,
    /// Bytes of the returned value (as JSON); more is a failure.
    pub max_value_bytes: usize,
}

impl Default for CodeLimits {
    fn default() -> Self {
        CodeLimits {
            memory_bytes: 64 << 20,
            stack_bytes: 1 << 20,
            wall: Duration::from_secs(60),
            max_calls: 200,
            max_log_bytes: 64 << 10,
            max_value_bytes: 256 << 10,
        }
    }
}
