//! The network transport: PEs on other hosts reached through UCX.
//!
//! A job whose PEs sit on more than one host (or virtual host, `RSHMEM_VIRTUAL_HOSTS`) opens one
//! [`Net`] per PE, next to its memory backend: node-local peers stay mapped (load/store), the
//! others are reached through UCP, which picks the wire (InfiniBand, RoCE, TCP, shared memory).
//! The runtime holds it as a [`crate::backend::Transport`] ([`open`]) and never names it.
//!
//! | file | what |
//! |---|---|
//! | `link.rs` | [`open`]: the transport of a runtime (the [`Net`], its registration of the heap's growth, the proxy), as a [`crate::backend::Transport`] |
//! | `mod.rs` | [`Net`]: open (worker addresses through the bootstrap, one endpoint per remote PE, a hello from each), the operations |
//! | `segments.rs` | the heap's registrations: each growth step registered with `ucp_mem_map`, its remote keys exchanged through the bootstrap |
//! | `am.rs` | the active messages (hello, put-with-signal, atomics run by the target, replies) and their handler, which checks the job's secret |
//! | `exec.rs` | the executor thread: runs the atomics and puts-with-signal peers leave for this PE's runtime, and replies |
//! | `proxy.rs` | the proxy: the thread that runs what GPU threads post for PEs on other hosts |
//! | `staging.rs` | puts in flight: bounce buffers (a put of host memory waits for UCX only for what precedes its last 64 KiB), `putmem_nbi`'s requests |
//! | `progress.rs` | the progress thread: sleeps on the worker's event fd, wakes to run what peers sent |
//! | `state.rs` | what the open transport holds, shared by [`Net`] and its progress and executor threads |
//! | [`ucx`] | the UCX library, loaded at run time: thin checked wrappers (context, worker, endpoints, memory registrations) |
//!
//! Operations take heap offsets: the address on the peer is its heap base (exchanged at open)
//! plus the offset.
//!
//! A GPU heap (the cuda backend): UCX moves its data (a CUDA-aware UCX, checked at open) with
//! the memory type of every buffer given, never detected (`ucx::Context::map` says why), and
//! no atomic or signal on it is left to UCX, whose software atomics (TCP, shared memory) act on
//! the target's memory with the CPU: each is an active message that the target's runtime runs
//! with its backend's atomics and answers (`am.rs`, `exec.rs`). `RSHMEM_NET_ATOMICS=target`
//! does the same on a host heap, so that the host backend tests that path. Puts return once the source may be reused; [`Net::quiet`] (every `fence`,
//! `quiet` and barrier) completes them at their targets, and any other operation towards a PE
//! first completes the puts to it that are still in flight, so a put followed by a signal, an
//! atomic or a get to the same PE is seen in that order, as on the host backend.
//!
//! Peers that die: the bootstrap names them (its star connection closes); an endpoint that
//! breaks also fails its operations at once with [`Error::Transport`] naming the PE, and every
//! wait on the wire checks both about every millisecond, so no call waits for ever.
//!
//! Trust: worker addresses and remote keys travel only through the bootstrap, which admits
//! only PEs holding the job's secret, and this PE opens endpoints only to those addresses; every
//! active message carries the secret and is refused without it. UCX itself does not
//! authenticate the connections its transports accept, so, as with MPI and NVSHMEM, run
//! multi-host jobs on a network that only the job's hosts reach (`docs/network.md`).
//!
//! # Safety
//! Callbacks handed to UCX get pointers into boxed state that `Inner` keeps until after the
//! worker is destroyed (its field order); buffers handed to operations stay valid until the
//! operation's request is waited for, or are leaked when a wait is abandoned; `put`, `get` and
//! `put_signal` take the caller's local buffers under the contract their `# Safety` states.
#![allow(unsafe_code)]

mod am;
mod exec;
mod link;
mod progress;
pub mod proxy;
mod segments;
mod staging;
mod state;
pub mod ucx;

