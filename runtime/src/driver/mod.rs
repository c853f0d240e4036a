//! The CUDA driver layer: thin, checked wrappers over `cudarc::driver::sys`.
//!
//! This is the bottom of the three layers (STYLE.md 1): [`sys`] is the raw driver API as cudarc
//! binds it; the files here wrap one driver call per function, turn its `CUresult` into
//! [`Error::Driver`], and give RAII types for the handles that need releasing. Only this module
//! and `backend::cuda` name `sys::` items; everything above passes plain integers
//! ([`stream::StreamHandle`], [`module::ModuleHandle`], device ordinals).
//!
//! | file | driver calls |
//! |---|---|
//! | [`context`] | library probe, version check, `cuInit`, devices, primary context, peer access queries |
//! | [`vmm`] | virtual memory management: `cuMemAddressReserve`, `cuMemCreate`, export/import as a POSIX fd, `cuMemMap`, `cuMemSetAccess`, ... |
//! | [`module`] | `cuModuleLoadData`, `cuModuleGetGlobal`, `cuModuleGetFunction`, `cuLaunchKernel` |
//! | [`packed`] | one kernel launch packed once (`cuFuncGetParamInfo`, `cuLaunchKernel`) |
//! | [`tensor_map`] | TMA descriptors (`cuTensorMapEncodeTiled`) |
//! | `newer` | calls newer than cudarc's bindings, looked up by name |
//! | [`stream`] | streams, events, `cuMemcpyAsync`, `cuStreamWriteValue64`, `cuStreamWaitValue64` |
//! | [`host_mem`] | page-locked host memory (`cuMemAllocHost`) |
//! | [`mod@pointer`] | what the driver knows about an address (`cuPointerGetAttribute`) |
//! | [`deferred`] | errors from `Drop`, kept until the runtime asks for them |
//!
//! The driver library is loaded at run time (cudarc's `dynamic-loading`), so this crate builds
//! and its host-backend tests run on machines without CUDA. cudarc resolves each symbol on its
//! first call and panics when the library or the symbol is missing; [`context::init`] therefore
//! probes for the library and checks the driver version before any other call, and every other
//! function here is reached only through a value that `init` made possible.
//!
//! NVLink multicast (`cuMulticast*`) is never used.
#![allow(unsafe_code)]

pub mod context;
pub mod deferred;
pub mod host_mem;
pub mod module;
mod newer;
pub mod packed;
pub mod pointer;
pub mod stream;
pub mod tensor_map;
pub mod vmm;

pub use cudarc::driver::sys;

use crate::error::{Error, Result};

/// Turns a `CUresult` into `Ok(())` or [`Error::Driver`] naming `call`.
///
/// # Errors
/// [`Error::Driver`] with the numeric code and the driver's name for it.
pub(crate) fn check(call: &'static str, result: sys::CUresult) -> Result<()> {
    if result as u32 == 0 {
        return Ok(());
    }
    Err(driver_error(call, result))
}

/// An [`Error::Driver`] for a failed `call`.
pub(crate) fn driver_error(call: &'static str, result: sys::CUresult) -> Error {
    // Read the raw value first: a driver newer than the bindings may return a code the enum
    // does not list, so the code never goes through a `match` or `Debug` on the enum.
    let code = result as u32;
    Error::Driver { call, code, name: error_name(result) }
}

/// Adds what we were doing to a driver error's text (`CUDA_ERROR_OUT_OF_MEMORY; while ...`);
/// other errors pass unchanged.
pub(crate) fn annotate(e: Error, doing: impl std::fmt::Display) -> Error {
    match e {
        Error::Driver { call, code, name } => Error::Driver { call, code, name: format!("{name}; {doing}") },
        other => other,
    }
}

/// The driver's name for a status (`CUDA_ERROR_OUT_OF_MEMORY`), or `CUresult <n>`.
fn error_name(result: sys::CUresult) -> String {
    let mut name: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorName "Sets *pStr to the address of a NULL-terminated string" with static
    // storage, or returns CUDA_ERROR_INVALID_VALUE for an unknown code and leaves it alone.
    // It is only reached after `context::init` loaded the library (errors come from calls).
    // https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__ERROR.html
    let status = unsafe { sys::cuGetErrorName(result, &mut name) };
    if status as u32 == 0 && !name.is_null() {
        // SAFETY: non-null and NUL-terminated, per the sentence above.
        unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned()
    } else {
        format!("CUresult {}", result as u32)
    }
}
