//! Status codes of the C ABI, and each thread's last error message.
//!
//! Every C function returns one code of [`CODES`] (0 on success); `tools/gen_c_api.py` writes
//! the table into `rshmem.h` and `docs/c-api.md`. The message, the runtime error's `Display`
//! text naming the values, the PE and what to do, is kept per thread for
//! `rshmem_host_last_error()`.

use rshmem::Error;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};

/// One status code: its C name, value and meaning.
pub struct Code {
    /// The C macro.
    pub name: &'static str,
    /// Its value.
    pub value: c_int,
    /// What it means (one line); tools/gen_c_api.py writes it into the header and the docs.
    #[allow(dead_code)]
    pub doc: &'static str,
}

/// Every status code. Values are stable: a new code takes a new number.
pub const CODES: &[Code] = &[
    Code { name: "RSHMEM_SUCCESS", value: 0, doc: "The call did what it says." },
    Code { name: "RSHMEM_ERROR_NOT_INITIALIZED", value: 1, doc: "The call came before rshmem_host_init or after rshmem_host_finalize." },
    Code { name: "RSHMEM_ERROR_ALREADY_INITIALIZED", value: 2, doc: "rshmem_host_init was called twice without rshmem_host_finalize in between." },
    Code { name: "RSHMEM_ERROR_PE_OUT_OF_RANGE", value: 3, doc: "A PE number outside the job or the team." },
    Code { name: "RSHMEM_ERROR_INVALID_ARGUMENT", value: 4, doc: "A bad argument (size, NULL out-pointer, operation, comparison, team, dtype, unreadable local buffer, ...)." },
    Code { name: "RSHMEM_ERROR_NOT_SYMMETRIC", value: 5, doc: "Memory that is not inside a live allocation of the symmetric heap (outside it, freed, or the runtime's own words)." },
    Code { name: "RSHMEM_ERROR_CONFIG", value: 6, doc: "A bad RSHMEM_* or launcher variable, or init attribute." },
    Code { name: "RSHMEM_ERROR_HEAP_EXHAUSTED", value: 7, doc: "The symmetric heap would grow past RSHMEM_SYMMETRIC_SIZE." },
    Code { name: "RSHMEM_ERROR_MISMATCH", value: 8, doc: "A collective call whose arguments differ between PEs." },
    Code { name: "RSHMEM_ERROR_PEER_DIED", value: 9, doc: "A peer process exited or its connection broke." },
    Code { name: "RSHMEM_ERROR_TIMEOUT", value: 10, doc: "Something did not happen in time (bootstrap, or a wait under RSHMEM_DEBUG_WAIT_TIMEOUT_MS)." },
    Code { name: "RSHMEM_ERROR_REFUSED", value: 11, doc: "A bootstrap connection was refused (wrong secret, wrong job)." },
    Code { name: "RSHMEM_ERROR_UNSUPPORTED", value: 12, doc: "Something this build, backend or machine does not do." },
    Code { name: "RSHMEM_ERROR_OS", value: 13, doc: "An operating-system call failed." },
    Code { name: "RSHMEM_ERROR_DRIVER", value: 14, doc: "A CUDA driver call failed." },
    Code { name: "RSHMEM_ERROR_INTERRUPTED", value: 15, doc: "A wait was interrupted; the PEs' collective state is undefined." },
    Code { name: "RSHMEM_ERROR_BUSY", value: 16, doc: "rshmem_host_finalize while another thread is inside an rshmem call." },
    Code { name: "RSHMEM_ERROR_INTERNAL", value: 17, doc: "A bug in rshmem (a panic was caught at the C boundary); please report the message." },
];

/// The value of the code called `name` (one of [`CODES`]).
pub fn code(name: &str) -> c_int {
    CODES.iter().find(|c| c.name == name).map_or(CODES[CODES.len() - 1].value, |c| c.value)
}

/// The status code of a runtime error.
pub fn code_of(err: &Error) -> c_int {
    code(match err {
        Error::NotInitialized { .. } | Error::ForkedChild { .. } => "RSHMEM_ERROR_NOT_INITIALIZED",
        Error::AlreadyInitialized => "RSHMEM_ERROR_ALREADY_INITIALIZED",
        Error::PeOutOfRange { .. } => "RSHMEM_ERROR_PE_OUT_OF_RANGE",
        Error::NotSymmetric { .. } | Error::NotAllocated { .. } => "RSHMEM_ERROR_NOT_SYMMETRIC",
        Error::HeapExhausted { .. } => "RSHMEM_ERROR_HEAP_EXHAUSTED",
        Error::Mismatch { .. } => "RSHMEM_ERROR_MISMATCH",
        // A peer that left by finalizing is as gone for this call as a dead one.
        Error::PeerDied { .. } | Error::PeerExited { .. } => "RSHMEM_ERROR_PEER_DIED",
        Error::Timeout { .. } | Error::WaitTimeout { .. } => "RSHMEM_ERROR_TIMEOUT",
        Error::Refused { .. } => "RSHMEM_ERROR_REFUSED",
        Error::InvalidArgument(_) => "RSHMEM_ERROR_INVALID_ARGUMENT",
        Error::Config { .. } => "RSHMEM_ERROR_CONFIG",
        Error::Unsupported(_) => "RSHMEM_ERROR_UNSUPPORTED",
        Error::Os { .. } => "RSHMEM_ERROR_OS",
        Error::Driver { .. } => "RSHMEM_ERROR_DRIVER",
        Error::Interrupted { .. } => "RSHMEM_ERROR_INTERRUPTED",
        // `Error` is non-exhaustive: a variant added later is still an error, not success.
        _ => "RSHMEM_ERROR_INTERNAL",
    })
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
        CODES.iter().map(|c| (c.value, CString::new(c.name).expect("names have no NUL"))).collect()
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
