//! Device virtual address ranges from `cuMemAddressReserve`.
//!
//! # Safety
//! Device virtual address ranges from `cuMemAddressReserve`. A range is given back only when no
//! [`super::chunk::Mapping`] inside it is left (each mapping holds an `Arc` to it), because
//! `cuMemAddressFree` on a range with live mappings fails and would leak them.
#![allow(unsafe_code)]

use crate::backend::Reservation;
use crate::driver::context::PrimaryContext;
use crate::driver::vmm;
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

/// Device virtual addresses `[base, base+len)` with nothing behind them until chunks are mapped.
///
/// Owns the reservation and an `Arc` of the context; dropping the last `Arc<VaRange>` (the
/// reservation and every mapping inside hold one) frees the addresses, then lets go of the
/// context. Release order: mappings, then the range, then the context.
#[derive(Debug)]
pub struct VaRange {
    base: usize,
    len: usize,
    ctx: Arc<PrimaryContext>,
    mapped: Claims,
}

impl VaRange {
    /// First address.
    pub fn base(&self) -> usize {
        self.base
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range holds no addresses (never: `reserve` refuses 0 bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `[addr, addr+len)` lies inside the range.
    pub(crate) fn covers(&self, addr: usize, len: usize) -> bool {
        addr >= self.base && addr.checked_add(len).is_some_and(|end| end <= self.base + self.len)
    }

    /// Records a mapping of `[addr, addr+len)` (see [`Claims::claim`]).
    pub(crate) fn claim(&self, addr: usize, len: usize) -> Result<()> {
        self.mapped.claim(addr, len)
    }

    /// Forgets the mapping at `addr`.
    pub(crate) fn release(&self, addr: usize) {
        self.mapped.release(addr)
    }
}

/// The live mappings inside one range: start -> length.
#[derive(Debug, Default)]
struct Claims(Mutex<BTreeMap<usize, usize>>);

impl Claims {
    /// Records `[addr, addr+len)`, refusing one that overlaps a live mapping, so the error
    /// names both ranges instead of being a bare `CUDA_ERROR_INVALID_VALUE` from `cuMemMap`.
    fn claim(&self, addr: usize, len: usize) -> Result<()> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((&s, &l)) = m.range(..addr + len).next_back() {
            if s + l > addr {
                return Err(Error::InvalidArgument(format!(
                    "cannot map {len} bytes at {addr:#x}: {l} bytes are already mapped at {s:#x}"
                )));
            }
        }
        m.insert(addr, len);
        Ok(())
    }

    fn release(&self, addr: usize) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&addr);
    }
}

impl Drop for VaRange {
    fn drop(&mut self) {
        let freed = self.ctx.bind().and_then(|()| {
            // SAFETY: the range came from `vmm::address_reserve` with exactly these bounds, and
            // nothing is mapped in it: every Mapping holds an Arc to this value, so the last
            // one is gone. Nobody uses the addresses after this drop.
            unsafe { vmm::address_free(self.base, self.len) }
        });
        if let Err(e) = freed {
            crate::driver::deferred::record("the heap's device address reservation", e);
        }
    }
}

/// The live ranges of one backend, so `map_at` can check that its address is inside one.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    ranges: Mutex<Vec<Weak<VaRange>>>,
}

impl Registry {
    /// The live range that holds `[addr, addr+len)`.
    pub(crate) fn find(&self, addr: usize, len: usize) -> Option<Arc<VaRange>> {
        let mut ranges = self.ranges.lock().unwrap_or_else(|p| p.into_inner());
        ranges.retain(|w| w.strong_count() > 0);
        ranges.iter().filter_map(Weak::upgrade).find(|r| r.covers(addr, len))
    }

    fn add(&self, r: &Arc<VaRange>) {
        self.ranges.lock().unwrap_or_else(|p| p.into_inner()).push(Arc::downgrade(r));
    }
}

/// A reservation of the cuda backend (see [`VaRange`]).
#[derive(Debug)]
pub struct CudaReservation {
    range: Arc<VaRange>,
}

impl Reservation for CudaReservation {
    fn base(&self) -> usize {
        self.range.base
    }
    fn len(&self) -> usize {
        self.range.len
    }
}

/// Reserves `len` bytes (a multiple of `granularity`) aligned to `granularity`.
pub(crate) fn reserve(
    ctx: &Arc<PrimaryContext>,
    registry: &Registry,
    len: usize,
    granularity: usize,
) -> Result<CudaReservation> {
    if len == 0 || len % granularity != 0 {
        return Err(Error::InvalidArgument(format!(
            "cannot reserve {len} bytes of device addresses: the size must be a positive \
             multiple of the allocation granularity ({granularity} bytes)"
        )));
    }
    ctx.bind()?;
    let base = vmm::address_reserve(len, granularity)?;
    let range = Arc::new(VaRange { base, len, ctx: ctx.clone(), mapped: Claims::default() });
    registry.add(&range);
    tracing::debug!(base, len, "reserved device address range");
    Ok(CudaReservation { range })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_claims_are_refused_and_released_ones_reusable() {
        let c = Claims::default();
        c.claim(0x1000, 0x1000).unwrap();
        c.claim(0x3000, 0x1000).unwrap();
        // Touching neighbours are fine, overlaps are not.
        c.claim(0x2000, 0x1000).unwrap();
        let err = c.claim(0x2800, 0x400).unwrap_err().to_string();
        assert!(err.contains("at 0x2800") && err.contains("mapped at 0x2000"), "{err}");
        assert!(c.claim(0x2800, 0x1000).is_err());
        assert!(c.claim(0x0800, 0x1000).is_err());
        c.release(0x2000);
        c.claim(0x2000, 0x1000).unwrap();
    }
}
