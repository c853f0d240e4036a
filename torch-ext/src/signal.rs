//! # Safety
//! `putmem_signal` copies from a local address that Python hands over as an integer; the runtime
//! checks the symmetric destination and signal word, and by default the source against this
//! process's mappings. The Python wrapper skips that check only for a source it took from a
//! live tensor or array.
//!
//! Signals and point-to-point waits: `putmem_signal`, `signal_op`, `signal_fetch`,
//! `signal_wait_until`, `wait_until*` and `test*`.
#![allow(unsafe_code)]

use crate::dtype::sync_dtype;
use crate::error::IntoPy;
use crate::init::{pe_arg, runtime};
use pyo3::prelude::*;
use rshmem::consts::{Cmp, SignalOp};
use rshmem::runtime::Access;

/// Copies `nbytes` to `dest` on `pe`, then applies `op` with `signal` to the 64-bit word
/// `sig_addr` on `pe`; whoever sees the signal sees the data (`nvshmem_putmem_signal`).
/// With `check_local` (the default) `source` is checked as `putmem` checks it.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (dest, source, nbytes, sig_addr, signal, op, pe, check_local=true))]
fn putmem_signal(
    py: Python<'_>,
    dest: usize,
    source: usize,
    nbytes: usize,
    sig_addr: usize,
    signal: u64,
    op: i32,
    pe: i64,
    check_local: bool,
) -> PyResult<()> {
    let rt = runtime("rshmem.putmem_signal()")?;
    let pe = pe_arg(&rt, pe)?;
    let op = SignalOp::from_raw(op).py_err()?;
    py.detach(|| {
        if check_local {
            rt.check_local_buffer(source, nbytes, Access::Read)?;
        }
        // SAFETY: see the file header: `source..source+nbytes` was checked above, or the caller
        // took it from a live tensor.
        unsafe { rt.putmem_signal(dest, source, nbytes, sig_addr, signal, op, pe) }
    })
    .py_err()
}

/// Applies `op` (`SIGNAL_SET` / `SIGNAL_ADD`) with `signal` to the word `sig_addr` on `pe`
/// (`nvshmemx_signal_op`).
#[pyfunction]
fn signal_op(sig_addr: usize, signal: u64, op: i32, pe: i64) -> PyResult<()> {
    let rt = runtime("rshmem.signal_op()")?;
    let pe = pe_arg(&rt, pe)?;
    let op = SignalOp::from_raw(op).py_err()?;
    rt.signal_op(sig_addr, signal, op, pe).py_err()
}

/// Reads the local signal word at `sig_addr` (`nvshmem_signal_fetch`).
#[pyfunction]
fn signal_fetch(sig_addr: usize) -> PyResult<u64> {
    runtime("rshmem.signal_fetch()")?.signal_fetch(sig_addr).py_err()
}

/// Waits until the local signal word satisfies `cmp` against `value`; returns the value seen
/// (`nvshmem_signal_wait_until`).
#[pyfunction]
fn signal_wait_until(py: Python<'_>, sig_addr: usize, cmp: i32, value: u64) -> PyResult<u64> {
    let rt = runtime("rshmem.signal_wait_until()")?;
    let cmp = Cmp::from_raw(cmp).py_err()?;
    py.detach(|| rt.signal_wait_until(sig_addr, cmp, value)).py_err()
}

/// Waits until the local element at `addr` satisfies `cmp` against `value`
/// (`nvshmem_<type>_wait_until`).
#[pyfunction]
fn wait_until(py: Python<'_>, addr: usize, dtype_name: &str, cmp: i32, value: i128) -> PyResult<()> {
    let rt = runtime("rshmem.wait_until()")?;
    let (dt, cmp) = (sync_dtype(dtype_name, "rshmem.wait_until()")?, Cmp::from_raw(cmp).py_err()?);
    py.detach(|| rt.wait_until(addr, dt, cmp, value)).py_err()
}

/// Whether the local element at `addr` satisfies `cmp` against `value` (`nvshmem_<type>_test`).
#[pyfunction]
fn test(addr: usize, dtype_name: &str, cmp: i32, value: i128) -> PyResult<bool> {
    let rt = runtime("rshmem.test()")?;
    rt.test(addr, sync_dtype(dtype_name, "rshmem.test()")?, Cmp::from_raw(cmp).py_err()?, value).py_err()
}

/// Waits until every element of `addr[..nelems]` not masked by `status` satisfies the comparison.
#[pyfunction]
#[pyo3(signature = (addr, nelems, status, dtype_name, cmp, value))]
fn wait_until_all(
    py: Python<'_>,
    addr: usize,
    nelems: usize,
    status: Option<Vec<i32>>,
    dtype_name: &str,
    cmp: i32,
    value: i128,
) -> PyResult<()> {
    let rt = runtime("rshmem.wait_until_all()")?;
    let (dt, cmp) = (sync_dtype(dtype_name, "rshmem.wait_until_all()")?, Cmp::from_raw(cmp).py_err()?);
    py.detach(|| rt.wait_until_all(addr, nelems, status.as_deref(), dt, cmp, value)).py_err()
}

