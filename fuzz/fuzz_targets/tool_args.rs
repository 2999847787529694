//! A tool call's arguments as a model sends them, from the raw text to gate 3: read by the
//! agent loop, validated against the tool's input schema, declared (`accesses`) and judged by
//! every policy of a session assembled as `dsh check` assembles one (nothing runs), and
//! written back into both wire formats' next request.
//!
//! The first byte picks the tool (every tool the session offers), the rest is the argument
//! text. Judging the same call twice gives one report; arguments that are not a JSON object
//! are never allowed; the Anthropic request always carries an object as the call's input.
#![no_main]
use std::sync::{Arc, OnceLock};

use dsh_agent::{Session, SessionSettings};
use dsh_core::{Decision, Origin, Rule, ToolCall};
use dsh_model::{ChatRequest, Message, ToolCallRequest};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    session: Session,
    tools: Vec<String>,
    anthropic: dsh_model::AnthropicProvider,
    openai: dsh_model::OpenAiProvider,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let ws = dsh_fuzz::workspace();
        let home = tempfile::tempdir().expect("a temporary directory");
        let mut settings = SessionSettings::new(ws.path(), home.path());
        let rule = |d, t: &str| Rule::parse(d, t, Origin::builtin()).expect("a rule");
        settings.rules = vec![
            rule(Decision::Allow, "run_shell(git status)"),
            rule(Decision::Allow, "run_shell(echo *)"),
            rule(Decision::Allow, "write_file(src/**)"),
            rule(Decision::Deny, "read_file(.env)"),
            rule(Decision::Ask, "edit_file(docs/**)"),
        ];
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let session = {
            let _in = runtime.enter();
            Session::assemble_dry(&settings).expect("a dry session")
        };
        let mut tools: Vec<String> = session
            .pipeline
            .specs(&session.main_tools())
            .iter()
            .map(|s| s.name.clone())
            .collect();
        tools.push("no_such_tool".to_owned());
        let config = || dsh_model::ProviderConfig::new("fuzz", "http://127.0.0.1:9", "m");
        Fixture {
            runtime,
            session,
            tools,
            anthropic: dsh_model::AnthropicProvider::new(config()).expect("a provider"),
            openai: dsh_model::OpenAiProvider::new(config()).expect("a provider"),
            _dirs: (ws, home),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let f = fixture();
    let name = &f.tools[usize::from(pick) % f.tools.len()];
    let raw = String::from_utf8_lossy(rest);
    let args = dsh_agent::fuzzing::tool_args(&raw);
    let _ = dsh_agent::fuzzing::repeated_args(&raw);
    let call = ToolCall::new("call_1", name.as_str(), args.clone());
    let pipeline = Arc::clone(&f.session.pipeline);
    let (first, second) = f
        .runtime
        .block_on(async { (pipeline.check(&call).await, pipeline.check(&call).await) });
    assert_eq!(first, second, "the same call was judged twice differently");
    if !args.is_object() {
        assert_ne!(
            first.decision,
            Decision::Allow,
            "arguments that are not an object were allowed: {first:?}"
        );
    }

    let message = Message::assistant(
        "",
        vec![ToolCallRequest {
            id: "call_1".to_owned(),
            name: name.clone(),
            arguments: raw.clone().into_owned(),
        }],
    );
    let request = ChatRequest {
        model: "m".to_owned(),
        messages: vec![
            Message::user("go"),
            message,
            Message::tool("call_1", "done"),
        ],
        tools: Vec::new(),
        max_tokens: None,
    };
    let body = f.anthropic.request_body(&request);
    let inputs: Vec<&Value> = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| &b["input"])
        .collect();
    assert_eq!(inputs.len(), 1, "one tool_use block: {body}");
    assert!(
        inputs[0].is_object(),
        "a tool_use input is not an object: {body}"
    );
    let body = f.openai.request_body(&request);
    assert!(serde_json::to_string(&body).is_ok());
});
