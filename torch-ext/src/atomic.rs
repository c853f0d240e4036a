//! Remote atomics from the host (`nvshmem_atomic_*`).
//!
//! One entry point takes the operation by name and the operands as the word's raw bits; the
//! Python layer (`rshmem/host.py`) converts signed and float values to bits and back, so each
//! SHMEM atomic is a one-line Python function instead of a Rust function per type.

use crate::error::{new_err, IntoPy, Name};
use crate::init::{pe_arg, runtime};
use pyo3::prelude::*;
use rshmem::backend::{AmoOp, Width};
use rshmem::SymAddr;

/// Applies atomic `op` to the `width`-byte word at symmetric `addr` on `pe` and returns the old
/// bits. `op` is one of `fetch`, `set`, `swap`, `compare_swap` (`a` = expected, `b` = new),
/// `add`, `and`, `or`, `xor`; other operations use `a`.
#[pyfunction]
#[pyo3(signature = (addr, width, op, pe, a=0, b=0))]
fn atomic(addr: usize, width: usize, op: &str, pe: i64, a: u64, b: u64) -> PyResult<u64> {
    let rt = runtime("rshmem atomics")?;
    let pe = pe_arg(&rt, pe)?;
    let width = match width {
        4 => Width::W32,
        8 => Width::W64,
        other => {
            return Err(new_err(
                Name::DTypeError,
                format!("atomics work on 4- and 8-byte words, not {other}-byte ones; use int32, int64, uint32 or uint64"),
            ))
        }
    };
    let op = match op {
        "fetch" => AmoOp::Fetch,
        "set" => AmoOp::Set(a),
        "swap" => AmoOp::Swap(a),
        "compare_swap" => AmoOp::CompareSwap { cond: a, value: b },
        "add" => AmoOp::Add(a),
        "and" => AmoOp::And(a),
        "or" => AmoOp::Or(a),
        "xor" => AmoOp::Xor(a),
        other => {
            return Err(new_err(
                Name::InvalidArgumentError,
                format!("atomic operation {other:?} is not one of fetch, set, swap, compare_swap, add, and, or, xor"),
            ))
        }
    };
    rt.atomic(SymAddr::new(addr), width, op, pe).py_err()
}

/// Adds this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(atomic, m)?)?;
    Ok(())
}
