//! # Safety
//! On-stream operations take a CUDA stream as an integer (`torch.cuda.Stream.cuda_stream`, 0 for
//! the legacy default stream) and, for puts and gets, a local address as an integer. The stream
//! cannot be checked here; the local address is, unless the caller took it from a live tensor
//! (`check_local=False`): GPU memory the driver knows, or readable/writable host memory. The Python layer (`rshmem.torch`) takes them from torch objects: the stream
//! from a live `torch.cuda.Stream` of the PE's device, the local address from a CUDA tensor
//! whose size it checks, and it keeps the tensors alive until the stream has run the operation
//! (torch's caching allocator does not reuse memory of a tensor recorded on the stream). Code
//! that passes raw integers itself takes on that duty. Symmetric addresses are checked against
//! the heap by the runtime.
//!
//! `*_on_stream` operations: queued on the caller's stream and ordered with its other work;
//! each call returns once the work is queued (on the host backend it does the host operation
//! synchronously). The GIL is released while a call runs.
#![allow(unsafe_code)]

use crate::dtype::{dtype as parse_dtype, reduce_args};
use crate::error::IntoPy;
use crate::init::{pe_arg, runtime};
use crate::team::team as team_of;
use pyo3::prelude::*;
use rshmem::consts::{Cmp, SignalOp};
use rshmem::driver::stream::StreamHandle;
use rshmem::runtime::Access;

/// Queues a copy of `nbytes` from local `src` to symmetric `dest` on `pe`
/// (`nvshmemx_putmem_on_stream`).
/// With `check_local` (the default) `src` is checked first: GPU memory the driver knows, or
/// readable memory of this process.
#[pyfunction]
#[pyo3(signature = (dest, src, nbytes, pe, stream, check_local=true))]
fn putmem_on_stream(
    py: Python<'_>,
    dest: usize,
    src: usize,
    nbytes: usize,
    pe: i64,
    stream: usize,
    check_local: bool,
) -> PyResult<()> {
    let rt = runtime("rshmem.putmem_on_stream()")?;
    let pe = pe_arg(&rt, pe)?;
    py.detach(|| {
        if check_local {
            rt.check_local_buffer(src, nbytes, Access::Read)?;
        }
        // SAFETY: see the file header: `src..src+nbytes` was checked above or comes from a
        // live tensor; the caller vouches for the stream.
        unsafe { rt.putmem_on_stream(dest, src, nbytes, pe, StreamHandle(stream)) }
    })
    .py_err()
}

/// Queues a copy of `nbytes` from symmetric `src` on `pe` to local `dest`
/// (`nvshmemx_getmem_on_stream`).
/// `dest` is checked as `putmem_on_stream` checks its source.
#[pyfunction]
#[pyo3(signature = (dest, src, nbytes, pe, stream, check_local=true))]
fn getmem_on_stream(
    py: Python<'_>,
    dest: usize,
    src: usize,
    nbytes: usize,
    pe: i64,
    stream: usize,
    check_local: bool,
) -> PyResult<()> {
    let rt = runtime("rshmem.getmem_on_stream()")?;
    let pe = pe_arg(&rt, pe)?;
    py.detach(|| {
        if check_local {
            rt.check_local_buffer(dest, nbytes, Access::Write)?;
        }
        // SAFETY: see the file header: `dest..dest+nbytes` was checked above or comes from a
        // live tensor; the caller vouches for the stream.
        unsafe { rt.getmem_on_stream(dest, src, nbytes, pe, StreamHandle(stream)) }
    })
    .py_err()
}

