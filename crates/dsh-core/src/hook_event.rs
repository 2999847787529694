//! [`HookEvent`]: the moments a hook may be run at, spelled as Claude Code spells them, so a
//! `[[hooks.PreToolUse]]` table and a `.claude/settings.json` `hooks.PreToolUse` list name the
//! same thing (DESIGN §5).

crate::spelled_enum! {
    /// When a hook runs.
    HookEvent {
        /// Gate 1: before a call is judged; the hook votes allow, deny or ask.
        PreToolUse = "PreToolUse",
        /// Gate 5: after a call ran; the hook may withhold the result or attach context, never
        /// flip whether it succeeded.
        PostToolUse = "PostToolUse",
        /// A session starts (or is resumed); the hook may add context.
        SessionStart = "SessionStart",
        /// A person's prompt is about to be sent; the hook may add context or block it.
        UserPromptSubmit = "UserPromptSubmit",
        /// The main agent is about to end its turn; the hook may ask it to go on.
        Stop = "Stop",
        /// A sub-agent is about to end; the hook may ask it to go on.
        SubagentStop = "SubagentStop",
        /// The conversation is about to be compacted.
        PreCompact = "PreCompact",
        /// A call is waiting for a person's approval.
        Notification = "Notification",
    }
}

impl HookEvent {
    /// Whether hooks of this event match on a tool's name.
    pub fn matches_tools(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }
}
