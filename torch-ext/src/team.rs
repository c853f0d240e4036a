//! Teams: queries, translation, split and destroy.
//!
//! A team crosses into Python as its integer id (`TEAM_WORLD = 0`, ...); `rshmem.Team` wraps it.

use crate::error::IntoPy;
use crate::init::runtime;
use pyo3::prelude::*;
use rshmem::runtime::Team;

/// The runtime team with id `id`.
pub fn team(id: i32) -> Team {
    Team(id)
}

/// This PE's number in `team`, or -1 when it is not a member (`nvshmem_team_my_pe`).
#[pyfunction]
fn team_my_pe(team_id: i32) -> PyResult<i32> {
    runtime("rshmem.team_my_pe()")?.team_my_pe(team(team_id)).py_err()
}

/// How many PEs `team` has (`nvshmem_team_n_pes`).
#[pyfunction]
fn team_n_pes(team_id: i32) -> PyResult<i32> {
    runtime("rshmem.team_n_pes()")?.team_n_pes(team(team_id)).py_err()
}

/// PE `pe` of `src` as numbered in `dest`, or -1 (`nvshmem_team_translate_pe`).
#[pyfunction]
fn team_translate_pe(src: i32, pe: i32, dest: i32) -> PyResult<i32> {
    runtime("rshmem.team_translate_pe()")?.team_translate_pe(team(src), pe, team(dest)).py_err()
}

/// Collective over `parent`: a new team of `size` PEs starting at `start` with `stride`; `None`
/// on the PEs that are not in it (`nvshmem_team_split_strided`).
#[pyfunction]
fn team_split_strided(py: Python<'_>, parent: i32, start: i32, stride: i32, size: i32) -> PyResult<Option<i32>> {
    let rt = runtime("rshmem.team_split_strided()")?;
    let made = py.detach(|| rt.team_split_strided(team(parent), start, stride, size)).py_err()?;
    Ok(made.map(|t| t.0))
}

/// Collective over `team`: releases a team made by a split (`nvshmem_team_destroy`).
#[pyfunction]
fn team_destroy(py: Python<'_>, team_id: i32) -> PyResult<()> {
    let rt = runtime("rshmem.team_destroy()")?;
    py.detach(|| rt.team_destroy(team(team_id))).py_err()
}

/// Adds this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(team_my_pe, m)?)?;
    m.add_function(wrap_pyfunction!(team_n_pes, m)?)?;
    m.add_function(wrap_pyfunction!(team_translate_pe, m)?)?;
    m.add_function(wrap_pyfunction!(team_split_strided, m)?)?;
    m.add_function(wrap_pyfunction!(team_destroy, m)?)?;
    Ok(())
}
