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
//! | `PUT_SIGNAL` | copies the payload to `dest` of its heap, then updates the signal word with release order: one message, no round trip between data and signal. With id 0, at once in the handler (host memory); else queued for the target's runtime (below) and acknowledged |
//! | `AMO` | queued for the target's runtime, which applies the atomic with its backend's own atomics and replies with the old value (id 0: only acknowledges) |
//! | `REPLY` | (at the origin) the result of an `AMO`, or the acknowledgement of a queued `PUT_SIGNAL` or `AMO` without result |
//!
//! Why queued: a GPU heap is not host memory, so neither the CPU nor UCX's software atomics
//! (which run the atomic with CPU instructions at the target address) may touch it; the target's
//! runtime runs the operation as its host API does on its own heap (a one-thread kernel for an
//! atomic, a copy then a kernel for a put-with-signal), on its executor thread (`exec.rs`),
//! outside UCX's callback, which must not wait for the GPU.
//!
//! Heap positions travel as offsets from the heap's start and are checked against what the
//! target has mapped, so a message cannot reach outside the target's heap.
//!
//! # Safety
//! The handler is called by UCX with `arg` pointing at the [`Target`] installed with it, which
//! outlives the worker (`Net` drops the worker first), and with `header_length` / `length`
//! readable bytes at `header` / `data`. It writes only inside the target's mapped heap (checked
//! against `mapped`), and into it with the CPU only where the heap is host memory
//! (`host_memory`; an inline `PUT_SIGNAL` to a GPU heap is refused).
#![allow(unsafe_code)]

use crate::backend::{AmoOp, Width};
use crate::consts::SignalOp;
use super::ucx::sys;
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// The active-message id rshmem's handler is installed under.
pub const AM_ID: u32 = 0x5253;
/// First four bytes of every header.
const MAGIC: u32 = u32::from_le_bytes(*b"RSHN");
/// Kinds of message.
pub const HELLO: u8 = 1;
/// Data and a signal.
pub const PUT_SIGNAL: u8 = 2;
/// An atomic run by the target's runtime.
pub const AMO: u8 = 3;
/// A result or an acknowledgement, back to the origin.
pub const REPLY: u8 = 4;
/// Bytes of the common part: magic, kind, 3 spare, sender PE, secret.
pub const COMMON_LEN: usize = 4 + 1 + 3 + 4 + SECRET_BYTES;
/// The secret's length (the bootstrap's).
pub const SECRET_BYTES: usize = 16;
/// Bytes of a `PUT_SIGNAL` header: the common part, dest offset, signal offset, value, op, id.
pub const PUT_SIGNAL_LEN: usize = COMMON_LEN + 5 * 8;
/// Bytes of an `AMO` header: the common part, id, offset, width, op code, two operands.
pub const AMO_LEN: usize = COMMON_LEN + 6 * 8;
/// Bytes of a `REPLY` header: the common part, id, what it answers, status, value.
pub const REPLY_LEN: usize = COMMON_LEN + 4 * 8;
/// `REPLY`'s "what": the old value of an `AMO`.
pub const REPLY_AMO: u64 = 1;
/// `REPLY`'s "what": a queued operation without a result (a `PUT_SIGNAL`, an `AMO` with id 0) is done.
pub const REPLY_ACK: u64 = 2;

/// A header's common part.
pub fn common(kind: u8, from: usize, secret: &[u8; SECRET_BYTES]) -> Vec<u8> {
    let mut h = Vec::with_capacity(PUT_SIGNAL_LEN);
    h.extend_from_slice(&MAGIC.to_le_bytes());
    h.extend_from_slice(&[kind, 0, 0, 0]);
    h.extend_from_slice(&(from as u32).to_le_bytes());
    h.extend_from_slice(secret);
    h
}

fn with_words(mut h: Vec<u8>, words: &[u64]) -> Vec<u8> {
    for w in words {
        h.extend_from_slice(&w.to_le_bytes());
    }
    h
}

/// A `PUT_SIGNAL` header; `id` 0 asks the target to run it at once (host memory), any other
/// to queue it for its runtime and acknowledge it.
#[allow(clippy::too_many_arguments)]
pub fn put_signal(from: usize, secret: &[u8; SECRET_BYTES], dest: usize, sig: usize, value: u64, op: SignalOp, id: u64) -> Vec<u8> {
    with_words(common(PUT_SIGNAL, from, secret), &[dest as u64, sig as u64, value, op as u64, id])
}

