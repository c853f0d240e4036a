//! The transport's active messages: their header, and the handler that runs them on the target.
//!
//! Every message starts with the same header: a magic word, the kind, the sender's PE and the
//! job's secret. The handler drops (and counts) any message whose header is short, of another
//! magic, or without the secret: a process that reached this PE's UCX worker without having
//! joined the job through the bootstrap cannot write through these messages.
//!
//! | kind | what the target does |
//! |---|---|
//! | `HELLO` | records that the sender's endpoint works (init waits for every peer's) |
//! | `PUT_SIGNAL` | copies the payload to `dest` of its heap, then updates the signal word with release order: one message, no round trip between data and signal |
//!
//! Heap positions travel as offsets from the heap's start and are checked against what the
//! target has mapped, so a message cannot reach outside the target's heap.
//!
//! # Safety
//! The handler is called by UCX with `arg` pointing at the [`Target`] installed with it, which
//! outlives the worker (`Net` drops the worker first), and with `header_length` / `length`
//! readable bytes at `header` / `data`. It writes only inside the target's mapped heap (checked
//! against `mapped`), into host memory (`PUT_SIGNAL` is only sent where the heap is host memory).
#![allow(unsafe_code)]

use crate::consts::SignalOp;
use crate::ucx::sys;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The active-message id rshmem's handler is installed under.
pub const AM_ID: u32 = 0x5253;
/// First four bytes of every header.
const MAGIC: u32 = u32::from_le_bytes(*b"RSHN");
/// Kinds of message.
pub const HELLO: u8 = 1;
/// Data and a signal.
pub const PUT_SIGNAL: u8 = 2;
/// Bytes of the common part: magic, kind, 3 spare, sender PE, secret.
pub const COMMON_LEN: usize = 4 + 1 + 3 + 4 + SECRET_BYTES;
/// The secret's length (the bootstrap's).
pub const SECRET_BYTES: usize = 16;
/// Bytes of a `PUT_SIGNAL` header: the common part, dest offset, signal offset, value, op.
pub const PUT_SIGNAL_LEN: usize = COMMON_LEN + 8 + 8 + 8 + 8;

/// A header's common part.
pub fn common(kind: u8, from: usize, secret: &[u8; SECRET_BYTES]) -> Vec<u8> {
    let mut h = Vec::with_capacity(PUT_SIGNAL_LEN);
    h.extend_from_slice(&MAGIC.to_le_bytes());
    h.extend_from_slice(&[kind, 0, 0, 0]);
    h.extend_from_slice(&(from as u32).to_le_bytes());
    h.extend_from_slice(secret);
    h
}

/// A `PUT_SIGNAL` header.
pub fn put_signal(from: usize, secret: &[u8; SECRET_BYTES], dest: usize, sig: usize, value: u64, op: SignalOp) -> Vec<u8> {
    let mut h = common(PUT_SIGNAL, from, secret);
    for w in [dest as u64, sig as u64, value, op as u64] {
        h.extend_from_slice(&w.to_le_bytes());
    }
    h
}

/// What the handler needs on the target: its heap, its secret, and what it records.
#[derive(Debug)]
pub struct Target {
    /// Address of heap offset 0 in this process.
    pub base: usize,
    /// Bytes of the heap mapped (and registered) so far.
    pub mapped: AtomicUsize,
    /// The job's secret.
    pub secret: [u8; SECRET_BYTES],
    /// Number of PEs (senders beyond it are refused).
    pub n_pes: usize,
    /// Bit `pe % 64` of word `pe / 64`: a `HELLO` arrived from `pe`.
    pub hello: Vec<AtomicU64>,
    /// Messages dropped: bad header, wrong secret, out-of-heap positions.
    pub refused: AtomicU64,
}

