//! One turn: the agent runs the prompt while the REPL renders its events, reads keys (Esc
//! or Ctrl-C interrupt; typing queues the next prompt) and puts approval requests to the
//! person one at a time. The agent decides and records; the turn only relays.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use dsh_agent::{Command, EventKind, EventStream, Reply, Runtime};

use super::stats::Stats;
use dsh_core::{ApprovalAnswer, ApprovalOutcome};
use tokio::sync::oneshot;

use super::approval::{self, Action, Question};
use super::keys::{Key, Report, TurnKeys};
use super::render::{Ask, Render};
use super::screen::Screen;
use crate::signals::Signals;

/// How often the spinner and elapsed times move.
const TICK: Duration = Duration::from_millis(100);

/// While events stream, the screen is drawn at most this often (the lines pile up between).
const FRAME: Duration = Duration::from_millis(16);

/// What the person typed during the turn: text for the next prompt, and prompts sent with
/// Enter, queued.
#[derive(Default)]
pub(crate) struct TypeAhead {
    pub(crate) text: String,
    pub(crate) queued: VecDeque<String>,
}

/// A question's drain before it is asked for.
const NOT_YET: u64 = u64::MAX;

/// The open approval question and where its answer goes.
struct Open {
    question: Question,
    reply: oneshot::Sender<ApprovalAnswer>,
    /// Until the reader reports this drain, keys come from before the question was drawn.
    draining: Option<u64>,
    /// When it was drawn, or a key last came while it was not armed.
    quiet_since: Instant,
    /// Whether a key now answers it.
    armed: bool,
}

/// A question takes answers only after it has been on the screen this long with no key
/// typed: someone typing their next prompt when it appears must not answer it with the
/// next `y` or `n` of their sentence.
const ARM_QUIET: Duration = Duration::from_millis(350);

impl Open {
    /// Arms the question once drained and quiet long enough; whether that changed.
    fn arm(&mut self) -> bool {
        let ready = self.draining.is_none() && self.quiet_since.elapsed() >= ARM_QUIET;
        let changed = ready && !self.armed;
        self.armed |= ready;
        changed
    }

    /// A key that does not count: the question waits for quiet again.
    fn disarm(&mut self) {
        self.armed = false;
        self.quiet_since = Instant::now();
        self.question.discarded += 1;
    }
}

/// What the REPL keeps across turns and sessions: the screen, the renderer, the session's
/// statistics and the type-ahead.
pub(crate) struct Ui {
    pub(crate) screen: Screen,
    pub(crate) render: Render,
    pub(crate) stats: Stats,
    pub(crate) typed: TypeAhead,
}

