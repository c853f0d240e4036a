//! `PackedLaunch`: the ops' steady-state kernel launch (`rshmem.ops._launch`), one call from
//! Python into `cuLaunchKernel` with the parameters packed once (`rshmem::driver::packed`).
//!
//! # Safety
//! The `CUfunction` comes from a Triton kernel that `rshmem.ops` compiled and loaded in the
//! current device's primary context (Triton's loader, the context the runtime uses) and keeps
//! for as long as the process runs; the words are packed from that kernel's signature and
//! checked against the driver's parameter layout. Launch values are device addresses of tensors
//! that the caller keeps alive on the launch's stream (torch's caching allocator orders their
//! reuse after it). Other callers passing raw integers take those promises on themselves.
#![allow(unsafe_code)]

use crate::error::IntoPy;
use crate::init::runtime;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use rshmem::driver::module::LaunchDims;
use rshmem::driver::packed::{self, Param};
use rshmem::driver::stream::StreamHandle;
use rshmem::driver::tensor_map::{TensorMapBytes, TiledMap};

/// The most varying values one launch takes (an op's inputs and output).
const MAX_VARYING: usize = 8;

/// A parameter's value from Python: `bytes` (a TMA descriptor's 128) or an integer (a word).
fn param<'a>(v: &'a Bound<'_, PyAny>) -> PyResult<Param<'a>> {
    match v.cast::<PyBytes>() {
        Ok(b) => Ok(Param::Bytes(b.as_bytes())),
        Err(_) => Ok(Param::Word(v.extract::<u64>()?)),
    }
}

/// A tiled TMA view as Triton's `fill_tma_descriptor` takes it: (driver data type, element size,
/// shape, element strides, tile (each outermost first), swizzle mode, NaN padding).
type View = (u32, u64, Vec<u64>, Vec<u64>, Vec<u32>, u32, bool);

fn tiled_map((data_type, elem_size, shape, strides, tile, swizzle, nan): View) -> PyResult<TiledMap> {
    TiledMap::new(data_type, elem_size, &shape, &strides, &tile, swizzle, nan).py_err()
}

/// The 128 bytes of the TMA descriptor of tiled `view` at `base`, encoded by the driver as
/// `PackedLaunch.vary_map` encodes it.
#[pyfunction]
fn tensor_map_bytes(py: Python<'_>, base: u64, view: View) -> PyResult<Bound<'_, PyBytes>> {
    let mut out = TensorMapBytes([0; 128]);
    tiled_map(view)?.encode(base, &mut out).py_err()?;
    Ok(PyBytes::new(py, &out.0))
}

/// One kernel with its grid, block and parameter values packed: `launch(stream, *values)`
/// rewrites the parameters at `varying` and enqueues it.
#[pyclass(module = "rshmem._native")]
struct PackedLaunch {
    inner: packed::PackedLaunch,
}

#[pymethods]
impl PackedLaunch {
    /// `function`: a `CUfunction`; `grid`: blocks in x, y, z; `threads`: threads per block;
    /// `shared_bytes`: dynamic shared memory; `values`: one per kernel parameter, an integer
    /// (up to 8 bytes, two's complement) or the parameter's bytes; `varying`: the parameters a
    /// launch passes. Raises `UnsupportedError` when the driver's parameter layout differs from
    /// `values`, `InvalidArgumentError` for a value of the wrong width.
    #[new]
    fn new(
        function: usize,
        grid: (u32, u32, u32),
        threads: u32,
        shared_bytes: u32,
        values: Vec<Bound<'_, PyAny>>,
        varying: Vec<usize>,
    ) -> PyResult<Self> {
        runtime("rshmem.ops kernel launch")?;
        if varying.len() > MAX_VARYING {
            return Err(PyValueError::new_err(format!("a packed launch varies at most {MAX_VARYING} parameters")));
        }
        let dims = LaunchDims { grid, block: (threads, 1, 1), shared_bytes };
        // SAFETY: see the file header.
        let values = values.iter().map(param).collect::<PyResult<Vec<_>>>()?;
        let inner = unsafe { packed::PackedLaunch::new(function, dims, &values, varying) }.py_err()?;
        Ok(PackedLaunch { inner })
    }

    /// Makes launch value `k` a base address: a launch encodes the TMA descriptor of tiled
    /// `view` (Triton's `fill_tma_descriptor` arguments, see `tensor_map_bytes`) at it.
    fn vary_map(&mut self, k: usize, view: View) -> PyResult<()> {
        self.inner.vary_map(k, tiled_map(view)?).py_err()
    }

    /// Enqueues the kernel on `stream` with `values` (in the order of `varying`: integers, or a
    /// descriptor's bytes).
    #[pyo3(signature = (stream, *values))]
    fn launch(&mut self, stream: usize, values: &Bound<'_, PyTuple>) -> PyResult<()> {
        let n = values.len();
        if n > MAX_VARYING {
            return Err(PyValueError::new_err(format!("this launch takes {} values, not {n}", self.inner.varying())));
        }
        // The values are held here so that a descriptor's bytes borrowed by `buf` stay alive.
        let items: Vec<Bound<'_, PyAny>> = values.iter().collect();
        let mut buf = [Param::Word(0); MAX_VARYING];
        for (slot, v) in buf.iter_mut().zip(&items) {
            *slot = param(v)?;
        }
        // SAFETY: see the file header.
        unsafe { self.inner.launch(StreamHandle(stream), &buf[..n]) }.py_err()
    }
}

/// Adds this file's class.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PackedLaunch>()?;
    m.add_function(wrap_pyfunction!(tensor_map_bytes, m)?)
}
