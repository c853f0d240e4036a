//! Symmetric heap allocation (`nvshmem_malloc` and friends) and address translation.
//!
//! Addresses cross into Python as plain integers; `rshmem.torch` wraps them in tensors.

use crate::error::IntoPy;
use crate::init::{pe_arg, runtime};
use pyo3::prelude::*;

/// Collective: allocates `size` bytes on every PE's heap and returns the local address
/// (`nvshmem_malloc`). Every PE must pass the same size.
#[pyfunction]
fn malloc(py: Python<'_>, size: usize) -> PyResult<usize> {
    let rt = runtime("rshmem.malloc()")?;
    py.detach(|| rt.malloc(size)).py_err()
}

/// Collective: `count * size` zeroed bytes (`nvshmem_calloc`).
#[pyfunction]
fn calloc(py: Python<'_>, count: usize, size: usize) -> PyResult<usize> {
    let rt = runtime("rshmem.calloc()")?;
    py.detach(|| rt.calloc(count, size)).py_err()
}

/// Collective: `size` bytes aligned to `alignment` (`nvshmem_align`).
#[pyfunction]
fn align(py: Python<'_>, alignment: usize, size: usize) -> PyResult<usize> {
    let rt = runtime("rshmem.align()")?;
    py.detach(|| rt.align(alignment, size)).py_err()
}

/// Collective: frees an allocation made by `malloc` / `calloc` / `align` (`nvshmem_free`).
#[pyfunction]
fn free(py: Python<'_>, addr: usize) -> PyResult<()> {
    let rt = runtime("rshmem.free()")?;
    py.detach(|| rt.free(addr)).py_err()
}

/// The address of symmetric `addr` on `pe` if this PE reaches it by load/store, else `None`
/// (`nvshmem_ptr`).
#[pyfunction]
fn ptr(addr: usize, pe: i64) -> PyResult<Option<usize>> {
    let rt = runtime("rshmem.ptr()")?;
    let pe = pe_arg(&rt, pe)?;
    rt.ptr(addr, pe).py_err()
}

/// The address of `[addr, addr+len)` of this PE's heap on `pe`, in this process. Unlike `ptr`,
/// a range outside the heap is a `NotSymmetricError` and a PE on another host an
/// `UnsupportedError`, each with a message saying so.
#[pyfunction]
fn translate(addr: usize, len: usize, pe: i64) -> PyResult<usize> {
    let rt = runtime("rshmem.torch.peer_tensor()")?;
    let pe = pe_arg(&rt, pe)?;
    rt.heap().translate(addr, len, pe).py_err()
}

/// Bytes of this PE's heap handed out by the allocator and not yet freed.
#[pyfunction]
fn heap_in_use() -> PyResult<usize> {
    Ok(runtime("rshmem.heap_in_use()")?.heap().in_use())
}

/// Bytes of this PE's heap backed by physical memory.
#[pyfunction]
fn heap_mapped() -> PyResult<usize> {
    Ok(runtime("rshmem.heap_mapped()")?.heap().mapped())
}

/// Adds this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(malloc, m)?)?;
    m.add_function(wrap_pyfunction!(calloc, m)?)?;
    m.add_function(wrap_pyfunction!(align, m)?)?;
    m.add_function(wrap_pyfunction!(free, m)?)?;
    m.add_function(wrap_pyfunction!(ptr, m)?)?;
    m.add_function(wrap_pyfunction!(translate, m)?)?;
    m.add_function(wrap_pyfunction!(heap_in_use, m)?)?;
    m.add_function(wrap_pyfunction!(heap_mapped, m)?)?;
    Ok(())
}
