//! On-stream operations (`*_on_stream`): queued on a caller's CUDA stream (a
//! `torch.cuda.Stream`'s `cuda_stream`, or 0 for the legacy default stream) and ordered with the
//! caller's kernels and copies on it; each call returns once the work is queued.
//!
//! Every public call describes itself as an [`OnStreamCall`] (an [`OnStream`] value here, one
//! struct per collective in `stream_collective.rs`), and [`Runtime::on_stream`] makes the one
//! decision: a backend with streams ([`crate::backend::Streams`]) queues it, a backend
//! without runs its host form synchronously and ignores the stream (the host backend: each call
//! completes before it returns, which is the order a stream would give).
//!
//! Queued, on the cuda backend:
//! - puts and gets are copy-engine copies between two addresses mapped in this process (a
//!   node-local peer's heap is mapped in our reservation);
//! - signals are a stream memory operation (set) or a one-thread kernel (add), queued after the
//!   data, so the target sees the data once it sees the signal;
//! - `signal_wait_until_on_stream` is a one-thread kernel that polls the word: later work on the
//!   stream waits, and the kernel stops with a record naming the call when a peer leaves the job
//!   (or a debug timeout passes) instead of waiting forever;
//! - barriers are the runtime's barrier kernel, which uses the same never-reset words as host
//!   and in-kernel barriers, so all three interoperate.
//!
//! # Safety
//! Every function takes a stream handle, which must be a live stream of this PE's device's
//! primary context (or 0), and symmetric memory it touches must stay allocated until the stream
//! has run the operation (do not `free` it before synchronizing). Puts and gets also take a raw
//! local address, valid for `nbytes` until the copy has run. So they are all `unsafe fn`.
#![allow(unsafe_code)]

use super::mem::check_disjoint;
use super::team_table::TeamInfo;
use super::{Runtime, Team};
use crate::backend::{Streams, Width};
use crate::consts::{Cmp, SignalOp};
use crate::driver::stream::StreamHandle;
use crate::heap::SymAddr;
use crate::error::{Error, Result};

/// One on-stream call, as the caller made it: what it reaches, its host form and its queued form.
/// [`Runtime::on_stream`] runs every call through these; the collectives implement it once, for
/// all of them (`stream_collective.rs`).
pub(super) trait OnStreamCall {
    /// The on-stream call the program made, as waits and errors name it.
    fn name(&self) -> &'static str;

    /// The PEs it reaches.
    fn reach(&self) -> Reach;

    /// Runs it as its host form, synchronously.
    ///
    /// # Safety
    /// Local addresses valid for their sizes (module docs).
    unsafe fn run_on_host(&self, rt: &Runtime) -> Result<()>;

    /// Queues it on `stream`.
    ///
    /// # Safety
    /// As the module docs.
    unsafe fn queue(&self, rt: &Runtime, q: &dyn Streams, stream: StreamHandle) -> Result<()>;
}

/// The PEs an on-stream call reaches.
#[derive(Debug, Clone, Copy)]
pub(super) enum Reach {
    /// This PE only.
    Me,
    /// World PE `pe`.
    Pe(usize),
    /// Every member of a team.
    Team(Team),
}

/// The on-stream transfers, signals, waits, quiet and barriers.
#[derive(Debug, Clone, Copy)]
enum OnStream {
    Put { dest: SymAddr, source: usize, nbytes: usize, pe: usize },
    Get { dest: usize, source: SymAddr, nbytes: usize, pe: usize },
    PutSignal { dest: SymAddr, source: usize, nbytes: usize, sig_addr: SymAddr, signal: u64, op: SignalOp, pe: usize },
    Signal { sig_addr: SymAddr, signal: u64, op: SignalOp, pe: usize },
    Wait { sig_addr: SymAddr, cmp: Cmp, value: u64 },
    Quiet,
    Barrier { team: Team },
}

impl Runtime {
    /// Runs `call`: queued on `stream` by a backend with streams, else as its host form.
    ///
    /// # Safety
    /// As the module docs.
    pub(super) unsafe fn on_stream(&self, stream: StreamHandle, call: impl OnStreamCall) -> Result<()> {
        match self.backend.streams() {
            // SAFETY: forwarded contract.
            Some(queue) if !self.needs_transport(call.reach()) => unsafe { call.queue(self, queue, stream) },
            Some(_) => {
                // A PE on another host: the stream's copy engine and kernels cannot reach it.
                // Staged through the host: the device's queued work first (it may produce the
                // source), then the host form through the transport, which returns once done,
                // so the stream's later work follows it.
                self.backend.synchronize().map_err(|e| self.prefer_device_error(e))?;
                // SAFETY: forwarded contract.
                unsafe { self.run_named_on_host(&call) }
            }
            // SAFETY: forwarded contract (the host forms read and write the same memory now).
            None => unsafe { self.run_named_on_host(&call) },
        }
    }

