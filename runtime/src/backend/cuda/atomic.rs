//! Host-issued copies and atomics on device memory, run on a private stream and waited for.
//!
//! Choice: an atomic is a one-thread kernel (`kernels.rs`, built from `runtime_kernels.cu`) launched on a private
//! non-blocking stream, then `cuStreamSynchronize`. The kernel writes the old value into a
//! page-locked host word, so there is no extra copy. About 10 µs per operation, which host
//! atomics can afford; device code uses its own atomics. A plain `cuMemcpy` would be cheaper
//! for loads but gives no acquire ordering and runs on the legacy default stream, where it
//! would queue behind (and deadlock with) a kernel that waits for this very store.
//!
//! # Safety
//! Host-issued copies and atomics on device memory, run on a private stream and waited for.
//! Callers (the `MemoryBackend` methods) vouch for the addresses; this file only adds that the
//! result slot is page-locked host memory owned here, written by one kernel at a time.
#![allow(unsafe_code)]

use super::kernels::{encode, AmoCode, Kernels};
use crate::backend::{AmoOp, Width};
use crate::driver::context::PrimaryContext;
use crate::driver::host_mem::PinnedHost;
use crate::driver::stream::{self, Stream};
use crate::error::{Error, Result};
use std::sync::{Arc, Mutex};

/// The private stream and result word of host-issued operations.
///
/// Owns both; dropping it destroys the stream (after its work) and frees the word. The lock
/// serialises host operations of all threads, which also keeps the one result word safe.
#[derive(Debug)]
pub(crate) struct HostOps {
    inner: Mutex<Inner>,
    ctx: Arc<PrimaryContext>,
}

#[derive(Debug)]
struct Inner {
    stream: Stream,
    slot: PinnedHost,
}

impl HostOps {
    pub(crate) fn new(ctx: &Arc<PrimaryContext>) -> Result<HostOps> {
        let stream = Stream::new(ctx)?;
        let slot = PinnedHost::new(ctx, 8)?;
        Ok(HostOps { inner: Mutex::new(Inner { stream, slot }), ctx: ctx.clone() })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Inner>> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        self.ctx.bind()?;
        Ok(guard)
    }

    /// Copies `len` bytes and waits for the copy.
    ///
    /// # Safety
    /// Both ranges are valid for `len` bytes and do not overlap.
    pub(crate) unsafe fn copy(&self, dst: usize, src: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let inner = self.lock()?;
        // SAFETY: the caller's contract; the copy is finished before we return (synchronize),
        // so the ranges need to stay valid only for this call.
        unsafe { stream::memcpy_async(dst, src, len, inner.stream.handle())? };
        inner.stream.synchronize()
    }

    /// Runs `op` on the word at `addr` and returns its old value.
    ///
    /// # Safety
    /// `addr` is a mapped, `width`-aligned device address.
    pub(crate) unsafe fn atomic(&self, kernels: &Kernels, addr: usize, width: Width, op: AmoOp) -> Result<u64> {
        let (code, a, b) = encode(op);
        // SAFETY: forwarded contract.
        unsafe { self.run(kernels, addr, width, code, a, b) }
    }

    /// Reads the word at `addr` with acquire ordering at system scope.
    ///
    /// # Safety
    /// As [`HostOps::atomic`].
    pub(crate) unsafe fn load_acquire(&self, kernels: &Kernels, addr: usize, width: Width) -> Result<u64> {
        // SAFETY: forwarded contract.
        unsafe { self.run(kernels, addr, width, AmoCode::LoadAcquire, 0, 0) }
    }

    unsafe fn run(&self, kernels: &Kernels, addr: usize, width: Width, code: AmoCode, a: u64, b: u64) -> Result<u64> {
        if addr % width.bytes() != 0 {
            return Err(Error::InvalidArgument(format!(
                "atomic on {addr:#x}: the address is not {}-byte aligned",
                width.bytes()
            )));
        }
        let mut inner = self.lock()?;
        inner.slot.write_u64(0, 0);
        let out = inner.slot.addr();
        // SAFETY: the caller vouches for `addr`; `out` is our page-locked word, which lives as
        // long as `inner` and which no other launch writes while we hold the lock; the kernel
        // is finished when synchronize returns, before the guard is dropped.
        unsafe { kernels.amo(inner.stream.handle(), addr, width, code, a, b, out)? };
        inner.stream.synchronize()?;
        Ok(inner.slot.read_u64(0))
    }

    /// Waits until every operation issued here is complete (they are already: each one waits
    /// for itself; this reports a sticky error of the stream, if any).
    pub(crate) fn quiet(&self) -> Result<()> {
        let inner = self.lock()?;
        inner.stream.synchronize()
    }
}
