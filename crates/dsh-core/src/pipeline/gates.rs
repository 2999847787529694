//! The gates before execution, one function each — the registry's check, gate 1 (votes),
//! gate 2 (one approval) and gate 3 (guards) — in the order [`Pipeline::admit`] calls them.

use super::*;

/// Gate 1's combined outcome for one call, with every vote for `dsh check`.
pub(super) struct Gate1 {
    pub(super) votes: Vec<(String, Vote)>,
    pub(super) step: Gate1Step,
}

/// Where gate 1 sends a call; each carries gate 1's `decided_by`.
pub(super) enum Gate1Step {
    /// Refused (a crashed policy's denial is `crashed`, a failed one's `tool_error`).
    Deny(Candidate),
    /// To gate 2.
    Ask(DecidedBy),
    /// Straight to gate 3, with what the allow clears the call to do.
    Allow(DecidedBy, Clearance),
}

/// Who decided gate 1: the deciding vote, or the tool's default when no policy voted.
fn gate1_decided_by(
    votes: &[(String, Vote)],
    decider: Option<usize>,
    tool: &str,
    read_only: bool,
) -> DecidedBy {
    match decider {
        Some(i) => {
            let (name, vote) = &votes[i];
            DecidedBy::new(Gate::PrePolicy, Some(name), vote.reason.clone())
        }
        None if read_only => DecidedBy::new(
            Gate::PrePolicy,
            None,
            format!("no policy voted; `{tool}` is read-only, so it is allowed by default"),
        ),
        None => DecidedBy::new(
            Gate::PrePolicy,
            None,
            format!("no policy voted; `{tool}` can change things, so it needs approval"),
        ),
    }
}

impl Pipeline {
    /// Gate 2 for a call gate 1 sent to `ask`. A call a guard will refuse is never sent to a
    /// person; [`Mode::Check`] stops here and reports `ask`; a batch asks once
    /// ([`crate::policy::ask_once`]). `Ok(allowed_by)` lets the call go on to gate 3.
    pub(super) async fn gate2(
        &self,
        call: &ToolCall,
        cx: &PolicyContext<'_>,
        entry: &Entry,
        decided: DecidedBy,
        mode: Mode<'_>,
    ) -> Result<Result<DecidedBy, Admit>, JournalError> {
        if let Some(c) = self.guards(call, cx) {
            return Ok(Err(Admit::Refused(c)));
        }
        let Mode::Run { cancel, events, .. } = mode else {
            return Ok(Err(Admit::WouldAsk(decided)));
        };
        // A display for the person, when the approver shows one: computed off the runtime (it
        // may read and diff a large file); a tool that panics showing it shows nothing.
        let preview = match &self.approver {
            Some(a) if a.shows_preview() => {
                let (tool, args) = (entry.tool.clone(), call.args().clone());
                tokio::task::spawn_blocking(move || {
                    std::panic::catch_unwind(AssertUnwindSafe(|| tool.preview(&args)))
                        .ok()
                        .flatten()
                })
                .await
                .ok()
                .flatten()
            }
            _ => None,
        };
        let request = ApprovalRequest {
            call,
            spec: cx.spec,
            accesses: cx.accesses,
            policy: decided.policy.as_deref(),
            reason: &decided.reason,
            preview: preview.as_deref(),
            cancel: cancel.clone(),
        };
        crate::panic::quietly(|| events.person(call, true));
        let asked = crate::policy::ask_once(
            self.approver.as_ref(),
            &request,
            self.journal.as_ref(),
            &self.config.unavailable_hint.for_call(call, cx.accesses),
        )
        .await;
        crate::panic::quietly(|| events.person(call, false));
        Ok(asked?.map_err(Admit::Refused))
    }

    /// Gate 3, the authoritative guard check: after approval, just before execution.
    pub(super) fn gate3(
        &self,
        call: &ToolCall,
        cx: &PolicyContext<'_>,
        entry: Arc<Entry>,
        allowed_by: DecidedBy,
        clearance: Clearance,
    ) -> Admit {
        match self.guards(call, cx) {
            Some(c) => Admit::Refused(c),
            None => Admit::Admitted(Admitted {
                entry,
                allowed_by,
                clearance,
            }),
        }
    }