    /// Whether a call reaching `reach` goes through the network transport (a target PE on
    /// another host, or a team with members there).
    fn needs_transport(&self, reach: Reach) -> bool {
        let Some(net) = &self.net else { return false };
        match reach {
            Reach::Me => false,
            Reach::Pe(pe) => net.reaches(pe),
            Reach::Team(team) => {
                self.teams().get(team).map(|t| t.members.iter().any(|&pe| net.reaches(pe))).unwrap_or(false)
            }
        }
    }

    /// `call` as its host form, its waits and errors named for the on-stream call.
    ///
    /// # Safety
    /// As [`OnStreamCall::run_on_host`].
    unsafe fn run_named_on_host(&self, call: &impl OnStreamCall) -> Result<()> {
        let _named = crate::watchdog::call_scope(call.name());
        // SAFETY: forwarded contract.
        unsafe { call.run_on_host(self) }
    }
}

impl OnStreamCall for OnStream {
    fn name(&self) -> &'static str {
        use OnStream::*;
        match *self {
            Barrier { team } if team == Team::WORLD => "barrier_all_on_stream",
            Barrier { .. } => "barrier_on_stream",
            Wait { .. } => "signal_wait_until_on_stream",
            Quiet => "quiet_on_stream",
            Put { .. } | Get { .. } | PutSignal { .. } | Signal { .. } => "an on-stream transfer",
        }
    }

    fn reach(&self) -> Reach {
        use OnStream::*;
        match *self {
            Put { pe, .. } | Get { pe, .. } | PutSignal { pe, .. } | Signal { pe, .. } => Reach::Pe(pe),
            Wait { .. } | Quiet => Reach::Me,
            Barrier { team } => Reach::Team(team),
        }
    }

    unsafe fn run_on_host(&self, rt: &Runtime) -> Result<()> {
        use OnStream::*;
        match *self {
            // SAFETY: forwarded contract.
            Put { dest, source, nbytes, pe } => unsafe { rt.putmem(dest, source, nbytes, pe) },
            // SAFETY: forwarded contract.
            Get { dest, source, nbytes, pe } => unsafe { rt.getmem(dest, source, nbytes, pe) },
            PutSignal { dest, source, nbytes, sig_addr, signal, op, pe } => {
                // SAFETY: forwarded contract.
                unsafe { rt.putmem_signal(dest, source, nbytes, sig_addr, signal, op, pe) }
            }
            Signal { sig_addr, signal, op, pe } => rt.signal_op(sig_addr, signal, op, pe),
            Wait { sig_addr, cmp, value } => rt.signal_wait_until(sig_addr, cmp, value).map(drop),
            Quiet => rt.quiet(),
            Barrier { team } => rt.barrier(team),
        }
    }

    unsafe fn queue(&self, rt: &Runtime, q: &dyn Streams, stream: StreamHandle) -> Result<()> {
        use OnStream::*;
        // SAFETY (every arm): forwarded contract; each queued form checks its symmetric ranges.
        unsafe {
            match *self {
                Put { dest, source, nbytes, pe } => {
                    if nbytes == 0 {
                        return rt.check_pe(pe);
                    }
                    let d = rt.user_remote(dest, nbytes, pe, "putmem_on_stream")?.mapped()?;
                    rt.queue_copy(q, stream, d, source, nbytes)
                }
                Get { dest, source, nbytes, pe } => {
                    if nbytes == 0 {
                        return rt.check_pe(pe);
                    }
                    let s = rt.user_remote(source, nbytes, pe, "getmem_on_stream")?.mapped()?;
                    rt.queue_copy(q, stream, dest, s, nbytes)
                }
                PutSignal { dest, source, nbytes, sig_addr, signal, op, pe } => {
                    // Check the signal word first so that a bad one fails before any data moves.
                    let sig = rt.user_word(sig_addr, Width::W64, pe, "putmem_signal_on_stream")?.mapped()?;
                    if nbytes > 0 {
                        let d = rt.user_remote(dest, nbytes, pe, "putmem_signal_on_stream")?.mapped()?;
                        rt.queue_copy(q, stream, d, source, nbytes)?;
                    } else {
                        rt.check_pe(pe)?;
                    }
                    q.signal(stream, sig, signal, op)
                }
                Signal { sig_addr, signal, op, pe } => {
                    let sig = rt.user_word(sig_addr, Width::W64, pe, "signal_op_on_stream")?.mapped()?;
                    q.signal(stream, sig, signal, op)
                }
                Wait { sig_addr, cmp, value } => {
                    let sig = rt.user_word(sig_addr, Width::W64, rt.my_pe(), "signal_wait_until_on_stream")?.mapped()?;
                    q.wait(stream, sig, cmp, value)
                }
                // Peers reached by load/store need nothing queued: the stream's own ordering
                // completes a copy, memory operation or kernel, its writes performed, before the
                // next one starts. What is left is to check that nothing failed.
                Quiet => rt.stream_precheck("quiet_on_stream"),
                Barrier { team } => {
                    rt.device_team(team, "barrier_on_stream")?;
                    rt.stream_precheck("barrier_on_stream")?;
                    q.barrier(stream, team.0)
                }
            }
        }
    }
}

