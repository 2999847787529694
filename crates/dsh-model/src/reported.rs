//! Errors a server reports inside a successful (200) answer — an error event in the stream,
//! an error object where the message should be (issue 14): read into
//! [`ModelError::Reported`] and classified as their HTTP equivalent would be.

use crate::http::{Endpoint, Failure, server_message};
use crate::types::ModelError;

impl Endpoint {
    /// A reported error, classified as its HTTP equivalent would be: authentication, unknown
    /// model and bad requests are final with the same "what to check" hint; rate limits and
    /// overload are retried; anything else is final, in the server's own words.
    pub(crate) fn reported_failure(&self, error: ModelError) -> Failure {
        let ModelError::Reported {
            kind,
            message,
            hint,
        } = error
        else {
            return Failure::fatal(error);
        };
        let status = kind.as_deref().and_then(equivalent_status);
        let rebuilt = |hint| ModelError::Reported {
            kind: kind.clone(),
            message: message.clone(),
            hint,
        };
        match status {
            Some(429 | 500..=599) => Failure::retryable(rebuilt(hint), None),
            Some(code) => Failure::fatal(rebuilt(hint.or_else(|| self.hint_for(code, None)))),
            None => Failure::fatal(rebuilt(hint)),
        }
    }
}

/// An error object a server sent inside a 200 answer (`{"message","type","code"}`, or a
/// bare string), as [`ModelError::Reported`]; `message` is the server's message when the
/// caller already extracted it.
pub(crate) fn reported(error: &serde_json::Value, message: Option<String>) -> ModelError {
    let field = |key: &str| match error.get(key) {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    // The most specific name first: OpenAI's `code` (`invalid_api_key`), else the type
    // (`rate_limit_error`, `invalid_request_error`).
    let kind = field("code").or_else(|| field("type"));
    let message = message
        .or_else(|| server_message(&serde_json::json!({ "error": error }).to_string()))
        .unwrap_or_else(|| "(no message)".to_string());
    ModelError::Reported {
        kind,
        message,
        hint: None,
    }
}

/// The HTTP status a reported error's kind stands for, when it names one.
fn equivalent_status(kind: &str) -> Option<u16> {
    let k = kind.to_ascii_lowercase();
    if let Ok(code) = k.parse::<u16>() {
        return Some(code);
    }
    let has = |words: &[&str]| words.iter().any(|w| k.contains(w));
    if has(&["rate_limit", "ratelimit", "too_many_requests"]) {
        Some(429)
    } else if has(&["overloaded", "unavailable"]) {
        Some(529)
    } else if has(&["api_error", "server_error", "internal"]) {
        Some(500)
    } else if has(&["auth", "api_key", "apikey", "unauthorized"]) {
        Some(401)
    } else if has(&["permission", "forbidden"]) {
        Some(403)
    } else if has(&["not_found", "notfound", "does_not_exist", "unknown_model"]) {
        Some(404)
    } else if has(&[
        "invalid_request",
        "bad_request",
        "context_length",
        "invalid",
    ]) {
        Some(400)
    } else {
        None
    }
}
