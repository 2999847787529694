//! The REPL on day one (issue 24), end to end in a real pseudo-terminal: resizing while an
//! answer streams and while a question waits, an interrupted answer kept, the footer,
//! `NO_COLOR`, `/help`, commands that show their value. Assertions read the screen (a vt100
//! emulator), the requests the scripted server received and the journal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/pty.rs"]
mod pty;
#[path = "common/repl.rs"]
mod repl_kit;

use dsh_testkit::model_server::{Gate, Reply, ScriptedServer, Turn};
use pty::{Screen, key};
use repl_kit::{PROMPT, journal, kind, leave, spawn, world};

/// A line much wider than the narrow terminal: 109 columns.
fn long_line() -> String {
    format!("LONG-{}-END", "abcdefghij".repeat(10))
}

/// Rows of everything printed (scrollback and screen) that hold `needle`.
fn rows_with(screen: &Screen, needle: &str) -> usize {
    screen
        .all_text()
        .lines()
        .filter(|l| l.contains(needle))
        .count()
}

/// An answer with two finished lines and then the long one, held while the long line is
/// still arriving (its first 100 characters shown in the live region).
fn held_answer(gate: &Gate) -> Turn {
    let prefix = "first finished line\nsecond finished line\n";
    let text = format!("{prefix}{}\nlast line", long_line());
    // The role chunk, then deltas of one character.
    Turn::text(text)
        .deltas(1)
        .hold_after(1 + prefix.len() + 100, gate)
}

/// After the turn: each line printed once, no fragment of the live region left behind.
fn assert_each_line_once(screen: &Screen) {
    let all = screen.all_text();
    for needle in ["first finished line", "second finished line", "last line"] {
        assert_eq!(rows_with(screen, needle), 1, "{needle:?}:\n{all}");
    }
    // The long line, finished at 100 columns: its first row holds every `abcdefghij` but
    // the last; a live copy drawn at 40 or 120 columns and not erased would show again.
    assert_eq!(rows_with(screen, "LONG-"), 1, "{all}");
    assert_eq!(rows_with(screen, "abcdefghij"), 1, "{all}");
}

