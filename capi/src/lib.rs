//! `librshmem.so`: rshmem's host API for C and C++ programs.
//!
//! `generated.rs` and `include/rshmem.h` are written by `tools/gen_c_api.py` from `api/host.toml`,
//! the one table of the host API (the Python extension is generated from it too); `hand.rs`
//! holds the rows marked `c = "hand"`, `ffi.rs` what every function shares (the process's one
//! runtime, errors and panics turned into status codes, argument checks), `status.rs` the status
//! codes (generated from `api/errors.toml`), `error.rs` each runtime error's code and each
//! thread's last message. `docs/c-api.md` is the reference, `docs/c.md` the guide
//! (building, launching under torchrun and mpirun, MPI, CUDA C++, the NVSHMEM header).
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod error;
mod ffi;
mod generated;
mod hand;
mod status;

/// The process's runtime as the C functions see it: the Python extension links this crate and
/// keeps its runtime here, so the C ABI it exports acts on the runtime Python started.
pub use ffi::RUNTIME;
