//! The proxy: one thread per PE that carries out what GPU threads post for PEs on other hosts.
//!
//! A GPU thread cannot call UCX, so device code (`triton-lib/src/proxy_device.h`) writes each
//! operation towards a PE it cannot reach by load/store as a [`ProxyDesc`] into a ring of
//! page-locked host memory ([`ProxyRing`], address in `DeviceState::proxy_ring`), and this
//! thread runs them, in ticket order, through [`Net`]:
//!
//! - A poster takes ticket `t` with an atomic add on a device word (`DeviceState::proxy_head`),
//!   waits until slot `t % PROXY_SLOTS` is free (`tail > t - PROXY_SLOTS`), writes the fields,
//!   then `seq = t + 1` with release.
//! - The proxy acquires `seq == t + 1`, runs the operation, sets `seq = 0` and `tail = t + 1`.
//!   A fetching descriptor ([`PROXY_FLAG_FETCH`]: `g`, fetching atomics) gets its result in
//!   `value` and `seq = PROXY_SEQ_RESULT`; the slot is freed once the poster has read it and
//!   written `seq = 0`.
//! - Order: one thread runs every descriptor of the PE in ticket order, and [`Net`] completes
//!   the puts to a PE before any other kind of operation to it, so a put followed by a signal
//!   or an atomic to the same PE lands first (`fence` needs nothing more). [`PROXY_QUIET`]
//!   completes everything at its target ([`Net::quiet`]) and publishes `quieted = t + 1`.
//! - Failure: an operation that fails (a dead peer, a broken endpoint) stops the proxy; it
//!   keeps the error for [`Proxy::error`] and sets `failed`, on which every device wait on the
//!   ring stops its kernel (`ERROR_FLAG_PROXY`) instead of spinning for ever.
//!
//! Data moves between GPU memory and the network as UCX can: a CUDA-aware UCX (the
//! `libucx-cu12` wheel) reads and writes GPU memory itself, told each buffer's memory type by
//! [`Net`] (never left to UCX's detection); [`Net::open`] refuses a UCX without CUDA support on
//! the cuda backend. Atomics and signals on a GPU heap are run by the target's runtime (`exec.rs`).
//!
//! # Safety
//! The ring is [`RingMemory`] owned by the [`Proxy`] and outlives its thread (joined in
//! `Drop`); its words are accessed through atomics only, or read whole after the acquire of
//! `seq` made them visible. Addresses in descriptors come from device code of this PE: heap
//! addresses are range-checked by [`Net`] (through the registrations), and the local side of a
//! put or a get is handed to UCX under the device API's contract (the caller's buffer is valid
//! until the call returns), exactly as the host API's `putmem`/`getmem` do.
#![allow(unsafe_code)]

use super::Net;
use crate::backend::{AmoOp, RingMemory, Width};
use crate::consts::SignalOp;
use crate::device_state::{
    ProxyDesc, ProxyRing, AMO_ADD, AMO_AND, AMO_COMPARE_SWAP, AMO_FETCH, AMO_OR, AMO_SET, AMO_SWAP, AMO_XOR,
    PROXY_AMO, PROXY_FLAG_FETCH, PROXY_GET, PROXY_PUT, PROXY_PUT_INLINE, PROXY_PUT_SIGNAL, PROXY_QUIET,
    PROXY_SEQ_RESULT, PROXY_SLOTS,
};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the proxy keeps polling an empty ring after its last descriptor before it starts to
/// sleep between polls: a kernel that posts again within this (a ping-pong, a pipeline) is
/// served at once, while an idle PE's proxy costs (almost) no CPU. It yields the core between
/// polls, so on a machine with more runnable threads than cores it does not starve them.
const SPIN: Duration = Duration::from_millis(2);

/// Polls between looks at the clock and yields while spinning.
const POLLS_PER_YIELD: u32 = 64;

/// The sleep between polls of an idle ring: the latency a post after a quiet spell pays.
const IDLE_SLEEP: Duration = Duration::from_micros(50);

/// Waits a little before the next poll: spinning (and yielding) for [`SPIN`] after `since`,
/// sleeping [`IDLE_SLEEP`] after that.
fn pause(polls: &mut u32, since: Instant) {
    *polls = polls.wrapping_add(1);
    if *polls % POLLS_PER_YIELD != 0 {
        std::hint::spin_loop();
    } else if since.elapsed() < SPIN {
        std::thread::yield_now();
    } else {
        std::thread::sleep(IDLE_SLEEP);
    }
}

