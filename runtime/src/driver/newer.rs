//! Driver calls newer than the API cudarc binds (CUDA 11.7), looked up by name in the driver
//! library once. Each is `None` on a driver that lacks it; the callers turn that into
//! [`crate::error::Error::Unsupported`].
#![allow(unsafe_code)]

use super::sys;
use std::ffi::c_void;
use std::sync::OnceLock;

/// `cuFuncGetParamInfo` (CUDA 12.4).
pub(super) type ParamInfoFn = unsafe extern "C" fn(sys::CUfunction, usize, *mut usize, *mut usize) -> sys::CUresult;

/// `cuTensorMapEncodeTiled` (CUDA 12.0). The enums (data type, interleave, swizzle, L2
/// promotion, out-of-bounds fill) are C enums, passed as `u32`.
pub(super) type EncodeTiledFn = unsafe extern "C" fn(
    *mut c_void,
    u32,
    u32,
    *mut c_void,
    *const u64,
    *const u64,
    *const u32,
    *const u32,
    u32,
    u32,
    u32,
    u32,
) -> sys::CUresult;

struct Symbols {
    _lib: libloading::Library,
    param_info: Option<ParamInfoFn>,
    encode_tiled: Option<EncodeTiledFn>,
}

fn symbols() -> Option<&'static Symbols> {
    static FOUND: OnceLock<Option<Symbols>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            // SAFETY: loading the driver library that cudarc already loaded (its initializers
            // ran); each symbol's type is the documented signature of that driver call.
            unsafe {
                let lib = libloading::Library::new("libcuda.so.1").ok()?;
                let param_info = lib.get::<ParamInfoFn>(b"cuFuncGetParamInfo\0").ok().map(|s| *s);
                let encode_tiled = lib.get::<EncodeTiledFn>(b"cuTensorMapEncodeTiled\0").ok().map(|s| *s);
                Some(Symbols { _lib: lib, param_info, encode_tiled })
            }
        })
        .as_ref()
}

/// `cuFuncGetParamInfo`, if the driver has it.
pub(super) fn param_info() -> Option<ParamInfoFn> {
    symbols().and_then(|s| s.param_info)
}

/// `cuTensorMapEncodeTiled`, if the driver has it.
pub(super) fn encode_tiled() -> Option<EncodeTiledFn> {
    symbols().and_then(|s| s.encode_tiled)
}
