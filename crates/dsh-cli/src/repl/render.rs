//! From agent events to the screen: the answer streamed and rendered as Markdown line by
//! line, reasoning dimmed and collapsed, one line per tool call finished in place, a spinner
//! with the elapsed time while the model thinks or a tool runs. It decides nothing: an
//! approval request is handed back to the turn, which asks the person.

use std::time::{Duration, Instant};

use dsh_agent::events::ApprovalAsk;
use dsh_agent::{Event, EventKind};
use dsh_core::{ApprovalAnswer, ToolCall};
use tokio::sync::oneshot;

use super::markdown::Markdown;
use super::screen::{self, Screen};
use super::style::Style;
use super::toolline;
use super::visible::visible;

/// Spinner frames.
const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// After this long without output, the spinner shows (so it does not flicker between
/// streamed lines).
const QUIET: Duration = Duration::from_millis(250);

/// Reasoning shown in one line, at most this many characters of its start.
const REASONING_PREVIEW: usize = 100;

/// An approval request for the turn to put to the person.
pub(crate) type Ask = (ApprovalAsk, oneshot::Sender<ApprovalAnswer>);

/// A call not finished yet.
struct Open {
    call: ToolCall,
    started: Option<Instant>,
    /// The latest lines it printed while running.
    output: String,
}

/// How many of a running command's latest lines the live region shows.
const LIVE_OUTPUT_LINES: usize = 5;

/// The rendering state of one REPL.
pub(crate) struct Render {
    st: Style,
    terminal: bool,
    md: Markdown,
    /// The answer line still arriving (terminal only).
    line: String,
    /// This step's reasoning so far.
    reasoning: String,
    /// Show reasoning in full.
    pub(crate) verbose: bool,
    /// Calls proposed and not finished, in order.
    open: Vec<Open>,
    /// Whether the model is being waited for.
    waiting: bool,
    /// When the model started being waited for.
    waiting_since: Instant,
    /// When something was last shown.
    last_output: Instant,
    frame: usize,
    /// When this step's answer began to stream, and the time spent rendering its lines:
    /// rendering that takes a large share of the stream's time makes it fall behind.
    answer_began: Option<Instant>,
    rendering: Duration,
    /// The person interrupted the turn: what the model still streams is not shown (it was
    /// cut where the interrupt line is printed; the agent keeps what it had received).
    interrupted: bool,
    /// The last finished call and its result, shown whole by `/expand` (Ctrl-O).
    pub(crate) last_result: Option<(
        Option<dsh_core::ToolCall>,
        std::sync::Arc<dsh_core::FrozenResult>,
    )>,
}

/// Rendering that has taken this long, and this share of the answer's time, is behind.
const BEHIND_AFTER: Duration = Duration::from_millis(100);
const BEHIND_SHARE: u32 = 4;

impl Render {
    pub(crate) fn new(terminal: bool, color: bool) -> Render {
        let now = Instant::now();
        Render {
            st: Style::new(color),
            terminal,
            md: Markdown::new(color),
            line: String::new(),
            reasoning: String::new(),
            verbose: false,
            open: Vec::new(),
            waiting: false,
            waiting_since: now,
            last_output: now,
            frame: 0,
            answer_began: None,
            rendering: Duration::ZERO,
            interrupted: false,
            last_result: None,
        }
    }

    pub(crate) fn style(&self) -> Style {
        self.st
    }

    /// A turn starts: the model is asked.
    pub(crate) fn begin_turn(&mut self) {
        self.interrupted = false;
        self.wait_for_model();
    }

    /// The person interrupted the turn: the answer line still arriving is shown as it
    /// stands, and nothing more of the answer after it.
    pub(crate) fn interrupt(&mut self, screen: &mut Screen) {
        self.flush_reasoning(screen);
        self.end_line(screen);
        self.reasoning.clear();
        self.interrupted = true;
    }

    fn wait_for_model(&mut self) {
        self.waiting = true;
        self.waiting_since = Instant::now();
    }

