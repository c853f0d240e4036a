//! Module loading, globals and kernel launches.
//!
//! Reference: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html>,
//! <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html>
//!
//! # Safety
//! Module loading, globals and kernel launches. A [`ModuleHandle`] is an integer someone else
//! (Triton, PyTorch) vouches for; [`LoadedModule`] owns a module we loaded and unloads it once.
//! Kernel arguments are raw pointers whose layout the caller matches to the kernel's
//! parameters, so [`launch`] is `unsafe`.
#![allow(unsafe_code)]

use super::context::PrimaryContext;
use super::stream::StreamHandle;
use super::{check, sys};
use crate::error::{Error, Result};
use std::ffi::{c_void, CStr, CString};
use std::sync::Arc;

/// A `CUmodule` as an integer: what Triton's `kernel_load_end_hook` and other loaders hand us.
/// We never unload it; its loader owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModuleHandle(pub usize);

impl ModuleHandle {
    fn raw(self) -> sys::CUmodule {
        self.0 as sys::CUmodule
    }
}

/// A global variable found in a module: its device address and size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Global {
    /// Device address.
    pub addr: usize,
    /// Size in bytes, as the module declares it.
    pub size: usize,
}

/// `cuModuleGetGlobal_v2`: the global `name` of `module`, or `None` when the module has no such
/// global (`CUDA_ERROR_NOT_FOUND`), e.g. a Triton kernel that does not link the device library.
///
/// # Errors
/// [`Error::Driver`] for any other failure (an invalid module handle, a context mismatch).
///
/// # Safety
/// `module` must be a loaded module of the context current on this thread.
pub unsafe fn get_global(module: ModuleHandle, name: &CStr) -> Result<Option<Global>> {
    let mut addr: sys::CUdeviceptr = 0;
    let mut size: usize = 0;
    // SAFETY: "Returns a global pointer from a module": writes the address and size of the
    // global `name` into *dptr and *bytes (live locals); the caller vouches for the module.
    let r = unsafe { sys::cuModuleGetGlobal_v2(&mut addr, &mut size, module.raw(), name.as_ptr()) };
    if r as u32 == sys::CUresult::CUDA_ERROR_NOT_FOUND as u32 {
        return Ok(None);
    }
    check("cuModuleGetGlobal_v2", r)?;
    Ok(Some(Global { addr: addr as usize, size }))
}

/// A kernel of a loaded module (`CUfunction`). Valid while its [`LoadedModule`] lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Function(usize);

impl Function {
    /// A `CUfunction` loaded by someone else (a Triton kernel), as an integer; the caller of
    /// [`launch`] vouches for it as for every other argument.
    pub(super) fn from_raw(f: usize) -> Function {
        Function(f)
    }

    pub(super) fn raw(self) -> sys::CUfunction {
        self.0 as sys::CUfunction
    }
}

/// A module rshmem loaded itself (its own PTX kernels).
///
/// Owns the `CUmodule` and an `Arc` of the context it lives in; dropping it unloads the module
/// (after binding the context), then lets go of the context. Functions taken from it must not
/// be launched afterwards.
#[derive(Debug)]
pub struct LoadedModule {
    raw: sys::CUmodule,
    ctx: Arc<PrimaryContext>,
}

// SAFETY: a CUmodule is a driver handle usable from any thread with its context current; the
// driver API is thread-safe. We never dereference it.
unsafe impl Send for LoadedModule {}
// SAFETY: as above.
unsafe impl Sync for LoadedModule {}

impl LoadedModule {
    /// `cuModuleLoadData` of PTX text; the driver compiles it for the context's device.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for text with a NUL byte; [`Error::Driver`] when the driver
    /// rejects the PTX (`CUDA_ERROR_INVALID_PTX`, `UNSUPPORTED_PTX_VERSION` for a driver older
    /// than the PTX ISA version).
    pub fn load_ptx(ctx: &Arc<PrimaryContext>, ptx: &str) -> Result<LoadedModule> {
        let image = CString::new(ptx)
            .map_err(|_| Error::InvalidArgument("PTX text contains a NUL byte".into()))?;
        ctx.bind()?;
        let mut raw: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: "Takes a pointer image and loads the corresponding module module into the
        // current context. The image may be a cubin or fatbin ... or a NULL-terminated text
        // string"; `image` is NUL-terminated and outlives the call; `raw` is a live local.
        check("cuModuleLoadData", unsafe { sys::cuModuleLoadData(&mut raw, image.as_ptr().cast()) })?;
        Ok(LoadedModule { raw, ctx: ctx.clone() })
    }

