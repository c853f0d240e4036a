//! What the driver knows about an address: `cuPointerGetAttribute`.
//!
//! # Safety
//! The one call writes a `u32` into a live local and reads nothing the caller passes but the
//! address value itself.
#![allow(unsafe_code)]

use super::{check, sys};
use crate::error::Result;

/// Whether the driver knows `addr` as GPU memory (device or managed), which its copies check
/// themselves; `false` for memory the driver does not know (ordinary host memory, or nothing).
/// The caller binds a context first.
///
/// # Errors
/// Never for an unknown address (the driver's `CUDA_ERROR_INVALID_VALUE` means "not ours");
/// [`crate::Error::Driver`] for other failures.
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__UNIFIED.html> (`cuPointerGetAttribute`)
pub fn is_gpu_memory(addr: usize) -> Result<bool> {
    let mut kind: u32 = 0;
    // SAFETY: "CU_POINTER_ATTRIBUTE_MEMORY_TYPE: Returns in *data the physical memory type of the
    // memory that ptr addresses" as a CUmemorytype (a 32-bit enum); `kind` is a live u32.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            (&mut kind as *mut u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            addr as sys::CUdeviceptr,
        )
    };
    if r == sys::CUresult::CUDA_ERROR_INVALID_VALUE {
        return Ok(false);
    }
    check("cuPointerGetAttribute", r)?;
    Ok(kind == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 || kind == sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32)
}