use crate::backend::{AmoOp, MemoryBackend, Width};
use crate::bootstrap::Bootstrap;
use crate::consts::SignalOp;
use crate::error::{Error, Result};
use crate::heap::agree::all_ok;
use crate::heap::group::Group;
use state::{Inner, PeerErrors};
use ucx::{AtomicOp, Context, Endpoint, MemType, Worker};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use link::open;
pub use segments::Segments;

/// Largest put-with-signal sent as one active message (payload and signal together); larger
/// ones are a put, a flush and an atomic.
pub const AM_PUT_SIGNAL_MAX: usize = 64 << 10;

/// The same bound where the target's runtime runs puts-with-signal (a GPU heap; `RSHMEM_NET_TARGET_ATOMICS`): a payload up to this goes as one message,
/// copied once between the GPU and the host at each end (the target's runtime writes it),
/// where UCX would copy each of its fragments separately (many small copies that each wait for
/// the GPU, a time slice each where processes share the GPU).
pub const AM_PUT_SIGNAL_MAX_GPU: usize = 4 << 20;

/// This PE's network transport (see the module docs). Dropping it stops the progress thread,
/// then closes the endpoints, deregisters the heap and destroys the worker and context.
pub struct Net {
    inner: Arc<Inner>,
    /// The progress and executor threads.
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let remote: Vec<usize> = self.inner.eps.iter().enumerate().filter(|(_, e)| e.is_some()).map(|(pe, _)| pe).collect();
        f.debug_struct("Net").field("me", &self.inner.me).field("remote", &remote).finish()
    }
}

/// UCX's error callback: records the first error of the endpoint to PE `arg`'s slot.
///
/// # Safety
/// `arg` points at the `AtomicI32` of that PE inside a live `PeerErrors` (it outlives the
/// endpoints, see `Inner`).
unsafe extern "C" fn on_ep_error(arg: *mut c_void, _ep: ucx::sys::ucp_ep_h, status: ucx::sys::ucs_status_t) {
    // SAFETY: as the function says.
    let slot = unsafe { &*(arg as *const AtomicI32) };
    let _ = slot.compare_exchange(0, i32::from(status), Ordering::AcqRel, Ordering::Acquire);
}