/// What the proxy thread and the runtime share.
struct Shared {
    ring: Box<dyn RingMemory>,
    net: Arc<Net>,
    stop: AtomicBool,
    error: Mutex<Option<Error>>,
    me: usize,
}

/// Offsets of the header words, in `u64`s.
const TAIL: usize = 0;
const QUIETED: usize = 1;
const FAILED: usize = 2;

impl Shared {
    /// Header word `i` of the ring.
    fn header(&self, i: usize) -> &AtomicU64 {
        // SAFETY: the ring is RING_BYTES of 8-byte aligned memory owned by `self.ring`; the
        // header's first words are u64 fields of ProxyRing, accessed only atomically.
        unsafe { &*((self.ring.addr() + 8 * i) as *const AtomicU64) }
    }

    /// Address of descriptor slot `t % PROXY_SLOTS`.
    fn slot(&self, t: u64) -> usize {
        self.ring.addr() + std::mem::size_of::<ProxyRing>() + (t % u64::from(PROXY_SLOTS)) as usize * std::mem::size_of::<ProxyDesc>()
    }

    /// The `seq` word of slot `t % PROXY_SLOTS`.
    fn seq(&self, t: u64) -> &AtomicU64 {
        // SAFETY: `seq` is the first field of the slot, inside the ring (see `header`).
        unsafe { &*(self.slot(t) as *const AtomicU64) }
    }

    /// The `value` word of slot `t % PROXY_SLOTS` (a fetching descriptor's result).
    fn value(&self, t: u64) -> &AtomicU64 {
        // SAFETY: as `seq`; `value` is at its offset in the 8-byte aligned descriptor.
        unsafe { &*((self.slot(t) + std::mem::offset_of!(ProxyDesc, value)) as *const AtomicU64) }
    }

