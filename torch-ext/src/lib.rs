//! `rshmem._native`: the Python extension over the `rshmem` runtime.
//!
//! `generated.rs` holds every function that only converts its arguments and calls the runtime,
//! written by `tools/gen_host_api.py` from `api/host.toml` (the one table of the host API, which
//! also writes `rshmem/_native.pyi` and `docs/python-api.md`). The other files, one per area,
//! hold what needs more (init, allocation records, DLPack views, `p`/`g` typed by the element,
//! atomics by name, the device); the table lists them too, as `native = "hand"` rows. Functions
//! take and return plain integers (addresses, PEs, team ids), dtype names and bytes; the Python
//! package `rshmem` builds its API (tensors, `Team`, value conversion) on top. Every call that can
//! block (init, allocation, barriers, waits, collectives) releases the GIL while it waits, so
//! other Python threads keep running.
#![deny(unsafe_code)]
#![deny(missing_docs)]

use pyo3::prelude::*;

mod atomic;
mod device;
mod dlpack;
mod dtype;
mod error;
mod generated;
mod init;
mod launch;
mod memory;
mod rma;

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
    generated::register(m)?;
    device::register(m)?;
    dlpack::register(m)?;
    launch::register(m)?;
    Ok(())
}
