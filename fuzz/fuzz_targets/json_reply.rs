//! A server that answers JSON where a stream was asked for (a whole message, an error object
//! in a 200 answer, anything else), read in both wire formats, and an error body read for the
//! server's own words.
#![no_main]
use dsh_model::ModelError;
use dsh_model::fuzzing::{self, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let body = String::from_utf8_lossy(data);
    for format in [Format::OpenAi, Format::Anthropic] {
        let d = fuzzing::json_reply(format, &body);
        match &d.result {
            // An error object is the server's report, never a turn.
            Ok(_) => assert!(
                !is_error_object(&body),
                "an error object was taken as a turn"
            ),
            Err(ModelError::Reported { .. } | ModelError::Protocol(_)) => {
                assert!(d.events.is_empty() || !d.retried);
            }
            Err(e) => panic!("a JSON answer gave an error of another kind: {e:?}"),
        }
        // Nothing that is not a whole message is retried except a reported overload or rate
        // limit.
        if d.retried {
            assert!(matches!(d.result, Err(ModelError::Reported { .. })));
        }
    }
    if let Some(said) = fuzzing::error_message(&body) {
        assert!(
            said.chars().count() <= 501,
            "the server's message is not cut"
        );
    }
});

fn is_error_object(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").cloned())
        .is_some_and(|e| !e.is_null())
}
