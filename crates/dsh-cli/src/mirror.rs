//! `--json`: the session's journal lines on stdout, through the journal's queued mirror, so a
//! slow or absent reader never holds up the journal, the tools or a signal.

use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use dsh_core::journal::{MIRROR_CAPACITY, Mirror};

use crate::Failure;
use crate::signals::Signals;

/// How long a run that was ended by a signal still waits for stdout's reader.
const AFTER_SIGNAL: Duration = Duration::from_secs(2);

/// The mirror to stdout, when `--json` asks for one.
pub(crate) fn open(json: bool) -> Result<Option<Arc<Mirror>>, Failure> {
    if !json {
        return Ok(None);
    }
    Mirror::spawn(Box::new(std::io::stdout()), MIRROR_CAPACITY)
        .map(Some)
        .map_err(|e| Failure::harness(anyhow!("cannot start the --json output: {e}")))
}

/// Waits until the mirror has written everything: as long as it takes while no signal
/// comes, at most [`AFTER_SIGNAL`] once one has (the first signal that ended the run, or a
/// new one). Then says on stderr how many lines a slow reader missed.
pub(crate) async fn drain(mirror: Option<&Arc<Mirror>>, signals: &Signals) {
    let Some(mirror) = mirror else {
        return;
    };
    let seen = signals.count();
    let mut deadline = (seen > 0).then(|| tokio::time::Instant::now() + AFTER_SIGNAL);
    while !mirror.is_drained() {
        if deadline.is_none() && signals.count() > seen {
            deadline = Some(tokio::time::Instant::now() + AFTER_SIGNAL);
        }
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            eprintln!(
                "dsh: --json: stdout is not being read; the rest of the journal lines are in \
                 the journal file"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let dropped = mirror.dropped();
    if dropped > 0 {
        eprintln!(
            "dsh: --json: {dropped} journal lines were not copied to stdout because its reader \
             fell too far behind; the journal file has every line"
        );
    }
}
