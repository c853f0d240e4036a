//! Physical GPU memory (`cuMemCreate`, or imported from a peer's file descriptor) and its mappings
//! into the heap's reservations.
//!
//! # Safety
//! Physical GPU memory (`cuMemCreate`, or imported from a peer's file descriptor) and its
//! mappings into our reservations. `map_at` maps only inside a live reservation of the same
//! backend and never over a live mapping; a [`Mapping`] unmaps exactly what it mapped, after
//! the context has finished all queued work.
#![allow(unsafe_code)]

use super::reserve::{Registry, VaRange};
use crate::backend::Chunk;
use crate::driver::context::{self, Device, PrimaryContext};
use crate::driver::annotate;
use crate::driver::vmm::{self, AllocHandle};
use crate::error::{Error, Result};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// What every chunk of one backend shares: the context, where reservations are, who gets
/// access to a mapping, and the granularity.
#[derive(Debug)]
pub(crate) struct ChunkEnv {
    pub(crate) ctx: Arc<PrimaryContext>,
    pub(crate) registry: Arc<Registry>,
    /// This PE's device first, then every node-local device that reaches it by load/store
    /// and is visible in this process.
    pub(crate) access: Vec<Device>,
    pub(crate) granularity: usize,
}

/// Physical memory: `len` bytes of one GPU, created here or imported from a node-local peer.
///
/// Owns one allocation handle. Dropping it releases the handle (`cuMemRelease`); the memory
/// itself lives on until every mapping of it and every handle to it, in every process, is gone,
/// so dropping a chunk while its mappings stay is fine.
#[derive(Debug)]
pub struct PhysChunk {
    handle: AllocHandle,
    len: usize,
    imported: bool,
    env: Arc<ChunkEnv>,
}

/// Creates `len` bytes (a positive multiple of the granularity) on this PE's device.
pub(crate) fn create(env: &Arc<ChunkEnv>, len: usize) -> Result<PhysChunk> {
    check_len(env, len, "create")?;
    env.ctx.bind()?;
    let handle = vmm::create(env.ctx.device(), len).map_err(|e| {
        annotate(
            e,
            format_args!(
                "creating a {len}-byte symmetric-heap chunk on GPU {}; if the GPU is full, free \
                 memory or allocate less",
                env.ctx.device().ordinal()
            ),
        )
    })?;
    tracing::debug!(len, "created a device memory chunk");
    Ok(PhysChunk { handle, len, imported: false, env: env.clone() })
}

/// Takes a descriptor a peer exported with [`Chunk::export_fd`]. The descriptor is closed
/// after the import (the handle keeps the memory alive).
pub(crate) fn import(env: &Arc<ChunkEnv>, fd: OwnedFd, len: usize) -> Result<PhysChunk> {
    check_len(env, len, "import")?;
    env.ctx.bind()?;
    let handle = vmm::import_fd(fd.as_fd())?;
    drop(fd);
    Ok(PhysChunk { handle, len, imported: true, env: env.clone() })
}

/// Takes the program's own allocation mapped at `addr` (`cuMemCreate` + `cuMemMap`, the buffer
/// `nvshmemx_buffer_register_symmetric` is given) as a chunk: a handle of its own
/// (`cuMemRetainAllocationHandle`), so the memory stays alive while the heap maps it, whatever
/// the program does with its mapping.
pub(crate) fn adopt(env: &Arc<ChunkEnv>, addr: usize, len: usize) -> Result<PhysChunk> {
    check_len(env, len, "register")?;
    env.ctx.bind()?;
    let handle = vmm::retain(addr).map_err(|e| {
        annotate(
            e,
            format_args!(
                "registering {len} bytes at {addr:#x}: only memory the program mapped with cuMemCreate and \
                 cuMemMap can be made symmetric (not cudaMalloc or PyTorch's caching allocator)"
            ),
        )
    })?;
    // Owned from here: an early return releases it.
    let chunk = PhysChunk { handle, len, imported: false, env: env.clone() };
    let info = vmm::properties(handle)?;
    let mine = env.ctx.device().raw();
    if info.device != Some(mine) {
        return Err(Error::InvalidArgument(format!(
            "registering {len} bytes at {addr:#x}: the memory is {} and this PE's GPU is device {}; \
             register memory of this PE's own GPU",
            info.device.map_or("not device memory".to_string(), |d| format!("on device {d}")),
            env.ctx.device().ordinal()
        )));
    }
    if !info.exportable_fd {
        return Err(Error::InvalidArgument(format!(
            "registering {len} bytes at {addr:#x}: the allocation was created without \
             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR in CUmemAllocationProp::requestedHandleTypes, \
             so the PEs of this host cannot map it; create it with that handle type"
        )));
    }
    tracing::debug!(addr, len, "adopted a program's device allocation");
    Ok(chunk)
}

