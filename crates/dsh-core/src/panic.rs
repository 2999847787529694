//! Turning a caught panic payload into a message for a `crashed` result (SPEC P7).

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
