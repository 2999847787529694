//! The built-in configuration: every scalar key at its default from the key table
//! ([`crate::keys::KEYS`]), every list at its default from [`crate::defaults`].

use std::collections::BTreeMap;

use crate::config::{
    Compat, Config, ContextConfig, Fsync, Guards, Hooks, JournalConfig, Limits, Mcp, ModelConfig,
    PermissionMode, Permissions, Provider, SandboxConfig, SandboxMode, ShellConfig, ToolsConfig,
    ToolsMode, Unlisted, VerifyConfig,
};
use crate::defaults;

impl Default for Config {
    fn default() -> Self {
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect();
        // Every scalar below is a placeholder: the key table stores each key's default next.
        let mut c = Config {
            model: ModelConfig {
                provider: Provider::Openai,
                base_url: String::new(),
                model: None,
                api_key_env: None,
                context_window: None,
                price: None,
                idle_timeout_s: 0,
                max_retries: 0,
            },
            permissions: Permissions {
                mode: PermissionMode::Ask,
                allow: Vec::new(),
                ask: Vec::new(),
                deny: Vec::new(),
            },
            shell: ShellConfig {
                safe: words(defaults::SHELL_SAFE),
                confirm: words(defaults::SHELL_CONFIRM),
                unlisted: Unlisted::Ask,
                timeout_s: 0,
                max_output_chars: 0,
                pass_env: Vec::new(),
            },
            guards: Guards::default(),
            hooks: Hooks {
                max_continuations: 0,
                entries: Vec::new(),
            },
            compat: Compat { claude: false },
            mcp: Mcp::default(),
            limits: Limits {
                max_steps: 0,
                max_tokens: 0,
                max_parallel: 0,
                max_read_bytes: 0,
                max_results: 0,
                spill_chars: 0,
                max_cost_usd: 0.0,
            },
            journal: JournalConfig {
                fsync: Fsync::Batch,
            },
            sandbox: SandboxConfig {
                mode: SandboxMode::Auto,
                allow_network: false,
            },
            context: ContextConfig {
                keep_turns: 0,
                max_fraction: 0.0,
            },
            tools: ToolsConfig {
                mode: ToolsMode::Native,
                code_timeout_s: 0,
            },
            verify: VerifyConfig {
                command: None,
                max_rounds: 0,
            },
            agents: BTreeMap::new(),
        };
        for k in crate::keys::KEYS {
            k.store(&mut c, k.default.map(crate::keys::Fixed::scalar).as_ref());
        }
        c
    }
}
