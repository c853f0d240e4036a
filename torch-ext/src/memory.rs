//! Symmetric heap allocation (`nvshmem_malloc` and friends) and address translation.
//!
//! Addresses cross into Python as plain integers; `rshmem.torch` wraps them in tensors.

use crate::error::IntoPy;
use crate::init::{pe_arg, runtime};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rshmem::heap::Owner;
use rshmem::SymAddr;

/// Collective: allocates `size` bytes on every PE's heap and returns the local address
/// (`nvshmem_malloc`). Every PE must pass the same size.
#[pyfunction]
fn malloc(py: Python<'_>, size: usize) -> PyResult<usize> {
    let rt = runtime("rshmem.malloc()")?;
    py.detach(|| rt.malloc(size).map(SymAddr::get)).py_err()
}

/// Collective: `count * size` zeroed bytes (`nvshmem_calloc`); `what` describes them in the
/// caller's words, and PEs whose descriptions differ fail naming both.
/// `call` names the public function the user called (e.g. `"create_symmetric_tensor"`) in
/// wait reports and peer errors.
#[pyfunction]
#[pyo3(signature = (count, size, what=None, call=None))]
fn calloc(py: Python<'_>, count: usize, size: usize, what: Option<String>, call: Option<String>) -> PyResult<usize> {
    let rt = runtime("rshmem.calloc()")?;
    let call = call.unwrap_or_else(|| "calloc".to_string());
    py.detach(|| {
        rshmem::watchdog::in_call(&call, || match what {
            None => rt.calloc(count, size),
            Some(what) => rt.calloc_described(count, size, &what),
        })
    }
    .map(SymAddr::get))
    .py_err()
}

/// Collective: `size` bytes aligned to `alignment` (`nvshmem_align`).
#[pyfunction]
fn align(py: Python<'_>, alignment: usize, size: usize) -> PyResult<usize> {
    let rt = runtime("rshmem.align()")?;
    py.detach(|| rt.align(alignment, size).map(SymAddr::get)).py_err()
}

/// Collective: frees an allocation made by `malloc` / `calloc` / `align` (`nvshmem_free`);
/// `call` names the public function the user called (e.g. `"free_tensor"`) in wait reports.
#[pyfunction]
#[pyo3(signature = (addr, call=None))]
fn free(py: Python<'_>, addr: usize, call: Option<String>) -> PyResult<()> {
    let rt = runtime("rshmem.free()")?;
    let call = call.unwrap_or_else(|| "free".to_string());
    py.detach(|| rshmem::watchdog::in_call(&call, || rt.free(SymAddr::new(addr)))).py_err()
}

/// Collective: makes the program's own `size` bytes at `addr` (one `cuMemCreate` allocation
/// of this PE's GPU, mapped by the program) symmetric and returns its symmetric address
/// (`nvshmemx_buffer_register_symmetric`).
#[pyfunction]
fn buffer_register_symmetric(py: Python<'_>, addr: usize, size: usize) -> PyResult<usize> {
    let rt = runtime("rshmem.buffer_register_symmetric()")?;
    py.detach(|| rt.register_symmetric(addr, size).map(SymAddr::get)).py_err()
}

/// Collective: ends a registration (`addr` the symmetric address it returned, `size` its size)
/// (`nvshmemx_buffer_unregister_symmetric`).
#[pyfunction]
fn buffer_unregister_symmetric(py: Python<'_>, addr: usize, size: usize) -> PyResult<()> {
    let rt = runtime("rshmem.buffer_unregister_symmetric()")?;
    py.detach(|| rt.unregister_symmetric(SymAddr::new(addr), size)).py_err()
}

/// The address of symmetric `addr` on `pe` if this PE reaches it by load/store, else `None`
/// (`nvshmem_ptr`).
#[pyfunction]
fn ptr(addr: usize, pe: i64) -> PyResult<Option<usize>> {
    let rt = runtime("rshmem.ptr()")?;
    let pe = pe_arg(&rt, pe)?;
    rt.ptr(SymAddr::new(addr), pe).py_err()
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

/// Checks that `[addr, addr+len)` is this PE's symmetric memory the program may address: inside
/// one live allocation of its own (not freed, not the runtime's words). `NotSymmetricError`
/// naming the heap offset and why otherwise.
#[pyfunction]
fn check_symmetric(addr: usize, len: usize) -> PyResult<()> {
    runtime("rshmem.check_symmetric()")?.heap().check_user(addr, len).py_err()
}

/// The live allocation holding `addr` (this PE's copy or a node-local peer's), as a dict with
/// `pe`, `base`, `offset`, `nbytes`, `id` and `owner` (`"user"` or `"runtime"`), or `None`.
/// `id` is unique in the process (also across `finalize` + `init`): an allocation remembered by
/// its id is gone when its address answers another id, or `None`.
#[pyfunction]
fn allocation_of(py: Python<'_>, addr: usize) -> PyResult<Option<Py<PyDict>>> {
    let rt = runtime("rshmem.allocation_of()")?;
    let Some(a) = rt.heap().allocation_of(addr) else { return Ok(None) };
    let d = PyDict::new(py);
    d.set_item("pe", a.pe)?;
    d.set_item("base", a.base)?;
    d.set_item("offset", a.offset)?;
    d.set_item("nbytes", a.len)?;
    d.set_item("id", a.id)?;
    d.set_item("owner", match a.owner { Owner::User => "user", Owner::Runtime => "runtime" })?;
    Ok(Some(d.unbind()))
}

/// Where a tensor made over allocation `id` stands, from its address: `"live"` (the allocation
/// is still there), `"freed"` (freed, or another allocation holds the address now),
/// `"finalized"` (its heap was dropped by `finalize`), `"uninitialized"` (no runtime now). The
/// cheap check every call on a tensor made by `rshmem.torch` makes.
#[pyfunction]
fn view_state(addr: usize, id: u64) -> &'static str {
    let Ok(rt) = runtime("rshmem.view_state()") else { return "uninitialized" };
    let heap = rt.heap();
    if !heap.made_id(id) {
        return "finalized";
    }
    match heap.allocation_of(addr) {
        Some(a) if a.id == id => "live",
        _ => "freed",
    }
}

/// Keeps the heap's memory mapped while it lives, past `finalize` too: every tensor over heap
/// memory holds one, so a tensor kept after `finalize` reads and writes memory that is still
/// there (this process's alone by then) instead of faulting.
#[pyclass(frozen, module = "rshmem._native")]
struct HeapPin {
    _pin: rshmem::heap::HeapPin,
}

/// A pin of the current heap (see `HeapPin`).
#[pyfunction]
fn heap_pin() -> PyResult<HeapPin> {
    Ok(HeapPin { _pin: runtime("rshmem.torch tensors")?.heap().pin() })
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
    m.add_function(wrap_pyfunction!(buffer_register_symmetric, m)?)?;
    m.add_function(wrap_pyfunction!(buffer_unregister_symmetric, m)?)?;
    m.add_function(wrap_pyfunction!(ptr, m)?)?;
    m.add_function(wrap_pyfunction!(translate, m)?)?;
    m.add_function(wrap_pyfunction!(check_symmetric, m)?)?;
    m.add_function(wrap_pyfunction!(allocation_of, m)?)?;
    m.add_function(wrap_pyfunction!(view_state, m)?)?;
    m.add_function(wrap_pyfunction!(heap_pin, m)?)?;
    m.add_class::<HeapPin>()?;
    m.add_function(wrap_pyfunction!(heap_in_use, m)?)?;
    m.add_function(wrap_pyfunction!(heap_mapped, m)?)?;
    Ok(())
}
