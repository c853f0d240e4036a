//! Collectives from the host on symmetric memory: broadcast, fcollect, alltoall, reductions.
//! Every PE of the team must call them with the same arguments.

use crate::dtype::{dtype, reduce_args};
use crate::error::IntoPy;
use crate::init::runtime;
use crate::team::team;
use pyo3::prelude::*;

/// Copies `nelems` elements of `source` on `root` (team numbering) into `dest` on every PE of
/// the team (`nvshmem_<type>_broadcast`).
#[pyfunction]
fn broadcast(
    py: Python<'_>,
    team_id: i32,
    dest: usize,
    source: usize,
    nelems: usize,
    root: i32,
    dtype_name: &str,
) -> PyResult<()> {
    let rt = runtime("rshmem.broadcast()")?;
    let dt = dtype(dtype_name)?;
    py.detach(|| rt.broadcast(team(team_id), dest, source, nelems, root, dt)).py_err()
}

/// Concatenates every PE's `nelems` elements of `source` into `dest`, in team order
/// (`nvshmem_<type>_fcollect`).
#[pyfunction]
fn fcollect(py: Python<'_>, team_id: i32, dest: usize, source: usize, nelems: usize, dtype_name: &str) -> PyResult<()> {
    let rt = runtime("rshmem.fcollect()")?;
    let dt = dtype(dtype_name)?;
    py.detach(|| rt.fcollect(team(team_id), dest, source, nelems, dt)).py_err()
}

/// Block `j` (of `nelems` elements) of `source` goes to block `me` of `dest` on PE `j`
/// (`nvshmem_<type>_alltoall`).
#[pyfunction]
fn alltoall(py: Python<'_>, team_id: i32, dest: usize, source: usize, nelems: usize, dtype_name: &str) -> PyResult<()> {
    let rt = runtime("rshmem.alltoall()")?;
    let dt = dtype(dtype_name)?;
    py.detach(|| rt.alltoall(team(team_id), dest, source, nelems, dt)).py_err()
}

/// Reduces `nelems` elements of `source` over the team with `op` into `dest` on every PE
/// (`nvshmem_<type>_<op>_reduce`).
#[pyfunction]
fn reduce(
    py: Python<'_>,
    team_id: i32,
    op: &str,
    dest: usize,
    source: usize,
    nelems: usize,
    dtype_name: &str,
) -> PyResult<()> {
    let rt = runtime("rshmem.reduce()")?;
    let (op, dt) = reduce_args(op, dtype_name)?;
    py.detach(|| rt.reduce(team(team_id), op, dest, source, nelems, dt)).py_err()
}

/// Adds this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(broadcast, m)?)?;
    m.add_function(wrap_pyfunction!(fcollect, m)?)?;
    m.add_function(wrap_pyfunction!(alltoall, m)?)?;
    m.add_function(wrap_pyfunction!(reduce, m)?)?;
    Ok(())
}
