//! memfd chunks of host memory and their mappings into the heap's reservations.
//!
//! # Safety
//! Mapping memfd chunks with `MAP_SHARED | MAP_FIXED` over reserved addresses. `map_at` only
//! maps inside a live reservation of the same backend and never over a live mapping, so it
//! replaces nothing but `PROT_NONE` placeholder pages that this crate owns.
#![allow(unsafe_code)]

use super::reserve::{re_reserve, Registry, ReservedRange};
use crate::backend::{Chunk, Mapping};
use crate::error::{Error, Result};
use rustix::fs::MemfdFlags;
use rustix::mm::{MapFlags, ProtFlags};
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// Host memory: a memfd of `len` bytes, created here or received from a node-local peer.
///
/// Owns the file descriptor. The pages live until the last descriptor and the last mapping in
/// any process are gone, so dropping a chunk while its mappings stay is fine.
#[derive(Debug)]
pub struct HostChunk {
    fd: OwnedFd,
    len: usize,
    registry: Arc<Registry>,
}

/// Creates a memfd of `len` bytes (sparse: pages are allocated on first touch, zero-filled).
pub(crate) fn create(registry: &Arc<Registry>, len: usize) -> Result<HostChunk> {
    if len == 0 {
        return Err(Error::InvalidArgument("cannot create a chunk of 0 bytes".into()));
    }
    let fd = rustix::fs::memfd_create("rshmem-heap", MemfdFlags::CLOEXEC)
        .map_err(|e| Error::os("memfd_create for a symmetric-heap chunk", e))?;
    rustix::fs::ftruncate(&fd, len as u64)
        .map_err(|e| Error::os(format!("ftruncate of a heap memfd to {len} bytes"), e))?;
    Ok(HostChunk { fd, len, registry: registry.clone() })
}

/// Takes a descriptor a peer exported; it must be at least `len` bytes long.
pub(crate) fn import(registry: &Arc<Registry>, fd: OwnedFd, len: usize) -> Result<HostChunk> {
    let st = rustix::fs::fstat(&fd).map_err(|e| Error::os("fstat of an imported heap chunk", e))?;
    let size = usize::try_from(st.st_size).unwrap_or(0);
    if size < len {
        return Err(Error::InvalidArgument(format!(
            "imported heap chunk is {size} bytes, expected at least {len}: the peer sent a \
             descriptor that is not a chunk of this size (mixed rshmem versions or backends?)"
        )));
    }
    Ok(HostChunk { fd, len, registry: registry.clone() })
}

impl Chunk for HostChunk {
    fn len(&self) -> usize {
        self.len
    }

    fn export_fd(&self) -> Result<OwnedFd> {
        self.fd.try_clone().map_err(|e| Error::os("dup of a heap memfd for export", e))
    }

    fn map_at(&self, addr: usize) -> Result<Box<dyn Mapping>> {
        let range = self.registry.find(addr, self.len).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "cannot map a {}-byte chunk at {addr:#x}: not inside a live reservation of this backend",
                self.len
            ))
        })?;
        if addr % rustix::param::page_size() != 0 {
            return Err(Error::InvalidArgument(format!("chunk address {addr:#x} is not page-aligned")));
        }
        range.claim(addr, self.len)?;
        // SAFETY: `mmap(2)` MAP_FIXED "any existing mapping of the overlapped region is
        // discarded": `claim` just checked that `[addr, addr+len)` lies in a reservation we
        // own and holds no live mapping, so only PROT_NONE placeholder pages are replaced.
        // MAP_SHARED makes stores visible to every process mapping the same memfd.
        // https://man7.org/linux/man-pages/man2/mmap.2.html
        let mapped = unsafe {
            rustix::mm::mmap(
                addr as *mut _,
                self.len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                &self.fd,
                0,
            )
        };
        match mapped {
            Ok(p) if p as usize == addr => Ok(Box::new(HostMapping { addr, len: self.len, range })),
            Ok(p) => {
                // Cannot happen with MAP_FIXED; undo rather than trust it.
                let _ = re_reserve(p as usize, self.len);
                range.release(addr);
                Err(Error::InvalidArgument(format!("mmap placed a chunk at {p:?}, not {addr:#x}")))
            }
            Err(e) => {
                range.release(addr);
                Err(Error::os(format!("mmap of a {}-byte heap chunk at {addr:#x}", self.len), e))
            }
        }
    }
}

/// A chunk mapped read/write at `addr`. Owns the mapping; dropping it puts `PROT_NONE`
/// placeholder pages back (the addresses stay reserved), then lets go of the reservation.
#[derive(Debug)]
pub struct HostMapping {
    addr: usize,
    len: usize,
    range: Arc<ReservedRange>,
}

impl Mapping for HostMapping {
    fn addr(&self) -> usize {
        self.addr
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for HostMapping {
    fn drop(&mut self) {
        if let Err(e) = re_reserve(self.addr, self.len) {
            // Drop must not panic; the pages stay mapped, which wastes memory but breaks nothing.
            tracing::error!(addr = self.addr, len = self.len, "unmapping a heap chunk failed: {e}");
        }
        self.range.release(self.addr);
    }
}