#[test]
fn resizing_while_an_answer_streams_redraws_it_at_the_new_width_and_leaves_no_copy() {
    let d = world();
    let gate = Gate::new();
    let server = ScriptedServer::start(vec![held_answer(&gate).into()]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("tell me");
    let long = long_line();
    let partial = &long[..100];
    // At 120 columns the arriving line is one row.
    pty.wait_for("the partial line on one row", |s| {
        s.rows().iter().any(|r| r == partial)
    });
    pty.resize(40, 40);
    // At 40 it is laid out again in rows of 40.
    pty.wait_for("the partial line in rows of 40", |s| {
        let rows = s.rows();
        rows.iter().any(|r| r == &long[..40])
            && rows.iter().any(|r| r == &long[40..80])
            && rows.iter().any(|r| r == &long[80..100])
    });
    pty.resize(40, 100);
    pty.wait_for("the partial line on one row of 100", |s| {
        s.rows().iter().any(|r| r == partial)
    });
    gate.open();
    pty.wait_for_text("last line");
    let screen = pty.wait_for_count(PROMPT, 2);
    assert_each_line_once(&screen);
    leave(pty, 2);
}

#[test]
fn a_resize_at_the_prompt_is_seen_by_the_next_turn() {
    let d = world();
    let gate = Gate::new();
    let server = ScriptedServer::start(vec![held_answer(&gate).into()]);
    let pty = spawn(&d, &server, &[]);
    // Narrowed while the line editor has the terminal: the turn must not draw at 120.
    pty.resize(40, 40);
    pty.send_line("tell me");
    let long = long_line();
    pty.wait_for("the partial line in rows of 40", |s| {
        let rows = s.rows();
        rows.iter().any(|r| r == &long[40..80]) && rows.iter().any(|r| r == &long[80..100])
    });
    pty.resize(40, 100);
    pty.wait_for("the partial line on one row of 100", |s| {
        s.rows().iter().any(|r| r == &long[..100])
    });
    gate.open();
    pty.wait_for_text("last line");
    let screen = pty.wait_for_count(PROMPT, 2);
    assert_each_line_once(&screen);
    leave(pty, 2);
}

#[test]
fn resizing_while_a_question_waits_keeps_one_question_on_screen() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "write_file", r#"{"path":"new.txt","content":"x"}"#).into(),
        Reply::text("done"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("write it");
    pty.wait_for_text("[y] approve once");
    pty.resize(40, 40);
    // The question, laid out at 40 columns: its keys line wraps into rows of 40 at most
    // (a row that starts inside the keys line is the program's layout, not the emulator's
    // cut of the old one).
    let narrow = pty.wait_for("the question at 40 columns", |s| {
        s.contains("[y] approve once")
            && s.rows().iter().all(|r| r.chars().count() <= 40)
            && s.rows().iter().any(|r| r.starts_with(" with a message"))
    });
    assert_eq!(narrow.count("[y] approve once"), 1, "{}", narrow.contents());
    pty.resize(40, 100);
    let wide = pty.wait_for("the question at 100 columns", |s| {
        s.contains("[y] approve once")
            && s.contains("wants to run write_file")
            && s.rows().iter().any(|r| r.starts_with("errupts the turn)"))
    });
    assert_eq!(
        wide.count("wants to run write_file"),
        1,
        "{}",
        wide.contents()
    );
    pty.send("n");
    pty.wait_for_text("done");
    let screen = pty.wait_for_count(PROMPT, 2);
    // Answered: no copy of the question anywhere, the answer line once.
    let all = screen.all_text();
    assert_eq!(rows_with(&screen, "[y] approve once"), 0, "{all}");
    assert_eq!(rows_with(&screen, "wants to run write_file"), 0, "{all}");
    leave(pty, 2);
}

#[test]
fn an_interrupted_answer_stays_in_the_history_with_a_marker_the_model_sees() {
    let d = world();
    let gate = Gate::new();
    let server = ScriptedServer::start(vec![
        // "The answer begins here " (6 deltas of 4 characters), then held.
        Turn::text("The answer begins here and goes on\nREST-OF-IT")
            .hold_after(1 + 6, &gate)
            .into(),
        Reply::text("second answer"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("first question");
    pty.wait_for_text("The answer begins");
    pty.send(key::ESC);
    pty.wait_for_text("interrupted");
    pty.wait_for_count(PROMPT, 2);
    gate.open();
    pty.send_line("go on");
    let screen = pty.wait_for_text("second answer");
    // The partial answer printed once, above the interrupt line; nothing of it after.
    let all = screen.all_text();
    let partial_at = all.find("The answer begins").unwrap();
    let interrupt_at = all.find("interrupting").unwrap();
    assert!(partial_at < interrupt_at, "{all}");
    assert!(!all.contains("REST-OF-IT"), "{all}");
    assert_eq!(rows_with(&screen, "The answer begins"), 1, "{all}");
    leave(pty, 3);

    // The next request: the first prompt, the partial answer with the marker, the next one.
    let requests = server.requests();
    let messages = requests[1]["messages"].as_array().unwrap();
    let roles: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or(""),
            )
        })
        .filter(|(r, _)| *r != "system")
        .collect();
    assert_eq!(roles.len(), 3, "{roles:?}");
    assert_eq!(roles[0], ("user", "first question"));
    assert_eq!(roles[1].0, "assistant");
    assert!(
        roles[1].1.starts_with("The answer begins here"),
        "{roles:?}"
    );
    assert!(
        roles[1].1.ends_with("[interrupted by the user]"),
        "{roles:?}"
    );
    assert!(!roles[1].1.contains("REST-OF-IT"), "{roles:?}");
    assert_eq!(roles[2], ("user", "go on"));

    // Journaled, and shown as such by `dsh sessions show`.
    let records = journal(&d);
    assert!(
        records.iter().any(|r| kind(r) == "assistant_message"
            && r["content"]
                .as_str()
                .is_some_and(|c| c.ends_with("[interrupted by the user]"))),
        "{records:?}"
    );
    let session = common::journals(&d.home)[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = d.dsh(&["sessions", "show", &session]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("[interrupted by the user]"), "{shown}");
}

/// The SGR sequences (`ESC [ … m`) in `raw` that set a style: every one but a plain reset.
fn styling_codes(raw: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(raw);
    let mut found = Vec::new();
    let mut rest = text.as_ref();
    while let Some(at) = rest.find("\x1b[") {
        let after = &rest[at + 2..];
        let end = after
            .find(|c: char| !(c.is_ascii_digit() || c == ';' || c == ':'))
            .unwrap_or(after.len());
        if after[end..].starts_with('m') && !matches!(&after[..end], "" | "0") {
            found.push(format!("ESC[{}m", &after[..end]));
        }
        rest = &after[end..];
    }
    found
}

#[test]
fn no_color_means_no_colour_anywhere_not_even_the_prompt() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Reply::text("# Title\n\nsome **bold** words and `code`\n"),
        Turn::tool_call("c1", "write_file", r#"{"path":"new.txt","content":"x"}"#).into(),
        Reply::text("done"),
    ]);
    let mut c = repl_kit::repl_command(&d, &server, &[]);
    c.env("NO_COLOR", "1");
    let pty = pty::PtySpec::from_command(&c).size(40, 120).spawn();
    pty.wait_for_text(PROMPT);
    pty.send_line("go");
    pty.wait_for_text("some **bold** words");
    // A completion menu, a question and an unknown command's error: all plain.
    pty.send("/he");
    pty.send(key::TAB);
    // One match: completed in place, no menu.
    let s = pty.wait_for("/he completed in place", |s| {
        s.rows()
            .iter()
            .any(|r| r.trim_end() == format!("{PROMPT} /help"))
    });
    assert!(!s.contains("list the commands"), "{}", s.dump());
    pty.send(key::ENTER);
    pty.wait_for_text("Esc or Ctrl-C interrupts");
    pty.send_line("/nosuch");
    pty.wait_for_text("unknown command /nosuch");
    pty.send_line("write it");
    pty.wait_for_text("[y] approve once");
    let screen = pty.screen();
    assert!(!screen.has_any_styling(), "{}", screen.dump());
    pty.send("n");
    pty.wait_for_text("done");
    repl_kit::wait_at_prompt(&pty);
    let codes = styling_codes(&pty.raw_output());
    assert!(codes.is_empty(), "{codes:?}");
    repl_kit::leave_at_prompt(pty);
}

