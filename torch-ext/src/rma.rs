//! Remote memory access from the host that needs more than the generated layer: bulk `putmem` /
//! `getmem` with their local-buffer check, and `p` / `g` typed by the element.
//!
//! # Safety
//! `putmem` / `getmem` copy between a symmetric address and a local address that Python hands
//! over as an integer. The runtime checks the symmetric side against the heap's live
//! allocations, and by default the local side against this process's mappings
//! (`Runtime::check_local_buffer`), so a bad integer is an error, not a fault.
//! `rshmem.putmem` / `rshmem.getmem` skip that check only for an address they took from a live
//! tensor or array (`data_ptr()`, `nbytes`, size checked).
#![allow(unsafe_code)]

use crate::dtype::dtype;
use crate::error::IntoPy;
use crate::init::{pe_arg, runtime};
use half::{bf16, f16};
use rshmem::runtime::Access;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use rshmem::dtype::DType;

/// Copies `nbytes` from local `source` to symmetric `dest` on `pe` (`nvshmem_putmem`). With
/// `check_local` (the default) `source` is checked to be readable memory of this process first;
/// callers that took it from a live tensor pass `False`.
#[pyfunction]
#[pyo3(signature = (dest, source, nbytes, pe, check_local=true))]
fn putmem(py: Python<'_>, dest: usize, source: usize, nbytes: usize, pe: i64, check_local: bool) -> PyResult<()> {
    let rt = runtime("rshmem.putmem()")?;
    let pe = pe_arg(&rt, pe)?;
    py.detach(|| {
        if check_local {
            rt.check_local_buffer(source, nbytes, Access::Read)?;
        }
        // SAFETY: see the file header: `source..source+nbytes` was checked above, or the caller
        // took it from a live tensor; the runtime checks that `dest` is a symmetric range.
        unsafe { rt.putmem(dest, source, nbytes, pe) }
    })
    .py_err()
}

/// Copies `nbytes` from symmetric `source` on `pe` to local `dest` (`nvshmem_getmem`); `dest`
/// is checked as `putmem` checks its source.
#[pyfunction]
#[pyo3(signature = (dest, source, nbytes, pe, check_local=true))]
fn getmem(py: Python<'_>, dest: usize, source: usize, nbytes: usize, pe: i64, check_local: bool) -> PyResult<()> {
    let rt = runtime("rshmem.getmem()")?;
    let pe = pe_arg(&rt, pe)?;
    py.detach(|| {
        if check_local {
            rt.check_local_buffer(dest, nbytes, Access::Write)?;
        }
        // SAFETY: see the file header: `dest..dest+nbytes` was checked above, or the caller
        // took it from a live tensor; the runtime checks that `source` is a symmetric range.
        unsafe { rt.getmem(dest, source, nbytes, pe) }
    })
    .py_err()
}

/// Stores one element of `dtype` at symmetric `dest` on `pe` (`nvshmem_<type>_p`).
#[pyfunction]
fn p(dest: usize, value: &Bound<'_, PyAny>, pe: i64, dtype_name: &str) -> PyResult<()> {
    let rt = runtime("rshmem.p()")?;
    let pe = pe_arg(&rt, pe)?;
    match dtype(dtype_name)? {
        DType::I8 => rt.p::<i8>(dest, value.extract()?, pe),
        DType::I16 => rt.p::<i16>(dest, value.extract()?, pe),
        DType::I32 => rt.p::<i32>(dest, value.extract()?, pe),
        DType::I64 => rt.p::<i64>(dest, value.extract()?, pe),
        DType::U8 => rt.p::<u8>(dest, value.extract()?, pe),
        DType::U16 => rt.p::<u16>(dest, value.extract()?, pe),
        DType::U32 => rt.p::<u32>(dest, value.extract()?, pe),
        DType::U64 => rt.p::<u64>(dest, value.extract()?, pe),
        DType::F16 => rt.p::<f16>(dest, f16::from_f64(value.extract()?), pe),
        DType::BF16 => rt.p::<bf16>(dest, bf16::from_f64(value.extract()?), pe),
        DType::F32 => rt.p::<f32>(dest, value.extract()?, pe),
        DType::F64 => rt.p::<f64>(dest, value.extract()?, pe),
    }
    .py_err()
}

/// Loads one element of `dtype` from symmetric `source` on `pe` (`nvshmem_<type>_g`).
#[pyfunction]
fn g(py: Python<'_>, source: usize, pe: i64, dtype_name: &str) -> PyResult<Py<PyAny>> {
    let rt = runtime("rshmem.g()")?;
    let pe = pe_arg(&rt, pe)?;
    fn out<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: rshmem::Result<T>) -> PyResult<Py<PyAny>> {
        v.py_err()?.into_py_any(py)
    }
    match dtype(dtype_name)? {
        DType::I8 => out(py, rt.g::<i8>(source, pe)),
        DType::I16 => out(py, rt.g::<i16>(source, pe)),
        DType::I32 => out(py, rt.g::<i32>(source, pe)),
        DType::I64 => out(py, rt.g::<i64>(source, pe)),
        DType::U8 => out(py, rt.g::<u8>(source, pe)),
        DType::U16 => out(py, rt.g::<u16>(source, pe)),
        DType::U32 => out(py, rt.g::<u32>(source, pe)),
        DType::U64 => out(py, rt.g::<u64>(source, pe)),
        DType::F16 => out(py, rt.g::<f16>(source, pe).map(f64::from)),
        DType::BF16 => out(py, rt.g::<bf16>(source, pe).map(f64::from)),
        DType::F32 => out(py, rt.g::<f32>(source, pe)),
        DType::F64 => out(py, rt.g::<f64>(source, pe)),
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