/// Queues a put of `nbytes`, then the update of the signal word `sig_addr` on `pe` with
/// `signal` (`sig_op` is `SIGNAL_SET` or `SIGNAL_ADD`), ordered after the data
/// (`nvshmemx_putmem_signal_on_stream`).
/// `src` is checked as `putmem_on_stream` checks it.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (dest, src, nbytes, sig_addr, signal, sig_op, pe, stream, check_local=true))]
fn putmem_signal_on_stream(
    py: Python<'_>,
    dest: usize,
    src: usize,
    nbytes: usize,
    sig_addr: usize,
    signal: u64,
    sig_op: i32,
    pe: i64,
    stream: usize,
    check_local: bool,
) -> PyResult<()> {
    let rt = runtime("rshmem.putmem_signal_on_stream()")?;
    let pe = pe_arg(&rt, pe)?;
    let op = SignalOp::from_raw(sig_op).py_err()?;
    py.detach(|| {
        if check_local {
            rt.check_local_buffer(src, nbytes, Access::Read)?;
        }
        // SAFETY: see the file header; `src` checked above or from a live tensor.
        unsafe { rt.putmem_signal_on_stream(dest, src, nbytes, sig_addr, signal, op, pe, StreamHandle(stream)) }
    })
    .py_err()
}

/// Queues the update of the signal word `sig_addr` on `pe` (`nvshmemx_signal_op_on_stream`).
#[pyfunction]
fn signal_op_on_stream(
    py: Python<'_>,
    sig_addr: usize,
    signal: u64,
    sig_op: i32,
    pe: i64,
    stream: usize,
) -> PyResult<()> {
    let rt = runtime("rshmem.signal_op_on_stream()")?;
    let pe = pe_arg(&rt, pe)?;
    let op = SignalOp::from_raw(sig_op).py_err()?;
    // SAFETY: see the file header (the stream).
    py.detach(|| unsafe { rt.signal_op_on_stream(sig_addr, signal, op, pe, StreamHandle(stream)) }).py_err()
}

/// Makes later work on the stream wait until this PE's signal word `sig_addr` compares `cmp`
/// (`CMP_EQ`, `CMP_GE` or `CMP_GT`) to `value` (`nvshmemx_signal_wait_until_on_stream`).
#[pyfunction]
fn signal_wait_until_on_stream(py: Python<'_>, sig_addr: usize, cmp: i32, value: u64, stream: usize) -> PyResult<()> {
    let rt = runtime("rshmem.signal_wait_until_on_stream()")?;
    let cmp = Cmp::from_raw(cmp).py_err()?;
    // SAFETY: see the file header (the stream).
    py.detach(|| unsafe { rt.signal_wait_until_on_stream(sig_addr, cmp, value, StreamHandle(stream)) }).py_err()
}

/// Completes every put and signal queued on the stream before it (`nvshmemx_quiet_on_stream`).
#[pyfunction]
fn quiet_on_stream(py: Python<'_>, stream: usize) -> PyResult<()> {
    let rt = runtime("rshmem.quiet_on_stream()")?;
    // SAFETY: see the file header (the stream).
    py.detach(|| unsafe { rt.quiet_on_stream(StreamHandle(stream)) }).py_err()
}

/// Queues a barrier over all PEs (`nvshmemx_barrier_all_on_stream`). Every PE calls it.
#[pyfunction]
fn barrier_all_on_stream(py: Python<'_>, stream: usize) -> PyResult<()> {
    let rt = runtime("rshmem.barrier_all_on_stream()")?;
    // SAFETY: see the file header (the stream).
    py.detach(|| unsafe { rt.barrier_all_on_stream(StreamHandle(stream)) }).py_err()
}

/// Queues a barrier over `team` (`nvshmemx_barrier_on_stream`). Every member calls it.
#[pyfunction]
fn barrier_on_stream(py: Python<'_>, team: i32, stream: usize) -> PyResult<()> {
    let rt = runtime("rshmem.barrier_on_stream()")?;
    // SAFETY: see the file header (the stream).
    py.detach(|| unsafe { rt.barrier_on_stream(team_of(team), StreamHandle(stream)) }).py_err()
}