    /// Shows one event; hands an approval request back.
    pub(crate) fn event(&mut self, screen: &mut Screen, event: Event) -> Option<Ask> {
        let main = &*event.agent == dsh_agent::events::MAIN;
        // Call ids are unique per agent only (a sub-agent's model numbers its own).
        let agent = event.agent.clone();
        let mine = move |o: &Open| o.call.agent().unwrap_or(dsh_agent::events::MAIN) == &*agent;
        match event.kind {
            EventKind::TextDelta(_) | EventKind::ReasoningDelta(_) if main && self.interrupted => {}
            EventKind::TextDelta(text) if main => {
                self.flush_reasoning(screen);
                self.text(screen, &text);
            }
            EventKind::ReasoningDelta(text) if main => {
                self.reasoning.push_str(&text);
                if self.verbose && !self.terminal {
                    screen.stream(&visible(&text, true));
                }
            }
            EventKind::ModelRetry { attempt, reason } => {
                self.end_line(screen);
                let who = if main {
                    String::new()
                } else {
                    format!("[{}] ", visible(&event.agent, false))
                };
                screen.line(&self.st.yellow(&format!(
                    "{who}model call failed, asking again (attempt {attempt}): {}",
                    visible(&reason, false)
                )));
            }
            EventKind::ModelCall { .. } if main => {
                // The step's text is complete.
                self.flush_reasoning(screen);
                self.end_line(screen);
                self.waiting = false;
            }
            EventKind::ToolProposed { call } => {
                self.open.push(Open {
                    call,
                    started: None,
                    output: String::new(),
                });
            }
            EventKind::ToolStarted { call_id } => {
                if let Some(o) = self
                    .open
                    .iter_mut()
                    .find(|o| o.call.id() == call_id && mine(o))
                {
                    o.started = Some(Instant::now());
                }
            }
            EventKind::ToolOutput { call_id, text } => {
                if let Some(o) = self
                    .open
                    .iter_mut()
                    .find(|o| o.call.id() == call_id && mine(o))
                {
                    o.output = text;
                }
            }
            EventKind::ToolFinished { result } => {
                let at = self
                    .open
                    .iter()
                    .position(|o| o.call.id() == result.call_id() && mine(o));
                let open = at.map(|i| self.open.remove(i));
                for l in toolline::finished(
                    open.as_ref().map(|o| &o.call),
                    &result,
                    self.st,
                    self.verbose,
                ) {
                    screen.line(&l);
                }
                self.last_result = Some((open.map(|o| o.call), result.clone()));
                if self.open.is_empty() {
                    self.wait_for_model();
                }
            }
            EventKind::ApprovalAsked { request, reply } => return Some((request, reply)),
            EventKind::ContextPruned {
                results,
                tokens_before,
                tokens_after,
            } => screen.line(&self.st.dim(&format!(
                "context: {} cut to make room ({tokens_before} → {tokens_after} tokens)",
                crate::words::plural(results, "old tool result")
            ))),
            EventKind::ContextCompacted {
                turns,
                tokens_before,
                tokens_after,
            } => screen.line(&self.st.dim(&format!(
                "context: {} summarized ({tokens_before} → {tokens_after} tokens)",
                crate::words::plural(turns, "old turn")
            ))),
            EventKind::CompactionRefused { turns, refused } => screen.line(&self.st.dim(&format!(
                "context: {} not summarized: {refused}",
                crate::words::plural(turns, "old turn")
            ))),
            EventKind::ContextAttached { policy, text } => screen.line(
                &self
                    .st
                    .dim(&format!("context from {policy}: {}", visible(&text, false))),
            ),
            EventKind::HookSaid { event, text } => screen.line(
                &self
                    .st
                    .yellow(&format!("{event} {}", visible(&text, false))),
            ),
            EventKind::Verify(step) => {
                let line = super::verify_line(&step);
                screen.line(&match step {
                    dsh_agent::VerifyStep::Passed => self.st.green(&line),
                    dsh_agent::VerifyStep::Running { .. } => self.st.dim(&line),
                    _ => self.st.yellow(&line),
                });
            }
            EventKind::SubAgentStarted { child, profile } => {
                let line = format!("sub-agent {child} ({profile}) starts");
                screen.line(&self.st.dim(&visible(&line, false)));
            }
            EventKind::SubAgentFinished { child, stop } => {
                // Calls of a child stopped by force never report their end.
                self.open.retain(|o| o.call.agent() != Some(&*child));
                let line = format!("sub-agent {child} stops: {stop}");
                screen.line(&self.st.dim(&visible(&line, false)));
            }
            // A sub-agent's text and reasoning are its parent's tool result; stops are the
            // turn's to report.
            _ => {}
        }
        self.last_output = Instant::now();
        None
    }

