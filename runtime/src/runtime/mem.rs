//! Checked access to symmetric memory: every heap address is translated (and so range-checked)
//! by the heap before the backend touches it, so these helpers are safe to call.
//!
//! A peer's copy is either mapped in this process ([`Place::Mapped`]: node-local peers) or
//! reached through the network transport ([`Place::Net`]: PEs on other hosts); each helper
//! takes the matching path.
//!
//! # Safety
//! `SymmetricHeap::translate(addr, len, pe)` returns an address in this process at which `len`
//! bytes of PE `pe`'s copy of `addr` are mapped, or an error; the mapping lives as long as the
//! heap, which outlives `&self`. Words handed to atomics are checked for alignment here, as
//! `MemoryBackend::atomic` requires. The memory may be written by peers concurrently, which is
//! why the backend's accessors take raw addresses and not Rust references.
#![allow(unsafe_code)]

use super::Runtime;
use crate::backend::{AmoOp, Width};
use crate::error::{Error, Result};
use crate::heap::SymAddr;

/// Where PE `pe`'s copy of a symmetric range is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// Mapped in this process at this address.
    Mapped(usize),
    /// On a PE on another host, at this heap offset, through the network transport.
    Net {
        /// The PE.
        pe: usize,
        /// Heap offset.
        offset: usize,
    },
}

impl Place {
    /// The mapped address; an error for a PE reached through the transport (callers that
    /// queue device work route those elsewhere first).
    pub(super) fn mapped(self) -> Result<usize> {
        match self {
            Place::Mapped(at) => Ok(at),
            Place::Net { pe, .. } => Err(Error::Unsupported(format!(
                "PE {pe} is on another host: it has no address in this process"
            ))),
        }
    }
}

impl Runtime {
    /// Where `len` bytes at symmetric `addr` of PE `pe` are: mapped here, or through the
    /// network transport.
    ///
    /// # Errors
    /// [`Error::PeOutOfRange`], [`Error::NotSymmetric`].
    pub(super) fn place(&self, addr: usize, len: usize, pe: usize) -> Result<Place> {
        self.check_pe(pe)?;
        if self.net.as_ref().is_some_and(|n| n.reaches(pe)) {
            if !self.heap.contains(addr, len) {
                let lo = self.heap.my_base();
                return Err(Error::NotSymmetric { addr, len, heap_lo: lo, heap_hi: lo + self.heap.mapped() });
            }
            return Ok(Place::Net { pe, offset: addr - self.heap.my_base() });
        }
        self.heap.translate(addr, len, pe).map(Place::Mapped)
    }

    /// The transport (present whenever a [`Place::Net`] was returned).
    pub(super) fn net(&self) -> Result<&dyn crate::backend::Transport> {
        self.net.as_deref().ok_or_else(|| Error::Unsupported("no network transport is open".into()))
    }

    /// Checks a symmetric range the program passed (`[addr, addr+len)` in this PE's slot): it
    /// must lie inside one live allocation of the program's, never in the runtime's own words.
    /// Also fails once a peer is known dead, so that puts, gets and atomics stop succeeding
    /// silently towards a job that cannot continue.
    ///
    /// # Errors
    /// [`Error::PeerDied`], [`Error::NotSymmetric`], [`Error::NotAllocated`].
    pub(super) fn user_range(&self, addr: SymAddr, len: usize, what: &str) -> Result<()> {
        self.boot.health().check_dead(what)?;
        self.heap.check_user(addr.get(), len)
    }

    /// [`Runtime::user_range`], then where the range is on PE `pe`.
    ///
    /// # Errors
    /// As [`Runtime::user_range`] and [`Runtime::place`].
    pub(super) fn user_remote(&self, addr: SymAddr, len: usize, pe: usize, what: &str) -> Result<Place> {
        self.check_pe(pe)?;
        self.user_range(addr, len, what)?;
        // A PE that left the job (finalize) unmaps its heap: nothing may reach it any more.
        self.boot.health().check_left(pe, what)?;
        self.place(addr.get(), len, pe)
    }

