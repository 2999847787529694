//! Turning a caught panic payload into a message for a `crashed` result (SPEC P7), and
//! running listeners whose panics change nothing.

use std::any::Any;

/// The panic message, when the payload is a string (as `panic!` makes it).
pub(crate) fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// Runs a listener (an observer, an event sink) whose panic must change nothing: it is caught
/// and dropped.
pub(crate) fn quietly(f: impl FnOnce()) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
}
