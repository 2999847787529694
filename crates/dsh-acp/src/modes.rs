//! The permission modes as the protocol's session modes: `read-only`, `ask`, `auto` (a
//! session started with `yolo` offers only that, since no switch leads into or out of it).
//! `session/set_mode` switches through the session, which journals `mode_changed` first.

use agent_client_protocol::v1::schema::{SessionMode, SessionModeState};
use dsh_agent::Session;
use dsh_config::PermissionMode;

/// The modes a client may switch between.
const SWITCHABLE: [PermissionMode; 3] = [
    PermissionMode::ReadOnly,
    PermissionMode::Ask,
    PermissionMode::Auto,
];

/// The session's modes and the one in force.
pub(crate) fn state(session: &Session) -> SessionModeState {
    let current = session.mode();
    let offered: Vec<PermissionMode> = if current == PermissionMode::Yolo {
        vec![PermissionMode::Yolo]
    } else {
        SWITCHABLE.to_vec()
    };
    SessionModeState::new(
        current.as_str(),
        offered
            .into_iter()
            .map(|m| {
                let mut description = describe(m).to_owned();
                if let Some(why) = session.mode_notice(m) {
                    description.push_str(&format!(" — here: {why}"));
                }
                SessionMode::new(m.as_str(), title(m)).description(description)
            })
            .collect(),
    )
}

/// The mode a mode id names (`Err`: which ids there are).
pub(crate) fn parse(id: &str) -> Result<PermissionMode, String> {
    id.parse::<PermissionMode>()
        .map_err(|_| format!("no mode `{id}`: the modes are read-only, ask and auto"))
}

fn title(m: PermissionMode) -> &'static str {
    match m {
        PermissionMode::ReadOnly => "Read-only",
        PermissionMode::Ask => "Ask",
        PermissionMode::Auto => "Auto",
        PermissionMode::Yolo => "Yolo",
    }
}

fn describe(m: PermissionMode) -> &'static str {
    match m {
        PermissionMode::ReadOnly => {
            "every write and every program not on the read-only list is refused"
        }
        PermissionMode::Ask => "you are asked before writes and programs the lists do not free",
        PermissionMode::Auto => {
            "builds and workspace writes run without asking, in a hardened sandbox"
        }
        PermissionMode::Yolo => {
            "every ask is approved (guards, the sandbox and the network ban still apply)"
        }
    }
}