    /// [`Runtime::user_remote`] for a word used atomically, checking its alignment first.
    ///
    /// # Errors
    /// As [`Runtime::user_remote`]; [`Error::InvalidArgument`] for a misaligned word.
    pub(super) fn user_word(&self, addr: SymAddr, width: Width, pe: usize, what: &str) -> Result<Place> {
        let target = self.place_word(addr.get(), width, pe)?;
        self.user_range(addr, width.bytes(), what)?;
        Ok(target)
    }

    /// [`Runtime::amo`] on a word the program passed.
    pub(super) fn user_amo(&self, addr: SymAddr, width: Width, op: AmoOp, pe: usize, what: &str) -> Result<u64> {
        let target = self.user_word(addr, width, pe, what)?;
        self.amo_at(target, width, op)
    }

    /// [`Runtime::user_amo`] without its result: towards a PE on another host it does not
    /// wait for the round trip (`signal_op`).
    pub(super) fn user_amo_post(&self, addr: SymAddr, width: Width, op: AmoOp, pe: usize, what: &str) -> Result<()> {
        let target = self.user_word(addr, width, pe, what)?;
        self.amo_post_at(target, width, op)
    }

    /// [`Runtime::amo`] without its result: towards a PE on another host it does not wait for
    /// the round trip; the operation lands after this PE's earlier ones to that PE, and is
    /// complete there at the next `quiet` or any later operation to it.
    pub(super) fn amo_post(&self, addr: usize, width: Width, op: AmoOp, pe: usize) -> Result<()> {
        let target = self.place_word(addr, width, pe)?;
        self.amo_post_at(target, width, op)
    }

    fn amo_post_at(&self, target: Place, width: Width, op: AmoOp) -> Result<()> {
        match target {
            // SAFETY: `target` is a mapped heap word of `width` bytes, aligned (place_word).
            Place::Mapped(at) => unsafe { self.mem.atomic(at, width, op) }.map(drop),
            Place::Net { pe, offset } => self.net()?.atomic_post(pe, offset, width, op),
        }
    }

    /// Applies `op` to an aligned word, wherever it is.
    fn amo_at(&self, target: Place, width: Width, op: AmoOp) -> Result<u64> {
        match target {
            // SAFETY: `target` is a mapped heap word of `width` bytes, aligned (place_word).
            Place::Mapped(at) => unsafe { self.mem.atomic(at, width, op) },
            Place::Net { pe, offset } => self.net()?.atomic(pe, offset, width, op),
        }
    }

    /// [`Runtime::place`] for a word used atomically, checking its alignment.
    pub(super) fn place_word(&self, addr: usize, width: Width, pe: usize) -> Result<Place> {
        self.check_aligned(addr, width)?;
        self.place(addr, width.bytes(), pe)
    }

    /// Where `len` bytes at symmetric `addr` of PE `pe` are mapped in this process.
    ///
    /// # Errors
    /// [`Error::PeOutOfRange`], [`Error::NotSymmetric`], [`Error::Unsupported`] (not mapped).
    pub(super) fn remote(&self, addr: usize, len: usize, pe: usize) -> Result<usize> {
        self.check_pe(pe)?;
        self.heap.translate(addr, len, pe)
    }

    /// `remote` for a word used atomically, checking its alignment.
    pub(super) fn remote_word(&self, addr: usize, width: Width, pe: usize) -> Result<usize> {
        self.check_aligned(addr, width)?;
        self.remote(addr, width.bytes(), pe)
    }

    fn check_aligned(&self, addr: usize, width: Width) -> Result<()> {
        let w = width.bytes();
        if addr % w != 0 {
            return Err(Error::InvalidArgument(format!(
                "{addr:#x} ({}) is not {w}-byte aligned; atomic and signal words must be aligned \
                 to their size",
                self.heap.describe(addr)
            )));
        }
        Ok(())
    }

    /// Atomically applies `op` to the word at symmetric `addr` of PE `pe`; returns the old bits.
    pub(super) fn amo(&self, addr: usize, width: Width, op: AmoOp, pe: usize) -> Result<u64> {
        let target = self.place_word(addr, width, pe)?;
        self.amo_at(target, width, op)
    }

