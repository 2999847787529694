//! What an agent tells the outside world (DESIGN §3, "Agents and events"): one ordered stream
//! of typed events, the only thing front ends — `dsh exec`, the REPL, a parent agent —
//! consume. Every event carries the agent it is about.
//!
//! Events report; the journal records. Sending never waits (the channel is unbounded) and a
//! missing or gone consumer is ignored, so no consumer can change a decision or a record.
//! The one event that expects an answer is [`EventKind::ApprovalAsked`]: an interactive
//! approver ([`crate::Approval::Interactive`]) sends it and waits on its `reply`; dropping
//! the reply is `cancelled`, and with no consumer at all the call is `unavailable`.

use std::sync::Arc;
use std::time::Duration;

use dsh_core::{
    Access, ApprovalAnswer, ApprovalError, ApprovalOutcome, ApprovalRequest, Approver, CallEvents,
    FrozenResult, ToolCall, async_trait,
};
use dsh_model::Usage;
use tokio::sync::{mpsc, oneshot};

/// Which agent an event is about: `main`, or `sub-N`.
pub type AgentId = Arc<str>;

/// The main agent's id.
pub const MAIN: &str = "main";

/// The id of a session's `n`th sub-agent: `sub-N`.
pub fn child_id(n: u32) -> AgentId {
    format!("sub-{n}").into()
}

/// `N` of a sub-agent id `sub-N`.
pub fn child_number(id: &str) -> Option<u32> {
    id.strip_prefix("sub-")?.parse().ok()
}

/// One event of an agent.
#[derive(Debug)]
pub struct Event {
    pub agent: AgentId,
    pub kind: EventKind,
}

/// What happened.
#[derive(Debug)]
#[non_exhaustive]
pub enum EventKind {
    /// Answer text as it streams.
    TextDelta(String),
    /// Reasoning text as it streams, when the provider sends it.
    ReasoningDelta(String),
    /// The model is being asked again after a transient failure.
    ModelRetry { attempt: u32, reason: String },
    /// A model call finished.
    ModelCall {
        step: u32,
        usage: Usage,
        elapsed: Duration,
        /// What it cost, when the model's prices are known.
        cost_usd: Option<f64>,
    },
    /// A call's `tool_call` record is written; gate 1 comes next.
    ToolProposed { call: ToolCall },
    /// The call passed gates 1–3 and executes.
    ToolStarted { call_id: String },
    /// The latest lines a running call printed (a command's output), a few times a second
    /// at most: for a live view; the result holds what counts.
    ToolOutput { call_id: String, text: String },
    /// Gate 2 asks a person. Answer through `reply`; dropping it is `cancelled`.
    ApprovalAsked {
        request: ApprovalAsk,
        reply: oneshot::Sender<ApprovalAnswer>,
    },
    /// The call's result is journaled.
    ToolFinished { result: Arc<FrozenResult> },
    /// Old tool results were cut to make room in the model's context window (their whole
    /// text is in the spill store).
    ContextPruned {
        results: usize,
        tokens_before: u64,
        tokens_after: u64,
    },
    /// The oldest turns were summarized to make room (`context_compacted` is journaled).
    ContextCompacted {
        turns: usize,
        tokens_before: u64,
        tokens_after: u64,
    },
    /// The oldest turns were not summarized: the summary, cut to its bound, was more than
    /// half of what it would replace (nothing is journaled; the turn goes on uncompacted).
    CompactionRefused {
        turns: usize,
        refused: crate::context::SummaryRefused,
    },
    /// A disposition attached context for the model's next input.
    ContextAttached { policy: String, text: String },
    /// A hook said something for the person, or failed without deciding anything.
    HookSaid {
        event: dsh_core::HookEvent,
        text: String,
    },
    /// A sub-agent started (its own events follow, with its id).
    SubAgentStarted { child: AgentId, profile: String },
    /// A sub-agent stopped.
    SubAgentFinished { child: AgentId, stop: String },
    /// The agent's run stopped; `text` is its final answer (or its last text).
    Stop { reason: String, text: String },
    /// The configured check after a turn (the main agent's).
    Verify(crate::reply::VerifyStep),
    /// A runtime command ended; the last event it causes (the main agent's).
    Done {
        command: crate::reply::CommandId,
        reply: crate::reply::Reply,
    },
}

