//! Runtime dtype and reduction names as Python passes them.
//!
//! Python names dtypes by the runtime's names (`DType::name`: `"int8"` ... `"float64"`);
//! `rshmem/_dtypes.py` is the one table mapping torch and numpy dtypes to them.

use crate::error::{new_err, IntoPy};
use pyo3::prelude::*;
use rshmem::dtype::{DType, ReduceOp, ALL_DTYPES};

/// Every dtype name the runtime takes.
pub fn names() -> Vec<&'static str> {
    ALL_DTYPES.iter().map(|d| d.name()).collect()
}

/// The runtime dtype called `name`; an unknown name is a `DTypeError`.
pub fn dtype(name: &str) -> PyResult<DType> {
    DType::parse(name).map_err(|e| new_err("DTypeError", e.to_string()))
}

/// The reduction called `name` (`"sum"`, `"prod"`, `"min"`, `"max"`, `"and"`, `"or"`, `"xor"`).
pub fn reduce_op(name: &str) -> PyResult<ReduceOp> {
    ReduceOp::parse(name).py_err()
}
