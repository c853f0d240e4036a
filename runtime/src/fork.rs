//! A process forked from a PE is not a PE.
//!
//! `fork()` copies the parent's memory, and with it the front ends' global runtime, its
//! bootstrap sockets and its heap mappings, but none of its threads. A child that used them
//! would speak on the parent's connections (a finalize there ends the parent's job) and wait for
//! threads that do not exist. So the front ends ([`check`] in their `runtime()` accessor) refuse
//! every call in a child with [`Error::ForkedChild`], report the runtime as not initialized there
//! (so that exit handlers skip it), and never finalize it: the child's exit closes only its own
//! copies of the descriptors, which the parent's job does not notice.
//!
//! The child is told apart by a `pthread_atfork` handler registered at the first [`arm`]; it only
//! stores to an atomic (async-signal-safe, as a child handler must be). A Rust program holding a
//! [`crate::Runtime`] value itself is responsible for not using it in a child.
#![allow(unsafe_code)]

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Once;

/// Set in a child forked while armed.
static FORKED: AtomicBool = AtomicBool::new(false);
/// Between [`arm`] and [`disarm`]: a runtime is running in this process.
static ARMED: AtomicBool = AtomicBool::new(false);
/// The process and PE that armed the handler (the parent, as a child sees them).
static PARENT_PID: AtomicU32 = AtomicU32::new(0);
static PARENT_PE: AtomicUsize = AtomicUsize::new(0);
static REGISTER: Once = Once::new();

extern "C" {
    fn pthread_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
    ) -> std::ffi::c_int;
}

unsafe extern "C" fn in_child() {
    if ARMED.load(Ordering::Acquire) {
        FORKED.store(true, Ordering::Release);
    }
}

/// Records that this process is PE `pe` now, and makes every child it forks from now on a
/// [`forked_child`].
pub fn arm(pe: usize) {
    PARENT_PID.store(rustix::process::getpid().as_raw_nonzero().get() as u32, Ordering::Relaxed);
    PARENT_PE.store(pe, Ordering::Relaxed);
    ARMED.store(true, Ordering::Release);
    REGISTER.call_once(|| {
        // SAFETY: registers a handler that only stores to an atomic.
        let rc = unsafe { pthread_atfork(None, None, Some(in_child)) };
        if rc != 0 {
            tracing::warn!(rc, "pthread_atfork failed: a forked child would not be told apart from its PE");
        }
    });
}

/// The runtime of this process stopped: a child forked from now on may start a job of its own.
pub fn disarm() {
    ARMED.store(false, Ordering::Release);
}

/// Whether this process is a child forked from a PE.
pub fn forked_child() -> bool {
    FORKED.load(Ordering::Acquire)
}

/// [`Error::ForkedChild`] naming `call` in a forked child, else `Ok`.
///
/// # Errors
/// [`Error::ForkedChild`] in a child forked from a PE.
pub fn check(call: &'static str) -> Result<()> {
    if forked_child() {
        return Err(Error::ForkedChild {
            call,
            pe: PARENT_PE.load(Ordering::Relaxed),
            parent: PARENT_PID.load(Ordering::Relaxed),
        });
    }
    Ok(())
}
