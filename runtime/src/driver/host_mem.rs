//! Page-locked host memory (`cuMemAllocHost_v2`) that host and kernels both read and write.
//!
//! # Safety
//! Page-locked host memory from `cuMemAllocHost_v2`. The pointer is valid for reads and writes
//! by the host and, through unified addressing, by kernels of every context, until
//! `cuMemFreeHost`; [`PinnedHost`] frees it exactly once, in `Drop`.
#![allow(unsafe_code)]

use super::context::PrimaryContext;
use super::{check, sys};
use crate::error::Result;
use std::sync::Arc;

/// `len` bytes of page-locked host memory that kernels can write directly.
///
/// Owns the allocation; dropping it frees it (after binding the context it was made in, which
/// the `Arc` keeps alive until then). Users make sure no kernel still writes to it.
#[derive(Debug)]
pub struct PinnedHost {
    ptr: *mut std::ffi::c_void,
    len: usize,
    ctx: Arc<PrimaryContext>,
}

// SAFETY: the pointer is plain host memory owned by this value; moving it to another thread
// moves the ownership. Reads and writes go through `&self` / `&mut self` methods.
unsafe impl Send for PinnedHost {}
// SAFETY: shared access reads the address (`addr`), does volatile reads or atomic stores.
unsafe impl Sync for PinnedHost {}

impl PinnedHost {
    /// Allocates `len` bytes (`cuMemAllocHost_v2`) in `ctx`.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # References
    /// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html> (`cuMemAllocHost`)
    pub fn new(ctx: &Arc<PrimaryContext>, len: usize) -> Result<PinnedHost> {
        ctx.bind()?;
        let mut ptr: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: "Allocates bytesize bytes of host memory that is page-locked and accessible
        // to the device"; `ptr` is a live local.
        check("cuMemAllocHost_v2", unsafe { sys::cuMemAllocHost_v2(&mut ptr, len) })?;
        Ok(PinnedHost { ptr, len, ctx: ctx.clone() })
    }

    /// The address, for kernels (unified addressing: the same value on host and device).
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes `value` at byte offset `off` (8-byte aligned, inside the buffer).
    ///
    /// # Panics
    /// When `off` is out of range or unaligned (a bug in the caller, not a runtime condition).
    pub fn write_u64(&mut self, off: usize, value: u64) {
        assert!(off % 8 == 0 && off + 8 <= self.len, "PinnedHost write at {off} of {}", self.len);
        // SAFETY: in bounds and aligned (checked above; cuMemAllocHost memory is page-aligned);
        // volatile because a kernel writes the same bytes behind the compiler's back.
        unsafe { std::ptr::write_volatile(self.ptr.cast::<u8>().add(off).cast::<u64>(), value) }
    }

    /// Reads the value at byte offset `off` (8-byte aligned, inside the buffer).
    ///
    /// # Panics
    /// As [`PinnedHost::write_u64`].
    pub fn read_u64(&self, off: usize) -> u64 {
        assert!(off % 8 == 0 && off + 8 <= self.len, "PinnedHost read at {off} of {}", self.len);
        // SAFETY: as in `write_u64`.
        unsafe { std::ptr::read_volatile(self.ptr.cast::<u8>().add(off).cast::<u64>()) }
    }
}

impl PinnedHost {
    /// Stores `value` at byte offset `off` (8-byte aligned, inside the buffer) through a shared
    /// reference, as one atomic store with release ordering: for a word that other threads of
    /// this process publish into while kernels poll it.
    ///
    /// # Panics
    /// As [`PinnedHost::write_u64`].
    pub fn store_u64(&self, off: usize, value: u64) {
        assert!(off % 8 == 0 && off + 8 <= self.len, "PinnedHost store at {off} of {}", self.len);
        // SAFETY: in bounds and aligned (checked above; cuMemAllocHost memory is page-aligned),
        // live while `self` is; an AtomicU64 has the layout of a u64, and every host access of
        // such a word goes through this atomic or the volatile reads.
        let word = unsafe { &*self.ptr.cast::<u8>().add(off).cast::<std::sync::atomic::AtomicU64>() };
        word.store(value, std::sync::atomic::Ordering::Release);
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        let freed = self.ctx.bind().and_then(|()| {
            // SAFETY: "Frees the memory space pointed to by p, which must have been returned
            // by a previous call to cuMemAllocHost"; it was, and it is freed only here.
            check("cuMemFreeHost", unsafe { sys::cuMemFreeHost(self.ptr) })
        });
        if let Err(e) = freed {
            super::deferred::record("page-locked host memory", e);
        }
    }
}
