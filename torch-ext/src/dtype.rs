//! Runtime dtype and reduction names as Python passes them.
//!
//! Python names dtypes by the runtime's names (`DType::name`: `"int8"` ... `"float64"`);
//! `rshmem/_dtypes.py` is the one table mapping torch and numpy dtypes to them.

use crate::error::{new_err, IntoPy, Name};
use pyo3::prelude::*;
use rshmem::dtype::{DType, ReduceOp, ALL_DTYPES, SYNC_DTYPES};

/// Every dtype name the runtime takes.
pub fn names() -> Vec<&'static str> {
    ALL_DTYPES.iter().map(|d| d.name()).collect()
}

/// The runtime dtype called `name`; an unknown name is a `DTypeError`.
pub fn dtype(name: &str) -> PyResult<DType> {
    DType::parse(name).map_err(|e| new_err(Name::DTypeError, e.to_string()))
}

/// The dtype of a point-to-point wait or test (`what`, e.g. `"rshmem.wait_until()"`): one of the
/// runtime's `SYNC_DTYPES`, else a `DTypeError`. The runtime refuses other dtypes too, but as a
/// plain invalid argument; checking here first gives Python the dtype class.
pub fn sync_dtype(name: &str, what: &str) -> PyResult<DType> {
    let dt = dtype(name)?;
    dt.expect_one_of(what, &SYNC_DTYPES).map_err(|e| new_err(Name::DTypeError, e.to_string()))?;
    Ok(dt)
}

/// The reduction called `name` (`"sum"`, `"prod"`, `"min"`, `"max"`, `"and"`, `"or"`, `"xor"`)
/// and the dtype called `dtype_name`; a dtype the reduction does not take (a bitwise reduction
/// of floats) is a `DTypeError`.
pub fn reduce_args(name: &str, dtype_name: &str) -> PyResult<(ReduceOp, DType)> {
    let op = ReduceOp::parse(name).py_err()?;
    let dt = dtype(dtype_name)?;
    op.check(dt).map_err(|e| new_err(Name::DTypeError, e.to_string()))?;
    Ok((op, dt))
}
