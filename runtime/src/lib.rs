//! # rshmem: a SHMEM runtime for GPUs, for Triton kernels and PyTorch programs
//!
//! Every process ("PE") owns a symmetric heap that all node-local PEs can read, write and update
//! atomically: from the host (this crate), on a CUDA stream, and from inside GPU kernels (the
//! device library in `triton-lib/`). Layers, bottom up:
//!
//! | module | what it does |
//! |---|---|
//! | [`error`], [`env`], [`consts`], [`log`] | the one error type, every `RSHMEM_*` variable, SHMEM constants, the rank-prefixed logs (`RSHMEM_LOG`) |
//! | [`bootstrap`] | how PEs find each other: unique id over TCP, torchrun env, byte-blob collectives, peer-death detection, fd passing over Unix sockets |
//! | [`driver`] | the CUDA driver, loaded at run time: thin checked wrappers (VMM, modules, streams) and RAII handles; only it and `backend::cuda` name raw driver items |
//! | [`backend`] | the one seam: a [`backend::Backend`] owns memory, streams, the runtime's kernels and the device state; `host` (memfd, no device) and `cuda` (everything GPU: selection, VMM memory, kernels, streams, publishing the [`device_state`]); PEs on other hosts are reached through a [`backend::Transport`] |
//! | [`device_state`] | the one struct device code reads, shared with the device library through a generated header |
//! | [`heap`] | the symmetric heap: one reserved range with a slot per node-local PE, grown on demand; the allocator |
//! | [`transport`] | the network transport to PEs on other hosts (UCX, loaded at run time): one-sided operations by heap offset, the heap's registrations, the proxy that runs what kernels post for other hosts |
//! | [`dtype`] | element types (the twelve SHMEM dtypes) and reduction operators |
//! | [`runtime`] | [`Runtime`]: init / finalize and the host API (RMA, atomics, signals, waits, barriers, teams, collectives) |
//! | [`fork`] | a child forked from a PE is not a PE: its calls are refused, its exit touches nothing of the job |
//! | [`watchdog`] | what every long wait does besides waiting: interrupts (Ctrl-C) and the stuck report |
//!
//! ## Using the crate from a Rust program
//!
//! ```toml
//! [dependencies]
//! rshmem = { path = "…/runtime" }                            # features: "mpi", "ndarray"
//! ```
//!
//! [`Runtime::init`] joins the job and returns this PE's runtime: a value, not a global, with
//! every host call a method (`&self`, `Send + Sync`) that returns [`Result`] with the one
//! [`Error`] type, whose variants say what was wrong (a PE out of range, an address outside the
//! live allocations, a peer that died) instead of crashing. Symmetric memory is addressed by
//! `usize` addresses in this PE's heap, the same number on every PE for the same allocation;
//! typed single elements go through [`Runtime::p`] / [`Runtime::g`], buffers through
//! `putmem` / `getmem` (raw local addresses, hence `unsafe`), arrays through the `ndarray`
//! feature. The PEs come from [`InitOptions`]: a unique id with rank and size, else the
//! launcher's environment (`torchrun --no-python`, or `mpirun` with `MASTER_ADDR` /
//! `MASTER_PORT` exported), else a job of one PE; with the `mpi` feature,
//! `InitOptions::from_mpi(&communicator)` makes an MPI communicator's ranks the PEs. The backend
//! is the GPU's (cuda) when one is visible, else host memory (`RSHMEM_BACKEND=host`), and every
//! call behaves the same on both.
//!
//! ```
//! use rshmem::backend::BackendKind;
//! use rshmem::dtype::{DType, ReduceOp};
//! use rshmem::{Error, InitOptions, Runtime, Team};
//!
//! // No launcher here: a job of one PE (under torchrun every PE runs the same code).
//! let rt = Runtime::init(InitOptions { backend: Some(BackendKind::Host), ..Default::default() })?;
//! let (me, n) = (rt.my_pe(), rt.n_pes());
//! let dst = rt.calloc(1, 4)?; // symmetric: every PE allocates, in the same order
//! rt.p::<i32>(dst, me as i32, (me + 1) % n)?; // to the next PE's copy
//! rt.barrier_all()?;
//! assert_eq!(rt.g::<i32>(dst, me)?, ((me + n - 1) % n) as i32);
//!
//! let (src, sum) = (rt.calloc(4, 8)?, rt.calloc(4, 8)?);
//! rt.reduce(Team::WORLD, ReduceOp::Sum, sum, src, 4, DType::I64)?;
//! // Bad input is an error that names the problem, never a crash.
//! let err = rt.p::<i32>(dst, 1, n).unwrap_err();
//! assert!(matches!(err, Error::PeOutOfRange { .. }), "{err}");
//! for a in [dst, src, sum] {
//!     rt.free(a)?;
//! }
//! rt.finalize()?;
//! # Ok::<(), Error>(())
//! ```
//!
//! `runtime/examples/` are whole programs: `simple_shift`, `ring_reduce` and, with `ndarray`,
//! `array_shift` (`cargo build -p rshmem --example simple_shift`, then
//! `RSHMEM_BACKEND=host torchrun --nproc-per-node 2 --no-python target/debug/examples/simple_shift`;
//! built with `--features mpi` they are MPI programs for `mpirun`). GPU kernels reach the same
//! heap through the device library (Triton, Numba, CUDA C++: `docs/device-api.md`,
//! `docs/c.md`); a Rust program that loads its own CUDA module hands it to
//! [`Runtime::publish_module`] so that its kernels see the device state.
//!
//! PEs on the same host reach each other by load/store; PEs on other hosts through the network
//! transport (UCX: InfiniBand, RoCE or TCP), from the host API and, through the proxy, from
//! kernels (the device state's per-PE "reachable by load/store" bit picks the path;
//! `docs/network.md`). NVLink multicast is never used.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod backend;
pub mod bootstrap;
pub mod consts;
pub mod device_state;
pub mod driver;
pub mod dtype;
pub mod env;
pub mod error;
pub mod fork;
pub mod heap;
pub mod log;
pub mod runtime;
pub mod transport;
pub mod watchdog;

pub use error::{Error, ErrorKind, Result};
pub use heap::SymAddr;
pub use runtime::{InitOptions, Runtime, Team};