impl Runtime {
    /// Checks that nothing already failed (a dead peer, a kernel that stopped) before queueing
    /// more work that would wait for it.
    pub(super) fn stream_precheck(&self, during: &str) -> Result<()> {
        self.boot.health().check(during)?;
        self.check_device_error()
    }

    /// The team as on-stream and device code address it (members `start + i * stride`, every
    /// one reachable by load/store).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a team this PE is not in; [`Error::Unsupported`] for a
    /// team device code cannot address, or with a member it cannot reach (a kernel would stop
    /// on it with a trap, which kills the CUDA context).
    pub(super) fn device_team(&self, team: Team, what: &str) -> Result<TeamInfo> {
        let info = {
            let t = self.teams();
            let info = t.get(team)?.clone();
            if t.desc(team.0 as usize).size == 0 {
                return Err(Error::Unsupported(format!(
                    "{what} on {}: its members {:?} are not evenly spaced in ascending order \
                     (start + i * stride, stride >= 1), which device code and on-stream operations \
                     need; make the team with a positive stride, or use the host form",
                    info.name, info.members
                )));
            }
            info
        };
        if let Some(pe) = info.first_unreachable(|pe| self.reachable.get(pe).copied().unwrap_or(false)) {
            return Err(Error::Unsupported(format!(
                "{what} on {}: member PE {pe} is not reachable by load/store from PE {} (it runs \
                 on another host, or its GPU has no peer access to this one), and on-stream \
                 collectives and barriers move data with this GPU's loads and stores: use a team \
                 of PEs on one host (TEAM_NODE), or the host form",
                info.name,
                self.my_pe()
            )));
        }
        Ok(info)
    }

    /// Queues a copy of `len` bytes from `src` to `dst` (both already translated).
    ///
    /// # Safety
    /// As the module docs: mapped ranges, live stream.
    pub(super) unsafe fn queue_copy(
        &self,
        q: &dyn Streams,
        stream: StreamHandle,
        dst: usize,
        src: usize,
        len: usize,
    ) -> Result<()> {
        if len == 0 || dst == src {
            return Ok(());
        }
        check_disjoint(dst, src, len)?;
        // SAFETY: the caller's contract (module docs); the ranges are disjoint.
        unsafe { q.copy(stream, dst, src, len) }
    }