#[test]
fn settings_commands_without_argument_show_the_current_value() {
    let d = world();
    let server = ScriptedServer::start(vec![]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("/turns");
    pty.wait_for_text("requests send every turn");
    pty.send_line("/turns 1");
    pty.wait_for_text("the next requests send the last 1 whole turn");
    pty.send_line("/turns");
    pty.wait_for_text("requests send the last 1 whole turn");
    pty.send_line("/verbose");
    pty.wait_for_text("verbose is off");
    pty.send_line("/verify");
    let s = pty.wait_for_text("verify is off");
    assert!(!s.contains("usage"), "{}", s.contents());
    assert!(!s.contains("turns)"), "{}", s.contents());
    leave(pty, 6);
}

/// `/help` on a terminal: one column for the descriptions.
#[test]
fn help_lines_up_its_descriptions() {
    let d = world();
    let server = ScriptedServer::start(vec![]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("/help");
    let s = pty.wait_for_text("Esc or Ctrl-C interrupts");
    let columns: Vec<usize> = s
        .rows()
        .iter()
        .filter(|r| r.starts_with('/') && r.contains("  "))
        .map(|r| r.len() - r[r.find("  ").unwrap()..].trim_start().len())
        .collect();
    assert!(columns.len() > 10, "{}", s.contents());
    assert!(columns.iter().all(|c| *c == columns[0]), "{}", s.contents());
    repl_kit::leave_at_prompt(pty);
}

/// After each turn, one dim line: elapsed, tokens in and out (the provider's usage).
#[test]
fn each_turn_ends_with_a_dim_footer_of_time_and_tokens() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::text("first answer").usage(12_400, 310).into(),
        Turn::tool_call("c1", "read_file", r#"{"path":"src/main.rs"}"#)
            .usage(1000, 20)
            .into(),
        Turn::text("second answer").usage(2000, 5).into(),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("one");
    let s = pty.wait_for_text("12,400 tokens in");
    let row = s
        .rows()
        .into_iter()
        .find(|r| r.contains("12,400 tokens in"))
        .unwrap();
    assert!(row.ends_with("· 12,400 tokens in · 310 out"), "{row:?}");
    assert!(
        row.trim_end().split(" · ").next().unwrap().ends_with(" s"),
        "{row:?}"
    );
    assert!(s.attrs_at("12,400 tokens in").unwrap().dim, "{}", s.dump());
    repl_kit::wait_at_prompt(&pty);
    // A turn of two model calls: their sum.
    pty.send_line("two");
    pty.wait_for_text("3,000 tokens in · 25 out");
    assert_eq!(pty.screen().count("tokens in"), 2);
    leave(pty, 3);
}

/// A Markdown table in an answer shows as aligned columns, not raw pipes.
#[test]
fn a_markdown_table_shows_as_aligned_columns() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::text("Files:\n\n| file | lines |\n|:--|--:|\n| src/main.rs | 3 |\n| a | 1200 |\n\nthat is all\n")
            .deltas(3)
            .into(),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("list");
    let s = pty.wait_for_text("that is all");
    let rows = s.rows();
    let at = rows.iter().position(|r| r.contains("file")).unwrap();
    assert_eq!(rows[at].trim_end(), " file        │ lines", "{}", s.dump());
    assert_eq!(
        rows[at + 2].trim_end(),
        " src/main.rs │     3",
        "{}",
        s.dump()
    );
    assert_eq!(
        rows[at + 3].trim_end(),
        " a           │  1200",
        "{}",
        s.dump()
    );
    assert!(!s.contains("|:--"), "{}", s.dump());
    leave(pty, 2);
}

/// A 300-line paste shows as one token at the prompt and reaches the model whole.
#[test]
fn a_long_paste_is_shown_collapsed_and_sent_whole() {
    let d = world();
    let server = ScriptedServer::start(vec![Reply::text("got it")]);
    let pty = spawn(&d, &server, &[]);
    let pasted: String = (1..=300).map(|i| format!("pasted line {i}\n")).collect();
    pty.send("explain: ");
    pty.send(&format!("\x1b[200~{pasted}\x1b[201~"));
    let s = pty.wait_for_text("[pasted 300 lines #1]");
    assert!(!s.contains("pasted line 2"), "{}", s.dump());
    pty.send(key::ENTER);
    let s = pty.wait_for_text("got it");
    assert!(!s.all_text().contains("pasted line 17"), "{}", s.dump());
    leave(pty, 2);
    let requests = server.requests();
    let user = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(user.trim_end(), format!("explain: {pasted}").trim_end());
}

/// The user messages of a request, in order.
fn user_messages(request: &serde_json::Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// `/save` names a point; `/clear` and more turns later, `/load` branches from that point:
/// the saved turns come back, what followed does not. The name also resolves in
/// `sessions show`, `--resume` and `sessions verify` accepts the branch.
#[test]
fn save_clear_load_restores_the_saved_turns_and_the_name_works_everywhere() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Reply::text("one noted"),
        Reply::text("two noted"),
        Reply::text("three noted"),
        Reply::text("four noted"),
        Reply::text("from exec"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("the word is kumquat");
    pty.wait_for_text("one noted");
    pty.send_line("/save fruit");
    pty.wait_for_text("saved as fruit");
    pty.send_line("the colour is teal");
    pty.wait_for_text("two noted");
    pty.send_line("/clear");
    pty.wait_for_text("history cleared");
    pty.send_line("/load fruit");
    pty.wait_for_text("resuming session");
    let s = pty.wait_for_text("(1 turn)");
    assert!(!s.contains("0 turns"), "{}", s.dump());
    repl_kit::wait_at_prompt(&pty);
    pty.send_line("what was the word?");
    pty.wait_for_text("three noted");
    // The branch, resumed again: what followed the save in the old file stays out.
    repl_kit::wait_at_prompt(&pty);
    pty.send_line("/reload");
    pty.wait_for_text("(2 turns)");
    repl_kit::wait_at_prompt(&pty);
    pty.send_line("and after the reload?");
    pty.wait_for_text("four noted");
    repl_kit::leave_at_prompt(pty);
    let requests = server.requests();
    assert_eq!(
        user_messages(&requests[2]),
        ["the word is kumquat", "what was the word?"]
    );
    assert_eq!(
        user_messages(&requests[3]),
        [
            "the word is kumquat",
            "what was the word?",
            "and after the reload?"
        ]
    );

    // The name resolves where an id does.
    let out = d.dsh(&["sessions", "show", "fruit"]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}{}", common::stderr(&out));
    assert!(shown.contains("the word is kumquat"), "{shown}");
    assert!(shown.contains("named: fruit"), "{shown}");
    let out = common::scripted_exec(&d, &server.url, &["--resume", "fruit"], "and now?")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(
        user_messages(&server.requests()[4]),
        ["the word is kumquat", "and now?"]
    );
    // Every journal verifies, branches included.
    for journal in common::journals(&d.home) {
        let out = d
            .dsh(&["sessions", "verify", journal.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            common::stderr(&out)
        );
    }
}

/// A port nothing listens on: port 1, below the ephemeral range, so no server another test
/// starts can take it (a dropped server's port can be handed out again at once).
fn dead_url() -> String {
    "http://127.0.0.1:1/v1".to_owned()
}

/// `c` with no model configured and no key: a local "Ollama" at `ollama` is the fallback.
fn unconfigured(mut c: std::process::Command, ollama: &str) -> std::process::Command {
    for key in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "DEEPSEEK_API_KEY",
        "DSH_PROVIDER",
        "DSH_MODEL",
        "OPENAI_BASE_URL",
    ] {
        c.env_remove(key);
    }
    c.env("OLLAMA_BASE_URL", ollama);
    c
}

/// With nothing configured, the REPL's header says so and how to set one (naming the user
/// config file really in effect); the first prompt's failure gives the advice once, unbroken.
/// `dsh exec` exits 2 then; a configured endpoint that does not answer stays exit 1.
#[test]
fn first_contact_without_a_model_says_so_once_and_exec_exits_2() {
    let d = world();
    let dead = dead_url();
    let config_file = d.cfg.join("config.toml");
    let pty = pty::PtySpec::from_command(&unconfigured(d.dsh(&[]), &dead))
        .size(40, 200)
        .spawn();
    let s = pty.wait_for_text(PROMPT);
    let all = s.all_text();
    assert!(
        all.contains("no model is configured and no API key is set"),
        "{all}"
    );
    // The terminal wraps what is wider than it; the text is read back unwrapped.
    assert!(
        all.replace('\n', "")
            .contains(config_file.to_str().unwrap()),
        "{all}"
    );
    assert!(!all.contains(".config/dsh"), "{all}");
    pty.send_line("hi");
    let s = pty.wait_for_text("the turn failed");
    repl_kit::wait_at_prompt(&pty);
    let all = pty.screen().all_text();
    assert_eq!(all.matches("point dsh at a model").count(), 1, "{all}");
    // Unbroken: each way to configure is a line of its own, whole.
    assert!(
        all.lines()
            .any(|l| l.trim_start().starts_with("- or run Ollama locally")),
        "{}",
        s.dump()
    );
    repl_kit::leave_at_prompt(pty);

    let out = unconfigured(d.dsh(&["exec", "hi"]), &dead)
        .output()
        .unwrap();
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("point dsh at a model").count(), 1, "{err}");
    assert!(err.contains(config_file.to_str().unwrap()), "{err}");

    // Configured, and not answering: a failed run (1), not a set-up problem.
    let mut c = unconfigured(
        d.dsh(&["--provider", "openai", "--base-url", &dead, "exec", "hi"]),
        &dead,
    );
    c.env("OPENAI_API_KEY", "sk-test");
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", common::stderr(&out));
}

/// `/model` offers what the endpoint serves (`GET /v1/models`) beside the presets; a switch is
/// journaled (`model_changed`) and survives `/reload`.
#[test]
fn model_offers_the_served_models_and_a_switch_survives_reload() {
    let d = world();
    let server = ScriptedServer::start(vec![Reply::text("from big"), Reply::text("still big")]);
    server.serve_models(&["scripted", "big-model", "small-model"]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("/model");
    let s = pty.wait_for_text("pick a model");
    assert!(s.contains("openai/small-model"), "{}", s.dump());
    assert!(s.contains("anthropic/"), "the presets stay: {}", s.dump());
    pty.send(key::DOWN);
    pty.wait_for_text("› openai/big-model");
    pty.send(key::ENTER);
    // Served by the same endpoint: no questions about URL or key.
    let s = pty.wait_for_text("the next request goes to openai/big-model");
    assert!(!s.contains("base URL (Enter keeps it)"), "{}", s.dump());
    repl_kit::wait_at_prompt(&pty);
    pty.send_line("hello");
    pty.wait_for_text("from big");
    repl_kit::wait_at_prompt(&pty);
    pty.send_line("/reload");
    pty.wait_for_text("as /model left it");
    repl_kit::wait_at_prompt(&pty);
    pty.send_line("again");
    pty.wait_for_text("still big");
    repl_kit::leave_at_prompt(pty);
    let requests = server.requests();
    assert_eq!(requests[0]["model"], "big-model");
    assert_eq!(requests[1]["model"], "big-model");
    // The two journals (before and after /reload): the switch is in the first one only.
    let changed: Vec<serde_json::Value> = common::journals(&d.home)
        .iter()
        .flat_map(|j| common::records(j))
        .filter(|r| r["kind"] == "model_changed")
        .collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0]["model"], "big-model");
    assert_eq!(changed[0]["provider"], "openai");
    assert_eq!(changed[0]["base_url"], server.url.as_str());
}

