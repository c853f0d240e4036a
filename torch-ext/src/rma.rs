//! Remote memory access from the host that needs more than the generated layer: bulk `putmem` /
//! `getmem` with their local-buffer check, and `p` / `g`, typed by the dtype at run time.
//!
//! # Safety
//! `putmem` / `getmem` copy between a symmetric address and a local address that Python hands
//! over as an integer. The runtime checks the symmetric side against the heap's live
//! allocations, and by default the local side against this process's mappings
//! (`Runtime::check_local_buffer`), so a bad integer is an error, not a fault.
//! `rshmem.putmem` / `rshmem.getmem` skip that check only for an address they took from a live
//! tensor or array (`data_ptr()`, `nbytes`, size checked); a destination is still checked for
//! writability then (`Runtime::check_writable`, one system call), since a live tensor may lie
//! over a read-only mapping.
#![allow(unsafe_code)]

use crate::error::IntoPy;
use crate::init::{pe_arg, runtime};
use rshmem::runtime::Access;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyOverflowError;
use rshmem::dtype::{Element, Scalar};
use rshmem::SymAddr;

/// Copies `nbytes` from local `src` to symmetric `dst` on `pe` (`nvshmem_putmem`). With
/// `check_local` (the default) `src` is checked to be readable memory of this process first;
/// callers that took it from a live tensor pass `False`.
#[pyfunction]
#[pyo3(signature = (dst, src, nbytes, pe, check_local=true))]
fn putmem(py: Python<'_>, dst: usize, src: usize, nbytes: usize, pe: i64, check_local: bool) -> PyResult<()> {
    let rt = runtime("rshmem.putmem()")?;
    let pe = pe_arg(&rt, pe)?;
    py.detach(|| {
        if check_local {
            rt.check_local_buffer(src, nbytes, Access::Read)?;
        }
        // SAFETY: see the file header: `src..src+nbytes` was checked above, or the caller
        // took it from a live tensor; the runtime checks that `dst` is a symmetric range.
        unsafe { rt.putmem(SymAddr::new(dst), src, nbytes, pe) }
    })
    .py_err()
}

/// Copies `nbytes` from symmetric `src` on `pe` to local `dst` (`nvshmem_getmem`); `dst`
/// is checked as `putmem` checks its source, and without `check_local` still for writability.
#[pyfunction]
#[pyo3(signature = (dst, src, nbytes, pe, check_local=true))]
fn getmem(py: Python<'_>, dst: usize, src: usize, nbytes: usize, pe: i64, check_local: bool) -> PyResult<()> {
    let rt = runtime("rshmem.getmem()")?;
    let pe = pe_arg(&rt, pe)?;
    py.detach(|| {
        if check_local {
            rt.check_local_buffer(dst, nbytes, Access::Write)?;
        } else {
            rt.check_writable(dst, nbytes)?;
        }
        // SAFETY: see the file header: `dst..dst+nbytes` was checked above, or the caller
        // took it from a live tensor; the runtime checks that `src` is a symmetric range.
        unsafe { rt.getmem(dst, SymAddr::new(src), nbytes, pe) }
    })
    .py_err()
}

/// Stores one element of `dtype` at symmetric `dst` on `pe` (`nvshmem_<type>_p`). An integer
/// dtype takes a Python int (`OverflowError` outside its range), a floating one any real number,
/// rounded to the dtype.
#[pyfunction]
fn p(dst: usize, value: &Bound<'_, PyAny>, pe: i64, dtype: &str) -> PyResult<()> {
    let rt = runtime("rshmem.p()")?;
    let pe = pe_arg(&rt, pe)?;
    let dtype = crate::dtype::dtype(dtype)?;
    let scalar = if dtype.is_integer() { Scalar::Int(value.extract()?) } else { Scalar::Float(value.extract()?) };
    rshmem::with_element!(dtype, T => {
        let v = T::from_scalar(scalar)
            .ok_or_else(|| PyOverflowError::new_err(format!("rshmem.p(): {value} does not fit dtype {dtype}")))?;
        rt.p::<T>(SymAddr::new(dst), v, pe).py_err()
    })
}

/// Loads one element of `dtype` from symmetric `src` on `pe` (`nvshmem_<type>_g`): a Python int
/// for an integer dtype, a float for a floating one.
#[pyfunction]
fn g(py: Python<'_>, src: usize, pe: i64, dtype: &str) -> PyResult<Py<PyAny>> {
    let rt = runtime("rshmem.g()")?;
    let pe = pe_arg(&rt, pe)?;
    let dtype = crate::dtype::dtype(dtype)?;
    let scalar = rshmem::with_element!(dtype, T => rt.g::<T>(SymAddr::new(src), pe).py_err()?.to_scalar());
    match scalar {
        Scalar::Int(v) => v.into_py_any(py),
        Scalar::Float(v) => v.into_py_any(py),
    }
}

/// Adds this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(putmem, m)?)?;
    m.add_function(wrap_pyfunction!(getmem, m)?)?;
    m.add_function(wrap_pyfunction!(p, m)?)?;
    m.add_function(wrap_pyfunction!(g, m)?)?;
    Ok(())
}
