//! The built-in defaults that are not a scalar key's (DESIGN §5): the lists, and the values
//! no key sets. A scalar key's default lives in its entry of the key table
//! ([`crate::keys::KEYS`]); [`Config::default`](crate::Config) holds both, and dsh-agent
//! builds a session's settings from it; no other crate on the session's path writes a
//! default value of its own.

/// The longest timeout a `run_shell` call may ask for (at least `shell.timeout_s`), seconds.
pub const SHELL_MAX_TIMEOUT_S: u64 = 600;
/// `[shell] safe`: the built-in read-only list — programs that run without asking, in the
/// read-only sandbox, while their flags keep them reading (each one's flag table is in
/// dsh-policy, whose `READ_ONLY_PROGRAMS` holds the same names).
pub const SHELL_SAFE: &str = "ls cat head tail wc find grep egrep fgrep tree pwd whoami date \
     echo diff stat file sort uniq cut tr nl seq rev tac column comm paste fold join expand \
     unexpand fmt basename dirname realpath readlink which command type uname id groups du \
     printf true false test [ sleep md5sum sha1sum sha224sum sha256sum sha384sum sha512sum \
     b2sum cksum sum cmp od xxd hexdump base64 base32 strings jq rg fd fdfind sed xargs git \
     env printenv nproc arch";
/// `[shell] confirm`: commands that need confirmation.
pub const SHELL_CONFIRM: &str = "python python3 pip pip3 pytest make npm node awk gawk mawk";

/// `[guards] protected`: paths no tool may write, which no layer can remove.
pub const GUARDS_PROTECTED: [&str; 4] = [".git/**", ".dsh/**", ".claude/**", ".mcp.json"];

/// `[[hooks.EVENT]] timeout_ms`.
pub const HOOK_TIMEOUT_MS: u64 = 5000;
/// A `.claude/settings.json` hook's timeout when it gives none (Claude Code's), seconds.
pub const CLAUDE_HOOK_TIMEOUT_S: u64 = 60;

/// The timeout of one tool execution (gate 4), seconds; not a config key.
pub const TOOL_TIMEOUT_S: u64 = 120;
/// Identical calls in a row after which the loop stops; not a config key.
pub const REPEAT_LIMIT: u32 = 3;

/// `[mcp.servers.NAME] startup_timeout_s`: how long a server may take to start and list its
/// tools.
pub const MCP_STARTUP_TIMEOUT_S: u64 = 30;
/// `[mcp.servers.NAME] timeout_s`: how long one MCP tool call may run.
pub const MCP_TIMEOUT_S: u64 = 120;
/// How many times a stdio MCP server that died is started again in one session; not a
/// config key.
pub const MCP_MAX_RESTARTS: u32 = 3;
