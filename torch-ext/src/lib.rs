//! `rshmem._native`: the Python extension over the `rshmem` runtime.
//!
//! One file per runtime area, each adding its functions with `register(m)`. Functions take and
//! return plain integers (addresses, PEs, team ids), dtype names and bytes; the Python package
//! `rshmem` builds its API (tensors, `Team`, value conversion) on top. Every call that can
//! block (init, allocation, barriers, waits, collectives) releases the GIL while it waits, so
//! other Python threads keep running.
#![deny(unsafe_code)]
#![deny(missing_docs)]

use pyo3::prelude::*;

mod atomic;
mod collective;
mod device;
mod dlpack;
mod dtype;
mod error;
mod init;
mod memory;
mod rma;
mod signal;
mod stream;
mod sync;
mod team;

/// Adds the SHMEM constants of `rshmem::consts`, the one place they are written.
fn register_consts(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use rshmem::consts::*;
    for (name, value) in [
        ("CMP_EQ", CMP_EQ),
        ("CMP_NE", CMP_NE),
        ("CMP_GT", CMP_GT),
        ("CMP_LE", CMP_LE),
        ("CMP_LT", CMP_LT),
        ("CMP_GE", CMP_GE),
        ("SIGNAL_SET", SIGNAL_SET),
        ("SIGNAL_ADD", SIGNAL_ADD),
        ("TEAM_INVALID", TEAM_INVALID),
        ("TEAM_WORLD", TEAM_WORLD),
        ("TEAM_SHARED", TEAM_SHARED),
        ("TEAM_NODE", TEAM_NODE),
        ("TEAM_SAME_MYPE_NODE", TEAM_SAME_MYPE_NODE),
    ] {
        m.add(name, value)?;
    }
    m.add("DTYPES", dtype::names())?;
    Ok(())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    register_consts(m)?;
    error::register(m)?;
    init::register(m)?;
    memory::register(m)?;
    rma::register(m)?;
    atomic::register(m)?;
    signal::register(m)?;
    sync::register(m)?;
    team::register(m)?;
    collective::register(m)?;
    stream::register(m)?;
    device::register(m)?;
    dlpack::register(m)?;
    Ok(())
}