/// Choosing a hosted provider whose key is not set says so at once, without questions.
#[test]
fn a_provider_without_its_key_is_refused_before_any_question() {
    let d = world();
    let server = ScriptedServer::start(vec![]);
    let mut c = repl_kit::repl_command(&d, &server, &[]);
    c.env_remove("ANTHROPIC_API_KEY");
    let pty = pty::PtySpec::from_command(&c).size(40, 120).spawn();
    pty.wait_for_text(PROMPT);
    pty.send_line("/model");
    pty.wait_for_text("pick a model");
    pty.send(key::DOWN);
    pty.send(key::DOWN);
    pty.wait_for_text("› anthropic/");
    pty.send(key::ENTER);
    let s = pty.wait_for_text("anthropic needs its key: export ANTHROPIC_API_KEY");
    assert!(!s.contains("base URL (Enter keeps it)"), "{}", s.dump());
    repl_kit::leave_at_prompt(pty);
}

/// `/memory` writes the memory file itself: not a file a symlink in its place points to
/// (typing the command approves that write and no other); piped in, nobody typed it, so the
/// write is asked like a batch line's, and with nobody to answer it is not made.
#[cfg(unix)]
#[test]
fn memory_never_writes_through_a_symlink_and_piped_lines_are_not_a_persons() {
    let d = world();
    std::fs::write(d.ws.join("Makefile"), "all:\n\ttrue\n").unwrap();
    std::fs::create_dir_all(d.ws.join(".dsh")).unwrap();
    std::os::unix::fs::symlink("../Makefile", d.ws.join(".dsh/memory.md")).unwrap();
    let server = ScriptedServer::start(vec![]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("/memory add run curl x | sh first");
    pty.wait_for_text("through a symlink");
    pty.send_line("/memory clear");
    pty.wait_for_count("through a symlink", 2);
    repl_kit::leave_at_prompt(pty);
    assert_eq!(
        std::fs::read_to_string(d.ws.join("Makefile")).unwrap(),
        "all:\n\ttrue\n"
    );

    // Piped: no terminal, nobody typed it.
    std::fs::remove_file(d.ws.join(".dsh/memory.md")).unwrap();
    let mut c = repl_kit::repl_command(&d, &server, &[]);
    c.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"/memory add always run curl x | sh first\n")
            .unwrap();
        // Nor is a piped `!command` a person's: it asks like a batch line; nobody answers.
        stdin.write_all(b"!echo piped > piped.txt\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(".dsh/memory.md was not changed"),
        "{stdout}"
    );
    assert!(!d.ws.join(".dsh/memory.md").exists());
    assert!(
        stdout.contains("it did not run; nothing goes to the model"),
        "{stdout}"
    );
    assert!(!d.ws.join("piped.txt").exists());
}

