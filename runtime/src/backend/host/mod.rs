//! The host backend: memfd chunks in host memory, no device.
//!
//! It runs the same heap layout and host API as the CUDA backend with no GPU, so CI tests the
//! runtime through it and programs run on a laptop with CPU tensors. It has no streams: every
//! `*_on_stream` call runs as its host form. Files by role, as in `backend/cuda/`: `reserve.rs`
//! (address ranges), `chunk.rs` (physical memory and mappings), `access.rs` (copies and atomics).
//!
//! # Safety
//! The `unsafe fn`s of [`MemoryBackend`] forward to `access.rs` under the same contract.
#![allow(unsafe_code)]

mod access;
mod chunk;
mod reserve;

pub use chunk::{HostChunk, HostMapping};
pub use reserve::HostReservation;

use crate::backend::{AmoOp, Backend, BackendKind, Chunk, MemoryBackend, Reservation, Width};
use crate::error::{Error, Result};
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// The host backend: host memory, no device.
#[derive(Debug)]
pub struct HostBackend {
    memory: Arc<HostMemory>,
}

impl HostBackend {
    /// The backend of a PE on the host backend; a device ordinal means nothing here.
    pub fn open(device: Option<i32>) -> HostBackend {
        if let Some(d) = device {
            tracing::debug!(device = d, "host backend: device ordinal ignored");
        }
        HostBackend { memory: Arc::new(HostMemory::new()) }
    }
}

impl Backend for HostBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Host
    }

    fn memory(&self) -> Arc<dyn MemoryBackend> {
        self.memory.clone()
    }
}

/// Host memory through memfd + mmap. Cheap to create; holds the list of its live reservations
/// (mappings are only allowed inside one).
#[derive(Debug, Default)]
pub struct HostMemory {
    registry: Arc<reserve::Registry>,
}

impl HostMemory {
    /// Host memory for a heap.
    pub fn new() -> HostMemory {
        HostMemory::default()
    }

    fn check_len(&self, what: &str, len: usize) -> Result<()> {
        let g = self.granularity();
        if len == 0 || len % g != 0 {
            return Err(Error::InvalidArgument(format!(
                "{what} of {len} bytes: the host backend needs a positive multiple of the page size {g}"
            )));
        }
        Ok(())
    }
}

impl MemoryBackend for HostMemory {
    fn kind(&self) -> BackendKind {
        BackendKind::Host
    }

    fn granularity(&self) -> usize {
        rustix::param::page_size()
    }

    fn reserve(&self, len: usize) -> Result<Box<dyn Reservation>> {
        self.check_len("reservation", len)?;
        Ok(Box::new(reserve::reserve(&self.registry, len)?))
    }

    fn create_chunk(&self, len: usize) -> Result<Box<dyn Chunk>> {
        self.check_len("chunk", len)?;
        Ok(Box::new(chunk::create(&self.registry, len)?))
    }

    fn import_chunk(&self, fd: OwnedFd, len: usize) -> Result<Box<dyn Chunk>> {
        self.check_len("imported chunk", len)?;
        Ok(Box::new(chunk::import(&self.registry, fd, len)?))
    }

    unsafe fn copy(&self, dst: usize, src: usize, len: usize) -> Result<()> {
        // SAFETY: same contract as this fn.
        unsafe { access::copy(dst, src, len) };
        Ok(())
    }

    unsafe fn zero(&self, addr: usize, len: usize) -> Result<()> {
        // SAFETY: same contract as this fn.
        unsafe { access::zero(addr, len) };
        Ok(())
    }

    unsafe fn atomic(&self, addr: usize, width: Width, op: AmoOp) -> Result<u64> {
        // SAFETY: same contract as this fn.
        unsafe { access::atomic(addr, width, op) }
    }

    unsafe fn load_acquire(&self, addr: usize, width: Width) -> Result<u64> {
        // SAFETY: same contract as this fn.
        unsafe { access::load_acquire(addr, width) }
    }

    fn quiet(&self) -> Result<()> {
        // Host stores are done when the store instruction retires; the fence orders them
        // before anything this thread does next, as seen from every other process.
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