impl Net {
    /// Opens the transport. Collective over every PE of `boot`; `remote[pe]` says which PEs
    /// are reached through it (those on other hosts), `base` is this PE's heap offset 0, `mem`
    /// the heap's memory, `host_memory` whether the heap is host memory, `target_ops` whether
    /// atomics and puts-with-signal are run by the target's runtime (forced on for a GPU heap),
    /// and `setup` what the transport's threads run first.
    ///
    /// # Errors
    /// On every PE alike: [`Error::Unsupported`] when some PE cannot load UCX (the message says
    /// how to install it), [`Error::Transport`] when a PE cannot create its worker or endpoints,
    /// [`Error::Timeout`] when a peer's hello does not arrive within the bootstrap timeout;
    /// bootstrap errors.
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        boot: &Bootstrap,
        remote: &[bool],
        base: usize,
        mem: Arc<dyn MemoryBackend>,
        host_memory: bool,
        target_ops: bool,
        setup: Option<crate::backend::ThreadSetup>,
        timeout: Duration,
    ) -> Result<Net> {
        let target_ops = target_ops || !host_memory;
        let me = boot.rank();
        let n = boot.nranks();
        let far: Vec<usize> = (0..n).filter(|&pe| remote[pe]).collect();
        let made = (|| {
            let ucx = ucx::api().map_err(|e| {
                Error::Unsupported(format!("PEs {far:?} are on other hosts than PE {me} and are reached through UCX, which is missing: {e}"))
            })?;
            let ctx = Context::new(ucx, far.len())?;
            // A UCX without CUDA would treat GPU addresses as host memory (a crash on the peer).
            if !host_memory && !ctx.cuda_aware()? {
                return Err(Error::Unsupported(format!(
                    "the UCX loaded from {} ({}.{}.{}) cannot move CUDA memory, and the cuda backend's heap \
                     is GPU memory: install a CUDA build of UCX (`pip install libucx-cu12`, then \
                     RSHMEM_UCX_DIR unset or pointing at its libucx/lib), or use the host backend",
                    ucx.origin, ucx.version.0, ucx.version.1, ucx.version.2
                )));
            }
            let worker = Worker::new(&ctx)?;
            let address = worker.address()?;
            Ok((ctx, worker, address))
        })();
        let (mine, parts) = match made {
            Ok((ctx, worker, address)) => (Ok(()), Some((ctx, worker, address))),
            Err(e) => (Err(e), None),
        };
        all_ok(boot, mine, "opening UCX")?;
        let Some((ctx, worker, address)) = parts else { unreachable!("all_ok returns this PE's error first") };
        let mut blob = (base as u64).to_le_bytes().to_vec();
        blob.extend_from_slice(&address);
        let all = boot.allgather(&blob)?;
        let bases: Vec<usize> = all.iter().map(|b| u64::from_le_bytes(b[..8].try_into().unwrap_or_default()) as usize).collect();
        let secret: [u8; am::SECRET_BYTES] = boot.secret().try_into().map_err(|_| {
            Error::InvalidArgument(format!("the bootstrap secret is not {} bytes", am::SECRET_BYTES))
        })?;
        let target = Box::new(am::Target::new(base, n, secret, host_memory));
        let errors = Box::new(PeerErrors { status: (0..n).map(|_| AtomicI32::new(0)).collect() });
        let connected = (|| {
            // SAFETY: the Target is boxed (stable address) and lives in `Inner` after the
            // worker, which is destroyed first (field order), so UCX never calls the handler
            // with a dangling `arg`.
            unsafe { worker.set_am_handler(am::AM_ID, am::on_message, &*target as *const am::Target as *mut c_void)? };
            let mut eps: Vec<Option<Endpoint>> = (0..n).map(|_| None).collect();
            for &pe in &far {
                let arg = &errors.status[pe] as *const AtomicI32 as *mut c_void;
                // SAFETY: `arg` is PE `pe`'s slot in the boxed PeerErrors, which outlives the
                // endpoints (field order of `Inner`); `on_ep_error` only stores into it.
                eps[pe] = Some(unsafe { Endpoint::connect(&worker, pe, &all[pe][8..], on_ep_error, arg)? });
            }
            Ok(eps)
        })();
        let (mine, eps) = match connected {
            Ok(eps) => (Ok(()), eps),
            Err(e) => (Err(e), Vec::new()),
        };
        all_ok(boot, mine, "connecting UCX endpoints")?;
        let inner = Arc::new(Inner {
            segments: Segments::new(n),
            eps,
            worker,
            target,
            errors,
            dirty: (0..n).map(|_| AtomicBool::new(false)).collect(),
            posted: (0..n).map(|_| AtomicBool::new(false)).collect(),
            staging: staging::Staging::new(),
            bases,
            me,
            secret,
            host_memory,
            target_ops,
            next_id: AtomicU64::new(0),
            mem,
            spin: progress::spin_for(),
            setup,
            health: boot.health().clone(),
            stop: AtomicBool::new(false),
            _ctx: ctx,
        });
        let net = Net { inner: inner.clone(), threads: Mutex::new(vec![progress::start(inner.clone())?]) };
        net.threads.lock().unwrap_or_else(|e| e.into_inner()).push(exec::start(inner)?);
        net.hello(&far, timeout)?;
        tracing::debug!(pe = me, remote = ?far, "network transport open");
        Ok(net)
    }

    /// Sends a hello to every remote PE and waits for theirs: every endpoint carries messages
    /// both ways before init returns.
    fn hello(&self, far: &[usize], timeout: Duration) -> Result<()> {
        let header = am::common(am::HELLO, self.inner.me, &self.inner.secret);
        for &pe in far {
            let ep = self.ep(pe)?;
            // SAFETY: no payload.
            let req = unsafe { ep.am_send(am::AM_ID, &header, &[])? };
            req.wait(&|| self.abort(pe, "the transport's hello"))?;
        }
        let start = Instant::now();
        while let Some(&missing) = far.iter().find(|&&pe| !self.inner.target.said_hello(pe)) {
            self.progress(true);
            self.abort(missing, "the transport's hello")?;
            if start.elapsed() > timeout {
                return Err(Error::Timeout { what: format!("the UCX hello of PE {missing}"), after: timeout });
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }

    /// Runs what a thread touching the heap through UCX runs first (see
    /// [`crate::backend::ThreadSetup`]); a failure is logged, the thread goes on.
    pub(crate) fn enter_thread(&self, name: &str) {
        self.inner.enter_thread(name);
    }

    /// This PE's heap offset 0 (heap offsets are addresses minus this).
    pub fn base(&self) -> usize {
        self.inner.target.base
    }

    /// Whether `pe` is reached through this transport.
    pub fn reaches(&self, pe: usize) -> bool {
        self.inner.eps.get(pe).is_some_and(Option::is_some)
    }

    /// The registrations of the heap (the heap's growth hook adds to them).
    pub fn segments(&self) -> &Segments {
        &self.inner.segments
    }

    /// Registers a new growth step of the heap: `[offset, offset+len)` of this PE's heap, and
    /// learns every remote PE's key for it. Collective (the heap grows on every PE together).
    ///
    /// # Errors
    /// On every PE alike, the first PE's registration error; bootstrap errors.
    pub fn register(&self, group: &dyn Group, offset: usize, len: usize) -> Result<()> {
        let i = &self.inner;
        let kind = if i.host_memory { MemType::Host } else { MemType::Cuda };
        i.segments.register(group, i.worker.context(), &i.eps, i.target.base, offset, len, kind)?;
        i.target.mapped.fetch_max(offset + len, Ordering::AcqRel);
        Ok(())
    }

    /// One round of progress (waits call it between polls: a peer's message then lands sooner
    /// than the progress thread would wake). `spinning`: the caller polls again at once, so the
    /// progress thread leaves incoming work to it; a caller that sleeps between polls passes
    /// `false`, and the progress thread runs what arrives meanwhile.
    pub fn progress(&self, spinning: bool) {
        if spinning {
            self.inner.worker.progress();
        } else {
            self.inner.worker.background_progress();
        }
    }

    fn ep(&self, pe: usize) -> Result<&Endpoint> {
        self.inner.eps.get(pe).and_then(Option::as_ref).ok_or_else(|| {
            Error::InvalidArgument(format!("PE {pe} is not reached through the network transport of PE {}", self.inner.me))
        })
    }

    /// Whether to give up waiting on an operation towards `pe`: a dead PE (the bootstrap's
    /// word), or a broken endpoint.
    fn abort(&self, pe: usize, during: &str) -> Result<()> {
        // Not a peer that left: finalize completes its puts after peers announced it.
        self.inner.health.check_dead(during)?;
        match self.inner.errors.status.get(pe).map(|s| s.load(Ordering::Acquire)) {
            Some(0) | None => Ok(()),
            Some(status) => Err(ucx::error(self.inner.worker.ucx(), "an endpoint", status as i8, Some(pe))),
        }
    }

    /// Completes the puts still in flight to `pe` (before another kind of operation to it),
    /// and the operations its runtime has not acknowledged yet.
    fn settle(&self, pe: usize, during: &str) -> Result<()> {
        self.settle_with(pe, during, false, true)
    }

    /// Before an operation `pe`'s runtime queues (`target_ops`): only the puts need completing,
    /// as its executor runs the queued operations in the order they were sent.
    fn settle_puts(&self, pe: usize, during: &str) -> Result<()> {
        self.settle_with(pe, during, false, false)
    }

    /// [`Net::settle`]; `posted` also completes the atomics posted to `pe` (a quiet); `queued`
    /// waits for `pe`'s runtime to acknowledge what it queued.
    fn settle_with(&self, pe: usize, during: &str, posted: bool, queued: bool) -> Result<()> {
        let posts = posted && self.inner.posted[pe].swap(false, Ordering::AcqRel);
        if self.inner.dirty[pe].swap(false, Ordering::AcqRel) || posts {
            self.ep(pe)?.flush()?.wait(&|| self.abort(pe, during))?;
            // The flush completed the staged puts to `pe`: their buffers return to the pool.
            self.inner.staging.reap()?;
        }
        let target = &self.inner.target;
        if queued {
            self.wait_until(pe, during, || target.outstanding[pe].load(Ordering::Acquire) == 0)?;
        }
        let failed = target.failed[pe].swap(0, Ordering::AcqRel);
        if failed > 0 {
            return Err(Error::Transport {
                call: "a put-with-signal run by its target",
                status: i32::from(ucx::sys::UCS_ERR_IO_ERROR),
                name: format!("PE {pe} could not write {failed} of them into its heap (its log says why)"),
                pe: Some(pe),
            });
        }
        Ok(())
    }

    /// Progresses the worker until `done()`, checking about every millisecond whether `pe`
    /// died or its endpoint broke.
    fn wait_until(&self, pe: usize, during: &str, mut done: impl FnMut() -> bool) -> Result<()> {
        let mut last = Instant::now();
        while !done() {
            if self.inner.worker.progress() == 0 {
                // The target's executor, or the peer sharing this core, needs the CPU.
                std::thread::yield_now();
            }
            if last.elapsed() >= Duration::from_millis(1) {
                self.abort(pe, during)?;
                last = Instant::now();
            }
        }
        Ok(())
    }

    /// The memory type of a local buffer at `addr`.
    fn kind_of(&self, addr: usize) -> Result<MemType> {
        if self.inner.host_memory || !self.inner.mem.checks_itself(addr)? {
            Ok(MemType::Host)
        } else {
            Ok(MemType::Cuda)
        }
    }

    /// `nbytes` from local `src` to heap offset `offset` of `pe`; returns once `src` may be
    /// reused (the data is at `pe` after [`Net::quiet`] or any later operation to `pe`).
    ///
    /// Host memory up to [`staging::STAGE_MAX`] bytes is copied and sent from the copy; a
    /// larger put sends its head from `src` and its last `STAGE_MAX` bytes from a copy, and
    /// waits only for the head: UCX completes a put when the target acknowledges it (TCP), and
    /// that acknowledgement travels back while the tail is still being sent, instead of a round
    /// trip after the whole put (`staging.rs`).
    ///
    /// # Errors
    /// [`Error::NotSymmetric`] for a range no registration covers; [`Error::Transport`];
    /// [`Error::PeerDied`].
    ///
    /// # Safety
    /// `src` must be readable for `nbytes`.
    pub unsafe fn put(&self, pe: usize, offset: usize, src: usize, nbytes: usize) -> Result<()> {
        let ep = self.ep(pe)?;
        self.abort(pe, "putmem")?;
        let base = self.inner.bases[pe];
        let kind = self.kind_of(src)?;
        let abort = || self.abort(pe, "putmem");
        let staging = &self.inner.staging;
        self.inner.segments.each_piece(pe, offset, nbytes, |off, len, rkey| {
            let from = src + (off - offset);
            self.inner.dirty[pe].store(true, Ordering::Release);
            if kind != MemType::Host {
                // SAFETY: the caller vouches for `src`; the request is waited for before returning.
                let req = unsafe { ep.put(from, kind, len, (base + off) as u64, rkey)? };
                return req.wait(&abort);
            }
            let head = len.saturating_sub(staging::STAGE_MAX);
            let head_req = if head > 0 {
                // SAFETY: the caller vouches for `src`; the request is waited for below, before
                // returning.
                Some(unsafe { ep.put(from, MemType::Host, head, (base + off) as u64, rkey)? })
            } else {
                None
            };
            // SAFETY: the caller vouches for `src`, read here before returning.
            let tail = unsafe { std::slice::from_raw_parts((from + head) as *const u8, len - head) };
            let at = (base + off + head) as u64;
            // SAFETY: the staging buffer at `buf` is kept until the request completes.
            let staged = staging.put(tail, &abort, |buf| unsafe { ep.put(buf, MemType::Host, len - head, at, rkey) });
            // Even when staging failed: `src` must not be left to UCX after returning.
            let headed = head_req.map_or(Ok(()), |r| r.wait(&abort));
            // Sends what the socket did not take at once and reaps acknowledgements, so that a
            // stream of puts keeps the wire busy without the progress thread (which leaves the
            // worker alone while this thread polls it).
            self.inner.worker.progress();
            staged.and(headed)
        })
    }

    /// `nbytes` from local `src` to heap offset `offset` of `pe`, returning at once: `src` must
    /// stay unchanged until [`Net::quiet`] (or any later operation to `pe`) returns, which
    /// completes it at `pe`. At most [`staging::MAX_IN_FLIGHT`] puts are in flight; the next
    /// waits for the oldest.
    ///
    /// # Errors
    /// As [`Net::put`]; also the error of an earlier put that failed.
    ///
    /// # Safety
    /// `src` must be readable for `nbytes` until this PE's next `quiet` returns, and not
    /// written meanwhile.
    pub unsafe fn put_nbi(&self, pe: usize, offset: usize, src: usize, nbytes: usize) -> Result<()> {
        let ep = self.ep(pe)?;
        self.abort(pe, "putmem_nbi")?;
        let base = self.inner.bases[pe];
        let kind = self.kind_of(src)?;
        let abort = || self.abort(pe, "putmem_nbi");
        self.inner.segments.each_piece(pe, offset, nbytes, |off, len, rkey| {
            let from = src + (off - offset);
            self.inner.dirty[pe].store(true, Ordering::Release);
            // SAFETY: the caller keeps `src` valid until the quiet that completes the request.
            self.inner.staging.track(&abort, || unsafe { ep.put(from, kind, len, (base + off) as u64, rkey) })?;
            self.inner.worker.progress();
            Ok(())
        })
    }

    /// `nbytes` from heap offset `offset` of `pe` into local `dst`; returns when they are there.
    ///
    /// # Errors
    /// As [`Net::put`].
    ///
    /// # Safety
    /// `dst` must be writable for `nbytes` and not otherwise accessed during the call.
    pub unsafe fn get(&self, pe: usize, offset: usize, dst: usize, nbytes: usize) -> Result<()> {
        let ep = self.ep(pe)?;
        self.settle(pe, "getmem")?;
        let base = self.inner.bases[pe];
        let kind = self.kind_of(dst)?;
        self.inner.segments.each_piece(pe, offset, nbytes, |off, len, rkey| {
            // SAFETY: the caller vouches for `dst`; the request is waited for before returning.
            let req = unsafe { ep.get(dst + (off - offset), kind, len, (base + off) as u64, rkey)? };
            req.wait(&|| self.abort(pe, "getmem"))
        })
    }

    /// Applies `op` to the `width`-byte word at heap offset `offset` of `pe`, atomically at the
    /// target; returns the old bits.
    ///
    /// # Errors
    /// As [`Net::put`].
    pub fn atomic(&self, pe: usize, offset: usize, width: Width, op: AmoOp) -> Result<u64> {
        let ep = self.ep(pe)?;
        if self.inner.target_ops {
            self.settle_puts(pe, "an atomic")?;
            return self.target_atomic(ep, pe, offset, width, op);
        }
        self.settle(pe, "an atomic")?;
        let w = width.bytes();
        let (kind, operand, reply_in) = match op {
            AmoOp::Fetch => (AtomicOp::Add, 0, 0),
            AmoOp::Set(v) | AmoOp::Swap(v) => (AtomicOp::Swap, v, 0),
            // UCP's CSWAP compares with the operand and stores the reply word's value.
            AmoOp::CompareSwap { cond, value } => (AtomicOp::CompareSwap, cond, value),
            AmoOp::Add(v) => (AtomicOp::Add, v, 0),
            AmoOp::And(v) => (AtomicOp::And, v, 0),
            AmoOp::Or(v) => (AtomicOp::Or, v, 0),
            AmoOp::Xor(v) => (AtomicOp::Xor, v, 0),
        };
        // Both words live on the heap (boxed) so that a wait given up on (a dead peer) never
        // leaves UCX writing into a stack frame that is gone: they are leaked in that case.
        let mut words = Box::new([operand, reply_in]);
        if w == 4 {
            // The low 4 bytes (little endian) hold the 32-bit operand.
            words[0] &= 0xffff_ffff;
            words[1] &= 0xffff_ffff;
        }
        let base = self.inner.bases[pe];
        let mut old = 0u64;
        let res = self.inner.segments.each_piece(pe, offset, w, |off, _, rkey| {
            let p = words.as_mut_ptr();
            // SAFETY: operand and reply are the boxed words, kept alive until the request is
            // done (or leaked below when the wait is abandoned).
            let req = unsafe { ep.atomic(kind, p as *const c_void, p.wrapping_add(1) as *mut c_void, w, (base + off) as u64, rkey)? };
            req.wait(&|| self.abort(pe, "an atomic"))?;
            old = if w == 4 { words[1] & 0xffff_ffff } else { words[1] };
            Ok(())
        });
        if res.is_err() {
            std::mem::forget(words);
        }
        res.map(|()| old)
    }

    /// Applies `op` (not [`AmoOp::Fetch`]) to the `width`-byte word at heap offset `offset` of
    /// `pe` without waiting for it: it is complete at the target after [`Net::quiet`] or any
    /// later operation to `pe`, and lands after this PE's earlier operations to `pe`.
    ///
    /// # Errors
    /// As [`Net::put`].
    pub fn atomic_post(&self, pe: usize, offset: usize, width: Width, op: AmoOp) -> Result<()> {
        let ep = self.ep(pe)?;
        if self.inner.target_ops {
            self.settle_puts(pe, "an atomic")?;
            self.inner.segments.each_piece(pe, offset, width.bytes(), |_, _, _| Ok(()))?;
            let header = am::amo(self.inner.me, &self.inner.secret, 0, offset, width, op);
            self.inner.target.outstanding[pe].fetch_add(1, Ordering::AcqRel);
            // SAFETY: no payload; the header is copied at once.
            let req = unsafe { ep.am_send(am::AM_ID, &header, &[])? };
            return req.wait(&|| self.abort(pe, "an atomic"));
        }
        let (kind, operand) = match op {
            AmoOp::Set(v) | AmoOp::Swap(v) => (AtomicOp::Swap, v),
            AmoOp::Add(v) => (AtomicOp::Add, v),
            AmoOp::And(v) => (AtomicOp::And, v),
            AmoOp::Or(v) => (AtomicOp::Or, v),
            AmoOp::Xor(v) => (AtomicOp::Xor, v),
            // Posts of operations whose point is their result: run them whole.
            AmoOp::Fetch | AmoOp::CompareSwap { .. } => return self.atomic(pe, offset, width, op).map(drop),
        };
        self.settle(pe, "an atomic")?;
        // UCP has no posted swap (a swap returns a result): a set waits for its reply.
        if kind == AtomicOp::Swap {
            return self.atomic(pe, offset, width, op).map(drop);
        }
        let operand = Box::new(if width == Width::W32 { operand & 0xffff_ffff } else { operand });
        let base = self.inner.bases[pe];
        let res = self.inner.segments.each_piece(pe, offset, width.bytes(), |off, _, rkey| {
            // SAFETY: the boxed operand is kept until the request is done (leaked below when
            // the wait is abandoned).
            let req = unsafe { ep.atomic_post(kind, &*operand as *const u64 as *const c_void, width.bytes(), (base + off) as u64, rkey)? };
            self.inner.posted[pe].store(true, Ordering::Release);
            req.wait(&|| self.abort(pe, "an atomic"))
        });
        if res.is_err() {
            std::mem::forget(operand);
        }
        res
    }

    /// [`Net::atomic`] run by `pe`'s runtime: an `AMO` message, then its reply.
    fn target_atomic(&self, ep: &Endpoint, pe: usize, offset: usize, width: Width, op: AmoOp) -> Result<u64> {
        // Where the registrations end is where the target's handler stops accepting.
        self.inner.segments.each_piece(pe, offset, width.bytes(), |_, _, _| Ok(()))?;
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let header = am::amo(self.inner.me, &self.inner.secret, id, offset, width, op);
        let target = &self.inner.target;
        target.outstanding[pe].fetch_add(1, Ordering::AcqRel);
        // SAFETY: no payload; the header is copied at once.
        let req = unsafe { ep.am_send(am::AM_ID, &header, &[])? };
        req.wait(&|| self.abort(pe, "an atomic"))?;
        let mut answer = None;
        self.wait_until(pe, "an atomic", || {
            answer = target.take_answer(id);
            answer.is_some()
        })?;
        match answer {
            Some(Ok(old)) => Ok(old),
            _ => Err(Error::Transport {
                call: "an atomic run by its target",
                status: i32::from(ucx::sys::UCS_ERR_IO_ERROR),
                name: format!("PE {pe} could not apply it to its heap (its log says why)"),
                pe: Some(pe),
            }),
        }
    }

    /// Puts `nbytes` from `src` to heap offset `dest` of `pe`, then updates its signal word at
    /// heap offset `sig`: the target sees the data once it sees the signal.
    ///
    /// # Errors
    /// As [`Net::put`].
    ///
    /// # Safety
    /// `src` must be readable for `nbytes`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn put_signal(&self, pe: usize, dest: usize, src: usize, nbytes: usize, sig: usize, value: u64, op: SignalOp) -> Result<()> {
        let one_message = if self.inner.target_ops { AM_PUT_SIGNAL_MAX_GPU } else { AM_PUT_SIGNAL_MAX };
        if nbytes > one_message {
            // SAFETY: the caller's promise about `src`.
            unsafe { self.put(pe, dest, src, nbytes)? };
            // The atomic completes the put first.
            let amo = match op {
                SignalOp::Set => AmoOp::Set(value),
                SignalOp::Add => AmoOp::Add(value),
            };
            return self.atomic(pe, sig, Width::W64, amo).map(drop);
        }
        let ep = self.ep(pe)?;
        if self.inner.target_ops {
            self.settle_puts(pe, "putmem_signal")?;
        } else {
            self.settle(pe, "putmem_signal")?;
        }
        // The payload goes from host memory: a GPU source is copied out first.
        let staged = match self.kind_of(src)? {
            MemType::Host => None,
            MemType::Cuda => {
                let mut buf = vec![0u8; nbytes];
                // SAFETY: the caller vouches for `src`; `buf` is ours, so they cannot overlap.
                unsafe { self.inner.mem.copy(buf.as_mut_ptr() as usize, src, nbytes)? };
                Some(buf)
            }
        };
        let data: &[u8] = match &staged {
            Some(buf) => buf,
            // SAFETY: the caller vouches for `src`.
            None => unsafe { std::slice::from_raw_parts(src as *const u8, nbytes) },
        };
        let target = &self.inner.target;
        let id = if self.inner.target_ops {
            target.outstanding[pe].fetch_add(1, Ordering::AcqRel);
            self.inner.next_id.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.inner.dirty[pe].store(true, Ordering::Release);
            0
        };
        let header = am::put_signal(self.inner.me, &self.inner.secret, dest, sig, value, op, id);
        // SAFETY: `data` stays readable until the request is waited for, below.
        let req = unsafe { ep.am_send(am::AM_ID, &header, data)? };
        req.wait(&|| self.abort(pe, "putmem_signal"))
    }

    /// Completes every operation this PE issued through the transport at its target.
    ///
    /// # Errors
    /// [`Error::Transport`]; [`Error::PeerDied`].
    pub fn quiet(&self) -> Result<()> {
        for pe in 0..self.inner.dirty.len() {
            self.settle_with(pe, "quiet", true, true)?;
        }
        Ok(())
    }

    /// Messages refused so far (bad header, wrong secret, outside the heap).
    pub fn refused(&self) -> u64 {
        self.inner.target.refused.load(Ordering::Relaxed)
    }
}

impl crate::heap::GrowHook for Net {
    fn grown(&self, group: &dyn Group, offset: usize, len: usize) -> Result<()> {
        self.register(group, offset, len)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.inner.staging.abandon();
        self.inner.stop.store(true, Ordering::Release);
        self.inner.worker.signal();
        {
            // Under the queue's lock, so the executor cannot miss the wake-up between its look at
            // the stop flag and its wait.
            let _jobs = self.inner.target.jobs.lock().unwrap_or_else(|e| e.into_inner());
            self.inner.target.job_ready.notify_all();
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            if t.join().is_err() {
                tracing::warn!("a thread of the transport panicked");
            }
        }
    }
}
