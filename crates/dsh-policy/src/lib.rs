//! dsh's policies, each a listener on a pipeline gate. Policies learn what a call touches from
//! the tool's [`dsh_core::Access`] declarations, never by knowing the tool (DESIGN §2), and do
//! not know each other: the pipeline combines their votes (DESIGN §3).
//!
//! | policy | gate | tier | what it decides |
//! |--------|------|------|-----------------|
//! | [`Confinement`] | 1 and 3 | rule | every declared path resolves inside the workspace |
//! | [`ProtectedPaths`] | 1 and 3 | rule | no write to a protected path (default `.git/**`, `.dsh/**`) |
//! | [`PermissionRules`] | 1 | rule | `allow` / `ask` / `deny` rules such as `read_file(src/**)` |
//! | [`ShellPolicy`] | 1 | rule or default | each command of a `run_shell` line, by `run_shell` rules and the safe/confirm lists; `python` scripts and `-c` code audited first ([`python`]) |
//! | [`PythonAuditGuard`] | 3 | — | the Python a `run_shell` line runs still passes the audit ([`python`]) |
//! | [`HookPolicy`] | 1 | rule | `PreToolUse` hooks (Claude Code's protocol) vote allow, deny or ask |
//! | [`Redact`] | 5 | — | secrets in any output (known credential values, token shapes) replaced by a marker naming the kind |
//! | [`PostToolUseHooks`] | 5 | — | `PostToolUse` hooks may withhold a result or attach context |
//! | [`Spill`] | 5 | — | oversized output saved, head and tail kept, locator given |
//!
//! Permission rules arrive as [`dsh_core::Rule`] — parsed by the one grammar, with the list
//! they are on and where they were written — and what a policy compiles from them (a path
//! pattern) stays private to it; this crate reads no configuration file and does not depend
//! on dsh-config.
//!
//! Confinement and protected paths vote at gate 1 *and* guard at gate 3, so a call they refuse
//! is never sent to a person and `dsh check` reports it, while the guard keeps the red line
//! even if a later listener allows everything (SPEC P4).

mod added;
mod confine;
mod glob;
pub mod hooks;
mod linked;
mod memory;
mod mode;
mod protect;
pub mod python;
mod redact;
mod rules;
pub mod shell;
mod spill;

pub use added::AddedRules;
pub use confine::Confinement;
pub use glob::{PathPattern, PatternError};
pub use hooks::{HookPolicy, Hooks, PostToolUseHooks};
pub use memory::{MEMORY_FILE, MemoryPolicy, PROMPT_FILES, is_memory_file};
pub use mode::{AUTO_NEEDS, KeptCheck, ModePolicy, ModeSwitch};
pub use protect::{ProtectedPaths, protected_match};
pub use python::PythonAuditGuard;
pub use redact::{Redact, SHAPES, Shape};
pub use rules::{Decision, PermissionRules, RuleError};
pub use shell::{NetworkVote, READ_ONLY_PROGRAMS, SandboxCheck, ShellLists, ShellPolicy};
pub use spill::Spill;