/// Waits until one unmasked element satisfies the comparison; returns its index.
#[pyfunction]
#[pyo3(signature = (addr, nelems, status, dtype_name, cmp, value))]
fn wait_until_any(
    py: Python<'_>,
    addr: usize,
    nelems: usize,
    status: Option<Vec<i32>>,
    dtype_name: &str,
    cmp: i32,
    value: i128,
) -> PyResult<Option<usize>> {
    let rt = runtime("rshmem.wait_until_any()")?;
    let (dt, cmp) = (sync_dtype(dtype_name, "rshmem.wait_until_any()")?, Cmp::from_raw(cmp).py_err()?);
    py.detach(|| rt.wait_until_any(addr, nelems, status.as_deref(), dt, cmp, value)).py_err()
}

/// Waits until at least one unmasked element satisfies the comparison; returns the indices of
/// all that do.
#[pyfunction]
#[pyo3(signature = (addr, nelems, status, dtype_name, cmp, value))]
fn wait_until_some(
    py: Python<'_>,
    addr: usize,
    nelems: usize,
    status: Option<Vec<i32>>,
    dtype_name: &str,
    cmp: i32,
    value: i128,
) -> PyResult<Vec<usize>> {
    let rt = runtime("rshmem.wait_until_some()")?;
    let (dt, cmp) = (sync_dtype(dtype_name, "rshmem.wait_until_some()")?, Cmp::from_raw(cmp).py_err()?);
    py.detach(|| rt.wait_until_some(addr, nelems, status.as_deref(), dt, cmp, value)).py_err()
}

/// Whether every unmasked element satisfies the comparison.
#[pyfunction]
#[pyo3(signature = (addr, nelems, status, dtype_name, cmp, value))]
fn test_all(
    addr: usize,
    nelems: usize,
    status: Option<Vec<i32>>,
    dtype_name: &str,
    cmp: i32,
    value: i128,
) -> PyResult<bool> {
    let rt = runtime("rshmem.test_all()")?;
    let (dt, cmp) = (sync_dtype(dtype_name, "rshmem.test_all()")?, Cmp::from_raw(cmp).py_err()?);
    rt.test_all(addr, nelems, status.as_deref(), dt, cmp, value).py_err()
}

/// The index of one unmasked element that satisfies the comparison, if any.
#[pyfunction]
#[pyo3(signature = (addr, nelems, status, dtype_name, cmp, value))]
fn test_any(
    addr: usize,
    nelems: usize,
    status: Option<Vec<i32>>,
    dtype_name: &str,
    cmp: i32,
    value: i128,
) -> PyResult<Option<usize>> {
    let rt = runtime("rshmem.test_any()")?;
    let (dt, cmp) = (sync_dtype(dtype_name, "rshmem.test_any()")?, Cmp::from_raw(cmp).py_err()?);
    rt.test_any(addr, nelems, status.as_deref(), dt, cmp, value).py_err()
}

/// The indices of the unmasked elements that satisfy the comparison (possibly none).
#[pyfunction]
#[pyo3(signature = (addr, nelems, status, dtype_name, cmp, value))]
fn test_some(
    addr: usize,
    nelems: usize,
    status: Option<Vec<i32>>,
    dtype_name: &str,
    cmp: i32,
    value: i128,
) -> PyResult<Vec<usize>> {
    let rt = runtime("rshmem.test_some()")?;
    let (dt, cmp) = (sync_dtype(dtype_name, "rshmem.test_some()")?, Cmp::from_raw(cmp).py_err()?);
    rt.test_some(addr, nelems, status.as_deref(), dt, cmp, value).py_err()
}

/// Adds this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(putmem_signal, m)?)?;
    m.add_function(wrap_pyfunction!(signal_op, m)?)?;
    m.add_function(wrap_pyfunction!(signal_fetch, m)?)?;
    m.add_function(wrap_pyfunction!(signal_wait_until, m)?)?;
    m.add_function(wrap_pyfunction!(wait_until, m)?)?;
    m.add_function(wrap_pyfunction!(test, m)?)?;
    m.add_function(wrap_pyfunction!(wait_until_all, m)?)?;
    m.add_function(wrap_pyfunction!(wait_until_any, m)?)?;
    m.add_function(wrap_pyfunction!(wait_until_some, m)?)?;
    m.add_function(wrap_pyfunction!(test_all, m)?)?;
    m.add_function(wrap_pyfunction!(test_any, m)?)?;
    m.add_function(wrap_pyfunction!(test_some, m)?)?;
    Ok(())
}