/// Sends `command` (a prompt, or a person's own calls such as `/memory add`) and drives it
/// to its end while rendering the session's events, reading keys and asking approval
/// questions; Esc or Ctrl-C interrupts it. A terminal that can no longer be read is a
/// hang-up: the whole session ends, as on SIGHUP. Its reply; `None` when the runtime has
/// stopped.
pub(crate) async fn drive(
    command: Command,
    runtime: &Runtime,
    signals: &Signals,
    stream: &mut EventStream,
    ui: &mut Ui,
) -> Option<Reply> {
    let id = runtime.send(command).ok()?;
    let session = runtime.session();
    let mut interrupted = false;
    let Ui {
        screen,
        render,
        stats,
        typed,
    } = ui;
    let mut keys = if screen.terminal() {
        match TurnKeys::start(signals.token().clone()) {
            Ok(k) => Some(k),
            Err(e) => {
                screen.line(&format!(
                    "dsh: cannot read keys during the turn ({e}); Ctrl-C still interrupts"
                ));
                None
            }
        }
    } else {
        None
    };
    if screen.terminal() {
        // The cursor would only flicker inside the live region.
        screen.raw("\x1b[?25l");
    }
    // Shown again however the turn ends, a panic included.
    let _cursor = CursorShown(screen.terminal());
    // The terminal may have been resized while the prompt had it.
    screen.refresh_size();
    render.begin_turn();
    let mut asks: VecDeque<Ask> = VecDeque::new();
    let mut open: Option<Open> = None;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let st = render.style();
    // Drawn at most once a frame while events stream; at once after a key or a question.
    let mut last_draw = Instant::now();
    let mut dirty = false;
    let outcome = loop {
        let mut urgent = true;
        tokio::select! {
            biased;
            event = stream.recv() => {
                let Some(event) = event else {
                    break None;
                };
                urgent = false;
                if let Some(reply) = take(event, id, stats, render, screen, &mut asks) {
                    break Some(reply);
                }
                // Everything already queued, then one redraw.
                let mut done = None;
                while let Ok(event) = stream.try_recv() {
                    if let Some(reply) = take(event, id, stats, render, screen, &mut asks) {
                        done = Some(reply);
                        break;
                    }
                }
                if done.is_some() {
                    break done;
                }
            }
            report = next_key(keys.as_mut()) => {
                let key = match report {
                    Report::Key(key) => Some(key),
                    Report::Drained(n) => {
                        if let Some(q) = open.as_mut().filter(|q| q.draining == Some(n)) {
                            q.draining = None;
                        }
                        None
                    }
                    Report::Gone => {
                        // The terminal is gone (its window closed): stop reading it; the
                        // session ends as hung up, SIGHUP or not.
                        keys = None;
                        signals.hang_up();
                        None
                    }
                };
                if let Some(key) = key {
                    let armed = open.as_ref().is_some_and(|q| q.armed);
                    match (open.as_mut(), key) {
                        (_, Key::Interrupt | Key::Escape) => {
                            if let Some(q) = open.take() {
                                let answer = ApprovalAnswer::from(ApprovalOutcome::Cancelled);
                                screen.line(&approval::answered(&q.question.ask, &answer, st));
                                let _ = q.reply.send(answer);
                            }
                            if !interrupted {
                                render.interrupt(screen);
                                screen.line(&st.yellow("interrupting: running calls are cancelled and recorded"));
                                interrupted = true;
                                runtime.interrupt();
                            }
                        }
                        (_, Key::Resize) => screen.refresh_size(),
                        // Typed before the question appeared or settled: never an answer.
                        (Some(q), _) if !armed => q.disarm(),
                        (Some(q), key) => match q.question.key(key.clone()) {
                            // Other typing while it waits for an answer: not an answer; the
                            // question waits for quiet again.
                            Action::None if !q.question.takes_text() && !is_answer_key(&key) => {
                                q.disarm();
                            }
                            Action::None => {}
                            Action::Answer(answer) => {
                                if let Some(q) = open.take() {
                                    screen.line(&approval::answered(&q.question.ask, &answer, st));
                                    // The pipeline may have stopped waiting: nothing to do then.
                                    let _ = q.reply.send(answer);
                                }
                            }
                            Action::View => {
                                for l in q.question.full_lines(st) {
                                    screen.line(&l);
                                }
                            }
                            Action::Always => {
                                let written = q
                                    .question
                                    .always
                                    .as_ref()
                                    .map(|a| session.always_allow(a));
                                match written {
                                    Some(Ok(said)) => {
                                        if let Some(q) = open.take() {
                                            let answer = ApprovalAnswer::from(ApprovalOutcome::AllowedOnce);
                                            screen.line(&approval::answered(&q.question.ask, &answer, st));
                                            screen.line(&st.dim(&format!(
                                                "  a policy change, not an approval: {}; matching calls now run without asking",
                                                super::visible::visible(&said, false)
                                            )));
                                            let _ = q.reply.send(answer);
                                        }
                                    }
                                    Some(Err(e)) => {
                                        q.question.error = Some(format!("could not add the rule: {e}"));
                                        q.question.always = None;
                                    }
                                    None => {}
                                }
                            }
                        },
                        (None, key) => typed.key(key),
                    }
                }
            }
            _ = tick.tick(), if render.animated() || open.as_ref().is_some_and(|q| !q.armed) => {
                render.tick();
            }
            () = tokio::time::sleep_until((last_draw + FRAME).into()), if dirty => {}
        }
        if open.as_mut().is_some_and(Open::arm) {
            urgent = true;
        }
        // A question the pipeline stopped waiting for (its call was cancelled) goes away.
        if open.as_ref().is_some_and(|q| q.reply.is_closed()) {
            open = None;
            urgent = true;
        }
        asks.retain(|a| !a.1.is_closed());
        let mut fresh = false;
        if open.is_none()
            && let Some(ask) = asks.pop_front()
        {
            // The unsent type-ahead text goes with the keys typed before the question.
            let discarded = typed.text.chars().count();
            typed.text.clear();
            let (ask, reply) = ask;
            // Computed by the runtime (a dry check with the rule added); shown here.
            let always = session.always_allow_for(&ask.call, &ask.accesses).await;
            let program = match ask.call.parent() {
                Some(parent) if ask.call.source() == dsh_core::CallSource::Code => {
                    Some(render.program_description(parent).unwrap_or_default())
                }
                _ => None,
            };
            let remote = super::mcp::approval_line(session, ask.call.name());
            let mut question = Question::new(ask, always);
            question.program = program;
            question.remote = remote;
            question.discarded = discarded;
            if keys.is_none() {
                // No key can answer it (the terminal cannot be read): nobody is asked.
                let answer = ApprovalAnswer::from(ApprovalOutcome::Unavailable);
                screen.line(&approval::answered(&question.ask, &answer, st));
                let _ = reply.send(answer);
            } else {
                open = Some(Open {
                    question,
                    reply,
                    // Not armed until the drain asked for after the first draw is reported.
                    draining: Some(NOT_YET),
                    quiet_since: Instant::now(),
                    armed: false,
                });
                fresh = true;
            }
        }
        if !(urgent || fresh || last_draw.elapsed() >= FRAME) {
            dirty = true;
            continue;
        }
        dirty = false;
        last_draw = Instant::now();
        screen.set_live(live_lines(render, screen.cols(), open.as_ref(), typed));
        screen.flush();
        // Drawn first, then what was typed until now is dropped: a "y" typed ahead must
        // never approve a call nobody saw.
        if fresh && let (Some(q), Some(k)) = (open.as_mut(), keys.as_mut()) {
            q.draining = Some(k.drain());
        }
    };
    // The run is over; its last events are queued.
    while let Ok(event) = stream.try_recv() {
        stats.event(&event);
        // A question left over has no call waiting for it any more: dropped, `cancelled`.
        let _ = render.event(screen, event);
    }
    render.end_turn(screen);
    // The reader stops before the line editor reads again; what it read meanwhile is
    // type-ahead.
    if let Some(k) = keys {
        for key in k.stop() {
            typed.key(key);
        }
    }
    if screen.terminal() {
        screen.raw("\x1b[?25h");
    }
    screen.flush();
    outcome
}

