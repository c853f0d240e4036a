//! The status code of a runtime error, and each thread's last error message.
//!
//! Every C function returns one code of [`status::CODES`] (0 on success), generated from
//! `api/errors.toml` like `rshmem.h` and `docs/c-api.md`. The message, the runtime error's
//! `Display` text naming the values, the PE and what to do, is kept per thread for
//! `rshmem_host_last_error()`.

use crate::status;
use rshmem::{Error, ErrorKind};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};

/// The status code of a runtime error.
pub fn code_of(err: &Error) -> c_int {
    status::of(err.kind())
}

/// The runtime error kind called `name` ("Transport"), if there is one.
pub fn kind_named(name: &str) -> Option<ErrorKind> {
    ErrorKind::ALL.iter().copied().find(|k| k.name() == name)
}

/// The name of the `index`-th error kind as a static C string, `None` past the last.
pub fn kind_name(index: usize) -> Option<&'static CStr> {
    // The names are static; NUL-terminated copies are made once.
    static NAMES: std::sync::OnceLock<Vec<CString>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        ErrorKind::ALL.iter().map(|k| CString::new(k.name()).expect("names have no NUL")).collect()
    });
    names.get(index).map(CString::as_c_str)
}

/// The runtime's message for `err` in a C program's terms: the runtime words its messages for
/// Python, so the Python calls they name become their C functions.
pub fn in_c_terms(err: &Error) -> String {
    /// Python's words in runtime messages, and what a C program calls the same.
    const TERMS: &[(&str, &str)] = &[
        ("call rshmem.finalize() before init() again", "call rshmem_host_finalize() before rshmem_host_init() again"),
        ("rshmem.init()", "rshmem_host_init()"),
        ("rshmem.finalize()", "rshmem_host_finalize()"),
        ("rshmem malloc / create_symmetric_tensor", "rshmem_host_malloc / rshmem_host_calloc / rshmem_host_align"),
    ];
    let mut text = match err {
        // `call` is already the C function's name.
        Error::NotInitialized { call } => return format!("rshmem is not initialized: call rshmem_host_init() before {call}"),
        e => e.to_string(),
    };
    for (py, c) in TERMS {
        text = text.replace(py, c);
    }
    text
}

/// The C name of `status`, as a static C string.
pub fn name_of(status: c_int) -> *const c_char {
    // The names are static; NUL-terminated copies are made once.
    static NAMES: std::sync::OnceLock<Vec<(c_int, CString)>> = std::sync::OnceLock::new();
    static UNKNOWN: &std::ffi::CStr = c"unknown";
    let names = NAMES.get_or_init(|| {
        status::CODES.iter().map(|&(name, value)| (value, CString::new(name).expect("names have no NUL"))).collect()
    });
    names.iter().find(|(v, _)| *v == status).map_or(UNKNOWN.as_ptr(), |(_, n)| n.as_ptr())
}

thread_local! {
    /// The message of this thread's last failed call.
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `message` as this thread's last error and returns `status`.
pub fn fail(status: c_int, message: &str) -> c_int {
    // A message with a NUL inside (from an OS string) is cut there rather than dropped.
    let clean = message.split('\0').next().unwrap_or_default();
    let text = CString::new(clean).unwrap_or_default();
    tracing::debug!(status, message = clean, "rshmem C call failed");
    LAST.with(|l| *l.borrow_mut() = text);
    status
}

/// This thread's last error message; valid until its next failing call.
pub fn last() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_c_functions() {
        let e = Error::NotInitialized { call: "rshmem_host_malloc()" };
        assert_eq!(in_c_terms(&e), "rshmem is not initialized: call rshmem_host_init() before rshmem_host_malloc()");
        let again = in_c_terms(&Error::AlreadyInitialized);
        assert!(again.contains("rshmem_host_finalize() before rshmem_host_init() again") && !again.contains("rshmem."), "{again}");
        let gone = in_c_terms(&Error::PeerExited { pe: 1, during: "rshmem_host_barrier_all()".into(), how: "rshmem_host_finalize()".into() });
        assert!(gone.contains("PE 1 left the job (rshmem_host_finalize())"), "{gone}");
    }
}
