//! Every built-in default, in one place (DESIGN §5). [`Config::default`](crate::Config) is
//! built from these, and dsh-agent builds a session's settings from them; no other crate on
//! the session's path writes a default value of its own.

/// `[limits] max_steps`: model steps per task.
pub const LIMITS_MAX_STEPS: u64 = 1_000;
/// `[limits] max_tokens`: token budget per session; 0 is off (the budget is opt-in).
pub const LIMITS_MAX_TOKENS: u64 = 0;
/// `[limits] max_parallel`: calls executing at once.
pub const LIMITS_MAX_PARALLEL: u64 = 8;
/// The largest `[limits] max_parallel` accepted; a larger value is a config error. Every call
/// running at once holds descriptors (a path being resolved, a search's directory handles and
/// open files, a command's pipes — up to ten or so), so 64 of them stay well inside the usual
/// soft limit of 1,024 open files (the unbounded value ran a process at `ulimit -n
/// 256` out of descriptors); past a few dozen, parallel file tools on a machine's cores and
/// disk gain nothing, and 64 parallel sub-agents is already more than any provider's rate
/// limit lets progress.
pub const LIMITS_MAX_PARALLEL_BOUND: u64 = 64;
/// `[limits] max_read_bytes`: bytes `read_file` returns at most.
pub const LIMITS_MAX_READ_BYTES: u64 = 262_144;
/// `[limits] max_results`: results `grep`/`find_files` return at most.
pub const LIMITS_MAX_RESULTS: u64 = 50;
/// `[limits] spill_chars`: results longer than this are spilled to a file.
pub const LIMITS_SPILL_CHARS: u64 = 20_000;
/// `[limits] max_cost_usd`: 0 = off.
pub const LIMITS_MAX_COST_USD: f64 = 0.0;

/// `[permissions] mode`.
pub const PERMISSIONS_MODE: crate::PermissionMode = crate::PermissionMode::Ask;

/// `[shell] timeout_s`: default command timeout, seconds (a real `cargo build` takes
/// minutes; 30 s cut it off).
pub const SHELL_TIMEOUT_S: u64 = 120;
/// The longest timeout a `run_shell` call may ask for (at least the default), seconds.
pub const SHELL_MAX_TIMEOUT_S: u64 = 600;
/// `[shell] max_output_chars`.
pub const SHELL_MAX_OUTPUT_CHARS: u64 = 3000;
/// `[shell] safe`: the built-in read-only list — programs that run without asking, in the
/// read-only sandbox, while their flags keep them reading (each one's flag table is in
/// dsh-policy, whose `READ_ONLY_PROGRAMS` holds the same names).
pub const SHELL_SAFE: &str = "ls cat head tail wc find grep egrep fgrep tree pwd whoami date \
     echo diff stat file sort uniq cut tr nl seq rev tac column comm paste fold join expand \
     unexpand fmt basename dirname realpath readlink which command type uname id groups du \
     printf true false test [ sleep md5sum sha1sum sha224sum sha256sum sha384sum sha512sum \
     b2sum cksum sum cmp od xxd hexdump base64 base32 strings jq rg fd fdfind sed xargs git \
     env printenv nproc arch";
/// `[shell] unlisted`: a program on neither list asks.
pub const SHELL_UNLISTED: crate::Unlisted = crate::Unlisted::Ask;
/// `[shell] confirm`: commands that need confirmation.
pub const SHELL_CONFIRM: &str = "python python3 pip pip3 pytest make npm node awk gawk mawk";

/// `[guards] protected`: paths no tool may write, which no layer can remove.
pub const GUARDS_PROTECTED: [&str; 2] = [".git/**", ".dsh/**"];

/// `[[hooks.pre_tool_use]] timeout_ms`.
pub const HOOK_TIMEOUT_MS: u64 = 5000;

/// `[context] keep_turns`: 0 = unlimited.
pub const CONTEXT_KEEP_TURNS: u64 = 0;
/// `[context] max_fraction`: of the model's context window.
pub const CONTEXT_MAX_FRACTION: f64 = 0.8;

/// `[verify] max_rounds`.
pub const VERIFY_MAX_ROUNDS: u64 = 3;

/// The timeout of one tool execution (gate 4), seconds; not a config key.
pub const TOOL_TIMEOUT_S: u64 = 120;
/// Identical calls in a row after which the loop stops; not a config key.
pub const REPEAT_LIMIT: u32 = 3;

/// `[model] idle_timeout_s`: the longest silence from a model server (waiting for its answer
/// to begin, or between two pieces of its stream) before the attempt fails.
pub const MODEL_IDLE_TIMEOUT_S: u64 = 120;
/// `[model] max_retries`: retries of a model call that failed before any of its content
/// arrived (connection errors, 429, 5xx, an early cut); the first attempt is not counted.
pub const MODEL_MAX_RETRIES: u64 = 3;
