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

use crate::error::IntoPy;
use crate::init::{pe_arg, runtime};
use half::{bf16, f16};
use rshmem::runtime::Access;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use rshmem::dtype::DType;
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
/// is checked as `putmem` checks its source.
#[pyfunction]
#[pyo3(signature = (dst, src, nbytes, pe, check_local=true))]
fn getmem(py: Python<'_>, dst: usize, src: usize, nbytes: usize, pe: i64, check_local: bool) -> PyResult<()> {
    let rt = runtime("rshmem.getmem()")?;
    let pe = pe_arg(&rt, pe)?;
    py.detach(|| {
        if check_local {
            rt.check_local_buffer(dst, nbytes, Access::Write)?;
        }
        // SAFETY: see the file header: `dst..dst+nbytes` was checked above, or the caller
        // took it from a live tensor; the runtime checks that `src` is a symmetric range.
        unsafe { rt.getmem(dst, SymAddr::new(src), nbytes, pe) }
    })
    .py_err()
}

/// Stores one element of `dtype` at symmetric `dst` on `pe` (`nvshmem_<type>_p`).
#[pyfunction]
fn p(dst: usize, value: &Bound<'_, PyAny>, pe: i64, dtype: &str) -> PyResult<()> {
    let rt = runtime("rshmem.p()")?;
    let pe = pe_arg(&rt, pe)?;
    match crate::dtype::dtype(dtype)? {
        DType::I8 => rt.p::<i8>(SymAddr::new(dst), value.extract()?, pe),
        DType::I16 => rt.p::<i16>(SymAddr::new(dst), value.extract()?, pe),
        DType::I32 => rt.p::<i32>(SymAddr::new(dst), value.extract()?, pe),
        DType::I64 => rt.p::<i64>(SymAddr::new(dst), value.extract()?, pe),
        DType::U8 => rt.p::<u8>(SymAddr::new(dst), value.extract()?, pe),
        DType::U16 => rt.p::<u16>(SymAddr::new(dst), value.extract()?, pe),
        DType::U32 => rt.p::<u32>(SymAddr::new(dst), value.extract()?, pe),
        DType::U64 => rt.p::<u64>(SymAddr::new(dst), value.extract()?, pe),
        DType::F16 => rt.p::<f16>(SymAddr::new(dst), f16::from_f64(value.extract()?), pe),
        DType::BF16 => rt.p::<bf16>(SymAddr::new(dst), bf16::from_f64(value.extract()?), pe),
        DType::F32 => rt.p::<f32>(SymAddr::new(dst), value.extract()?, pe),
        DType::F64 => rt.p::<f64>(SymAddr::new(dst), value.extract()?, pe),
    }
    .py_err()
}

/// Loads one element of `dtype` from symmetric `src` on `pe` (`nvshmem_<type>_g`).
#[pyfunction]
fn g(py: Python<'_>, src: usize, pe: i64, dtype: &str) -> PyResult<Py<PyAny>> {
    let rt = runtime("rshmem.g()")?;
    let pe = pe_arg(&rt, pe)?;
    fn out<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: rshmem::Result<T>) -> PyResult<Py<PyAny>> {
        v.py_err()?.into_py_any(py)
    }
    match crate::dtype::dtype(dtype)? {
        DType::I8 => out(py, rt.g::<i8>(SymAddr::new(src), pe)),
        DType::I16 => out(py, rt.g::<i16>(SymAddr::new(src), pe)),
        DType::I32 => out(py, rt.g::<i32>(SymAddr::new(src), pe)),
        DType::I64 => out(py, rt.g::<i64>(SymAddr::new(src), pe)),
        DType::U8 => out(py, rt.g::<u8>(SymAddr::new(src), pe)),
        DType::U16 => out(py, rt.g::<u16>(SymAddr::new(src), pe)),
        DType::U32 => out(py, rt.g::<u32>(SymAddr::new(src), pe)),
        DType::U64 => out(py, rt.g::<u64>(SymAddr::new(src), pe)),
        DType::F16 => out(py, rt.g::<f16>(SymAddr::new(src), pe).map(f64::from)),
        DType::BF16 => out(py, rt.g::<bf16>(SymAddr::new(src), pe).map(f64::from)),
        DType::F32 => out(py, rt.g::<f32>(SymAddr::new(src), pe)),
        DType::F64 => out(py, rt.g::<f64>(SymAddr::new(src), pe)),
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
