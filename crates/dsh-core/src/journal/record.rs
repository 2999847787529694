//! The closed list of record kinds (DESIGN §6), one [`Record`] enum read and written by the
//! same code.
//!
//! A kind's name exists only in serde's tag (`#[serde(tag = "kind")]`, snake_case): a writer
//! builds a variant, the reader gets one back, and a new kind is a compile error until every
//! `match` handles it. Serializing a record gives `{"kind":"…",<fields>}` with the fields in
//! declaration order; the journal wraps that in the envelope (`v`, `seq`, `ts`, `session`
//! before it, `agent` and `prev` after it).
//!
//! Writers borrow (`Cow`, [`Held`]): journaling a tool call or its result copies nothing
//! before it is serialized. Records read back own their data (`Record<'static>`).

use std::borrow::Cow;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::Stored;
use crate::call::CallSource;
use crate::policy::ApprovalOutcome;
use crate::result::{AttachedContext, FrozenResult};

/// One journal record: its kind and that kind's fields. See the module docs.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record<'a> {
    /// The first record of every session file.
    SessionStart {
        workspace: Cow<'a, Path>,
        provider: Option<Cow<'a, str>>,
        model: Option<Cow<'a, str>>,
        dsh_version: Cow<'a, str>,
        config_digest: Cow<'a, str>,
        /// Set when this session resumes another (the last intact record of the old file).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resumed_from: Option<ResumedFrom<'a>>,
        /// The permission mode the session started in (`read-only | ask | auto | yolo`;
        /// absent in journals older than the modes: `ask`, or `yolo` for a `--yolo` run).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<Cow<'a, str>>,
        /// How the models called tools (`native | code | both`; absent in journals older
        /// than Code Mode: `native`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tools_mode: Option<Cow<'a, str>>,
        /// The client whose calls the session serves (`dsh mcp serve`: the MCP client's name
        /// as its `initialize` gave it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client: Option<Cow<'a, str>>,
    },
    UserMessage {
        text: Cow<'a, str>,
    },
    /// One model call.
    LlmCall {
        step: u32,
        provider: Cow<'a, str>,
        model: Cow<'a, str>,
        prompt_tokens: u64,
        completion_tokens: u64,
        /// The provider reported no usage; the counts are estimates.
        tokens_estimated: bool,
        /// Of `prompt_tokens`, those the provider's prompt cache served.
        #[serde(default)]
        cached_tokens: u64,
        /// Of `prompt_tokens`, those written to the prompt cache.
        #[serde(default)]
        cache_write_tokens: u64,
        /// What the call cost, from the model's prices; `None` when they are unknown.
        #[serde(default)]
        cost_usd: Option<f64>,
        elapsed_ms: u64,
        has_tool_calls: bool,
        /// As the provider crate serializes it (`"stop"`, `"tool_calls"`, `{"other":"…"}`).
        finish_reason: Cow<'a, Value>,
    },
    AssistantMessage {
        step: u32,
        content: Cow<'a, str>,
        tool_calls: Vec<RequestedCall<'a>>,
        reasoning: Option<Cow<'a, str>>,
    },
    /// Written and flushed before gate 1 (SPEC P1).
    ToolCall {
        call_id: Cow<'a, str>,
        name: Cow<'a, str>,
        /// Inline, or over [`INLINE_MAX`](super::INLINE_MAX) bytes in a blob beside the
        /// journal.
        args: Stored<'a, Value>,
        source: CallSource,
        parent: Option<Cow<'a, str>>,
        step: u32,
    },
    Approval {
        call_id: Cow<'a, str>,
        outcome: ApprovalOutcome,
        /// What the person told the model with a refusal.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<Cow<'a, str>>,
    },
    /// Execution began.
    ToolStarted {
        call_id: Cow<'a, str>,
    },
    /// DESIGN §4's result object, field for field.
    ToolResult(Held<'a, FrozenResult>),
    ContextAttached(Held<'a, AttachedContext>),
    Stop {
        reason: Cow<'a, str>,
        /// What went wrong, for a fault (`model_error`, `journal_error`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<Cow<'a, str>>,
        #[serde(flatten)]
        totals: Totals,
    },
    SessionEnd {
        /// `finished | interrupted | terminated | hung_up | error`.
        reason: Cow<'a, str>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<Cow<'a, str>>,
        #[serde(flatten)]
        totals: Totals,
    },
    /// Written in the parent's name.
    SubAgentStart {
        child: Cow<'a, str>,
        profile: Cow<'a, str>,
        /// The `call_sub_agent` call.
        call_id: Cow<'a, str>,
        task: Cow<'a, str>,
    },
    /// Written in the parent's name.
    SubAgentEnd {
        child: Cow<'a, str>,
        stop: Cow<'a, str>,
        steps: u32,
        tokens: u64,
        cost_usd: Option<f64>,
    },
    ContextCompacted {
        /// The seqs of this file's records whose content the summary replaces (records of
        /// the files a resumed session continues are counted in `turns` only).
        replaced: Vec<u64>,
        /// How many leading turns of the conversation were compacted: their first user
        /// messages kept verbatim, the rest replaced by `summary`. What resume applies.
        #[serde(default)]
        turns: u64,
        summary: Cow<'a, str>,
        tokens_before: u64,
        tokens_after: u64,
    },
    HistoryCleared {},
    /// `/save NAME`: the conversation as it stands is saved under `name`; `/load NAME`
    /// branches from record `point` (the seq it names: the last record before this one;
    /// absent in older journals, where it is this record's own seq less one). Not `seq`,
    /// which is the envelope's.
    SessionNamed {
        name: Cow<'a, str>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        point: Option<u64>,
    },
    /// The permission mode was switched; calls after this record are judged under `mode`.
    ModeChanged {
        mode: Cow<'a, str>,
        /// Who switched it: `person` (`/mode`, Shift-Tab) or the front end that did.
        by: Cow<'a, str>,
    },
    /// The model was switched (`/model`): requests after this record go to `model` at
    /// `base_url` through `provider`; a resume takes the last one up again.
    ModelChanged {
        provider: Cow<'a, str>,
        model: Cow<'a, str>,
        base_url: Cow<'a, str>,
    },
    /// A call changed `path` through the file seam, which kept the pre-image (content
    /// addressed, under the session's state) for `/undo`: `before` is its SHA-256, `after` the
    /// new content's; `None` — the file did not exist before, or was removed.
    Checkpoint {
        call_id: Cow<'a, str>,
        path: Cow<'a, str>,
        before: Option<Cow<'a, str>>,
        after: Option<Cow<'a, str>>,
    },
}

/// Where a resumed session left off: the old file's last intact record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumedFrom<'a> {
    pub session: Cow<'a, str>,
    pub seq: u64,
    /// The hex SHA-256 of that record's line.
    pub hash: Cow<'a, str>,
}

