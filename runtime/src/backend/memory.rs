//! The memory half of a backend: reservations, chunks and mappings that the symmetric heap is
//! made of, and the copies and atomics the host API does on them.
//!
//! Concepts:
//! - a **reservation** is a range of virtual addresses with nothing behind it; the heap reserves
//!   one per process, holding a slot per node-local PE;
//! - a **chunk** is physical memory, created by one PE and exported as a file descriptor that
//!   node-local peers import (the fd travels over a Unix socket);
//! - a **mapping** puts a chunk (own or imported) at an address inside the reservation.
//!
//! Each handle is an RAII value; dropping a mapping unmaps, dropping a chunk releases the memory
//! once no mapping uses it, dropping the reservation releases the addresses. The heap drops
//! mappings first, then chunks, then the reservation.
//!
//! # Safety
//! The memory-access methods take raw addresses, because the heap hands out addresses that
//! peers write behind Rust's back; they are `unsafe fn` and callers check ranges against the
//! heap first.
#![allow(unsafe_code)]

use super::BackendKind;
use crate::error::Result;
use std::os::fd::OwnedFd;

/// A reserved virtual address range. Dropping it releases the addresses.
pub trait Reservation: Send + Sync {
    /// First address.
    fn base(&self) -> usize;
    /// Length in bytes.
    fn len(&self) -> usize;
}

/// Physical memory, own or imported from a peer.
pub trait Chunk: Send + Sync {
    /// Size in bytes.
    fn len(&self) -> usize;
    /// A new file descriptor for this chunk, to send to node-local peers.
    ///
    /// # Errors
    /// When the OS or driver cannot export it.
    fn export_fd(&self) -> Result<OwnedFd>;
    /// Maps the whole chunk at `addr`, which lies inside a reservation of the same backend.
    ///
    /// # Errors
    /// When the OS or driver refuses the mapping.
    fn map_at(&self, addr: usize) -> Result<Box<dyn Mapping>>;
}

/// A chunk mapped at an address. Dropping it unmaps (the reservation keeps the addresses).
pub trait Mapping: Send + Sync {
    /// Mapped address.
    fn addr(&self) -> usize;
    /// Mapped length.
    fn len(&self) -> usize;
}

/// A source of symmetric memory.
pub trait MemoryBackend: Send + Sync {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;
    /// Chunk sizes and mapping addresses are multiples of this.
    fn granularity(&self) -> usize;
    /// Reserves `len` bytes of addresses (a multiple of the granularity).
    ///
    /// # Errors
    /// When the address space cannot be reserved.
    fn reserve(&self, len: usize) -> Result<Box<dyn Reservation>>;
    /// Creates a chunk of `len` bytes (a multiple of the granularity).
    ///
    /// # Errors
    /// When memory cannot be had.
    fn create_chunk(&self, len: usize) -> Result<Box<dyn Chunk>>;
    /// Imports a chunk a node-local peer exported.
    ///
    /// # Errors
    /// When the descriptor is not a chunk of this backend.
    fn import_chunk(&self, fd: OwnedFd, len: usize) -> Result<Box<dyn Chunk>>;
    /// Takes `len` bytes of memory the program allocated and mapped itself at `addr` as a chunk
    /// (`nvshmemx_buffer_register_symmetric`): the cuda backend adopts a `cuMemCreate`
    /// allocation; the default refuses.
    ///
    /// # Errors
    /// [`Error::Unsupported`](crate::error::Error::Unsupported) on a backend without it; the
    /// backend's reasons for memory it cannot adopt.
    fn adopt_chunk(&self, addr: usize, len: usize) -> Result<Box<dyn Chunk>> {
        Err(crate::error::Error::Unsupported(format!(
            "cannot register the program's {len} bytes at {addr:#x} as symmetric memory on the {} backend: \
             only the cuda backend adopts a buffer, one the program made with cuMemCreate and mapped with \
             cuMemMap; allocate symmetric memory with malloc / nvshmem_malloc instead",
            self.kind().name()
        )))
    }
    /// Copies `len` bytes between any two addresses this process can reach (heap or not).
    ///
    /// # Safety
    /// Both ranges must be valid for `len` bytes and must not overlap.
    unsafe fn copy(&self, dst: usize, src: usize, len: usize) -> Result<()>;
    /// Writes `len` zero bytes at `addr` (for `calloc`). The default copies from a static zero
    /// buffer with [`MemoryBackend::copy`]; backends with a memset override it.
    ///
    /// # Safety
    /// The range must be valid for writes of `len` bytes.
    unsafe fn zero(&self, addr: usize, len: usize) -> Result<()> {
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(ZEROS.len());
            // SAFETY: the destination part is inside the caller's valid range; the source is
            // a static buffer of at least `n` bytes, so the two cannot overlap.
            unsafe { self.copy(addr + done, ZEROS.as_ptr() as usize, n)? };
            done += n;
        }
        Ok(())
    }
    /// Whether `addr` is memory this backend's own copies check (GPU memory on the cuda backend,
    /// whose driver refuses a bad device address with an error): such an address needs no other
    /// check before [`MemoryBackend::copy`]. Host memory never is.
    ///
    /// # Errors
    /// When the backend cannot tell.
    fn checks_itself(&self, addr: usize) -> Result<bool> {
        let _ = addr;
        Ok(false)
    }
    /// Atomically applies `op` to the `width`-byte word at `addr` and returns the old value.
    ///
    /// Ordering is sequentially consistent at system scope, so host atomics and device
    /// atomics on the same word agree.
    ///
    /// # Safety
    /// `addr` must be a mapped, `width`-aligned heap address.
    unsafe fn atomic(&self, addr: usize, width: Width, op: AmoOp) -> Result<u64>;
    /// Reads the word at `addr` with acquire ordering.
    ///
    /// # Safety
    /// As [`MemoryBackend::atomic`].
    unsafe fn load_acquire(&self, addr: usize, width: Width) -> Result<u64>;
    /// Makes every earlier write of this process through this backend visible to all PEs
    /// before any later one (`fence.sc.sys` / `SeqCst` fence).
    ///
    /// # Errors
    /// When the backend's queue reports an earlier failure.
    fn quiet(&self) -> Result<()>;
}

/// Width of an atomic word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// 4 bytes.
    W32,
    /// 8 bytes.
    W64,
}

impl Width {
    /// Bytes.
    pub fn bytes(self) -> usize {
        match self {
            Width::W32 => 4,
            Width::W64 => 8,
        }
    }
}

/// An atomic memory operation. Operands are the raw bits of the word: every operation here
/// gives the same bits for signed and unsigned words in two's complement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmoOp {
    /// Read.
    Fetch,
    /// Store (returns the old value).
    Set(u64),
    /// Exchange.
    Swap(u64),
    /// Store `value` if the word equals `cond`; returns the old value either way.
    CompareSwap {
        /// Expected old value.
        cond: u64,
        /// New value.
        value: u64,
    },
    /// Wrapping add.
    Add(u64),
    /// Bitwise and.
    And(u64),
    /// Bitwise or.
    Or(u64),
    /// Bitwise xor.
    Xor(u64),
}
