//! The GPU a PE uses, module initialization (writing the device state into kernels that link the
//! device library) and errors recorded by kernels.
//!
//! # Safety
//! `device_init_module` receives a `CUmodule` as an integer from Triton's
//! `kernel_load_end_hook`, which hands over each module right after loading it in the current
//! device's primary context (the one the runtime uses) and never unloads it while the process
//! runs. That is the promise `Runtime::publish_module` and `registry::defer` ask for; other
//! callers passing raw integers take it on themselves.
#![allow(unsafe_code)]

use crate::error::IntoPy;
use crate::init::runtime;
use pyo3::prelude::*;
use rshmem::backend::cuda::registry;
use rshmem::backend::cuda::select::{self, Visible};
use rshmem::env::{Env, LocalPlace};
use rshmem::driver::module::ModuleHandle;

/// The ordinal of the GPU this PE uses, or `None` on the host backend.
#[pyfunction]
fn device_ordinal() -> PyResult<Option<i32>> {
    Ok(runtime("rshmem.device_ordinal()")?.device())
}

/// How many PEs of this host use this PE's GPU, this one included (1: a GPU of its own; more:
/// shared under `RSHMEM_ALLOW_SHARED_GPU=1`; 0 on the host backend).
#[pyfunction]
fn gpu_sharers() -> PyResult<usize> {
    Ok(runtime("rshmem.gpu_sharers()")?.gpu_sharers())
}

/// Before or after init: `(ordinal, sharers)` that rshmem's rule gives this process when it
/// sees `visible` GPUs (`select::choose_ordinal`, from the launcher's variables, `requested`,
/// `CUDA_VISIBLE_DEVICES` and `RSHMEM_ALLOW_SHARED_GPU` as they are now); `sharers` counts the
/// PEs of this host that the rule puts on that GPU. `None` when neither a launcher variable nor
/// `requested` is there (init then numbers the PEs of a host itself). Raises what `init` would.
#[pyfunction]
#[pyo3(signature = (visible, requested=None))]
fn plan_device(visible: usize, requested: Option<usize>) -> PyResult<Option<(usize, usize)>> {
    let env = Env::from_process().py_err()?;
    let place = match (env.local_place, requested) {
        (Some(p), _) => p,
        (None, Some(_)) => LocalPlace { rank: 0, size: 1 },
        (None, None) => return Ok(None),
    };
    let vis = Visible::new(visible, std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref());
    let ordinal = select::choose_ordinal(place, vis, requested, env.allow_shared_gpu).py_err()?;
    let sharers = if requested.is_some() || vis.one_per_process || place.size <= vis.count {
        1
    } else {
        (0..place.size).filter(|r| r % vis.count == ordinal).count()
    };
    Ok(Some((ordinal, sharers)))
}

/// Writes the device state into the CUDA module `handle` (`nvshmemx_cumodule_init`); call it
/// for every loaded module. Returns `True` when the module links the device library and was
/// initialized, `False` (quietly) for other modules, on the host backend, and before
/// `rshmem.init()`, when the module is kept and initialized by `init`.
#[pyfunction]
fn device_init_module(py: Python<'_>, handle: usize) -> PyResult<bool> {
    let Ok(rt) = runtime("rshmem.device_init_module()") else {
        // SAFETY: see the file header (a live module of the primary context, never unloaded).
        registry::defer(ModuleHandle(handle));
        return Ok(false);
    };
    // SAFETY: see the file header.
    py.detach(|| unsafe { rt.publish_module(handle) }).py_err()
}

/// Forgets the CUDA module `handle` that `device_init_module` was given, before its loader
/// unloads it (`nvshmemx_cumodule_finalize`), so no later init or finalize writes into a module
/// that is gone (or into another module that the driver gives the same handle). Returns whether
/// the module was remembered. Works before init and after finalize too.
#[pyfunction]
fn device_forget_module(handle: usize) -> bool {
    registry::forget(ModuleHandle(handle))
}

/// Raises the error a kernel of this PE recorded before it stopped (a wait past
/// `RSHMEM_DEBUG_WAIT_TIMEOUT_MS` names the PE, the allocation and offset, the expected and last
/// seen values); does nothing when there is none.
#[pyfunction]
fn check_device_error() -> PyResult<()> {
    runtime("rshmem.check_device_error()")?.check_device_error().py_err()
}

/// Adds this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(device_ordinal, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_sharers, m)?)?;
    m.add_function(wrap_pyfunction!(plan_device, m)?)?;
    m.add_function(wrap_pyfunction!(device_init_module, m)?)?;
    m.add_function(wrap_pyfunction!(device_forget_module, m)?)?;
    m.add_function(wrap_pyfunction!(check_device_error, m)?)?;
    Ok(())
}