/// An `AMO` header: `op` on the `width` word at heap offset `offset`, answered under `id` (0: no
/// result wanted, only an acknowledgement).
pub fn amo(from: usize, secret: &[u8; SECRET_BYTES], id: u64, offset: usize, width: Width, op: AmoOp) -> Vec<u8> {
    let (code, a, b) = amo_code(op);
    with_words(common(AMO, from, secret), &[id, offset as u64, width.bytes() as u64, code, a, b])
}

/// A `REPLY` header.
pub fn reply(from: usize, secret: &[u8; SECRET_BYTES], id: u64, what: u64, result: Result<u64, ()>) -> Vec<u8> {
    let (status, value) = match result {
        Ok(v) => (0, v),
        Err(()) => (1, 0),
    };
    with_words(common(REPLY, from, secret), &[id, what, status, value])
}

/// An [`AmoOp`] as the wire's (code, operand, operand).
fn amo_code(op: AmoOp) -> (u64, u64, u64) {
    match op {
        AmoOp::Fetch => (0, 0, 0),
        AmoOp::Set(v) => (1, v, 0),
        AmoOp::Swap(v) => (2, v, 0),
        AmoOp::CompareSwap { cond, value } => (3, cond, value),
        AmoOp::Add(v) => (4, v, 0),
        AmoOp::And(v) => (5, v, 0),
        AmoOp::Or(v) => (6, v, 0),
        AmoOp::Xor(v) => (7, v, 0),
    }
}

/// The wire's (code, operand, operand) as an [`AmoOp`]; `None` for an unknown code.
fn amo_op(code: u64, a: u64, b: u64) -> Option<AmoOp> {
    Some(match code {
        0 => AmoOp::Fetch,
        1 => AmoOp::Set(a),
        2 => AmoOp::Swap(a),
        3 => AmoOp::CompareSwap { cond: a, value: b },
        4 => AmoOp::Add(a),
        5 => AmoOp::And(a),
        6 => AmoOp::Or(a),
        7 => AmoOp::Xor(a),
        _ => return None,
    })
}

/// Work a message left for the target's runtime (its executor thread runs it, then replies to
/// `from`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// Apply `op` to the `width` word at heap offset `offset`; reply with the old value.
    Amo {
        /// The origin.
        from: usize,
        /// The origin's id for the reply.
        id: u64,
        /// Heap offset of the word.
        offset: usize,
        /// Its width.
        width: Width,
        /// What to do.
        op: AmoOp,
    },
    /// Copy `data` to heap offset `dest`, then update the signal word at `sig`; acknowledge.
    PutSignal {
        /// The origin.
        from: usize,
        /// The origin's id.
        id: u64,
        /// Heap offset of the data.
        dest: usize,
        /// Heap offset of the signal word.
        sig: usize,
        /// Signal operand.
        value: u64,
        /// Set or add.
        op: SignalOp,
        /// The payload.
        data: Vec<u8>,
    },
}

/// What came back for one `AMO`: its old value, or that the target failed to run it.
pub type Answer = Result<u64, ()>;

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
    /// The heap is host memory (the handler may write it with the CPU).
    pub host_memory: bool,
    /// Work for the executor thread, in arrival order.
    pub jobs: Mutex<VecDeque<Job>>,
    /// Signalled when a job is queued (and to stop the executor).
    pub job_ready: Condvar,
    /// Per PE: `AMO`s and queued `PUT_SIGNAL`s this PE sent there and has no reply for yet.
    pub outstanding: Vec<AtomicU64>,
    /// Answers to this PE's `AMO`s, by id, until their caller takes them.
    pub answers: Mutex<HashMap<u64, Answer>>,
    /// Per PE: queued operations without result that PE failed to run (reported by the next quiet).
    pub failed: Vec<AtomicU64>,
}