/// Queues a broadcast of `nelems` elements of `dtype` from `src` on team PE `root` into `dest`
/// on every member (`nvshmemx_<type>_broadcast_on_stream`). Every member calls it.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn broadcast_on_stream(
    py: Python<'_>,
    team: i32,
    dest: usize,
    src: usize,
    nelems: usize,
    root: i32,
    dtype: &str,
    stream: usize,
) -> PyResult<()> {
    let rt = runtime("rshmem.broadcast_on_stream()")?;
    let dt = parse_dtype(dtype)?;
    // SAFETY: see the file header (the stream; symmetric buffers are checked).
    py.detach(|| unsafe { rt.broadcast_on_stream(team_of(team), dest, src, nelems, root, dt, StreamHandle(stream)) }).py_err()
}

/// Queues the concatenation of every member's `nelems` elements of `src` into `dest`, in team
/// order (`nvshmemx_<type>_fcollect_on_stream`). Every member calls it.
#[pyfunction]
fn fcollect_on_stream(
    py: Python<'_>,
    team: i32,
    dest: usize,
    src: usize,
    nelems: usize,
    dtype: &str,
    stream: usize,
) -> PyResult<()> {
    let rt = runtime("rshmem.fcollect_on_stream()")?;
    let dt = parse_dtype(dtype)?;
    // SAFETY: see the file header.
    py.detach(|| unsafe { rt.fcollect_on_stream(team_of(team), dest, src, nelems, dt, StreamHandle(stream)) }).py_err()
}

/// Queues an all-to-all exchange of blocks of `nelems` elements
/// (`nvshmemx_<type>_alltoall_on_stream`). Every member calls it.
#[pyfunction]
fn alltoall_on_stream(
    py: Python<'_>,
    team: i32,
    dest: usize,
    src: usize,
    nelems: usize,
    dtype: &str,
    stream: usize,
) -> PyResult<()> {
    let rt = runtime("rshmem.alltoall_on_stream()")?;
    let dt = parse_dtype(dtype)?;
    // SAFETY: see the file header.
    py.detach(|| unsafe { rt.alltoall_on_stream(team_of(team), dest, src, nelems, dt, StreamHandle(stream)) }).py_err()
}

/// Queues a reduction with `op` (`"sum"`, `"prod"`, `"min"`, `"max"`, `"and"`, `"or"`, `"xor"`)
/// of every member's `nelems` elements of `src` into `dest` (`nvshmemx_<type>_<op>_reduce_on_stream`).
/// Every member calls it; `dest` may be `src`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn reduce_on_stream(
    py: Python<'_>,
    team: i32,
    op: &str,
    dest: usize,
    src: usize,
    nelems: usize,
    dtype: &str,
    stream: usize,
) -> PyResult<()> {
    let rt = runtime("rshmem.reduce_on_stream()")?;
    let (op, dt) = reduce_args(op, dtype)?;
    // SAFETY: see the file header.
    py.detach(|| unsafe { rt.reduce_on_stream(team_of(team), op, dest, src, nelems, dt, StreamHandle(stream)) }).py_err()
}

/// Adds this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(putmem_on_stream, m)?)?;
    m.add_function(wrap_pyfunction!(getmem_on_stream, m)?)?;
    m.add_function(wrap_pyfunction!(putmem_signal_on_stream, m)?)?;
    m.add_function(wrap_pyfunction!(signal_op_on_stream, m)?)?;
    m.add_function(wrap_pyfunction!(signal_wait_until_on_stream, m)?)?;
    m.add_function(wrap_pyfunction!(quiet_on_stream, m)?)?;
    m.add_function(wrap_pyfunction!(barrier_all_on_stream, m)?)?;
    m.add_function(wrap_pyfunction!(barrier_on_stream, m)?)?;
    m.add_function(wrap_pyfunction!(broadcast_on_stream, m)?)?;
    m.add_function(wrap_pyfunction!(fcollect_on_stream, m)?)?;
    m.add_function(wrap_pyfunction!(alltoall_on_stream, m)?)?;
    m.add_function(wrap_pyfunction!(reduce_on_stream, m)?)?;
    Ok(())
}