/// An approval request as a front end shows it: owned, so it can cross the channel.
#[derive(Clone, Debug)]
pub struct ApprovalAsk {
    pub call: ToolCall,
    /// What the call declares it touches.
    pub accesses: Vec<Access>,
    /// The policy whose `ask` sent it here (`None`: the tool's default).
    pub policy: Option<String>,
    pub reason: String,
    /// What the call would change (a diff for a file change), as its tool shows it.
    pub preview: Option<String>,
}

/// Where an agent's events go; cheap to clone. [`EventSink::none`] drops them.
#[derive(Clone, Debug, Default)]
pub struct EventSink {
    tx: Option<mpsc::UnboundedSender<Event>>,
}

/// The consuming end of an [`EventSink`].
pub type EventStream = mpsc::UnboundedReceiver<Event>;

impl EventSink {
    /// A sink and the stream it feeds.
    pub fn channel() -> (EventSink, EventStream) {
        let (tx, rx) = mpsc::unbounded_channel();
        (EventSink { tx: Some(tx) }, rx)
    }

    /// A sink that drops everything.
    pub fn none() -> Self {
        EventSink::default()
    }

    /// Sends `kind` for `agent`; `false` when nobody listens.
    pub fn send(&self, agent: &AgentId, kind: EventKind) -> bool {
        self.tx.as_ref().is_some_and(|tx| {
            tx.send(Event {
                agent: agent.clone(),
                kind,
            })
            .is_ok()
        })
    }
}

/// The agent's id as the journal and tool calls carry it: `None` for the main agent.
pub(crate) fn journal_agent(agent: &AgentId) -> Option<Arc<str>> {
    (&**agent != MAIN).then(|| agent.clone())
}

/// The pipeline's per-call reports, as events of one agent.
pub(crate) struct CallBridge {
    pub(crate) agent: AgentId,
    pub(crate) sink: EventSink,
}

impl CallEvents for CallBridge {
    fn proposed(&self, call: &ToolCall) {
        self.sink
            .send(&self.agent, EventKind::ToolProposed { call: call.clone() });
    }
    fn started(&self, call: &ToolCall) {
        self.sink.send(
            &self.agent,
            EventKind::ToolStarted {
                call_id: call.id().to_owned(),
            },
        );
    }
    fn output(&self, call: &ToolCall, text: &str) {
        self.sink.send(
            &self.agent,
            EventKind::ToolOutput {
                call_id: call.id().to_owned(),
                text: text.to_owned(),
            },
        );
    }
    fn finished(&self, _call: &ToolCall, result: &Arc<FrozenResult>) {
        self.sink.send(
            &self.agent,
            EventKind::ToolFinished {
                result: result.clone(),
            },
        );
    }
}

/// Gate 2 through the event stream: each `ask` becomes an [`EventKind::ApprovalAsked`] for
/// the agent that made the call, answered by whoever consumes the stream (the REPL's
/// prompt). No consumer: `unavailable`; the reply dropped: `cancelled`.
#[derive(Debug)]
pub struct EventApprover {
    sink: EventSink,
}

impl EventApprover {
    pub fn new(sink: EventSink) -> Self {
        EventApprover { sink }
    }
}

#[async_trait]
impl Approver for EventApprover {
    fn name(&self) -> &str {
        "person"
    }

    fn shows_preview(&self) -> bool {
        true
    }

    async fn approve(
        &self,
        request: &ApprovalRequest<'_>,
    ) -> Result<ApprovalAnswer, ApprovalError> {
        let (reply, answer) = oneshot::channel();
        let agent: AgentId = request.call.agent().unwrap_or(MAIN).into();
        let ask = ApprovalAsk {
            call: request.call.clone(),
            accesses: request.accesses.to_vec(),
            policy: request.policy.map(str::to_owned),
            reason: request.reason.to_owned(),
            preview: request.preview.map(str::to_owned),
        };
        if !self.sink.send(
            &agent,
            EventKind::ApprovalAsked {
                request: ask,
                reply,
            },
        ) {
            return Ok(ApprovalOutcome::Unavailable.into());
        }
        // The pipeline also stops waiting when the request's token is cancelled.
        Ok(answer
            .await
            .unwrap_or_else(|_| ApprovalOutcome::Cancelled.into()))
    }
}