impl Target {
    /// A target for a heap at `base` among `n_pes` PEs; `host_memory` says whether the heap is
    /// host memory.
    pub fn new(base: usize, n_pes: usize, secret: [u8; SECRET_BYTES], host_memory: bool) -> Target {
        Target {
            base,
            mapped: AtomicUsize::new(0),
            secret,
            n_pes,
            hello: (0..n_pes.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            refused: AtomicU64::new(0),
            host_memory,
            jobs: Mutex::new(VecDeque::new()),
            job_ready: Condvar::new(),
            outstanding: (0..n_pes).map(|_| AtomicU64::new(0)).collect(),
            answers: Mutex::new(HashMap::new()),
            failed: (0..n_pes).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn queue(&self, job: Job) {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).push_back(job);
        self.job_ready.notify_one();
    }

    /// Takes the answer to `AMO` `id`, once it is here.
    pub fn take_answer(&self, id: u64) -> Option<Answer> {
        self.answers.lock().unwrap_or_else(|e| e.into_inner()).remove(&id)
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
                let (dest, sig, value, op, id) = (word(header, 0) as usize, word(header, 1) as usize, word(header, 2), word(header, 3), word(header, 4));
                let mapped = self.mapped.load(Ordering::Acquire);
                let op = match op {
                    0 => SignalOp::Set,
                    1 => SignalOp::Add,
                    _ => return false,
                };
                if !fits(mapped, dest, data.len()) || !fits(mapped, sig, 8) || sig % 8 != 0 {
                    return false;
                }
                if id != 0 {
                    self.queue(Job::PutSignal { from, id, dest, sig, value, op, data: data.to_vec() });
                    return true;
                }
                if !self.host_memory {
                    return false;
                }
                // SAFETY: both ranges lie in this PE's mapped heap (checked above), which is host
                // memory (checked above); peers' writes to it are expected (it is symmetric memory).
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr(), (self.base + dest) as *mut u8, data.len());
                    let signal = &*((self.base + sig) as *const AtomicU64);
                    // SeqCst: the data copied above is visible to whoever acquires the signal.
                    if op == SignalOp::Set {
                        signal.store(value, Ordering::SeqCst);
                    } else {
                        signal.fetch_add(value, Ordering::SeqCst);
                    }
                }
                true
            }
            AMO if header.len() == AMO_LEN => {
                let (id, offset, width) = (word(header, 0), word(header, 1) as usize, word(header, 2));
                let width = match width {
                    4 => Width::W32,
                    8 => Width::W64,
                    _ => return false,
                };
                let Some(op) = amo_op(word(header, 3), word(header, 4), word(header, 5)) else { return false };
                if !fits(self.mapped.load(Ordering::Acquire), offset, width.bytes()) || offset % width.bytes() != 0 {
                    return false;
                }
                self.queue(Job::Amo { from, id, offset, width, op });
                true
            }
            REPLY if header.len() == REPLY_LEN => {
                let (id, what, status, value) = (word(header, 0), word(header, 1), word(header, 2), word(header, 3));
                let answer = if status == 0 { Ok(value) } else { Err(()) };
                match what {
                    REPLY_AMO => {
                        self.answers.lock().unwrap_or_else(|e| e.into_inner()).insert(id, answer);
                    }
                    REPLY_ACK => {
                        if answer.is_err() {
                            self.failed[from].fetch_add(1, Ordering::AcqRel);
                        }
                    }
                    _ => return false,
                }
                // Saturating: a reply nobody waits for (a forged one is refused above) must not wrap.
                let _ = self.outstanding[from].fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
                true
            }
            _ => false,
        }
    }
}

/// Header word `i` after the common part.
fn word(header: &[u8], i: usize) -> u64 {
    let at = COMMON_LEN + 8 * i;
    u64::from_le_bytes(header[at..at + 8].try_into().unwrap_or_default())
}