    /// Reads this PE's word at symmetric `addr` with acquire ordering.
    pub(super) fn load_local(&self, addr: usize, width: Width) -> Result<u64> {
        let target = self.remote_word(addr, width, self.my_pe())?;
        // SAFETY: as in `amo`.
        unsafe { self.mem.load_acquire(target, width) }
    }

    /// Copies `len` bytes from symmetric `src` of PE `src_pe` to symmetric `dst` of PE
    /// `dst_pe`. Copying a range onto itself does nothing; other overlaps are refused.
    pub(super) fn copy_heap(&self, dst: usize, dst_pe: usize, src: usize, src_pe: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        match (self.place(dst, len, dst_pe)?, self.place(src, len, src_pe)?) {
            (Place::Mapped(d), Place::Mapped(s)) => {
                if d == s {
                    return Ok(());
                }
                check_disjoint(d, s, len)?;
                // SAFETY: both ranges are mapped for `len` bytes (translate) and disjoint (checked).
                unsafe { self.mem.copy(d, s, len) }
            }
            // SAFETY: `d` is mapped for `len` bytes; the transport writes only there.
            (Place::Mapped(d), Place::Net { pe, offset }) => unsafe { self.net()?.get(pe, offset, d, len) },
            // SAFETY: `s` is mapped for `len` bytes; the transport reads only there.
            (Place::Net { pe, offset }, Place::Mapped(s)) => unsafe { self.net()?.put(pe, offset, s, len) },
            (Place::Net { .. }, Place::Net { .. }) => Err(Error::Unsupported(format!(
                "copying between PEs {dst_pe} and {src_pe}, both on other hosts than PE {}",
                self.my_pe()
            ))),
        }
    }

    /// Reads `out.len()` bytes at symmetric `src` of PE `pe`.
    pub(super) fn read_heap(&self, src: usize, pe: usize, out: &mut [u8]) -> Result<()> {
        if out.is_empty() {
            return self.check_pe(pe);
        }
        match self.place(src, out.len(), pe)? {
            // SAFETY: `s` is mapped for `out.len()` bytes; `out` is a Rust buffer we own
            // uniquely, so it cannot overlap the heap mapping.
            Place::Mapped(s) => unsafe { self.mem.copy(out.as_mut_ptr() as usize, s, out.len()) },
            // SAFETY: `out` is ours, writable for its length, untouched during the call.
            Place::Net { pe, offset } => unsafe { self.net()?.get(pe, offset, out.as_mut_ptr() as usize, out.len()) },
        }
    }

    /// Writes `data` at symmetric `dst` of PE `pe`.
    pub(super) fn write_heap(&self, dst: usize, pe: usize, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return self.check_pe(pe);
        }
        match self.place(dst, data.len(), pe)? {
            // SAFETY: `d` is mapped for `data.len()` bytes; `data` is a Rust buffer, so it
            // cannot overlap the heap mapping.
            Place::Mapped(d) => unsafe { self.mem.copy(d, data.as_ptr() as usize, data.len()) },
            // SAFETY: `data` is readable for its length during the call.
            Place::Net { pe, offset } => unsafe { self.net()?.put(pe, offset, data.as_ptr() as usize, data.len()) },
        }
    }
}

/// Refuses overlapping ranges, which `MemoryBackend::copy` does not allow.
pub(super) fn check_disjoint(a: usize, b: usize, len: usize) -> Result<()> {
    if a < b.saturating_add(len) && b < a.saturating_add(len) {
        return Err(Error::InvalidArgument(format!(
            "source {b:#x} and destination {a:#x} overlap ({len} bytes); copies need disjoint ranges"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn overlap_detection() {
        use super::check_disjoint;
        assert!(check_disjoint(0x1000, 0x1010, 16).is_ok());
        assert!(check_disjoint(0x1010, 0x1000, 16).is_ok());
        assert!(check_disjoint(0x1000, 0x100f, 16).is_err());
        assert!(check_disjoint(0x100f, 0x1000, 16).is_err());
        let err = check_disjoint(0x2000, 0x2000, 1).unwrap_err().to_string();
        assert!(err.contains("0x2000") && err.contains("overlap"), "{err}");
    }
}