/// Shows `event` as it comes (an approval question is queued in `asks`); command `id`'s
/// end, once seen, is its reply.
fn take(
    event: dsh_agent::Event,
    id: dsh_agent::runtime::CommandId,
    stats: &mut Stats,
    render: &mut Render,
    screen: &mut Screen,
    asks: &mut VecDeque<Ask>,
) -> Option<Reply> {
    if let EventKind::Done { command, reply } = event.kind {
        return (command == id).then_some(reply);
    }
    stats.event(&event);
    if let Some(ask) = render.event(screen, event) {
        asks.push_back(ask);
    }
    None
}

/// The live region: the render's, then the open question or the type-ahead.
fn live_lines(render: &Render, cols: usize, open: Option<&Open>, typed: &TypeAhead) -> Vec<String> {
    let st = render.style();
    let mut live = render.live(cols);
    match open {
        Some(q) => live.extend(q.question.lines(q.armed, st)),
        None => live.extend(type_ahead_lines(typed, st)),
    }
    live
}

/// Shows the terminal's cursor when dropped (on a terminal).
struct CursorShown(bool);

impl Drop for CursorShown {
    fn drop(&mut self) {
        if self.0 {
            use std::io::Write;
            let mut out = std::io::stdout();
            let _ = out.write_all(b"\x1b[?25h");
            let _ = out.flush();
        }
    }
}

/// The keys that answer a question (or start to: `m`, `a`), and Enter, which does nothing.
fn is_answer_key(key: &Key) -> bool {
    matches!(
        key,
        Key::Enter | Key::Char('y' | 'Y' | 'n' | 'N' | 'm' | 'M' | 'a' | 'A' | 'v' | 'V')
    )
}

async fn next_key(keys: Option<&mut TurnKeys>) -> Report {
    match keys {
        Some(k) => k.next().await,
        None => std::future::pending().await,
    }
}

impl TypeAhead {
    /// A key typed while no question is open.
    fn key(&mut self, key: Key) {
        match key {
            Key::Char(c) => self.text.push(c),
            Key::Paste(text) => self.text.push_str(&text),
            Key::Backspace => {
                self.text.pop();
            }
            Key::Enter => {
                let line = std::mem::take(&mut self.text);
                if !line.trim().is_empty() {
                    self.queued.push_back(line);
                }
            }
            Key::Interrupt | Key::Escape | Key::Resize | Key::Other => {}
        }
    }
}

fn type_ahead_lines(typed: &TypeAhead, st: super::style::Style) -> Vec<String> {
    let mut out = Vec::new();
    if !typed.queued.is_empty() {
        out.push(st.dim(&format!(
            "queued for after this turn: {}",
            typed
                .queued
                .iter()
                .map(|q| crate::sessions::shorten(q, 30))
                .collect::<Vec<_>>()
                .join(" · ")
        )));
    }
    if !typed.text.is_empty() {
        out.push(format!(
            "{} {}",
            st.dim("›"),
            super::visible::visible(&typed.text, false)
        ));
    }
    out
}