/// Whether `[off, off+len)` lies in the first `mapped` bytes of the heap.
fn fits(mapped: usize, off: usize, len: usize) -> bool {
    off.checked_add(len).is_some_and(|end| end <= mapped)
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
        let t = Target::new(base, 4, [7; SECRET_BYTES], true);
        t.mapped.store(64 * 8, Ordering::Release);
        let data = [1u8, 2, 3, 4, 5, 6, 7, 8];
        assert!(t.handle(&put_signal(2, &[7; 16], 16, 8 * 10, 5, SignalOp::Set, 0), &data));
        assert_eq!(heap[2], u64::from_ne_bytes(data));
        assert_eq!(heap[10], 5);
        assert!(t.handle(&put_signal(2, &[7; 16], 16, 8 * 10, 3, SignalOp::Add, 0), &data));
        assert_eq!(heap[10], 8);
        // Wrong secret, outside the heap, a misaligned signal, a sender beyond the job: refused.
        assert!(!t.handle(&put_signal(2, &[8; 16], 0, 0, 1, SignalOp::Set, 0), &data));
        assert!(!t.handle(&put_signal(2, &[7; 16], 64 * 8 - 4, 0, 1, SignalOp::Set, 0), &data));
        assert!(!t.handle(&put_signal(2, &[7; 16], 0, 64 * 8, 1, SignalOp::Set, 0), &data));
        assert!(!t.handle(&put_signal(2, &[7; 16], 0, 4, 1, SignalOp::Set, 0), &data));
        assert!(!t.handle(&put_signal(9, &[7; 16], 0, 0, 1, SignalOp::Set, 0), &data));
        assert!(!t.handle(&[0u8; 8], &data));
        assert_eq!(heap[0], 0);
        assert!(!t.said_hello(3));
        assert!(t.handle(&common(HELLO, 3, &[7; 16]), &[]));
        assert!(t.said_hello(3) && !t.said_hello(1));
    }

    #[test]
    fn gpu_heap_work_is_queued_checked_and_answered() {
        // A "GPU heap" at an address the handler must never touch: every write is queued.
        let t = Target::new(0x10, 4, [7; SECRET_BYTES], false);
        t.mapped.store(4096, Ordering::Release);
        assert!(!t.handle(&put_signal(1, &[7; 16], 0, 8, 1, SignalOp::Set, 0), &[1]), "inline put-with-signal to a GPU heap");
        assert!(t.handle(&put_signal(1, &[7; 16], 64, 8, 5, SignalOp::Add, 9), &[1, 2]));
        assert!(t.handle(&amo(2, &[7; 16], 11, 16, Width::W32, AmoOp::CompareSwap { cond: 3, value: 4 }), &[]));
        assert!(t.handle(&amo(2, &[7; 16], 12, 24, Width::W64, AmoOp::Xor(6)), &[]));
        // Outside the heap, misaligned, a bad width or code, the wrong secret: refused.
        assert!(!t.handle(&amo(2, &[7; 16], 13, 4096, Width::W64, AmoOp::Fetch), &[]));
        assert!(!t.handle(&amo(2, &[7; 16], 13, 4, Width::W64, AmoOp::Fetch), &[]));
        assert!(!t.handle(&amo(2, &[8; 16], 13, 8, Width::W64, AmoOp::Fetch), &[]));
        let mut bad = amo(2, &[7; 16], 13, 8, Width::W64, AmoOp::Fetch);
        bad[COMMON_LEN + 16] = 5;
        assert!(!t.handle(&bad, &[]));
        bad[COMMON_LEN + 16] = 8;
        bad[COMMON_LEN + 24] = 8;
        assert!(!t.handle(&bad, &[]));
        let jobs: Vec<Job> = t.jobs.lock().unwrap().drain(..).collect();
        assert_eq!(
            jobs,
            vec![
                Job::PutSignal { from: 1, id: 9, dest: 64, sig: 8, value: 5, op: SignalOp::Add, data: vec![1, 2] },
                Job::Amo { from: 2, id: 11, offset: 16, width: Width::W32, op: AmoOp::CompareSwap { cond: 3, value: 4 } },
                Job::Amo { from: 2, id: 12, offset: 24, width: Width::W64, op: AmoOp::Xor(6) },
            ]
        );
        // Replies: an answer by id, an acknowledgement that failed, the count of outstanding.
        t.outstanding[3].store(2, Ordering::Release);
        assert!(t.handle(&reply(3, &[7; 16], 12, REPLY_AMO, Ok(42)), &[]));
        assert!(t.handle(&reply(3, &[7; 16], 0, REPLY_ACK, Err(())), &[]));
        assert!(t.handle(&reply(3, &[7; 16], 0, REPLY_ACK, Ok(0)), &[]), "a reply beyond the count is harmless");
        assert_eq!(t.outstanding[3].load(Ordering::Acquire), 0);
        assert_eq!(t.failed[3].load(Ordering::Acquire), 1);
        assert_eq!(t.take_answer(12), Some(Ok(42)));
        assert_eq!(t.take_answer(12), None);
        for op in [AmoOp::Fetch, AmoOp::Set(1), AmoOp::Swap(2), AmoOp::CompareSwap { cond: 3, value: 4 }, AmoOp::Add(5), AmoOp::And(6), AmoOp::Or(7), AmoOp::Xor(8)] {
            let (c, a, b) = amo_code(op);
            assert_eq!(amo_op(c, a, b), Some(op));
        }
    }
}
