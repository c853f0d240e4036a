//! TMA descriptors (`CUtensorMap`) of a tiled view, encoded by the driver on the host.
//!
//! A GEMM kernel of `rshmem.ops` takes its operands as TMA descriptors: 128 bytes that hold the
//! tensor's base address with its shape, strides and tile. A call with a new input or output
//! tensor (every layer of a model step has its own) needs new descriptors; [`TiledMap`] keeps
//! everything but the base address and encodes one with a single driver call, as Triton's
//! `fill_tma_descriptor` does for its launcher (the same arguments, so the same bytes).
#![allow(unsafe_code)]

use super::{check, newer};
use crate::error::{Error, Result};
use std::ffi::c_void;

/// The bytes of one descriptor, at the alignment the driver wants (64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct TensorMapBytes(pub [u8; 128]);

/// The most dimensions a TMA descriptor has.
const MAX_RANK: usize = 5;
/// `CU_TENSOR_MAP_INTERLEAVE_NONE`.
const INTERLEAVE_NONE: u32 = 0;
/// `CU_TENSOR_MAP_L2_PROMOTION_L2_128B`, Triton's choice.
const L2_PROMOTION_128B: u32 = 2;
/// `CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE` / `..._NAN_REQUEST_ZERO_FMA`.
const FILL_NONE: u32 = 0;
const FILL_NAN: u32 = 1;

/// Everything of a tiled descriptor but its base address, in the driver's order (innermost
/// dimension first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TiledMap {
    data_type: u32,
    rank: u32,
    dims: [u64; MAX_RANK],
    /// Byte strides of dimensions 1.. (the innermost is contiguous).
    strides: [u64; MAX_RANK],
    tile: [u32; MAX_RANK],
    swizzle: u32,
    fill: u32,
}

impl TiledMap {
    /// A view of `shape` (elements, outermost first, as torch and Triton list it) with element
    /// `strides` (the last one 1) of `elem_size`-byte elements of driver data type `data_type`
    /// (`CUtensorMapDataType`), read in tiles of `tile` (outermost first), with driver swizzle
    /// mode `swizzle`; `nan_fill` fills out-of-bounds reads with NaN (Triton's `padding="nan"`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the lists' lengths differ, the rank is not 1 to 5, or the
    /// innermost stride is not 1. The driver checks the rest when it encodes.
    pub fn new(
        data_type: u32,
        elem_size: u64,
        shape: &[u64],
        strides: &[u64],
        tile: &[u32],
        swizzle: u32,
        nan_fill: bool,
    ) -> Result<TiledMap> {
        let rank = shape.len();
        if !(1..=MAX_RANK).contains(&rank) || strides.len() != rank || tile.len() != rank {
            return Err(Error::InvalidArgument(format!(
                "a TMA descriptor has 1 to {MAX_RANK} dimensions and a stride and tile size for each: shape {shape:?}, strides {strides:?}, tile {tile:?}"
            )));
        }
        if strides[rank - 1] != 1 {
            return Err(Error::InvalidArgument(format!("a TMA descriptor's innermost stride is 1, not {}", strides[rank - 1])));
        }
        let mut map = TiledMap {
            data_type,
            rank: rank as u32,
            dims: [0; MAX_RANK],
            strides: [0; MAX_RANK],
            tile: [0; MAX_RANK],
            swizzle,
            fill: if nan_fill { FILL_NAN } else { FILL_NONE },
        };
        for i in 0..rank {
            map.dims[i] = shape[rank - 1 - i];
            map.tile[i] = tile[rank - 1 - i];
        }
        for i in 1..rank {
            map.strides[i - 1] = strides[rank - 1 - i].saturating_mul(elem_size);
        }
        Ok(map)
    }

    /// Encodes the descriptor of this view at `base` into `out`.
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a driver without `cuTensorMapEncodeTiled`; [`Error::Driver`]
    /// when the driver refuses the view (an unaligned base or stride, a tile too large, ...).
    pub fn encode(&self, base: u64, out: &mut TensorMapBytes) -> Result<()> {
        // SAFETY: `out` is 128 writable bytes at 64-byte alignment.
        unsafe { self.encode_at(base, out.0.as_mut_ptr().cast()) }
    }

    /// [`TiledMap::encode`] into raw storage.
    ///
    /// # Safety
    /// `out` must point at 128 writable bytes aligned to 64.
    pub(super) unsafe fn encode_at(&self, base: u64, out: *mut c_void) -> Result<()> {
        let f = newer::encode_tiled()
            .ok_or_else(|| Error::Unsupported("this CUDA driver has no cuTensorMapEncodeTiled (CUDA 12.0 and later)".into()))?;
        let ones = [1u32; MAX_RANK];
        // SAFETY: the documented signature; the arrays hold `rank` valid entries (strides
        // `rank - 1`); the driver only records `base`, it does not dereference it; `out` is the
        // caller's contract.
        let r = unsafe {
            f(
                out,
                self.data_type,
                self.rank,
                base as usize as *mut c_void,
                self.dims.as_ptr(),
                self.strides.as_ptr(),
                self.tile.as_ptr(),
                ones.as_ptr(),
                INTERLEAVE_NONE,
                self.swizzle,
                L2_PROMOTION_128B,
                self.fill,
            )
        };
        check("cuTensorMapEncodeTiled", r)
    }
}

#[cfg(test)]
mod tests {
    use super::TiledMap;

    #[test]
    fn views_are_kept_innermost_first_with_byte_strides() {
        // A [2, 64, 256] bf16 buffer read in [1, 128, 64] tiles, as the AllGather buffer is.
        let m = TiledMap::new(10, 2, &[2, 64, 256], &[64 * 256, 256, 1], &[1, 128, 64], 3, false).unwrap();
        assert_eq!((m.rank, &m.dims[..3], &m.tile[..3]), (3, &[256, 64, 2][..], &[64, 128, 1][..]));
        assert_eq!(&m.strides[..2], &[512, 64 * 256 * 2]);
        let e = TiledMap::new(10, 2, &[64, 256], &[1, 64], &[128, 64], 3, false).unwrap_err().to_string();
        assert!(e.contains("innermost stride is 1, not 64"), "{e}");
        let e = TiledMap::new(10, 2, &[64, 256], &[256, 1], &[128], 3, false).unwrap_err().to_string();
        assert!(e.contains("1 to 5 dimensions"), "{e}");
    }
}
