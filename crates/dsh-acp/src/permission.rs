//! Gate 2 through the client: an `ask` becomes `session/request_permission` with the options
//! allow once, always allow (only where a rule can lift the ask: the rule shown as the REPL
//! writes it, and where), and reject once. The client's answer is the approval; its
//! `cancelled` outcome, an error, or no answer before the call stops waiting (the turn was
//! cancelled) is nobody's yes or no: the call is recorded as not run.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
};
use dsh_agent::Session;
use dsh_agent::events::ApprovalAsk;
use dsh_core::{ApprovalAnswer, ApprovalOutcome};
use tokio::sync::oneshot;

use crate::outbox::Outbox;
use crate::tool_call;
use crate::visible::visible;

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";

/// Asks the client about `ask` and answers the pipeline through `reply`.
pub(crate) async fn ask(
    outbox: Outbox,
    session: Arc<Session>,
    ask: ApprovalAsk,
    mut reply: oneshot::Sender<ApprovalAnswer>,
) {
    let always = session.always_allow_for(&ask.call, &ask.accesses).await;
    let mut options = vec![PermissionOption::new(
        ALLOW_ONCE,
        "Allow once",
        PermissionOptionKind::AllowOnce,
    )];
    if let Some(a) = &always {
        options.push(PermissionOption::new(
            ALLOW_ALWAYS,
            visible(&format!(
                "Always allow: add `{}` to {} in {}",
                a.rule,
                a.section,
                a.file.display()
            )),
            PermissionOptionKind::AllowAlways,
        ));
    }
    options.push(PermissionOption::new(
        REJECT_ONCE,
        "Reject",
        PermissionOptionKind::RejectOnce,
    ));
    let why = match &ask.policy {
        Some(p) => format!("{p} asks: {}", ask.reason),
        None => ask.reason.clone(),
    };
    let preview = match &ask.preview {
        Some(p) => format!("{why}\n\n{p}"),
        None => why,
    };
    let root = session.workspace.root().to_path_buf();
    let request = RequestPermissionRequest::new(
        outbox.session_id(),
        tool_call::asked(&ask.call, &root, Some(&preview)),
        options,
    );
    let answered = tokio::select! {
        r = outbox.request(request) => r,
        // The call stopped waiting (its turn was cancelled): it is recorded as not run,
        // whatever the client says later.
        () = reply.closed() => return,
    };
    let answer = match answered {
        Ok(response) => match response.outcome {
            RequestPermissionOutcome::Selected(s) => match &*s.option_id.0 {
                ALLOW_ONCE => ApprovalOutcome::AllowedOnce.into(),
                ALLOW_ALWAYS => match &always {
                    Some(a) => {
                        match session.always_allow(a) {
                            Ok(said) => outbox.say(&format!(
                                "\n\n*A policy change, not an approval: {said}; matching calls now run without asking.*\n\n"
                            )),
                            Err(e) => outbox.say(&format!(
                                "\n\n*The rule could not be added ({e}); this call is allowed once.*\n\n"
                            )),
                        }
                        ApprovalOutcome::AllowedOnce.into()
                    }
                    None => ApprovalOutcome::Cancelled.into(),
                },
                REJECT_ONCE => ApprovalOutcome::Rejected.into(),
                // An option that was not offered: nobody said yes or no.
                _ => ApprovalOutcome::Cancelled.into(),
            },
            RequestPermissionOutcome::Cancelled => ApprovalOutcome::Cancelled.into(),
            _ => ApprovalOutcome::Cancelled.into(),
        },
        Err(e) => {
            eprintln!("dsh: the client did not answer a permission request: {e}");
            ApprovalOutcome::Cancelled.into()
        }
    };
    let _ = reply.send(answer);
}