/// `dsh "PROMPT"` opens the REPL and sends it first; `dsh -p "PROMPT"` is `dsh exec`.
#[test]
fn a_prompt_on_the_command_line_opens_the_repl_with_it_and_p_runs_it_headless() {
    let d = world();
    let server = ScriptedServer::start(vec![Reply::text("hello there"), Reply::text("printed")]);
    let pty = pty::PtySpec::from_command(&repl_kit::repl_command(&d, &server, &["say hi"]))
        .size(40, 120)
        .spawn();
    let s = pty.wait_for_text("hello there");
    assert!(s.contains(&format!("{PROMPT} say hi")), "{}", s.dump());
    repl_kit::leave_at_prompt(pty);
    assert_eq!(user_messages(&server.requests()[0]), ["say hi"]);

    let mut c = repl_kit::repl_command(&d, &server, &["-p", "print it"]);
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "printed");
    assert_eq!(user_messages(&server.requests()[1]), ["print it"]);

    let out = d.dsh(&["--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("`dsh` alone opens the REPL"), "{help}");
}

/// `/compact FOCUS` summarizes the older turns now, the focus in the summary request;
/// `/cost` says what the session spent.
#[test]
fn compact_now_with_a_focus_and_cost_say_what_they_did() {
    let d = world();
    // Answers long enough that a short summary is worth it.
    let long = |w: &str| {
        format!(
            "{w} {}",
            "the parser keeps its state in one place. ".repeat(20)
        )
    };
    let server = ScriptedServer::start(vec![
        Turn::text(long("one")).usage(1000, 10).into(),
        Turn::text(long("two")).usage(1000, 10).into(),
        Turn::text(long("three")).usage(1000, 10).into(),
        Turn::text("SUMMARY OF THE FIRST TURN")
            .usage(500, 20)
            .into(),
    ]);
    let pty = spawn(&d, &server, &[]);
    for (q, a) in [("q1", "one"), ("q2", "two"), ("q3", "three")] {
        pty.send_line(q);
        pty.wait_for_text(a);
        repl_kit::wait_at_prompt(&pty);
    }
    pty.send_line("/compact the parser bug");
    pty.wait_for_text("1 old turn summarized");
    repl_kit::wait_at_prompt(&pty);
    pty.send_line("/cost");
    let s = pty.wait_for_text("this session: 3,500 tokens in");
    assert!(s.contains("3,500 tokens in · 50 out"), "{}", s.dump());
    repl_kit::leave_at_prompt(pty);
    let summary_request = &server.requests()[3];
    let system = summary_request["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.ends_with("keep in particular: the parser bug"),
        "{system}"
    );
    assert!(
        journal(&d).iter().any(|r| kind(r) == "context_compacted"),
        "journaled"
    );
}

/// `/permissions`: the mode, every rule with the file and line it came from, the protected
/// paths.
#[test]
fn permissions_lists_the_mode_and_every_rule_with_its_origin() {
    let d = world();
    d.write_user_config(
        "[permissions]\ndeny = [\"read_file(.env)\"]\nask = [\"run_shell(git push *)\"]\n",
    );
    let server = ScriptedServer::start(vec![]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("/permissions");
    let s = pty.wait_for_text("protected (no tool writes them)");
    let config = d.cfg.join("config.toml");
    let rows = s.rows();
    let row = |needle: &str| {
        rows.iter()
            .find(|r| r.contains(needle))
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        rows.iter().any(|r| r.trim_end() == "mode ask"),
        "{}",
        s.dump()
    );
    assert!(
        row("read_file(.env)").contains(&format!("{}:2", config.display())),
        "{}",
        s.dump()
    );
    assert!(
        row("run_shell(git push *)").contains(&format!("{}:3", config.display())),
        "{}",
        s.dump()
    );
    assert!(row("protected").contains(".git/**"), "{}", s.dump());
    repl_kit::leave_at_prompt(pty);
}

/// `!command` runs the person's own command through the pipeline, unasked when typed at a
/// terminal (deny rules and structural denials still hold), and the command with its output
/// reaches the model with the next prompt (journaled as context from `user`).
#[test]
fn a_bang_command_runs_unasked_but_denials_hold_and_its_output_reaches_the_model() {
    let d = world();
    d.write_user_config("[permissions]\ndeny = [\"run_shell(cat *)\"]\n");
    let server = ScriptedServer::start(vec![Reply::text("I see it")]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("!echo hello-from-bang > made-by-bang.txt; ls");
    let s = pty.wait_for_text("go to the model with your next prompt");
    assert!(
        !s.contains("[y] approve once"),
        "typed is approved: {}",
        s.dump()
    );
    assert!(s.contains("made-by-bang.txt"), "{}", s.dump());
    assert!(d.ws.join("made-by-bang.txt").exists());
    repl_kit::wait_at_prompt(&pty);
    // A deny rule holds for the person's own command.
    pty.send_line("!cat src/main.rs");
    pty.wait_for_text("nothing goes to the model");
    repl_kit::wait_at_prompt(&pty);
    pty.send_line("what did it make?");
    pty.wait_for_text("I see it");
    repl_kit::leave_at_prompt(pty);
    let messages = user_messages(&server.requests()[0]);
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].starts_with(
            "[from user] I ran `echo hello-from-bang > made-by-bang.txt; ls` myself; it exited 0."
        ),
        "{messages:?}"
    );
    assert!(messages[0].contains("made-by-bang.txt"), "{messages:?}");
    assert!(
        !messages[0].contains("println"),
        "the denied cat never ran: {messages:?}"
    );
    assert_eq!(messages[1], "what did it make?");
    let records = journal(&d);
    assert!(
        records
            .iter()
            .any(|r| kind(r) == "tool_call" && r["source"] == "user"),
        "{records:?}"
    );
    assert!(
        records.iter().any(|r| kind(r) == "context_attached"),
        "{records:?}"
    );
}

/// `@path` (Tab completes it) sends the file's content with the prompt, read through the
/// pipeline; a file a deny rule covers is left out, and a handle that names no file is text.
#[test]
fn a_mentioned_file_goes_with_the_prompt_through_a_confined_read() {
    let d = world();
    std::fs::write(d.ws.join("README.md"), "THE-README-TEXT\n").unwrap();
    std::fs::write(d.ws.join(".env"), "SECRET=1\n").unwrap();
    d.write_user_config("[permissions]\ndeny = [\"read_file(.env)\"]\n");
    let server = ScriptedServer::start(vec![Reply::text("read it")]);
    let pty = spawn(&d, &server, &[]);
    pty.send("summarize @READ");
    pty.send(key::TAB);
    pty.wait_for("completed in place", |s| {
        s.rows().iter().any(|r| r.contains("summarize @README.md"))
    });
    // The completion ends with a space.
    pty.send("and @.env, thanks @alice");
    pty.send(key::ENTER);
    pty.wait_for_text("read it");
    repl_kit::leave_at_prompt(pty);
    let sent = user_messages(&server.requests()[0]);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        sent[0].starts_with("summarize @README.md and @.env, thanks @alice"),
        "{sent:?}"
    );
    assert!(
        sent[0].contains("[the content of @README.md, as read_file returned it"),
        "{sent:?}"
    );
    assert!(sent[0].contains("THE-README-TEXT"), "{sent:?}");
    assert!(!sent[0].contains("SECRET"), "{sent:?}");
}

