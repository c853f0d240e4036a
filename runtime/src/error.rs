//! The one error type of the runtime.
//!
//! Every message says what went wrong, names the values and the PE involved, and says what to do.
//! Each variant's C status code and Python exception class are rows of `api/errors.toml`; the
//! front ends reach them through [`Error::kind`] (generated from that table into `error/kind.rs`).

use std::time::Duration;

mod kind;
pub use kind::ErrorKind;

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in rshmem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A call that needs the runtime came before `init` or after `finalize`.
    #[error("rshmem is not initialized: call rshmem.init() before {call}")]
    NotInitialized {
        /// The call that was made too early.
        call: &'static str,
    },

    /// A call in a process forked from a PE after `init` (see [`crate::fork`]).
    #[error(
        "{call} in a process forked from PE {pe} (pid {parent}) after rshmem.init(): a forked child is not a PE \
         of its parent's job and may not use its connections or memory; call rshmem in the parent, or start \
         workers with exec (multiprocessing's 'spawn' or 'forkserver') and give them a job of their own"
    )]
    ForkedChild {
        /// The call made in the child.
        call: &'static str,
        /// The parent's PE.
        pe: usize,
        /// The parent's process id.
        parent: u32,
    },

    /// `init` was called twice without `finalize` in between.
    #[error("rshmem is already initialized in this process; call rshmem.finalize() before init() again")]
    AlreadyInitialized,

    /// A PE number outside `0..n_pes` (or outside a team).
    #[error("PE {pe} is out of range: {scope} has {n_pes} PE{}, {}", if *.n_pes == 1 { "" } else { "s" }, valid_pes(*.n_pes))]
    PeOutOfRange {
        /// The PE asked for.
        pe: i64,
        /// How many PEs there are.
        n_pes: usize,
        /// "the job" or the team's name.
        scope: String,
    },

    /// An address range that is not inside this PE's part of the symmetric heap.
    #[error(
        "address {addr:#x} (+{len} bytes) is not inside the symmetric heap \
         ({heap_lo:#x}..{heap_hi:#x}); pass memory allocated with rshmem malloc / \
         create_symmetric_tensor"
    )]
    NotSymmetric {
        /// First byte of the range.
        addr: usize,
        /// Length of the range.
        len: usize,
        /// This PE's heap slot start.
        heap_lo: usize,
        /// This PE's heap slot end (bound).
        heap_hi: usize,
    },

    /// An address range inside the symmetric heap that is not inside one live allocation of the
    /// program (freed memory, the runtime's own words, or past an allocation's end).
    #[error(
        "address {addr:#x} (+{len} bytes) is not inside a live symmetric allocation of this \
         program: {detail}; pass memory from rshmem malloc / create_symmetric_tensor that is not \
         freed yet"
    )]
    NotAllocated {
        /// First byte of the range.
        addr: usize,
        /// Length of the range.
        len: usize,
        /// The heap offset and why it is refused.
        detail: String,
    },

    /// The symmetric heap would grow past `RSHMEM_SYMMETRIC_SIZE`.
    #[error(
        "symmetric heap bound exceeded: asked for {requested} bytes with {in_use} of {bound} \
         bytes in use; free memory or raise RSHMEM_SYMMETRIC_SIZE"
    )]
    HeapExhausted {
        /// Bytes requested.
        requested: usize,
        /// Bytes in use before the request.
        in_use: usize,
        /// The bound.
        bound: usize,
    },

    /// A collective call whose arguments differ between PEs.
    #[error(
        "{what} differs between PEs: PE {me} (this PE) passed {mine}, PE {pe} passed {theirs}; \
         every PE must make the same collective call with the same arguments"
    )]
    Mismatch {
        /// What differs ("malloc size", ...).
        what: &'static str,
        /// This PE.
        me: usize,
        /// The first PE found to differ.
        pe: usize,
        /// This PE's value.
        mine: String,
        /// The other PE's value.
        theirs: String,
    },

    /// A peer process exited or its connection broke.
    #[error("PE {pe} died or disconnected (seen during {during}); this job cannot continue")]
    PeerDied {
        /// The PE that is gone.
        pe: usize,
        /// What this PE was doing when it noticed.
        during: String,
    },

    /// A peer left the job (finalize, explicit or at exit) while this PE still waited for it in
    /// a call the peer will never make.
    #[error(
        "PE {pe} left the job ({how}) while this PE was in {during}, which needs it: every PE must \
         make the same calls before finalizing; the job cannot continue"
    )]
    PeerExited {
        /// The PE that left.
        pe: usize,
        /// What this PE was doing when it noticed.
        during: String,
        /// How the peer left, in its own words ("finalize", "exit after an uncaught KeyError").
        how: String,
    },

    /// Something did not happen in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        after: Duration,
    },

    /// A connection was refused during bootstrap (wrong secret, wrong job, bad protocol).
    #[error("bootstrap connection refused: {reason}")]
    Refused {
        /// Why.
        reason: String,
    },

    /// A bad argument that no other variant describes.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A configuration or environment variable with a bad value.
    #[error("invalid {var}={value:?}: {reason}")]
    Config {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong and what is allowed.
        reason: String,
    },

    /// Asked for something this build, backend or machine does not do.
    #[error("not supported: {0}")]
    Unsupported(String),

    /// An operating-system call failed.
    #[error("{call} failed: {source}")]
    Os {
        /// The call ("memfd_create", "connect to 10.0.0.1:29501", ...).
        call: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// A CUDA driver call failed.
    #[error("CUDA driver call {call} failed: {name} ({code})")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// The CUresult value.
        code: u32,
        /// The CUresult name.
        name: String,
    },

    /// A network-transport (UCX) call failed: towards PE `pe` when known.
    #[error("UCX call {call} failed{}: {name} ({status}); a lost connection means that PE died or the network failed, and the job cannot continue", pe.map_or_else(String::new, |pe| format!(" towards PE {pe}")))]
    Transport {
        /// The UCP function.
        call: &'static str,
        /// The `ucs_status_t` value.
        status: i32,
        /// UCX's name for it.
        name: String,
        /// The peer the operation went to, when there was one.
        pe: Option<usize>,
    },

    /// A wait was interrupted because the program asked to stop (Ctrl-C in Python; the front end
    /// raises its own exception, e.g. `KeyboardInterrupt`, in place of this one).
    #[error("rshmem: {during} was interrupted (the program asked to stop); the PEs' collective state is now undefined: finalize or exit")]
    Interrupted {
        /// What was waiting.
        during: String,
    },

    /// A device-side wait ran past `RSHMEM_DEBUG_WAIT_TIMEOUT_MS`.
    #[error(
        "PE {pe}: {call} timed out after {timeout_ms} ms waiting on {location}: expected value \
         {cmp} {expected}, last seen {seen}"
    )]
    WaitTimeout {
        /// The waiting PE.
        pe: usize,
        /// The call that waited, in the front end's terms ("barrier_all", "free_tensor", ...).
        call: String,
        /// The watched word, as "allocation #N + offset".
        location: String,
        /// The comparison ("==", ">=", ...).
        cmp: &'static str,
        /// The value compared against.
        expected: i64,
        /// The last value read.
        seen: i64,
        /// The timeout.
        timeout_ms: u64,
    },
}

impl Error {
    /// An [`Error::Os`] for `call`, from the last OS error or a given one.
    pub fn os(call: impl Into<String>, source: impl Into<std::io::Error>) -> Self {
        Error::Os { call: call.into(), source: source.into() }
    }
}

/// Which PE numbers a scope of `n` PEs has, in words: "the only valid PE is 0", "valid PEs are
/// 0 to 3" (an inclusive range, as users count).
fn valid_pes(n: usize) -> String {
    match n {
        0 => "so no PE number is valid".to_string(),
        1 => "the only valid PE is 0".to_string(),
        n => format!("valid PEs are 0 to {}", n - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pe_range_in_words() {
        let one = Error::PeOutOfRange { pe: 1, n_pes: 1, scope: "the job".into() }.to_string();
        assert_eq!(one, "PE 1 is out of range: the job has 1 PE, the only valid PE is 0");
        let four = Error::PeOutOfRange { pe: -1, n_pes: 4, scope: "the job".into() }.to_string();
        assert!(four.ends_with("has 4 PEs, valid PEs are 0 to 3"), "{four}");
    }
}