impl Target {
    /// A target for a heap at `base` among `n_pes` PEs.
    pub fn new(base: usize, n_pes: usize, secret: [u8; SECRET_BYTES]) -> Target {
        Target {
            base,
            mapped: AtomicUsize::new(0),
            secret,
            n_pes,
            hello: (0..n_pes.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            refused: AtomicU64::new(0),
        }
    }

    /// Whether a `HELLO` from `pe` arrived.
    pub fn said_hello(&self, pe: usize) -> bool {
        self.hello[pe / 64].load(Ordering::Acquire) & (1 << (pe % 64)) != 0
    }

    /// Runs one message; `false` when it was refused.
    fn handle(&self, header: &[u8], data: &[u8]) -> bool {
        if header.len() < COMMON_LEN || header[..4] != MAGIC.to_le_bytes() {
            return false;
        }
        // Compare every byte, so the time taken says nothing about how much of a guess matched.
        let diff = header[12..COMMON_LEN].iter().zip(&self.secret).fold(0u8, |d, (a, b)| d | (a ^ b));
        if diff != 0 {
            return false;
        }
        let from = u32::from_le_bytes(header[8..12].try_into().unwrap_or_default()) as usize;
        if from >= self.n_pes {
            return false;
        }
        match header[4] {
            HELLO => {
                self.hello[from / 64].fetch_or(1 << (from % 64), Ordering::AcqRel);
                true
            }
            PUT_SIGNAL if header.len() == PUT_SIGNAL_LEN => {
                let word = |i: usize| {
                    let at = COMMON_LEN + 8 * i;
                    u64::from_le_bytes(header[at..at + 8].try_into().unwrap_or_default())
                };
                let (dest, sig, value, op) = (word(0) as usize, word(1) as usize, word(2), word(3));
                let mapped = self.mapped.load(Ordering::Acquire);
                let fits = |off: usize, len: usize| off.checked_add(len).is_some_and(|end| end <= mapped);
                if !fits(dest, data.len()) || !fits(sig, 8) || sig % 8 != 0 || op > 1 {
                    return false;
                }
                // SAFETY: both ranges lie in this PE's mapped heap (checked above), which is host
                // memory; peers' writes to it are expected (it is symmetric memory).
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr(), (self.base + dest) as *mut u8, data.len());
                    let signal = &*((self.base + sig) as *const AtomicU64);
                    // SeqCst: the data copied above is visible to whoever acquires the signal.
                    if op == SignalOp::Set as u64 {
                        signal.store(value, Ordering::SeqCst);
                    } else {
                        signal.fetch_add(value, Ordering::SeqCst);
                    }
                }
                true
            }
            _ => false,
        }
    }
}

/// The UCX active-message callback: runs the message on the [`Target`] at `arg`.
///
/// # Safety
/// As the module says: `arg` is a live `Target`; the buffers are UCX's, readable for the call.
pub unsafe extern "C" fn on_message(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const sys::ucp_am_recv_param_t,
) -> sys::ucs_status_t {
    // SAFETY: `arg` is the Target installed with this handler (module docs).
    let target = unsafe { &*(arg as *const Target) };
    // SAFETY: UCX passes a valid param struct.
    let rndv = unsafe { param.as_ref() }.is_some_and(|p| p.recv_attr & sys::UCP_AM_RECV_ATTR_FLAG_RNDV != 0);
    let ok = !rndv && {
        // SAFETY: UCX hands `header_length` and `length` readable bytes (module docs).
        let (h, d) = unsafe {
            (
                bytes(header as *const u8, header_length),
                bytes(data as *const u8, length),
            )
        };
        target.handle(h, d)
    };
    if !ok {
        if target.refused.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(header_length, length, rndv, "rshmem transport: refused a message (bad header, wrong secret or outside the heap)");
        }
    }
    sys::UCS_OK
}

/// A slice from a pointer that may be null when `len` is 0.
///
/// # Safety
/// `len` readable bytes at `p` when `len > 0`.
unsafe fn bytes<'a>(p: *const u8, len: usize) -> &'a [u8] {
    if len == 0 || p.is_null() {
        &[]
    } else {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(p, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_signal_lands_inside_the_heap_only_with_the_secret() {
        let mut heap = vec![0u64; 64];
        let base = heap.as_mut_ptr() as usize;
        let t = Target::new(base, 4, [7; SECRET_BYTES]);
        t.mapped.store(64 * 8, Ordering::Release);
        let data = [1u8, 2, 3, 4, 5, 6, 7, 8];
        assert!(t.handle(&put_signal(2, &[7; 16], 16, 8 * 10, 5, SignalOp::Set), &data));
        assert_eq!(heap[2], u64::from_ne_bytes(data));
        assert_eq!(heap[10], 5);
        assert!(t.handle(&put_signal(2, &[7; 16], 16, 8 * 10, 3, SignalOp::Add), &data));
        assert_eq!(heap[10], 8);
        // Wrong secret, outside the heap, a misaligned signal, a sender beyond the job: refused.
        assert!(!t.handle(&put_signal(2, &[8; 16], 0, 0, 1, SignalOp::Set), &data));
        assert!(!t.handle(&put_signal(2, &[7; 16], 64 * 8 - 4, 0, 1, SignalOp::Set), &data));
        assert!(!t.handle(&put_signal(2, &[7; 16], 0, 64 * 8, 1, SignalOp::Set), &data));
        assert!(!t.handle(&put_signal(2, &[7; 16], 0, 4, 1, SignalOp::Set), &data));
        assert!(!t.handle(&put_signal(9, &[7; 16], 0, 0, 1, SignalOp::Set), &data));
        assert!(!t.handle(&[0u8; 8], &data));
        assert_eq!(heap[0], 0);
        assert!(!t.said_hello(3));
        assert!(t.handle(&common(HELLO, 3, &[7; 16]), &[]));
        assert!(t.said_hello(3) && !t.said_hello(1));
    }
}