    /// The heap offset of `addr`, a symmetric address of this PE.
    fn offset(&self, addr: u64, what: &str) -> Result<usize> {
        (addr as usize).checked_sub(self.net.base()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a kernel on PE {} asked the proxy for {what} at {addr:#x}, which is below the symmetric heap",
                self.me
            ))
        })
    }

    /// Runs descriptor `t`. `d` was read after `seq == t + 1` was acquired.
    fn execute(&self, t: u64, d: &ProxyDesc) -> Result<()> {
        let pe = usize::try_from(d.pe).map_err(|_| Error::InvalidArgument(format!("proxy descriptor for PE {}", d.pe)))?;
        let n = d.nbytes as usize;
        match d.kind {
            // SAFETY (put, get): the local buffer is the kernel's, valid until the posting
            // thread's call returns, which waits for this descriptor (module docs).
            PROXY_PUT => unsafe { self.net.put(pe, self.offset(d.dest, "a put")?, d.source as usize, n) },
            // A fetching get (`g`) lands in the slot's `value`, whatever `dest` says.
            PROXY_GET if d.flags & PROXY_FLAG_FETCH != 0 => {
                if n > 8 {
                    return Err(Error::InvalidArgument(format!("a proxied g of {n} bytes (at most 8)")));
                }
                self.value(t).store(0, Ordering::Relaxed);
                // SAFETY: `value` is 8 bytes of the ring, which only this thread touches until
                // it hands the result over.
                unsafe { self.net.get(pe, self.offset(d.source, "a g")?, self.value(t).as_ptr() as usize, n) }
            }
            PROXY_GET => unsafe { self.net.get(pe, self.offset(d.source, "a get")?, d.dest as usize, n) },
            PROXY_PUT_INLINE if n <= 8 => {
                let data = d.value;
                // SAFETY: `data` is a local of this frame, readable for n <= 8 bytes; the put
                // returns once it may be reused.
                unsafe { self.net.put(pe, self.offset(d.dest, "a p")?, &data as *const u64 as usize, n) }
            }
            PROXY_PUT_SIGNAL => {
                let op = SignalOp::from_raw(i32::from(d.sub))?;
                let dest = if n == 0 { 0 } else { self.offset(d.dest, "a put-with-signal")? };
                let sig = self.offset(d.sig_addr, "a signal")?;
                // SAFETY: as for a put.
                unsafe { self.net.put_signal(pe, dest, d.source as usize, n, sig, d.value, op) }
            }
            PROXY_AMO => {
                let width = match d.width {
                    4 => Width::W32,
                    8 => Width::W64,
                    w => return Err(Error::InvalidArgument(format!("a proxied atomic of {w} bytes (4 or 8)"))),
                };
                let op = match u32::from(d.sub) {
                    AMO_FETCH => AmoOp::Fetch,
                    AMO_SET => AmoOp::Set(d.value),
                    AMO_SWAP => AmoOp::Swap(d.value),
                    AMO_COMPARE_SWAP => AmoOp::CompareSwap { cond: d.value, value: d.value2 },
                    AMO_ADD => AmoOp::Add(d.value),
                    AMO_AND => AmoOp::And(d.value),
                    AMO_OR => AmoOp::Or(d.value),
                    AMO_XOR => AmoOp::Xor(d.value),
                    other => return Err(Error::InvalidArgument(format!("a proxied atomic with operation {other}"))),
                };
                let offset = self.offset(d.dest, "an atomic")?;
                if d.flags & PROXY_FLAG_FETCH == 0 {
                    // Nobody waits for a result (signal_op, atomic_add, the device barrier's
                    // arrivals): posted, so a burst of them goes out without a round trip each.
                    return self.net.atomic_post(pe, offset, width, op);
                }
                let old = self.net.atomic(pe, offset, width, op)?;
                self.value(t).store(old, Ordering::Relaxed);
                Ok(())
            }
            PROXY_QUIET => self.net.quiet(),
            kind => Err(Error::InvalidArgument(format!("a proxy descriptor of unknown kind {kind} ({} bytes)", d.nbytes))),
        }
    }

    /// Hands a fetching descriptor's result to its poster and waits until it has taken it.
    fn hand_over(&self, t: u64) -> Result<()> {
        let seq = self.seq(t);
        seq.store(PROXY_SEQ_RESULT, Ordering::Release);
        let (mut polls, since) = (0u32, Instant::now());
        while seq.load(Ordering::Acquire) != 0 {
            if self.stop.load(Ordering::Acquire) {
                return Err(Error::Unsupported("the runtime finalized while a kernel waited for a proxied result".into()));
            }
            pause(&mut polls, since);
        }
        Ok(())
    }

    fn run(&self) {
        // Puts and gets of GPU memory go through UCX's CUDA copies.
        self.net.enter_thread("proxy");
        let mut t = 0u64;
        let (mut polls, mut last) = (0u32, Instant::now());
        while !self.stop.load(Ordering::Acquire) {
            if self.seq(t).load(Ordering::Acquire) != t + 1 {
                pause(&mut polls, last);
                continue;
            }
            // SAFETY: the slot is inside the ring; its poster finished writing it before the
            // release of `seq` acquired above, and rewrites it only after `tail` passes `t`.
            let d = unsafe { std::ptr::read_volatile(self.slot(t) as *const ProxyDesc) };
            let done = self.execute(t, &d).and_then(|()| {
                if d.kind == PROXY_QUIET {
                    self.header(QUIETED).store(t + 1, Ordering::Release);
                }
                if d.flags & PROXY_FLAG_FETCH != 0 {
                    self.hand_over(t)
                } else {
                    self.seq(t).store(0, Ordering::Relaxed);
                    Ok(())
                }
            });
            if let Err(e) = done {
                tracing::error!(pe = self.me, ticket = t, kind = d.kind, to = d.pe, error = %e, "the proxy stopped");
                *self.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                self.header(FAILED).store(1, Ordering::Release);
                return;
            }
            t += 1;
            self.header(TAIL).store(t, Ordering::Release);
            last = Instant::now();
        }
    }
}

/// This PE's proxy: the ring and the thread that empties it. Dropping it stops the thread
/// (after the operation it is running, which [`Net`] bounds) and then frees the ring.
pub struct Proxy {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").field("me", &self.shared.me).field("ring", &format_args!("{:#x}", self.ring())).finish()
    }
}