    /// Streamed answer text.
    fn text(&mut self, screen: &mut Screen, text: &str) {
        self.waiting = false;
        if !self.terminal {
            screen.stream(&visible(text, true));
            return;
        }
        self.line.push_str(text);
        if !self.line.contains('\n') {
            return;
        }
        let began = *self.answer_began.get_or_insert_with(Instant::now);
        let start = Instant::now();
        while let Some(i) = self.line.find('\n') {
            for rendered in self.md.lines(&self.line[..i]) {
                screen.line(&rendered);
            }
            self.line.drain(..=i);
        }
        self.rendering += start.elapsed();
        // Highlighting is what falls behind a fast stream: when rendering has taken a
        // quarter of the answer's time, the rest of the answer's code is shown plain.
        if self.rendering > BEHIND_AFTER && self.rendering * BEHIND_SHARE > began.elapsed() {
            self.md.keep_up(true);
        }
    }

    /// Ends the answer line still arriving.
    fn end_line(&mut self, screen: &mut Screen) {
        if self.terminal {
            if !self.line.is_empty() {
                let rest = std::mem::take(&mut self.line);
                for rendered in self.md.lines(&rest) {
                    screen.line(&rendered);
                }
            }
            for l in self.md.end() {
                screen.line(&l);
            }
            self.answer_began = None;
            self.rendering = Duration::ZERO;
        } else {
            screen.end_stream_line();
        }
    }

    /// The step's reasoning, once its answer starts or the step ends: one dimmed line, or in
    /// full with `/verbose on`.
    fn flush_reasoning(&mut self, screen: &mut Screen) {
        if self.reasoning.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.reasoning);
        if self.verbose {
            if self.terminal {
                for l in text.trim().lines() {
                    screen.line(&self.st.dim(&visible(l, false)));
                }
            } else {
                screen.end_stream_line();
            }
            return;
        }
        let chars = text.chars().count();
        let preview = crate::sessions::shorten(text.trim(), REASONING_PREVIEW);
        let line = self.st.dim(&format!(
            "✻ reasoning ({chars} chars; /verbose on shows it): {}",
            visible(&preview, false)
        ));
        // One line, on a terminal as wide as it is.
        if self.terminal {
            let cols = screen.cols();
            screen.line(&screen::fit(&line, cols));
        } else {
            screen.line(&line);
        }
    }

    /// The turn is over: what is still arriving is shown as it stands.
    pub(crate) fn end_turn(&mut self, screen: &mut Screen) {
        self.flush_reasoning(screen);
        self.end_line(screen);
        self.open.clear();
        self.waiting = false;
        screen.set_live(Vec::new());
    }

    /// What the open `run_code` call `parent` says its program does (for a question about
    /// one of its calls).
    pub(crate) fn program_description(&self, parent: &str) -> Option<String> {
        self.open
            .iter()
            .find(|o| o.call.id() == parent && o.call.name() == dsh_agent::RUN_CODE)
            .and_then(|o| {
                o.call
                    .args()
                    .get("description")?
                    .as_str()
                    .map(str::to_owned)
            })
    }

    /// Advances the spinner.
    pub(crate) fn tick(&mut self) {
        self.frame = (self.frame + 1) % FRAMES.len();
    }

    /// Whether something in the live region changes with time (the turn then ticks).
    pub(crate) fn animated(&self) -> bool {
        self.waiting || self.open.iter().any(|o| o.started.is_some())
    }

    /// The live region, `cols` wide: the answer line still arriving, open calls, the
    /// spinner.
    pub(crate) fn live(&self, cols: usize) -> Vec<String> {
        let frame = FRAMES[self.frame];
        let mut live = self.md.pending();
        if !self.line.is_empty() {
            live.push(self.md.partial(&self.line));
        }
        for o in &self.open {
            let line = toolline::running(&o.call, o.started.map(|s| s.elapsed()), frame, self.st);
            live.push(screen::fit(&line, cols));
            live.extend(latest_lines(&o.output, LIVE_OUTPUT_LINES).map(|l| {
                let shown = format!("  │ {}", visible(l, false));
                self.st.dim(&screen::fit(&shown, cols))
            }));
        }
        if self.waiting && self.line.is_empty() && self.last_output.elapsed() >= QUIET {
            let what = if self.reasoning.is_empty() {
                "thinking".to_owned()
            } else {
                let tail: String = {
                    let r: Vec<char> = self.reasoning.trim_end().chars().collect();
                    let from = r.len().saturating_sub(50);
                    r[from..].iter().collect()
                };
                format!("reasoning … {}", visible(&tail, false))
            };
            let line = format!(
                "{} {} {}",
                self.st.cyan(frame),
                self.st.dim(&what),
                self.st
                    .dim(&toolline::seconds(self.waiting_since.elapsed())),
            );
            live.push(screen::fit(&line, cols));
        }
        live
    }
}

