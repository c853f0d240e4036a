//! Address ranges of the host backend, reserved with `mmap` and released with `munmap`.
//!
//! # Safety
//! Reserving and releasing address ranges with `mmap`/`munmap`. A range is unmapped only when
//! no [`super::chunk::HostMapping`] inside it is left (mappings hold an `Arc` to it), so a
//! mapping's own drop never writes over addresses the range no longer owns.
#![allow(unsafe_code)]

use crate::backend::Reservation;
use crate::error::{Error, Result};
use rustix::mm::{MapFlags, ProtFlags};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

/// Addresses reserved with `PROT_NONE` and the parts of them that chunks are mapped at.
///
/// Owns the virtual range `[base, base+len)`; dropping the last `Arc` unmaps all of it.
#[derive(Debug)]
pub(crate) struct ReservedRange {
    base: usize,
    len: usize,
    /// start -> length of each live chunk mapping inside the range.
    mapped: Mutex<BTreeMap<usize, usize>>,
}

impl ReservedRange {
    /// Whether `[addr, addr+len)` lies inside the range.
    pub(crate) fn covers(&self, addr: usize, len: usize) -> bool {
        addr >= self.base && addr.checked_add(len).is_some_and(|end| end <= self.base + self.len)
    }

    /// Records a mapping of `[addr, addr+len)`; refuses one that overlaps a live mapping
    /// (MAP_FIXED would silently replace it and the older mapping's drop would later punch a
    /// hole in the newer one).
    pub(crate) fn claim(&self, addr: usize, len: usize) -> Result<()> {
        let mut m = self.mapped.lock().unwrap_or_else(|p| p.into_inner());
        let before = m.range(..addr + len).next_back();
        if let Some((&s, &l)) = before {
            if s + l > addr {
                return Err(Error::InvalidArgument(format!(
                    "cannot map {len} bytes at {addr:#x}: {l} bytes are already mapped at {s:#x}"
                )));
            }
        }
        m.insert(addr, len);
        Ok(())
    }

    /// Forgets the mapping at `addr`.
    pub(crate) fn release(&self, addr: usize) {
        self.mapped.lock().unwrap_or_else(|p| p.into_inner()).remove(&addr);
    }
}

impl Drop for ReservedRange {
    fn drop(&mut self) {
        // SAFETY: `munmap(2)`: "The munmap() system call deletes the mappings for the specified
        // address range". This range was returned by mmap in `reserve`, and no mapping that
        // could still be used is inside it: each HostMapping holds an Arc to this value.
        // https://man7.org/linux/man-pages/man2/munmap.2.html
        if let Err(e) = unsafe { rustix::mm::munmap(self.base as *mut _, self.len) } {
            tracing::error!(base = self.base, len = self.len, "munmap of the heap reservation failed: {e}");
        }
    }
}

/// The live reservations of one backend, so `map_at` can check that its address is inside one.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    ranges: Mutex<Vec<Weak<ReservedRange>>>,
}

impl Registry {
    /// The live range that holds `[addr, addr+len)`.
    pub(crate) fn find(&self, addr: usize, len: usize) -> Option<Arc<ReservedRange>> {
        let mut ranges = self.ranges.lock().unwrap_or_else(|p| p.into_inner());
        ranges.retain(|w| w.strong_count() > 0);
        ranges.iter().filter_map(Weak::upgrade).find(|r| r.covers(addr, len))
    }

    fn add(&self, r: &Arc<ReservedRange>) {
        self.ranges.lock().unwrap_or_else(|p| p.into_inner()).push(Arc::downgrade(r));
    }
}

/// A reservation of the host backend: `PROT_NONE`, `MAP_NORESERVE` anonymous memory, so it
/// costs neither RAM nor swap. Owns (a share of) the range; see [`ReservedRange`].
#[derive(Debug)]
pub struct HostReservation {
    range: Arc<ReservedRange>,
}

impl Reservation for HostReservation {
    fn base(&self) -> usize {
        self.range.base
    }
    fn len(&self) -> usize {
        self.range.len
    }
}

/// Reserves `len` bytes anywhere in the address space.
pub(crate) fn reserve(registry: &Registry, len: usize) -> Result<HostReservation> {
    if len == 0 {
        return Err(Error::InvalidArgument("cannot reserve 0 bytes".into()));
    }
    // SAFETY: `mmap(2)` with a null address lets the kernel pick unused addresses, so no
    // existing mapping is touched; PROT_NONE memory cannot be read or written until a chunk is
    // mapped over it. https://man7.org/linux/man-pages/man2/mmap.2.html
    let ptr = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::NORESERVE,
        )
    }
    .map_err(|e| Error::os(format!("mmap reserving {len} bytes of addresses (PROT_NONE)"), e))?;
    let range = Arc::new(ReservedRange { base: ptr as usize, len, mapped: Mutex::new(BTreeMap::new()) });
    registry.add(&range);
    tracing::debug!(base = range.base, len, "reserved host address range");
    Ok(HostReservation { range })
}

/// Puts `PROT_NONE` reserved memory back over `[addr, addr+len)`, which lies in a live range.
pub(crate) fn re_reserve(addr: usize, len: usize) -> std::io::Result<()> {
    // SAFETY: `mmap(2)` MAP_FIXED "any existing mapping of the overlapped region is discarded".
    // The caller owns `[addr, addr+len)` (a chunk mapping being dropped, inside a range it
    // keeps alive), so only that mapping is replaced. https://man7.org/linux/man-pages/man2/mmap.2.html
    unsafe {
        rustix::mm::mmap_anonymous(
            addr as *mut _,
            len,
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::FIXED | MapFlags::NORESERVE,
        )
    }
    .map(|_| ())
    .map_err(Into::into)
}
