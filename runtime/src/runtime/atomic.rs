//! Remote atomics on 32- and 64-bit words.

use super::Runtime;
use crate::backend::{AmoOp, Width};
use crate::heap::SymAddr;
use crate::error::Result;

impl Runtime {
    /// Atomically applies `op` to the `width`-byte word at symmetric `addr` on PE `pe` and
    /// returns the word's old bits (zero-extended for 32-bit words). Signed and unsigned words
    /// share these operations: the bits are the same in two's complement. Fetch-less SHMEM forms
    /// (`atomic_add`, `atomic_set`, `atomic_inc`) are this call with the result ignored;
    /// `inc` is `AmoOp::Add(1)`.
    ///
    /// Sequentially consistent at system scope, as NVSHMEM's host-side atomics.
    ///
    /// # Errors
    /// [`crate::Error::PeOutOfRange`], [`crate::Error::NotSymmetric`],
    /// [`crate::Error::InvalidArgument`] for a word not aligned to `width`.
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/amo.html>
    #[doc(alias = "nvshmem_atomic_fetch_add")]
    #[doc(alias = "nvshmem_atomic_compare_swap")]
    pub fn atomic(&self, addr: SymAddr, width: Width, op: AmoOp, pe: usize) -> Result<u64> {
        let old = self.user_amo(addr, width, narrow(op, width), pe, "atomic")?;
        Ok(match width {
            Width::W32 => old & 0xffff_ffff,
            Width::W64 => old,
        })
    }
}

/// Keeps only the low 32 bits of the operands of a 32-bit operation, so that a sign-extended
/// `-1i32 as i64 as u64` and `u32::MAX as u64` mean the same word.
fn narrow(op: AmoOp, width: Width) -> AmoOp {
    if width == Width::W64 {
        return op;
    }
    let m = |v: u64| v & 0xffff_ffff;
    match op {
        AmoOp::Fetch => AmoOp::Fetch,
        AmoOp::Set(v) => AmoOp::Set(m(v)),
        AmoOp::Swap(v) => AmoOp::Swap(m(v)),
        AmoOp::CompareSwap { cond, value } => AmoOp::CompareSwap { cond: m(cond), value: m(value) },
        AmoOp::Add(v) => AmoOp::Add(m(v)),
        AmoOp::And(v) => AmoOp::And(m(v)),
        AmoOp::Or(v) => AmoOp::Or(m(v)),
        AmoOp::Xor(v) => AmoOp::Xor(m(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_masks_32_bit_operands_only() {
        let neg = -1i64 as u64;
        assert_eq!(narrow(AmoOp::Add(neg), Width::W32), AmoOp::Add(0xffff_ffff));
        assert_eq!(narrow(AmoOp::Add(neg), Width::W64), AmoOp::Add(neg));
        assert_eq!(
            narrow(AmoOp::CompareSwap { cond: neg, value: 1 << 40 }, Width::W32),
            AmoOp::CompareSwap { cond: 0xffff_ffff, value: 0 }
        );
        assert_eq!(narrow(AmoOp::Fetch, Width::W32), AmoOp::Fetch);
    }
}