/// The last `n` lines of `text` that show something (a carriage return's overwrite shows
/// its last part, as a terminal would).
fn latest_lines(text: &str, n: usize) -> impl Iterator<Item = &str> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.rsplit('\r').find(|p| !p.trim().is_empty()).unwrap_or(""))
        .filter(|l| !l.trim().is_empty())
        .collect();
    let from = lines.len().saturating_sub(n);
    lines.into_iter().skip(from)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use serde_json::json;

    use super::*;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn event(agent: &str, kind: EventKind) -> Event {
        Event {
            agent: agent.into(),
            kind,
        }
    }

    fn result(id: &str, tool: &str) -> Arc<dsh_core::FrozenResult> {
        Arc::new(
            serde_json::from_value(json!({
                "call_id": id, "tool": tool, "ok": true, "failure_kind": null,
                "decided_by": {"gate": "pre_policy", "policy": null, "reason": "r"},
                "content": "", "value": null, "elapsed_ms": 1, "exit_code": null, "sandbox": null,
            }))
            .unwrap(),
        )
    }

    #[test]
    fn a_sub_agents_call_with_its_parents_call_id_is_its_own() {
        let out = Shared::default();
        let mut screen = Screen::with_writer(false, Box::new(out.clone()));
        let mut r = Render::new(false, false);
        let parent = ToolCall::new("call_0", "call_sub_agent", json!({"profile": "search"}));
        let child = ToolCall::new("call_0", "read_file", json!({"path": "a.txt"}))
            .with_agent(Some("sub-1".into()));
        r.event(
            &mut screen,
            event("main", EventKind::ToolProposed { call: parent }),
        );
        r.event(
            &mut screen,
            event("sub-1", EventKind::ToolProposed { call: child }),
        );
        let finished = |tool| EventKind::ToolFinished {
            result: result("call_0", tool),
        };
        r.event(&mut screen, event("sub-1", finished("read_file")));
        r.event(&mut screen, event("main", finished("call_sub_agent")));
        screen.flush();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        // Each result is drawn with its own agent's call: its tag and its arguments.
        assert!(lines[0].contains("[sub-1] read_file a.txt"), "{text}");
        assert!(!lines[1].contains("sub-1"), "{text}");
        assert!(lines[1].contains("call_sub_agent"), "{text}");
    }
}