    /// Registry checks: the tool is not withheld from the agent (refused with the set's
    /// reason), a model's own call is to a tool its model may call itself (not one only its
    /// programs may: Code Mode), exists and is in the agent's set, the arguments match its
    /// schema, its access declaration can be computed, and no declared path is longer than
    /// [`crate::PATH_MAX`].
    pub(super) fn registry_check(
        &self,
        call: &ToolCall,
        tools: &ToolSet,
    ) -> Result<(Arc<Entry>, Vec<Access>), Box<Candidate>> {
        let fail = |kind, reason: String| {
            Box::new(Candidate::failure(
                call.id(),
                call.name(),
                kind,
                DecidedBy::new(Gate::Registry, None, reason),
            ))
        };
        if let Some(why) = tools.withheld(call.name()) {
            return Err(fail(FailureKind::UnknownTool, why.to_owned()));
        }
        // A model's own call to a tool only its programs may call (Code Mode).
        let from_a_model = matches!(
            call.source(),
            crate::CallSource::Model | crate::CallSource::SubAgent
        );
        if from_a_model && let Some(why) = tools.not_direct(call.name()) {
            return Err(fail(FailureKind::UnknownTool, why.to_owned()));
        }
        let entry = self
            .entry(call.name())
            .filter(|_| tools.contains(call.name()));
        let Some(entry) = entry else {
            let known: Vec<String> = self.specs(tools).iter().map(|s| s.name.clone()).collect();
            let whose = match call.agent() {
                None => String::new(),
                Some(agent) => format!(" for agent {agent}"),
            };
            return Err(fail(
                FailureKind::UnknownTool,
                format!(
                    "there is no tool named {}{whose}; the tools are: {}",
                    crate::quote_capped(call.name()),
                    known.join(", ")
                ),
            ));
        };
        if let serde_json::Value::String(raw) = call.args() {
            let preview: String = raw.chars().take(120).collect();
            return Err(fail(
                FailureKind::InvalidArgs,
                format!(
                    "the arguments of `{}` are not valid JSON (got `{preview}`); send them again as one JSON object",
                    call.name()
                ),
            ));
        }
        if let Err(why) = entry.check_input(call.args()) {
            return Err(fail(
                FailureKind::InvalidArgs,
                format!(
                    "the arguments do not match `{}`'s input schema ({why}); fix them and call again",
                    call.name()
                ),
            ));
        }
        let tool = &entry.tool;
        match std::panic::catch_unwind(AssertUnwindSafe(|| tool.accesses(call.args()))) {
            Ok(accesses) => {
                // A path no system call accepts is a malformed argument, not something for a
                // policy to judge: every policy would have to refuse it, quoting it whole.
                let too_long = accesses.iter().find_map(|a| match a {
                    Access::Read { path } | Access::Write { path } => {
                        crate::workspace::check_path_length(path).err()
                    }
                    _ => None,
                });
                match too_long {
                    Some(e) => Err(fail(FailureKind::InvalidArgs, e.to_string())),
                    None => Ok((entry, accesses)),
                }
            }
            Err(p) => Err(fail(
                FailureKind::Crashed,
                format!(
                    "`{}` panicked while declaring what it accesses: {}",
                    call.name(),
                    panic::message(p.as_ref())
                ),
            )),
        }
    }

    /// Gate 1: every listener votes (concurrently; the combination does not depend on order).
    pub(super) async fn gate1(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Gate1 {
        let votes = join_all(self.policies.iter().map(|p| async move {
            let vote = match AssertUnwindSafe(p.vote(call, cx)).catch_unwind().await {
                Ok(v) => v,
                Err(e) => Vote::crashed(format!(
                    "policy `{}` panicked: {}; the call is refused",
                    p.name(),
                    panic::message(e.as_ref())
                )),
            };
            (p.name().to_owned(), vote)
        }))
        .await;
        let plain: Vec<Vote> = votes.iter().map(|(_, v)| v.clone()).collect();
        let (decision, decider) = combine_votes(&plain, cx.spec.read_only);
        let decided = gate1_decided_by(&votes, decider, call.name(), cx.spec.read_only);
        let step = match decision {
            Decision::Deny => {
                let kind = decider.map_or(FailureKind::Denied, |i| votes[i].1.refusal);
                let mut c = Candidate::failure(call.id(), call.name(), kind, decided);
                if kind != FailureKind::ToolError {
                    c.content = format!("denied: {}", c.decided_by.reason);
                }
                Gate1Step::Deny(c)
            }
            Decision::Ask => Gate1Step::Ask(decided),
            Decision::Allow => {
                Gate1Step::Allow(decided, Clearance::of_allow(&plain, cx.spec.read_only))
            }
        };
        Gate1 { votes, step }
    }

    /// Gate 3: the first denial, or `None`. A panicking guard refuses. A guard that could
    /// not decide ([`crate::Denial::failed`]) refuses too, but a later guard's real denial is
    /// named before it, as in gate 1.
    pub(super) fn guards(&self, call: &ToolCall, cx: &PolicyContext<'_>) -> Option<Candidate> {
        let mut failed = None;
        for g in &self.guards {
            let verdict = std::panic::catch_unwind(AssertUnwindSafe(|| g.refuses(call, cx)));
            let (kind, reason) = match verdict {
                Ok(None) => continue,
                Ok(Some(d)) if d.is_failure() => {
                    failed.get_or_insert((g.name().to_owned(), d.reason));
                    continue;
                }
                Ok(Some(d)) => (FailureKind::Denied, d.reason),
                Err(p) => (
                    FailureKind::Crashed,
                    format!(
                        "guard `{}` panicked: {}; the call is refused",
                        g.name(),
                        panic::message(p.as_ref())
                    ),
                ),
            };
            return Some(Candidate::failure(
                call.id(),
                call.name(),
                kind,
                DecidedBy::new(Gate::Guard, Some(g.name()), reason),
            ));
        }
        failed.map(|(name, reason)| {
            Candidate::failure(
                call.id(),
                call.name(),
                FailureKind::ToolError,
                DecidedBy::new(Gate::Guard, Some(&name), reason),
            )
        })
    }
}