    /// Queues a copy of `nbytes` from local `source` to symmetric `dest` on PE `pe`.
    ///
    /// # Errors
    /// As [`Runtime::putmem`]; [`Error::Driver`].
    ///
    /// # Safety
    /// `source` stays readable for `nbytes` until the stream has run the copy; see the module
    /// docs for `stream` and `dest`.
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/rma.html>
    #[doc(alias = "nvshmemx_putmem_on_stream")]
    pub unsafe fn putmem_on_stream(
        &self,
        dest: SymAddr,
        source: usize,
        nbytes: usize,
        pe: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::Put { dest, source, nbytes, pe }) }
    }

    /// Queues a copy of `nbytes` from symmetric `source` on PE `pe` to local `dest`.
    ///
    /// # Errors
    /// As [`Runtime::getmem`]; [`Error::Driver`].
    ///
    /// # Safety
    /// `dest` stays writable for `nbytes` until the stream has run the copy; see the module docs.
    #[doc(alias = "nvshmemx_getmem_on_stream")]
    pub unsafe fn getmem_on_stream(
        &self,
        dest: usize,
        source: SymAddr,
        nbytes: usize,
        pe: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::Get { dest, source, nbytes, pe }) }
    }

    /// Queues a put of `nbytes` from local `source` to symmetric `dest` on PE `pe`, then the
    /// update of the 64-bit signal word `sig_addr` on `pe` (`op` with `signal`), ordered after
    /// the data at system scope: the target sees the data once it sees the signal.
    ///
    /// # Errors
    /// As [`Runtime::putmem_signal`]; [`Error::Unsupported`] for `SignalOp::Set` on a GPU without
    /// 64-bit stream memory operations; [`Error::Driver`].
    ///
    /// # Safety
    /// As [`Runtime::putmem_on_stream`].
    #[doc(alias = "nvshmemx_putmem_signal_on_stream")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn putmem_signal_on_stream(
        &self,
        dest: SymAddr,
        source: usize,
        nbytes: usize,
        sig_addr: SymAddr,
        signal: u64,
        op: SignalOp,
        pe: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::PutSignal { dest, source, nbytes, sig_addr, signal, op, pe }) }
    }

    /// Queues the update of the 64-bit signal word `sig_addr` on PE `pe`, after (and ordered
    /// after, at system scope) everything queued on `stream` before it.
    ///
    /// # Errors
    /// As [`Runtime::signal_op`]; [`Error::Unsupported`] for `SignalOp::Set` without 64-bit
    /// stream memory operations; [`Error::Driver`].
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_signal_op_on_stream")]
    pub unsafe fn signal_op_on_stream(
        &self,
        sig_addr: SymAddr,
        signal: u64,
        op: SignalOp,
        pe: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::Signal { sig_addr, signal, op, pe }) }
    }

    /// Makes work queued on `stream` after this call wait until this PE's signal word at
    /// `sig_addr` compares `cmp` to `value` (any comparison). Data put before the matching
    /// signal is visible to the stream's later work. On the host backend it waits here. On the
    /// cuda backend a wait that a departed peer leaves unsatisfied stops its kernel, and the next
    /// call that checks ([`Runtime::check_device_error`]) raises [`Error::PeerDied`] /
    /// [`Error::PeerExited`] naming `signal_wait_until_on_stream`.
    ///
    /// # Errors
    /// As [`Runtime::signal_wait_until`]; [`Error::Driver`].
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_signal_wait_until_on_stream")]
    pub unsafe fn signal_wait_until_on_stream(
        &self,
        sig_addr: SymAddr,
        cmp: Cmp,
        value: u64,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::Wait { sig_addr, cmp, value }) }
    }

    /// Completes, in `stream`'s order, every put, atomic and signal queued before it on the
    /// stream (by the calls above or by kernels): work queued after it sees them done.
    ///
    /// For peers reached by load/store the stream's own ordering already gives this (a copy,
    /// a memory operation or a kernel finishes, its writes performed, before the next one
    /// starts), so nothing is queued; the call checks that no peer died and no kernel stopped.
    ///
    /// # Errors
    /// [`Error::PeerDied`]; a recorded device error ([`Runtime::check_device_error`]).
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_quiet_on_stream")]
    pub unsafe fn quiet_on_stream(&self, stream: StreamHandle) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::Quiet) }
    }

    /// Queues a barrier over all PEs on `stream`: every PE's work queued before it (including
    /// puts to this PE) is complete and visible before any PE's stream continues. Every PE must
    /// call it.
    ///
    /// # Errors
    /// As [`Runtime::barrier_on_stream`].
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_barrier_all_on_stream")]
    pub unsafe fn barrier_all_on_stream(&self, stream: StreamHandle) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::Barrier { team: Team::WORLD }) }
    }

    /// Queues a barrier over `team` on `stream` (a one-warp kernel). Every member must call it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a team this PE is not in; [`Error::Unsupported`] for a team
    /// that device code cannot address; [`Error::PeerDied`]; a recorded device error;
    /// [`Error::Driver`].
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_barrier_on_stream")]
    #[doc(alias = "nvshmemx_team_sync_on_stream")]
    pub unsafe fn barrier_on_stream(&self, team: Team, stream: StreamHandle) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::Barrier { team }) }
    }
}