/// A tool call as the model asked for it, in `assistant_message`: `arguments` is the model's
/// raw text, which may not be valid JSON (inline, or over [`INLINE_MAX`](super::INLINE_MAX)
/// bytes in a blob beside the journal).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestedCall<'a> {
    pub id: Cow<'a, str>,
    pub name: Cow<'a, str>,
    pub arguments: Stored<'a, str>,
}

/// What a session spent, carried by `stop` and `session_end` (DESIGN §6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Model calls made.
    pub steps: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// `None` while the model's prices are unknown.
    pub cost_usd: Option<f64>,
}

impl Totals {
    /// A run without a model (`dsh batch`): nothing spent.
    pub fn none() -> Self {
        Totals {
            cost_usd: Some(0.0),
            ..Totals::default()
        }
    }
}

/// A value a record either borrows (when written) or owns (when read back); like `Cow`, for
/// types that are not `Clone` — a [`FrozenResult`] is shared by `Arc`, never copied.
#[derive(Debug)]
pub enum Held<'a, T> {
    Borrowed(&'a T),
    Owned(T),
}

impl<T> std::ops::Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Held::Borrowed(t) => t,
            Held::Owned(t) => t,
        }
    }
}

impl<T: PartialEq> PartialEq for Held<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Serialize> Serialize for Held<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Held<'_, T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Held::Owned)
    }
}

impl<'a, T> From<&'a T> for Held<'a, T> {
    fn from(t: &'a T) -> Self {
        Held::Borrowed(t)
    }
}
