//! # rshmem: a SHMEM runtime for GPUs, for Triton kernels and PyTorch programs
//!
//! Every process ("PE") owns a symmetric heap that all node-local PEs can read, write and update
//! atomically: from the host (this crate), on a CUDA stream, and from inside GPU kernels (the
//! device library in `triton-lib/`). Layers, bottom up:
//!
//! | module | what it does |
//! |---|---|
//! | [`error`], [`env`], [`consts`] | the one error type, every `RSHMEM_*` variable, SHMEM constants |
//! | [`bootstrap`] | how PEs find each other: unique id over TCP, torchrun env, byte-blob collectives, peer-death detection, fd passing over Unix sockets |
//! | [`driver`] | the CUDA driver, loaded at run time: thin checked wrappers (VMM, modules, streams) and RAII handles; only it and `backend::cuda` name raw driver items |
//! | [`backend`] | the one seam: a [`backend::Backend`] owns memory, streams, the runtime's kernels and the device state; `host` (memfd, no device) and `cuda` (everything GPU: selection, VMM memory, kernels, streams, publishing the [`device_state`]) |
//! | [`device_state`] | the one struct device code reads, shared with the device library through a generated header |
//! | [`heap`] | the symmetric heap: one reserved range with a slot per node-local PE, grown on demand; the allocator |
//! | [`dtype`] | element types (the twelve SHMEM dtypes) and reduction operators |
//! | [`runtime`] | [`Runtime`]: init / finalize and the host API (RMA, atomics, signals, waits, barriers, teams, collectives) |
//! | [`watchdog`] | what every long wait does besides waiting: interrupts (Ctrl-C) and the stuck report |
//!
//! What it does not do (yet): reach PEs on other hosts (the device state carries a per-PE
//! "reachable by load/store" bit so code can branch once a network transport exists), and NVLink
//! multicast, which is never used.
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
pub mod heap;
pub mod runtime;
pub mod ucx;
pub mod watchdog;

pub use error::{Error, Result};
pub use runtime::{InitOptions, Runtime, Team};