fn check_len(env: &ChunkEnv, len: usize, what: &str) -> Result<()> {
    if len == 0 || len % env.granularity != 0 {
        return Err(Error::InvalidArgument(format!(
            "cannot {what} a chunk of {len} bytes: the size must be a positive multiple of the \
             GPU allocation granularity ({} bytes)",
            env.granularity
        )));
    }
    Ok(())
}

impl Chunk for PhysChunk {
    fn len(&self) -> usize {
        self.len
    }

    fn export_fd(&self) -> Result<OwnedFd> {
        self.env.ctx.bind()?;
        Ok(vmm::export_fd(self.handle)?.0)
    }

    fn map_at(&self, addr: usize) -> Result<Box<dyn crate::backend::Mapping>> {
        let range = self.env.registry.find(addr, self.len).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "cannot map a {}-byte chunk at {addr:#x}: not inside a live reservation of the \
                 cuda backend",
                self.len
            ))
        })?;
        if addr % self.env.granularity != 0 {
            return Err(Error::InvalidArgument(format!(
                "chunk address {addr:#x} is not a multiple of the GPU allocation granularity ({})",
                self.env.granularity
            )));
        }
        range.claim(addr, self.len)?;
        match map_and_grant(&self.env, addr, self.len, self.handle) {
            Ok(()) => Ok(Box::new(Mapping { addr, len: self.len, range, ctx: self.env.ctx.clone() })),
            Err(e) => {
                range.release(addr);
                Err(e)
            }
        }
    }
}

/// Maps `handle` at `addr` and grants read/write access to every device of `env.access`;
/// undoes the mapping when the grant fails.
fn map_and_grant(env: &ChunkEnv, addr: usize, len: usize, handle: AllocHandle) -> Result<()> {
    env.ctx.bind()?;
    // SAFETY: `map_at` checked that `[addr, addr+len)` lies in a live reservation (the Arc it
    // holds keeps it live) and claimed it, so it is unmapped; the chunk is exactly `len`
    // bytes and its handle is live (we hold `&self`).
    unsafe { vmm::map(addr, len, handle) }.map_err(|e| {
        annotate(e, format_args!("mapping a {len}-byte chunk at {addr:#x} (an imported chunk smaller than that is refused)"))
    })?;
    if let Err(e) = vmm::set_access(addr, len, &env.access) {
        // SAFETY: the range was mapped just above and nothing has used it yet (no access).
        if let Err(undo) = unsafe { vmm::unmap(addr, len) } {
            crate::driver::deferred::record("a chunk mapping whose access grant failed", undo);
        }
        let devices: Vec<usize> = env.access.iter().map(|d| d.ordinal()).collect();
        return Err(annotate(e, format_args!("granting devices {devices:?} access to {len} bytes at {addr:#x}")));
    }
    Ok(())
}

impl Drop for PhysChunk {
    fn drop(&mut self) {
        let released = self.env.ctx.bind().and_then(|()| {
            // SAFETY: the handle came from cuMemCreate or cuMemImportFromShareableHandle, is
            // released once, here, and is not used afterwards. Mappings made from it stay
            // valid: the driver keeps the memory until they are unmapped.
            unsafe { vmm::release(self.handle) }
        });
        if let Err(e) = released {
            let what = if self.imported { "an imported heap chunk" } else { "a heap chunk" };
            crate::driver::deferred::record(what, e);
        }
    }
}

/// A chunk mapped read/write at `addr` inside a [`VaRange`].
///
/// Owns the mapping and an `Arc` of the range. Dropping it waits for the context's queued work
/// (`cuCtxSynchronize`: a kernel may still use the addresses), unmaps (the addresses stay
/// reserved), then lets go of the range, which is freed after its last mapping.
#[derive(Debug)]
pub struct Mapping {
    addr: usize,
    len: usize,
    range: Arc<VaRange>,
    ctx: Arc<PrimaryContext>,
}

impl crate::backend::Mapping for Mapping {
    fn addr(&self) -> usize {
        self.addr
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let unmapped = context::synchronize(&self.ctx).and_then(|()| {
            // SAFETY: `[addr, addr+len)` is exactly what `map_at` mapped, inside a range this
            // value keeps alive; the context has no queued work left that could use it.
            unsafe { vmm::unmap(self.addr, self.len) }
        });
        match unmapped {
            Ok(()) => self.range.release(self.addr),
            // Keep the claim: the addresses are still mapped, and mapping over them would fail.
            Err(e) => crate::driver::deferred::record("a heap chunk mapping", e),
        }
    }
}
