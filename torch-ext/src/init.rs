//! Init / finalize and the one runtime of this process.
//!
//! The runtime lives in a global `RwLock<Option<Arc<Runtime>>>`: every call clones the `Arc`
//! under a short read lock and works on its clone, so calls from several Python threads run at
//! once and none holds the lock while it blocks. `finalize` takes the runtime out under the write
//! lock and finalizes it once no other call still holds a clone.

use crate::error::{new_err, IntoPy, Name};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rshmem::backend::BackendKind;
use rshmem::bootstrap::UniqueId;
use rshmem::runtime::{InitOptions, Runtime};
use rshmem::Error;
use std::sync::Arc;

/// The process's runtime, `None` before `init` and after `finalize`: the C ABI's holder, which
/// this extension also exports (`rshmem_host_*`), so C++ code loaded into the process (the torch
/// SymmetricMemory backend) calls into the runtime that Python started.
use rshmem_capi::RUNTIME;

/// The runtime, or `NotInitializedError` naming `call` (e.g. `"rshmem.my_pe()"`).
pub fn runtime(call: &'static str) -> PyResult<Arc<Runtime>> {
    // A poisoned lock only means a thread panicked while holding it; the Option is still whole.
    rshmem::fork::check(call).map_err(crate::error::to_py)?;
    let guard = RUNTIME.read().unwrap_or_else(|e| e.into_inner());
    guard.clone().ok_or_else(|| crate::error::to_py(Error::NotInitialized { call }))
}

/// A PE argument from Python: negative numbers are out of range, not an overflow.
pub fn pe_arg(rt: &Runtime, pe: i64) -> PyResult<usize> {
    usize::try_from(pe).map_err(|_| {
        crate::error::to_py(Error::PeOutOfRange { pe, n_pes: rt.n_pes(), scope: "the job".into() })
    })
}

/// Makes a unique id on this PE: the address of a listener plus a random secret. The bytes are
/// handed to every other PE (by torch.distributed, MPI, ...) and passed to `init(uid=...)`.
#[pyfunction]
fn get_unique_id(py: Python<'_>) -> PyResult<Py<PyBytes>> {
    let uid = py.detach(UniqueId::new).py_err()?;
    Ok(PyBytes::new(py, &uid.to_bytes()).unbind())
}

/// Collective: starts the runtime on every PE (`nvshmem_init`).
#[pyfunction]
#[pyo3(signature = (uid=None, rank=None, nranks=None, backend=None, device=None))]
fn init(
    py: Python<'_>,
    uid: Option<Vec<u8>>,
    rank: Option<usize>,
    nranks: Option<usize>,
    backend: Option<String>,
    device: Option<i32>,
) -> PyResult<()> {
    let uid = uid.map(|b| UniqueId::from_bytes(&b)).transpose().py_err()?;
    let backend = backend.map(|b| BackendKind::parse(&b)).transpose().py_err()?;
    let opts = InitOptions { uid, rank, nranks, backend, device };
    py.detach(move || {
        rshmem::fork::check("rshmem.init()")?;
        let mut slot = RUNTIME.write().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return Err(Error::AlreadyInitialized);
        }
        let rt = Runtime::init(opts)?;
        rshmem::fork::arm(rt.my_pe());
        *slot = Some(Arc::new(rt));
        Ok(())
    })
    .py_err()
}

/// Collective: frees everything and stops the runtime (`nvshmem_finalize`). Does nothing when
/// the runtime is not running, so it can be called twice. `how` is what the other PEs are told
/// when this PE leaves while they still wait for it ("rshmem.finalize()", "the exit handler
/// after an uncaught KeyError: ...").
#[pyfunction]
#[pyo3(signature = (how=None))]
fn finalize(py: Python<'_>, how: Option<String>) -> PyResult<()> {
    // A forked child holds a copy of its parent's runtime: finalizing it would end the parent's job.
    rshmem::fork::check("rshmem.finalize()").py_err()?;
    let taken = {
        let mut slot = RUNTIME.write().unwrap_or_else(|e| e.into_inner());
        match slot.take() {
            None => return Ok(()),
            Some(rt) => match Arc::try_unwrap(rt) {
                Ok(rt) => rt,
                Err(shared) => {
                    *slot = Some(shared);
                    return Err(new_err(
                        Name::RshmemError,
                        "rshmem.finalize() was called while another thread is inside an rshmem \
                         call; wait for that call to return, then finalize",
                    ));
                }
            },
        }
    };
    rshmem::fork::disarm();
    let how = how.unwrap_or_else(|| "rshmem.finalize()".to_string());
    py.detach(move || taken.finalize_as(&how)).py_err()
}

/// Whether `init` has run and `finalize` has not (never in a child forked from a PE).
#[pyfunction]
fn is_initialized() -> bool {
    !rshmem::fork::forked_child() && RUNTIME.read().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// This PE's number in the job (`nvshmem_my_pe`).
#[pyfunction]
fn my_pe() -> PyResult<usize> {
    Ok(runtime("rshmem.my_pe()")?.my_pe())
}

/// How many PEs the job has (`nvshmem_n_pes`).
#[pyfunction]
fn n_pes() -> PyResult<usize> {
    Ok(runtime("rshmem.n_pes()")?.n_pes())
}

/// The memory backend in use: `"host"` or `"cuda"`.
#[pyfunction]
fn backend() -> PyResult<&'static str> {
    Ok(runtime("rshmem.backend()")?.backend_kind().name())
}

/// Adds this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(get_unique_id, m)?)?;
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(finalize, m)?)?;
    m.add_function(wrap_pyfunction!(is_initialized, m)?)?;
    m.add_function(wrap_pyfunction!(my_pe, m)?)?;
    m.add_function(wrap_pyfunction!(n_pes, m)?)?;
    m.add_function(wrap_pyfunction!(backend, m)?)?;
    Ok(())
}
