//! Ordering and synchronization from the host: fence, quiet, barriers and syncs.

use crate::error::IntoPy;
use crate::init::runtime;
use crate::team::team;
use pyo3::prelude::*;

/// Orders this PE's puts, atomics and signals to each PE (`nvshmem_fence`).
#[pyfunction]
fn fence() -> PyResult<()> {
    runtime("rshmem.fence()")?.fence().py_err()
}

/// Completes every put, atomic and signal this PE issued (`nvshmem_quiet`).
#[pyfunction]
fn quiet(py: Python<'_>) -> PyResult<()> {
    let rt = runtime("rshmem.quiet()")?;
    py.detach(|| rt.quiet()).py_err()
}

/// Collective: `quiet`, then waits for every PE (`nvshmem_barrier_all`).
#[pyfunction]
fn barrier_all(py: Python<'_>) -> PyResult<()> {
    let rt = runtime("rshmem.barrier_all()")?;
    py.detach(|| rt.barrier_all()).py_err()
}

/// Collective: waits for every PE without completing outstanding puts (`nvshmem_sync_all`).
#[pyfunction]
fn sync_all(py: Python<'_>) -> PyResult<()> {
    let rt = runtime("rshmem.sync_all()")?;
    py.detach(|| rt.sync_all()).py_err()
}

/// Collective over `team`: `quiet`, then waits for the team's PEs (`nvshmem_barrier`).
#[pyfunction]
fn barrier(py: Python<'_>, team_id: i32) -> PyResult<()> {
    let rt = runtime("rshmem.barrier()")?;
    let t = team(team_id);
    py.detach(|| rt.barrier(t)).py_err()
}

/// Collective over `team`: waits for the team's PEs (`nvshmem_team_sync`).
#[pyfunction]
fn sync(py: Python<'_>, team_id: i32) -> PyResult<()> {
    let rt = runtime("rshmem.sync()")?;
    let t = team(team_id);
    py.detach(|| rt.sync(t)).py_err()
}

/// Adds this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fence, m)?)?;
    m.add_function(wrap_pyfunction!(quiet, m)?)?;
    m.add_function(wrap_pyfunction!(barrier_all, m)?)?;
    m.add_function(wrap_pyfunction!(sync_all, m)?)?;
    m.add_function(wrap_pyfunction!(barrier, m)?)?;
    m.add_function(wrap_pyfunction!(sync, m)?)?;
    Ok(())
}
