//! Errors raised where nobody can return them: in `Drop` of the RAII driver types.
//!
//! `Drop` must not panic and cannot return an error, so it logs the failure and keeps the first
//! one here. The runtime's next barrier (or `check_err()`) calls [`take`] and reports it, as
//! STYLE.md 4 asks ("Drop never panics: it calls `Runtime::record_err`").

use crate::error::Error;
use std::sync::Mutex;

static FIRST: Mutex<Option<Error>> = Mutex::new(None);

/// Logs `err`, which happened while releasing `what`, and keeps it if it is the first one.
pub fn record(what: &str, err: Error) {
    tracing::error!("releasing {what} failed: {err}");
    let mut slot = FIRST.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_none() {
        *slot = Some(err);
    }
}

/// The first error recorded since the last call, if any.
pub fn take() -> Option<Error> {
    FIRST.lock().unwrap_or_else(|p| p.into_inner()).take()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_error_until_taken() {
        // Other tests in this binary do not record errors, so the slot starts empty.
        let _ = take();
        record("a test chunk", Error::Unsupported("first".into()));
        record("a test chunk", Error::Unsupported("second".into()));
        let e = take().expect("an error was recorded");
        assert!(e.to_string().contains("first"), "{e}");
        assert!(take().is_none());
    }
}