    /// `cuModuleLoadData` of a cubin (an ELF image for one GPU architecture, as ptxas writes
    /// it): nothing is compiled at load time.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for bytes that are not an ELF image; [`Error::Driver`] when the
    /// driver refuses it (`CUDA_ERROR_NO_BINARY_FOR_GPU` for another architecture,
    /// `CUDA_ERROR_INVALID_IMAGE`).
    pub fn load_cubin(ctx: &Arc<PrimaryContext>, cubin: &[u8]) -> Result<LoadedModule> {
        if !cubin.starts_with(b"\x7fELF") {
            return Err(Error::InvalidArgument("a cubin must be an ELF image (it does not start with \\x7fELF)".into()));
        }
        ctx.bind()?;
        let mut raw: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: "The image may be a cubin or fatbin as output by nvcc"; an ELF image carries
        // its own length in its headers, which the driver reads; `cubin` outlives the call;
        // `raw` is a live local.
        check("cuModuleLoadData", unsafe { sys::cuModuleLoadData(&mut raw, cubin.as_ptr().cast()) })?;
        Ok(LoadedModule { raw, ctx: ctx.clone() })
    }

    /// The module as a [`ModuleHandle`] (to publish the device state into it, say).
    pub fn handle(&self) -> ModuleHandle {
        ModuleHandle(self.raw as usize)
    }

    /// `cuModuleGetFunction`: the kernel `name`.
    ///
    /// # Errors
    /// [`Error::Driver`] (`CUDA_ERROR_NOT_FOUND` when the module has no such kernel).
    pub fn function(&self, name: &CStr) -> Result<Function> {
        self.ctx.bind()?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: "Returns in *hfunc the handle of the function of name name located in module
        // hmod"; the module is loaded (we own it) and `f` is a live local.
        check("cuModuleGetFunction", unsafe { sys::cuModuleGetFunction(&mut f, self.raw, name.as_ptr()) })?;
        Ok(Function(f as usize))
    }
}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        let unloaded = self.ctx.bind().and_then(|()| {
            // SAFETY: "Unloads a module hmod from the current context"; we loaded it and unload
            // it once, here.
            check("cuModuleUnload", unsafe { sys::cuModuleUnload(self.raw) })
        });
        if let Err(e) = unloaded {
            super::deferred::record("rshmem's kernel module", e);
        }
    }
}

/// Launch geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchDims {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory in bytes.
    pub shared_bytes: u32,
}

impl LaunchDims {
    /// One thread of one block.
    pub const SINGLE_THREAD: LaunchDims = LaunchDims { grid: (1, 1, 1), block: (1, 1, 1), shared_bytes: 0 };
}

/// `cuLaunchKernel`: enqueues `f` on `stream` with `params`, one pointer per kernel parameter.
///
/// # Errors
/// [`Error::Driver`] (`CUDA_ERROR_INVALID_VALUE` for bad dimensions, launch failures).
///
/// # Safety
/// `f` must come from a live module of the context current on this thread; `params` must hold,
/// in order, a pointer to a value of each kernel parameter's exact type and size; `stream` must
/// be a live stream of that context (or 0, the legacy default stream); whatever memory the
/// kernel touches must stay valid until it finishes.
pub unsafe fn launch(f: Function, dims: LaunchDims, stream: StreamHandle, params: &mut [*mut c_void]) -> Result<()> {
    let (gx, gy, gz) = dims.grid;
    let (bx, by, bz) = dims.block;
    // SAFETY: "Invokes the kernel f on a gridDimX x gridDimY x gridDimZ grid of blocks ...
    // Kernel parameters to f can be specified ... via kernelParams ... an array of N pointers
    // to each of the parameters"; the caller's contract above; `extra` is null.
    check("cuLaunchKernel", unsafe {
        sys::cuLaunchKernel(
            f.0 as sys::CUfunction,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            dims.shared_bytes,
            stream.raw(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    })
}