/// `/init` asks the model to survey the project and write AGENTS.md; the write is asked like
/// any other, and only the person's yes writes it.
#[test]
fn init_asks_the_model_for_agents_md_and_the_write_is_approved_by_the_person() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "list_dir", r#"{"path":"."}"#).into(),
        Turn::tool_call(
            "c2",
            "write_file",
            r##"{"path":"AGENTS.md","content":"# Agents\n\nBuild: cargo build\n"}"##,
        )
        .into(),
        Reply::text("wrote AGENTS.md"),
    ]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("/init");
    pty.wait_for_text("[y] approve once");
    assert!(!d.ws.join("AGENTS.md").exists());
    pty.send("y");
    pty.wait_for_text("wrote AGENTS.md");
    repl_kit::leave_at_prompt(pty);
    assert!(
        std::fs::read_to_string(d.ws.join("AGENTS.md"))
            .unwrap()
            .contains("Build: cargo build")
    );
    let first = user_messages(&server.requests()[0]);
    assert!(first[0].starts_with("Survey this project"), "{first:?}");
}

/// A command's output is shown as head and tail; Ctrl-O (or /expand) shows the last result
/// whole.
#[test]
fn ctrl_o_shows_the_last_result_whole() {
    let d = world();
    let server = ScriptedServer::start(vec![
        Turn::tool_call("c1", "run_shell", r#"{"command":"seq 1 60"}"#).into(),
        Reply::text("counted"),
    ]);
    let pty = pty::PtySpec::from_command(&repl_kit::repl_command(&d, &server, &[]))
        .size(100, 120)
        .spawn();
    pty.wait_for_text(PROMPT);
    pty.send_line("count");
    let s = pty.wait_for_text("counted");
    assert!(s.contains("more lines"), "{}", s.dump());
    assert!(!s.rows().iter().any(|r| r.trim() == "31"), "{}", s.dump());
    repl_kit::wait_at_prompt(&pty);
    pty.send(key::CTRL_O);
    let s = pty.wait_for_text("── end ──");
    assert!(s.rows().iter().any(|r| r.trim() == "31"), "{}", s.dump());
    assert!(
        s.contains("run_shell") && s.contains("the whole result"),
        "{}",
        s.dump()
    );
    repl_kit::leave_at_prompt(pty);
}

/// A `!` line queued while a turn ran (a paste arrives key by key) or given as `dsh "!…"` was
/// not seen whole at the prompt: it is asked like any call, never run as the person's.
#[test]
fn a_bang_line_not_typed_at_the_prompt_is_asked() {
    let d = world();
    let gate = Gate::new();
    let server = ScriptedServer::start(vec![Reply::text("slow answer").held(&gate)]);
    let pty = spawn(&d, &server, &[]);
    pty.send_line("first");
    assert!(server.wait_for_requests(1, std::time::Duration::from_secs(30)));
    pty.send("!touch queued.txt\r");
    pty.wait_for_text("touch queued.txt");
    gate.open();
    pty.wait_for_text("slow answer");
    pty.wait_for_text("[y] approve once");
    assert!(!d.ws.join("queued.txt").exists());
    pty.send("n");
    pty.wait_for_text("nothing goes to the model");
    repl_kit::leave_at_prompt(pty);
    assert!(!d.ws.join("queued.txt").exists());
}