impl Proxy {
    /// Starts the proxy of PE `me` on a zeroed `ring`.
    ///
    /// # Errors
    /// [`Error::Os`] when the thread cannot be spawned.
    pub fn start(net: Arc<Net>, ring: Box<dyn RingMemory>, me: usize) -> Result<Proxy> {
        let shared = Arc::new(Shared { ring, net, stop: AtomicBool::new(false), error: Mutex::new(None), me });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rshmem-proxy-{me}"))
            .spawn(move || s.run())
            .map_err(|e| Error::os("spawning the proxy thread", e))?;
        Ok(Proxy { shared, thread: Some(thread) })
    }

    /// The ring's address (`DeviceState::proxy_ring`).
    pub fn ring(&self) -> usize {
        self.shared.ring.addr()
    }

    /// The error the proxy stopped on, once (later calls return `None`).
    pub fn error(&self) -> Option<Error> {
        self.shared.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Whether the proxy stopped on an error.
    pub fn failed(&self) -> bool {
        self.shared.header(FAILED).load(Ordering::Acquire) != 0
    }

    /// Posts `d` from a host thread the way a GPU thread does (`proxy_device.h`): a ticket from
    /// the word `head` (this PE's `DeviceState::proxy_head`), the slot once free, the fields,
    /// then `seq`; waits until the proxy has run it (and, for [`PROXY_QUIET`], until `quieted`
    /// passes it) and returns a fetching descriptor's result, else 0. The host backend's tests
    /// of the proxy use it in place of a kernel (`RSHMEM_NET_PROXY=1`).
    ///
    /// # Errors
    /// The proxy's error once it has stopped; [`Error::Timeout`] after `timeout`.
    ///
    /// # Safety
    /// The local buffer `d` names (the source of a put, the destination of a get) must stay
    /// valid until this returns.
    pub unsafe fn post(&self, head: &AtomicU64, mut d: ProxyDesc, timeout: Duration) -> Result<u64> {
        let s = &*self.shared;
        let start = Instant::now();
        let kind = d.kind;
        let wait = |word: &AtomicU64, done: &dyn Fn(u64) -> bool| -> Result<u64> {
            loop {
                let v = word.load(Ordering::Acquire);
                if done(v) {
                    return Ok(v);
                }
                if self.failed() {
                    return Err(self.error().unwrap_or_else(|| Error::Unsupported("the proxy stopped on an error reported before".into())));
                }
                if start.elapsed() > timeout {
                    return Err(Error::Timeout { what: format!("the proxy to run a descriptor of kind {kind}"), after: timeout });
                }
                std::thread::yield_now();
            }
        };
        let t = head.fetch_add(1, Ordering::AcqRel);
        let slots = u64::from(PROXY_SLOTS);
        if t >= slots {
            wait(s.header(TAIL), &|tail| tail > t - slots)?;
        }
        d.seq = t + 1;
        // Every field but `seq` first (the proxy may be polling `seq` atomically meanwhile).
        // SAFETY: the slot is inside the ring and free (tail passed its previous ticket); the
        // bytes after `seq` are plain data the proxy reads only after acquiring `seq`.
        unsafe {
            std::ptr::copy_nonoverlapping((&d as *const ProxyDesc as *const u8).add(8), (s.slot(t) + 8) as *mut u8, std::mem::size_of::<ProxyDesc>() - 8);
        }
        s.seq(t).store(t + 1, Ordering::Release);
        if d.flags & PROXY_FLAG_FETCH != 0 {
            wait(s.seq(t), &|v| v == PROXY_SEQ_RESULT)?;
            let v = s.value(t).load(Ordering::Relaxed);
            s.seq(t).store(0, Ordering::Release);
            return Ok(v);
        }
        wait(s.header(TAIL), &|tail| tail > t)?;
        if d.kind == PROXY_QUIET {
            wait(s.header(QUIETED), &|q| q > t)?;
        }
        Ok(0)
    }

    /// Waits until the proxy has run every ticket below `tickets` (finalize: nothing a kernel
    /// posted is left behind), for at most `timeout`.
    ///
    /// # Errors
    /// The proxy's error; [`Error::Timeout`].
    pub fn drain(&self, tickets: u64, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        while self.shared.header(TAIL).load(Ordering::Acquire) < tickets {
            if self.failed() {
                return Err(self.error().unwrap_or_else(|| Error::Unsupported("the proxy stopped on an error reported before".into())));
            }
            if start.elapsed() > timeout {
                return Err(Error::Timeout { what: format!("the proxy to run the {tickets} operations kernels posted"), after: timeout });
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::warn!("the proxy thread panicked");
            }
        }
    }
}
