//! Where each node-local PE's slot lies in the one reservation, and the address arithmetic.
//!
//! The reservation holds `nslots` slots of `stride` bytes; node-local PE with local index `i`
//! owns slot `i`. Every process reserves its own range (at its own base), but the slot order
//! and stride are the same everywhere, so the copy of a symmetric object on `pe` is at
//! `local + (slot(pe) - slot(me)) * stride` in this process: no per-allocation exchange.

use super::allocator::round_up;
use crate::error::{Error, Result};

/// Slot geometry of one process's reservation. Plain data, fixed at heap creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Address of slot 0.
    pub base: usize,
    /// Bytes between slot starts (the bound rounded up to the granularity).
    pub stride: usize,
    /// This PE's slot.
    pub my_slot: usize,
    /// Slot of each PE of the job; `None` for PEs on other hosts.
    pub slot_of: Vec<Option<usize>>,
}

impl Layout {
    /// The slot stride for a bound: `bound` rounded up to `granularity` (a power of two).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero bound or granularity, or on overflow.
    pub fn stride_for(bound: usize, granularity: usize) -> Result<usize> {
        if bound == 0 || !granularity.is_power_of_two() {
            return Err(Error::InvalidArgument(format!(
                "heap bound {bound} with granularity {granularity}: the bound must be positive and \
                 the granularity a power of two"
            )));
        }
        round_up(bound, granularity).ok_or_else(|| {
            Error::InvalidArgument(format!("heap bound {bound} overflows when rounded to {granularity}"))
        })
    }

    /// Bytes to reserve for `nslots` slots of `stride`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when it overflows; the message suggests a smaller bound.
    pub fn reservation_len(stride: usize, nslots: usize) -> Result<usize> {
        stride.checked_mul(nslots.max(1)).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{nslots} heap slots of {stride} bytes overflow the address space; lower RSHMEM_SYMMETRIC_SIZE"
            ))
        })
    }

    /// Number of slots.
    pub fn nslots(&self) -> usize {
        self.slot_of.iter().flatten().count()
    }

    /// Start of `slot`.
    pub fn slot_base(&self, slot: usize) -> usize {
        self.base + slot * self.stride
    }

    /// Start of this PE's slot.
    pub fn my_base(&self) -> usize {
        self.slot_base(self.my_slot)
    }

    /// Start of `pe`'s slot, if `pe` is node-local.
    pub fn pe_base(&self, pe: usize) -> Option<usize> {
        Some(self.slot_base((*self.slot_of.get(pe)?)?))
    }

    /// The address on `pe` of `addr`, which lies in this PE's slot.
    pub fn peer_addr(&self, addr: usize, pe: usize) -> Option<usize> {
        Some(addr - self.my_base() + self.pe_base(pe)?)
    }

    /// `(pe, offset)` when `addr` lies in some node-local PE's slot.
    pub fn locate(&self, addr: usize) -> Option<(usize, usize)> {
        let rel = addr.checked_sub(self.base)?;
        let slot = rel / self.stride;
        let pe = self.slot_of.iter().position(|s| *s == Some(slot))?;
        Some((pe, rel % self.stride))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_peer_addresses() {
        // PEs 0 and 2 on this host, 1 and 3 elsewhere; this process is PE 2 (slot 1).
        let l = Layout { base: 0x10_0000, stride: 0x1000, my_slot: 1, slot_of: vec![Some(0), None, Some(1), None] };
        assert_eq!(l.nslots(), 2);
        assert_eq!(l.my_base(), 0x10_1000);
        assert_eq!(l.peer_addr(0x10_1010, 0), Some(0x10_0010));
        assert_eq!(l.peer_addr(0x10_1010, 2), Some(0x10_1010));
        assert_eq!(l.peer_addr(0x10_1010, 1), None);
        assert_eq!(l.peer_addr(0x10_1010, 9), None);
        assert_eq!(l.locate(0x10_0fff), Some((0, 0xfff)));
        assert_eq!(l.locate(0x10_1001), Some((2, 1)));
        assert_eq!(l.locate(0x10_2000), None);
        assert_eq!(l.locate(0xf_ffff), None);
    }

    #[test]
    fn stride_rounds_and_overflow_is_an_error() {
        assert_eq!(Layout::stride_for(64 << 20, 4096).unwrap(), 64 << 20);
        assert_eq!(Layout::stride_for(5000, 4096).unwrap(), 8192);
        assert_eq!(Layout::stride_for(1, 2 << 20).unwrap(), 2 << 20);
        assert!(Layout::stride_for(0, 4096).is_err());
        assert!(Layout::stride_for(usize::MAX, 4096).is_err());
        assert_eq!(Layout::reservation_len(1 << 37, 8).unwrap(), 1 << 40);
        let err = Layout::reservation_len(usize::MAX / 2, 3).unwrap_err().to_string();
        assert!(err.contains("RSHMEM_SYMMETRIC_SIZE"), "{err}");
    }
}
